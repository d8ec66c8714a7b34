"""Constant folding for every operator and dtype.

Integers are computed exactly and wrapped to the dtype (as numpy and C do); integer
division and modulo by zero give 0 (numpy's convention, Cuvil's run-time semantics on
every target).  Only a divisor that becomes zero during simplification reaches this
rule: the builders (``//``, ``%``, ``T.truncdiv`` …) refuse a constant zero divisor
with ``DivisionByZeroError``.  Floats
are computed by numpy in the dtype's own precision (``bfloat16`` in float32, rounded to
bfloat16 after every operation), so a folded constant is the value the hardware gives.

Example::

    >>> from cuvil_tir.expr import IntImm, FloatImm
    >>> fold_binary("Add", IntImm(100, "int8"), IntImm(100, "int8")).value
    -56
    >>> fold_binary("FloorDiv", IntImm(7), IntImm(0)).value
    0
    >>> fold_binary("Add", FloatImm(1.0, "float16"), FloatImm(0.0001, "float16")).value
    1.0
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import dtype as D
from .. import ops
from ..expr import Expr, FloatImm, IntImm
from ..expr_build import make_float
from ..float8 import round_to
from ..dtype import float_value, is_float8, round_bf16
from ..intdiv import INT_DIVISIONS

_INT_OPS = {
    "Add": lambda x, y: x + y,
    "Sub": lambda x, y: x - y,
    "Mul": lambda x, y: x * y,
    **INT_DIVISIONS,
    "Min": min,
    "Max": max,
}
_CMP_OPS = {
    "EQ": lambda x, y: x == y, "NE": lambda x, y: x != y, "LT": lambda x, y: x < y,
    "LE": lambda x, y: x <= y, "GT": lambda x, y: x > y, "GE": lambda x, y: x >= y,
}
_FLOAT_OPS = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.true_divide,
    "FloorDiv": np.floor_divide, "FloorMod": np.mod, "Mod": np.fmod,
    "Min": np.minimum, "Max": np.maximum,
}


def np_scalar(value: float, dt: str):
    """``value`` as a numpy scalar of float dtype ``dt`` (bfloat16 as float32 rounded).

    Example::

        >>> float(np_scalar(0.1, "float16"))
        0.0999755859375
    """
    if dt == "bfloat16":
        return np.float32(round_bf16(value))
    if is_float8(dt):
        return round_to(value, dt)
    return np.dtype(dt).type(value)


def _float_op(fn, dt: str, *vals):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = fn(*(np_scalar(v, dt) for v in vals))
        return make_float(float(r), dt)


def fold_binary(name: str, a: Expr, b: Expr) -> Expr | None:
    """Fold ``name(a, b)`` when both are scalar constants; else None.

    Example::

        >>> fold_binary("LT", IntImm(2), IntImm(3)).value
        1
    """
    if not (isinstance(a, (IntImm, FloatImm)) and isinstance(b, (IntImm, FloatImm))):
        return None
    dt = a.dtype
    if isinstance(a, IntImm):
        if name in _CMP_OPS:
            return IntImm(int(_CMP_OPS[name](a.value, b.value)), "bool")
        if name == "And":
            return IntImm(int(bool(a.value and b.value)), "bool")
        if name == "Or":
            return IntImm(int(bool(a.value or b.value)), "bool")
        fn = _INT_OPS.get(name)
        return None if fn is None else IntImm(fn(a.value, b.value), dt)
    x, y = float_value(a.value, dt), float_value(b.value, dt)
    if name in _CMP_OPS:
        return IntImm(int(_CMP_OPS[name](x, y)), "bool")
    fn = _FLOAT_OPS.get(name)
    return None if fn is None else _float_op(fn, dt, x, y)


def fold_cast(dt: str, v: Expr) -> Expr | None:
    """Fold ``Cast(dt, v)`` of a scalar constant with C semantics; else None.

    Float to int truncates toward zero and wraps; NaN and infinities are not folded
    (C leaves them undefined, so the cast is kept for the target to decide).

    Example::

        >>> fold_cast("int8", IntImm(300)).value, fold_cast("int32", FloatImm(-2.7)).value
        (44, -2)
    """
    if not isinstance(v, (IntImm, FloatImm)) or D.lanes(dt) != 1:
        return None
    x = v.value
    if D.is_float(dt):
        return make_float(float(x), dt)
    if D.is_bool(dt):
        return IntImm(int(x != 0), "bool")
    if isinstance(x, float):
        if math.isnan(x) or math.isinf(x):
            return None
        x = int(float_value(x, v.dtype))
    return IntImm(x, dt)


def fold_call(dt: str, op: str, args: tuple) -> Expr | None:
    """Fold an intrinsic call whose arguments are all constants; else None.

    ``if_then_else`` folds when its condition is constant (the arms need not be).
    ``fma`` folds only when ``a * b + c`` is exact in float64 (one rounding, as fma).

    Example::

        >>> fold_call("float32", "sqrt", (FloatImm(4.0),)).value
        2.0
    """
    if not ops.has_op(op):
        return None
    spec = ops.get_op(op)
    if spec.conditional:
        c = args[0]
        if isinstance(c, IntImm):
            return args[1] if c.value else args[2]
        return None
    if not spec.pure:
        return None
    if spec.fold is not None:
        return spec.fold(dt, args)
    if not all(isinstance(a, (IntImm, FloatImm)) for a in args) or D.lanes(dt) != 1:
        return None
    if spec.int_reference is not None and all(isinstance(a, IntImm) for a in args):
        return IntImm(spec.int_reference(dt)(*(a.value for a in args)), dt)
    if not D.is_float(dt):
        return None
    vals = [float_value(a.value, dt) for a in args]
    if spec.reference is None or spec.arity != len(vals):
        return None
    t = np.float32 if dt == "bfloat16" or is_float8(dt) else np.dtype(dt).type
    return _float_op(spec.reference(t), dt, *vals)
