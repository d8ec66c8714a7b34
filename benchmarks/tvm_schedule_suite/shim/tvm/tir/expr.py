"""``tvm.tir.expr``: expression node classes (Cuvil's; constants take TVM's argument order)."""

from cuvil_tir.expr import Add, Call, Cast, FloorDiv, FloorMod, Mul, Sub, Var
from cuvil_tir.expr import FloatImm as _FloatImm
from cuvil_tir.expr import IntImm as _IntImm

from .._gap import module_getattr


class _Alias(type):
    # isinstance(x, tvm.tir.IntImm) holds for Cuvil's IntImm
    def __instancecheck__(cls, obj):
        return isinstance(obj, cls.cuvil)


class IntImm(metaclass=_Alias):
    """``tir.IntImm(dtype, value)``."""

    cuvil = _IntImm

    def __new__(cls, dtype, value, span=None):
        return _IntImm(value, dtype)


class FloatImm(metaclass=_Alias):
    """``tir.FloatImm(dtype, value)``."""

    cuvil = _FloatImm

    def __new__(cls, dtype, value, span=None):
        return _FloatImm(value, dtype)


__getattr__ = module_getattr("tvm.tir.expr")
__all__ = ["Add", "Call", "Cast", "FloorDiv", "FloorMod", "Mul", "Sub", "Var", "IntImm",
           "FloatImm"]
