"""The memory table the planner reads: for each memory of the target, who shares one
allocation and how it may be placed.

Every target kind declares its memories (scope, capacity, and for banked on-chip
memories banks, bank size and access width).  The memory planner
(:func:`~cuvil_tir.transform.plan_allocation.plan_buffer_allocation`, the software
pipeline and static address assignment) never asks which target it lowers for; it reads
what it needs from a :class:`MemorySpec` per scope:

* ``instance``: what one allocation serves. ``"program"`` (``global``: one for the
  whole program, never privatised into a parallel or thread loop), ``"block"``
  (``shared``: one per thread block), ``"warp"`` (``warp`` and TVM's ``wmma.*``
  tensor-core fragments), ``"thread"`` (``local``: one per thread or per parallel
  task) or ``"static"`` (an accelerator scratchpad: one for the whole program at an
  address fixed at compile time);
* ``shared_by``: the thread tags whose iterations use one allocation, so the box of a
  buffer is relaxed over them (``shared``: ``threadIdx``, ``vthread``); the iterations
  of any other thread tag each have their own copy, so the box is what one of them
  touches;
* ``static``: allocated once, at the top of the program (its address is planned
  before the program runs), after compaction and multi-buffering;
* ``rebase_regions``: a call handed a region of this memory receives its layout
  (strides) with it, so compaction may move the region (accelerator intrinsics);
  elsewhere a call computes addresses from the whole buffer and its buffer is kept;
* ``banks``, ``bank_bytes``, ``width_bytes`` (the access width: sizes are whole
  accesses), ``align_bytes`` (where a buffer may start) and ``capacity_bytes``
  (``None``: bounded only by the machine).

A memory states ``instance`` in the target's declaration
(:class:`cuvil_tir.target.Memory`); otherwise it follows from its scope (the names TVM
uses; ``"program"`` for any other).

Example::

    >>> spec = memory_spec("shared")
    >>> spec.instance, spec.shared_by
    ('block', ('threadIdx', 'vthread'))
    >>> memory_spec("local").shared_by
    ()
"""

from __future__ import annotations

from dataclasses import dataclass

from .pass_manager import PassContext

#: instance and thread tags sharing one allocation, by the base of a scope name
_BY_BASE = {"global": ("program", ()), "shared": ("block", ("threadIdx", "vthread")),
            "warp": ("warp", ("threadIdx.x",)), "wmma": ("warp", ("threadIdx.x",)),
            "warpgroup": ("warp", ("threadIdx.x",)),
            "local": ("thread", ())}


@dataclass(frozen=True)
class MemorySpec:
    """What the planner knows of one memory (module doc).

    Example::

        >>> MemorySpec("npu.inp", "static", banks=4, bank_bytes=1024).static
        True
    """

    scope: str
    instance: str = "program"
    shared_by: tuple = ()
    capacity_bytes: int | None = None
    banks: int = 1
    bank_bytes: int | None = None
    width_bytes: int = 1
    align_bytes: int = 1

    @property
    def static(self) -> bool:
        """Allocated once for the whole program at a planned address."""
        return self.instance == "static"

    @property
    def rebase_regions(self) -> bool:
        """A call handed a region of this memory receives its layout with it."""
        return self.static

    def may_enter(self, loop) -> bool:
        """Whether one allocation per iteration of ``loop`` is allowed: ``global`` and
        static memories never move into a parallel or thread loop, ``shared`` not into
        the thread loops that share it; nothing moves into a vectorized or unrolled loop.

        Example::

            >>> import cuvil_tir as T
            >>> tx = T.For(T.var("t"), T.const(0), T.const(4), "thread_binding",
            ...            T.Evaluate(T.const(0)), "threadIdx.x")
            >>> memory_spec("shared").may_enter(tx), memory_spec("local").may_enter(tx)
            (False, True)
        """
        if loop.kind in ("vectorized", "unrolled"):
            return False
        if loop.kind == "thread_binding":
            return self.instance in ("block", "warp", "thread") and not (
                self.shared_by and loop.thread_tag.startswith(self.shared_by))
        if loop.kind == "parallel":
            return self.instance == "thread"
        return True

    def shares(self, loop) -> bool:
        """Whether ``loop`` is bound to a thread tag whose threads share one allocation
        of this memory (``shared`` under ``threadIdx``/``vthread``): a buffer whose
        accesses all lie inside it is still one allocation, placed deeper (at the
        statement holding its accesses, where its box is smallest) and relaxed over
        the loop's threads.

        Example::

            >>> import cuvil_tir as T
            >>> tx = T.For(T.var("t"), T.const(0), T.const(4), "thread_binding",
            ...            T.Evaluate(T.const(0)), "threadIdx.x")
            >>> memory_spec("shared").shares(tx), memory_spec("local").shares(tx)
            (True, False)
        """
        return loop.kind == "thread_binding" and self.instance == "block" \
            and loop.thread_tag.startswith(self.shared_by) and bool(self.shared_by)

    def own_copy(self, loop) -> bool:
        """Whether each iteration of thread loop ``loop`` has its own copy of a buffer
        of this memory (a ``shared`` buffer per ``blockIdx``, a ``local`` one per
        ``threadIdx`` too), so the buffer's box is not relaxed over it.  ``vthread``
        iterations run in one thread: they share its copies.

        Example::

            >>> import cuvil_tir as T
            >>> bx = T.For(T.var("b"), T.const(0), T.const(4), "thread_binding",
            ...            T.Evaluate(T.const(0)), "blockIdx.x")
            >>> [memory_spec(s).own_copy(bx) for s in ("global", "shared", "local")]
            [False, True, True]
        """
        return loop.kind == "thread_binding" and self.instance in ("block", "warp", "thread") \
            and not loop.thread_tag.startswith(("vthread",) + self.shared_by)


def memory_spec(scope: str, memory=None) -> MemorySpec:
    """The :class:`MemorySpec` of ``scope``, from the target's declared ``memory``
    (a :class:`cuvil_tir.target.Memory`) when given.

    Example::

        >>> memory_spec("npu.acc").instance
        'program'
        >>> from cuvil_tir.target import Memory
        >>> memory_spec("npu.acc", Memory("npu.acc", 4096, instance="static")).static
        True
    """
    scope = scope or "global"
    default = _BY_BASE.get(scope.split(".")[0], ("program", ()))
    if memory is None:
        return MemorySpec(scope, *default)
    return MemorySpec(scope, memory.instance or default[0], default[1],
                      memory.capacity_bytes, memory.banks, memory.bank_bytes,
                      memory.width_bytes or 1, memory.align_bytes or memory.width_bytes or 1)


def memory_table(target=None) -> dict | None:
    """``{scope: MemorySpec}`` of ``target`` (default: the ``PassContext``'s), or None
    when the target declares no memories (every scope is then planned by its name).

    Example::

        >>> memory_table() is None
        True
    """
    target = PassContext.current().target if target is None else target
    if target is None:
        return None
    return {m.scope: memory_spec(m.scope, m) for m in target.kind_obj.memories_for(target)}


def spec_of(table: dict | None, scope: str) -> MemorySpec | None:
    """The spec of ``scope`` in ``table`` (by name when there is no table); None when
    the target has no such memory (the buffer is left to the target's own checks).

    Example::

        >>> spec_of(None, "local").instance, spec_of({}, "local")
        ('thread', None)
    """
    scope = scope or "global"
    if table is None:
        return memory_spec(scope)
    return table.get(scope)


__all__ = ["MemorySpec", "memory_spec", "memory_table", "spec_of"]
