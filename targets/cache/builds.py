"""Build results in the cache: the key of a build, and a ``Module`` from an entry.

The key is taken *before* lowering, so that a hit skips the lowering passes as well
as the native compiler: SHA-256 over :func:`targets.build_key` of the unlowered
function (its fingerprint, which covers the schedule, since a schedule is a function;
the resolved target; Cuvil's and LLVM's versions), the symbol, a digest of Cuvil's own
source files (:func:`code_identity`), the target kind's own
identity of its tool chain (``kind.cache_identity(target)``: for ``c`` the compiler's
version line), the pass context's options and the entry format.

A target kind takes part by providing three methods; a kind without them is simply
never cached:

* ``cache_identity(target) -> str``;
* ``export_artifact(runtime) -> {name: bytes}`` (object code, a shared library, PTX);
* ``load_artifact(blobs, source, target, signature) -> runtime``;

and optionally ``runtime_for_export(source, target, signature) -> runtime``: the
runtime a build makes when its artifact is about to be stored, built so that the export
costs no second compilation (``llvm``: the object code is emitted once and loaded).

Example::

    >>> import cuvil_tir as T, targets
    >>> f = T.create_prim_func([T.placeholder((2,), name="X")]).with_attr("global_symbol", "f")
    >>> len(cache_key(f, targets.Target("llvm")))
    64
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os

from cuvil_tir.printer import to_text

from ..signature import Signature

#: bump when the layout of an entry changes: old entries then simply miss
FORMAT = 1


def cacheable(kind) -> bool:
    """Whether a target kind provides the cache protocol."""
    return all(callable(getattr(kind, m, None))
               for m in ("cache_identity", "export_artifact", "load_artifact"))


@functools.lru_cache(maxsize=None)
def code_identity() -> str:
    """A digest of Cuvil's own source files (names, sizes, modification times): an
    edited or reinstalled compiler never serves entries built by the old code, even at
    the same version number.  Computed once per process (a few hundred ``stat`` calls).

    Example::

        >>> len(code_identity())
        64
    """
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    h = hashlib.sha256()
    for pkg in ("cuvil_tir", "schedules", "targets"):
        for folder, dirs, files in os.walk(os.path.join(root, pkg)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith((".py", ".lark")):
                    st = os.stat(os.path.join(folder, name))
                    rel = os.path.relpath(os.path.join(folder, name), root)
                    h.update(f"{rel}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()


def cache_key(func, target) -> str:
    """The cache key of building ``func`` (with its final ``global_symbol``) for
    ``target`` in the current pass context: :func:`targets.build_key` of the unlowered
    function (fingerprint, resolved target, tool versions) plus the symbol, the kind's
    tool-chain identity, the pass context's options and the entry format."""
    from cuvil_tir.transform import PassContext
    from ..keys import build_key
    ctx = PassContext.current()
    kind = target.kind_obj
    parts = {
        "format": FORMAT,
        "build_key": build_key(func, target),
        "symbol": func.name,
        "code": code_identity(),
        "toolchain": kind.cache_identity(target) if cacheable(kind) else "",
        "pass_context": [ctx.opt_level, sorted((k, repr(v)) for k, v in ctx.config.items())],
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def entry_of(module, kind) -> dict:
    """The blobs that store ``module``: the kind's artefact, the source, the lowered
    IR text and which parameters the function writes."""
    blobs = {"artifact." + k: v for k, v in kind.export_artifact(module.runtime).items()}
    meta = {"writes": [p.writes for p in module.signature.params],
            "name": module.signature.name}
    blobs["meta.json"] = json.dumps(meta).encode()
    blobs["source"] = module.runtime.source.encode() if isinstance(
        getattr(module.runtime, "source", None), str) else b""
    blobs["lowered.tir"] = to_text(module.lowered).encode()
    return blobs


def module_of(blobs: dict, func, target):
    """Rebuild a ``Module`` of ``func`` for ``target`` from a cache entry; ``None``
    when the entry does not fit (then the caller builds normally)."""
    from ..module import Module
    try:
        meta = json.loads(blobs["meta.json"])
        source = blobs["source"].decode()
        lowered_text = blobs["lowered.tir"].decode()
    except (KeyError, ValueError, UnicodeDecodeError):
        return None
    sig = Signature.from_func(func, None, meta.get("name", func.name))
    writes = meta.get("writes", [])
    if len(writes) != len(sig.params):
        return None
    sig = dataclasses.replace(sig, params=tuple(
        dataclasses.replace(p, writes=bool(w)) for p, w in zip(sig.params, writes)))
    artifact = {k[len("artifact."):]: v for k, v in blobs.items()
                if k.startswith("artifact.")}
    runtime = target.kind_obj.load_artifact(artifact, source, target, sig)

    def lowered():
        from cuvil_tir.parser import parse
        return parse(lowered_text)

    mod = Module(runtime, sig, lowered, target, source_func=func)
    mod.from_cache = True
    return mod
