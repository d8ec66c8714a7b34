"""``Program``: what every backend's ``codegen`` returns, what the compile cache
stores and what ``load`` turns into a runnable module.

One dataclass for every backend: the sources by format (LLVM IR, C, CUDA C, an
accelerator's HAL header), the compiled binaries by format (object code, a shared
library), the functions it defines with their calling conventions, the launch plans
(GPU grids) and memory plans (an accelerator's bank placement) as plain data, and
whatever else its kind's ``load`` needs (``meta``, plain data).  The build driver adds
the calling ``signature`` (read from the unlowered function), the unlowered function
itself and the build key.

A program round-trips through :meth:`Program.to_blobs` / :meth:`Program.from_blobs`
(named byte strings, no pickle): the compile cache stores exactly that, for every
backend.

Example::

    >>> p = Program("doc", "main", sources={"py": "def main(): pass"},
    ...             functions={"main": "host"}, memory={"acc": [["C", 0, 64]]})
    >>> q = Program.from_blobs(p.to_blobs(), None)
    >>> q.sources["py"], q.memory, q.functions
    ('def main(): pass', {'acc': [['C', 0, 64]]}, {'main': 'host'})
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass, field

from ..errors import TargetError
from ..parser import parse
from ..printer import to_text
from .signature import Signature

#: bump when the blob layout changes: old cache entries then simply miss
FORMAT = 2


@dataclass(frozen=True)
class Program:
    """A compiled program of one target kind (module doc).

    ``lowered`` is the IRModule after the kind's passes, or its text (a program
    loaded from the cache parses it only when someone asks, see
    :meth:`lowered_module`).  ``signature`` and ``source_func`` are filled in by the
    build driver; ``from_cache`` says whether the compile cache supplied it.

    Example::

        >>> Program("doc", "f").default_format is None
        True
    """

    kind: str
    entry: str
    sources: dict = field(default_factory=dict)
    binaries: dict = field(default_factory=dict)
    functions: dict = field(default_factory=dict)
    launch: dict = field(default_factory=dict)
    memory: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    lowered: object = None
    signature: Signature | None = None
    source_func: object = None
    build_key: str = ""
    from_cache: bool = False

    @property
    def default_format(self) -> str | None:
        """The first source format (what ``get_source()`` shows by default)."""
        return next(iter(self.sources), None)

    @functools.cached_property
    def lowered_module(self):
        """The lowered IRModule (parsed from its text once, for a cached program)."""
        if isinstance(self.lowered, str):
            return parse(self.lowered)
        return self.lowered

    def replace(self, **changes) -> Program:
        """A copy with ``changes`` (the driver attaches the signature this way).

        Example::

            >>> Program("doc", "f").replace(build_key="ab").build_key
            'ab'
        """
        return dataclasses.replace(self, **changes)

    # ---- storage ----------------------------------------------------------------
    def to_blobs(self) -> dict:
        """``{name: bytes}`` holding everything but the signature's shapes and the
        unlowered function (the driver has both when it loads an entry)."""
        head = {"format": FORMAT, "kind": self.kind, "entry": self.entry,
                "sources": list(self.sources), "binaries": list(self.binaries),
                "functions": self.functions, "launch": self.launch, "memory": self.memory,
                "meta": self.meta, "build_key": self.build_key,
                "writes": None if self.signature is None else
                [p.writes for p in self.signature.params]}
        try:
            blobs = {"program.json": json.dumps(head).encode()}
        except (TypeError, ValueError) as err:
            raise TargetError(f"Program of target {self.kind!r}: launch, memory, meta and "
                              f"functions must be plain data (str, int, float, bool, lists, "
                              f"dicts) to be stored; {err}") from None
        for fmt, text in self.sources.items():
            blobs["source." + fmt] = text.encode() if isinstance(text, str) else bytes(text)
        for fmt, data in self.binaries.items():
            blobs["binary." + fmt] = bytes(data)
        lowered = self.lowered if isinstance(self.lowered, str) else \
            to_text(self.lowered) if self.lowered is not None else ""
        blobs["lowered.tir"] = lowered.encode()
        return blobs

    @classmethod
    def from_blobs(cls, blobs: dict, source_func, name: str | None = None):
        """The program stored by :meth:`to_blobs`; its signature is read again from
        ``source_func`` (the unlowered function) with the stored write flags.
        ``None`` when the blobs are not a program of this format.

        Example::

            >>> Program.from_blobs({"program.json": b"{}"}, None) is None
            True
        """
        try:
            head = json.loads(blobs["program.json"])
            if head.get("format") != FORMAT:
                return None
            sources = {f: blobs["source." + f].decode() for f in head["sources"]}
            binaries = {f: blobs["binary." + f] for f in head["binaries"]}
            lowered = blobs["lowered.tir"].decode()
        except (KeyError, ValueError, UnicodeDecodeError, TypeError):
            return None
        sig = None
        if source_func is not None:
            sig = Signature.from_func(source_func, None, name or head["entry"])
            writes = head.get("writes") or []
            if len(writes) != len(sig.params):
                return None
            sig = dataclasses.replace(sig, params=tuple(
                dataclasses.replace(p, writes=bool(w)) for p, w in zip(sig.params, writes)))
        return cls(head["kind"], head["entry"], sources, binaries, head["functions"],
                   head["launch"], head["memory"], head["meta"], lowered or None, sig,
                   source_func, head.get("build_key", ""), from_cache=True)


__all__ = ["FORMAT", "Program"]
