"""``tvm.tir``: IR node classes (Cuvil's), the schedule, index maps."""

from cuvil_tir import (Block, BlockRealize, Buffer, Cast, Evaluate, For, PrimFunc, Var, const,
                       decl_buffer, floordiv, floormod, truncdiv, truncmod)
from cuvil_tir.node import Node
from cuvil_tir.expr import Expr as PrimExpr

from schedules import AXIS_SEPARATOR

from .._gap import module_getattr
from .expr import FloatImm, IntImm
from .schedule import Schedule, ScheduleError, ScheduleState, TensorIntrin


class IndexMap:
    """``tir.IndexMap.from_func(fn)``: Cuvil's primitives take the function itself."""

    AXIS_SEPARATOR = AXIS_SEPARATOR

    def __init__(self, fn):
        self._cuvil_fn = fn

    @classmethod
    def from_func(cls, fn, inverse_index_map=None, index_dtype="int64"):
        return cls(fn)

    def _cuvil(self):
        import schedules as S
        return S.IndexMap.from_func(self._cuvil_fn)

    def is_equivalent_to(self, other) -> bool:
        return self._cuvil().is_equivalent_to(other._cuvil())

    def inverse(self, shape):
        return IndexMap(self._cuvil().inverse(list(shape)))


class ForKind:
    """``tir.ForKind``: Cuvil's loop kinds are their names."""

    SERIAL, PARALLEL, VECTORIZED = "serial", "parallel", "vectorized"
    UNROLLED, THREAD_BINDING = "unrolled", "thread_binding"


class _BufferMap(dict):
    """TVM's ``func.buffer_map[func.params[i]]``: a TVM parameter is a handle mapped to
    its buffer; a Cuvil parameter is the buffer itself (still found by name too)."""

    def __getitem__(self, key):
        if isinstance(key, Buffer) and self.get(key.name) is key:
            return key
        return super().__getitem__(key)


_buffer_map = PrimFunc.buffer_map.fget

# TVM's names for what Cuvil's nodes already have (only in the shim's process)
PrimFunc.buffer_map = property(lambda self: _BufferMap(_buffer_map(self)))
Block.name_hint = property(lambda self: self.name)
Node.same_as = lambda self, other: self is other

__getattr__ = module_getattr("tvm.tir")
