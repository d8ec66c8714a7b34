"""``tvm.tir.ScheduleState`` and ``StmtSRef``: TVM's names for Cuvil's handles.

TVM refers to a statement of the scheduled function through an ``StmtSRef`` of a
mutable state; Cuvil through a handle (``BlockRV`` by name, ``LoopRV`` by loop
variable) resolved against an immutable function (``schedules.Schedule.get``).  An
``StmtSRef`` here is the handle plus the owner it resolves against; ``.stmt`` asks
Cuvil.  The flags and the dependence graph are Cuvil's ``schedules.block_flags`` and
``schedules.block_scope``.  TVM's in-place ``replace`` has no counterpart (Cuvil's IR
is immutable) and is not mapped.
"""

from __future__ import annotations

import schedules as S
from cuvil_tir import Block, For, IRModule
from schedules.handles import BlockRV, LoopRV

from ..._gap import ShimGap

#: TVM's name for the flags of a block
CachedFlags = S.BlockFlags


class ScheduleDebugMask:
    """TVM's debug-mask bits (Schedule(debug_mask=...)): Cuvil's schedules always keep
    their IR and flags consistent, so the shim accepts and ignores the mask."""

    VERIFY_SREF_TREE = 1
    VERIFY_CACHED_FLAGS = 2


class StmtSRef:
    """A handle and the schedule (or state) it belongs to."""

    def __init__(self, owner, handle):
        self._owner, self.handle = owner, handle

    @property
    def stmt(self):
        return self._owner._get(self.handle)

    def same_as(self, other) -> bool:
        return isinstance(other, StmtSRef) and other._owner is self._owner and \
            other.handle == self.handle

    def __eq__(self, other):
        return self.same_as(other)

    def __hash__(self):
        return hash((id(self._owner), self.handle))

    def __repr__(self):
        return f"StmtSRef({self.handle!r})"


def handle_of(node):
    """The Cuvil handle of a Block or For node (by name / by loop variable)."""
    if isinstance(node, Block):
        return BlockRV(node.name)
    if isinstance(node, For):
        return LoopRV(node.loop_var)
    raise ShimGap(f"StmtSRef of a {type(node).__name__}: Cuvil handles name blocks and "
                  "loops only")


class Dependency:
    """A Cuvil ``Dependence`` with its ends as srefs of the state."""

    def __init__(self, owner, dep):
        self.src = StmtSRef(owner, dep.src)
        self.dst = StmtSRef(owner, dep.dst)
        self.kind = dep.kind


class BlockScope:
    """``get_deps_by_src`` / ``get_deps_by_dst`` over Cuvil's ``BlockScope``."""

    def __init__(self, scope):
        self._scope = scope

    def get_deps_by_src(self, sref):
        return [Dependency(sref._owner, d) for d in self._scope.deps_by_src(sref.handle)]

    def get_deps_by_dst(self, sref):
        return [Dependency(sref._owner, d) for d in self._scope.deps_by_dst(sref.handle)]


class ScheduleState:
    """``tir.ScheduleState(func_or_mod)``: a function to query (nothing to schedule)."""

    def __init__(self, mod, *, debug_mask="all", enable_check=True):
        from .schedule import main_func
        self._sch = S.Schedule(main_func(mod))
        self._owner = self

    @classmethod
    def of(cls, owner, sch):
        """The state of a ``tir.Schedule`` (its srefs are the schedule's)."""
        self = cls.__new__(cls)
        self._sch, self._owner = sch, owner
        return self

    @property
    def func(self):
        return self._sch.func

    @property
    def mod(self) -> IRModule:
        return IRModule.from_func(self.func.with_attr("global_symbol", "main"))

    def _get(self, handle):
        return self._sch.get(handle.name if isinstance(handle, BlockRV) else handle)

    def get_sref(self, node) -> StmtSRef:
        return StmtSRef(self._owner, handle_of(node))

    def _get_cached_flags(self, sref) -> CachedFlags:
        return S.block_flags(self.func, sref.handle)

    def get_block_scope(self, sref) -> BlockScope:
        return BlockScope(S.block_scope(self.func, sref.handle))

    def replace(self, *args, **kwargs):
        raise ShimGap("ScheduleState.replace: Cuvil's IR is immutable; primitives "
                      "return new functions (no in-place replacement to map onto)")
