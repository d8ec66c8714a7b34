"""Memories are part of a target: each target kind lists the scopes it can place a
buffer in, and a build refuses a buffer in any other scope.

A target kind's ``memories`` is a sequence of objects with at least ``scope`` (the name
buffers use: ``"global"``, ``"local"``, ``"shared"``, ``"npu.wgt"``) and
``capacity_bytes`` (``None``: bounded only by the machine).  :class:`Memory` is the
plain description; an accelerator's memories add banks and widths
(``targets.accel.Memory``).  A kind without ``memories`` has the host's
(:data:`HOST_MEMORIES`).

:func:`check_memories` is the one check every target runs at build time: a buffer in
a scope the target has no memory for (a typo such as ``cache_read(blk, 0, "locla")``,
or ``"shared"`` on a CPU) is a :class:`~cuvil_tir.errors.CodegenError` (CVL-E105)
naming the buffer, its scope and the target's scopes.

Example::

    >>> import targets
    >>> [m.scope for m in targets.get_target_kind("llvm").memories]
    ['global', 'local']
"""

from __future__ import annotations

from dataclasses import dataclass

from cuvil_tir.buffer import Buffer
from cuvil_tir.errors import CodegenError
from cuvil_tir.visitor import Visitor


@dataclass(frozen=True)
class Memory:
    """One memory of a target: the ``scope`` buffers name, its ``capacity_bytes``
    (``None`` when only the machine bounds it) and a one-line ``doc``.

    Example::

        >>> Memory("local", doc="registers and stack").capacity_bytes is None
        True
    """

    scope: str
    capacity_bytes: int | None = None
    doc: str = ""


#: the memories of a CPU: ordinary memory, and ``local`` (registers or the stack of
#: the function: small fixed-size buffers become registers after unrolling)
HOST_MEMORIES = (Memory("global", None, "main memory (parameters, large buffers)"),
                 Memory("local", None, "per-invocation buffers: registers or stack"))


def memories_of(kind) -> tuple:
    """The memories of target kind ``kind`` (:data:`HOST_MEMORIES` when it has none).

    Example::

        >>> class Kind: name = "k"
        >>> [m.scope for m in memories_of(Kind())]
        ['global', 'local']
    """
    mems = getattr(kind, "memories", None)
    return HOST_MEMORIES if mems is None else tuple(mems)


def declared_scopes() -> list:
    """The scopes some registered target kind has a memory for, sorted: what a schedule
    may place a buffer in before it knows its target (an accelerator's dotted scopes are
    checked when it is built, since it need not be registered yet).

    Example::

        >>> {"global", "local"} <= set(declared_scopes())
        True
    """
    from .registry import _KINDS
    return sorted({m.scope for kind in _KINDS.values() for m in memories_of(kind)})


class _Buffers(Visitor):
    """Every buffer a function defines or touches, in first-seen order."""

    def __init__(self):
        self.found: dict[int, Buffer] = {}

    def visit_buffer(self, b):
        self.found.setdefault(id(b), b)


def check_memories(func, target) -> None:
    """Raise ``CodegenError`` when a buffer of ``func`` (a PrimFunc, or every function
    of a module) is in a scope ``target``'s
    kind has no memory for (parameters, allocations and every accessed buffer).

    Example::

        >>> import cuvil_tir as T, targets
        >>> B = T.decl_buffer((4,), "float32", "B", scope="npu.wgt")
        >>> f = T.PrimFunc([B], T.Evaluate(T.const(0)))
        >>> check_memories(f, targets.Target("llvm"))
        Traceback (most recent call last):
          ...
        cuvil_tir.errors.CodegenError: [CVL-E105] build: buffer 'B' is in scope 'npu.wgt', which target 'llvm' has no memory for; its memories are: global, local. Put the buffer in one of them (cache_read/cache_write/set_scope), or build for a target that has this memory
    """
    from .target import as_target
    target = as_target(target)
    mems = memories_of(target.kind_obj)
    scopes = [m.scope for m in mems]
    walker = _Buffers()
    for f in (func.functions if hasattr(func, "functions") else (func,)):
        for p in f.params:
            walker.visit(p)
        walker.visit(f.body)
    for buf in walker.found.values():
        if buf.scope not in scopes:
            raise CodegenError(
                f"build: buffer '{buf.name}' is in scope '{buf.scope}', which target "
                f"'{target.kind}' has no memory for; its memories are: "
                f"{', '.join(scopes) or '(none)'}. Put the buffer in one of them "
                "(cache_read/cache_write/set_scope), or build for a target that has "
                "this memory")
