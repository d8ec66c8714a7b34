"""Building expressions from Python values: constants, promotion, folding and casts.

The Python operators of :class:`~cuvil_tir.expr.Expr` and the ``T.*`` builders call
these.  A Python literal takes the dtype of the other operand and must fit it; integer
constants fold at once; an integer division by the constant zero is refused.

Example::

    >>> import cuvil_tir as T
    >>> str(T.var("i", "int8") + 3)
    'i + T.int8(3)'
"""

from __future__ import annotations

import math
import numpy as np

from . import dtype as D
from .errors import DivisionByZeroError, DTypeError
from .intdiv import INT_DIVISIONS
from .dtype import float_value
from .expr import (Add, And, Broadcast, Call, Cast, CmpOp, Expr, FloatImm, IntImm,  # noqa: F401
                   Or, Var)


def const(value, dtype: str | None = None) -> Expr:
    """A typed constant; ``dtype`` defaults to int32 / float32 / bool by Python type.

    Example::

        >>> const(3).dtype, const(0.5).dtype, const(True).dtype
        ('int32', 'float32', 'bool')
    """
    if isinstance(value, Expr):
        return value if dtype is None else cast(value, dtype)
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, int):
            dtype = "int32" if -(1 << 31) <= value < (1 << 31) else "int64"
        elif isinstance(value, float):
            dtype = "float32"
        else:
            raise DTypeError(f"const: expected a Python bool, int or float, found {value!r}")
    dtype = D.canonical(dtype)
    if D.lanes(dtype) > 1:
        return Broadcast(const(value, D.element(dtype)), D.lanes(dtype))
    if D.is_float(dtype):
        return FloatImm(float(value), dtype)
    if isinstance(value, float):
        if not value.is_integer():
            raise DTypeError(f"const: {value!r} is not an integer but dtype is {dtype}")
        value = int(value)
    value = int(value)
    if not D.is_bool(dtype):
        lo, hi = D.int_range(dtype)
        if not lo <= value <= hi:
            raise DTypeError(f"the integer {value} does not fit {dtype} (range {lo}..{hi}); "
                             f"use a wider dtype, or T.cast({value}, '{dtype}') to wrap it "
                             "on purpose")
    return IntImm(value, dtype)


def zero_like(e: Expr) -> Expr:
    """Zero of ``e``'s dtype.

    Example::

        >>> zero_like(Var("x", "float32")).value
        0.0
    """
    return const(0, e.dtype)


def as_expr(value, like: str | None = None) -> Expr:
    """Turn a Python scalar into a constant (of dtype ``like`` when given).

    Example::

        >>> as_expr(2, "int64").dtype
        'int64'
    """
    if isinstance(value, Expr):
        return value
    if hasattr(value, "as_expr"):     # a te Tensor slice or similar
        return value.as_expr()
    if isinstance(value, (bool, int, float)) or _is_np_scalar(value):
        if _is_np_scalar(value):
            like = like or value.dtype.name
            value = value.item()
        if like is not None:
            if isinstance(value, float) and not isinstance(value, bool) and \
                    D.is_integer(like) and not float(value).is_integer():
                raise DTypeError(f"cannot combine the float literal {value!r} with an "
                                 f"expression of dtype {like}; cast the expression, e.g. "
                                 f"x.astype('float32')")
            if isinstance(value, float) and D.is_integer(like):
                raise DTypeError(f"cannot combine the float literal {value!r} with an "
                                 f"expression of dtype {like}; write an int literal or "
                                 f"cast the expression, e.g. x.astype('float32')")
            if isinstance(value, int) and not isinstance(value, bool) and \
                    D.is_integer(like):
                lo, hi = D.int_range(like)
                if not lo <= value <= hi:
                    # TVM refuses this too: wrapping would silently change the program
                    wide = next((w for w in ("int32", "int64") if D.bits(w) > D.bits(like)
                                 and D.int_range(w)[0] <= value <= D.int_range(w)[1]),
                                "int64")
                    raise DTypeError(
                        f"the literal {value} does not fit {like}, the dtype of the other "
                        f"operand (range {lo}..{hi}); cast that operand to a wider dtype "
                        f"first, e.g. x.astype('{wide}') + {value}, or write "
                        f"T.cast({value}, '{like}') to wrap the literal on purpose")
            return const(value, like)
        return const(value)
    raise DTypeError(f"expected an expression or a Python number, found "
                     f"{type(value).__name__} {value!r}")


def _is_np_scalar(v) -> bool:
    return isinstance(v, np.generic)


def _unify(a, b, where: str) -> tuple[Expr, Expr]:
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        a, b = as_expr(a), as_expr(b)
    elif not isinstance(a, Expr):
        a = as_expr(a, b.dtype if D.lanes(b.dtype) == 1 else D.element(b.dtype))
    elif not isinstance(b, Expr):
        b = as_expr(b, a.dtype if D.lanes(a.dtype) == 1 else D.element(a.dtype))
    if a.dtype == b.dtype:
        return a, b
    target = D.promote(a.dtype, b.dtype, where)
    return _convert(a, target), _convert(b, target)


def _convert(e: Expr, target: str) -> Expr:
    if e.dtype == target:
        return e
    n = D.lanes(target)
    if e.lanes == 1 and n > 1:
        e = _convert(e, D.element(target))
        return Broadcast(e, n)
    return cast(e, target)


_FOLD = {
    "Add": lambda x, y: x + y, "Sub": lambda x, y: x - y, "Mul": lambda x, y: x * y,
    **INT_DIVISIONS, "Min": min, "Max": max,
    "EQ": lambda x, y: x == y, "NE": lambda x, y: x != y, "LT": lambda x, y: x < y,
    "LE": lambda x, y: x <= y, "GT": lambda x, y: x > y, "GE": lambda x, y: x >= y,
}


_DIVISIONS = ("FloorDiv", "FloorMod", "Div", "Mod")


def zero_division(what: str) -> None:
    """Refuse an integer division or modulo whose divisor is the constant zero.

    Example::

        >>> try:
        ...     zero_division("i // 0")
        ... except DivisionByZeroError as err:
        ...     print(err.message.split(";")[0])
        integer division by zero in i // 0
    """
    raise DivisionByZeroError(f"integer division by zero in {what}; the divisor "
                              "is the constant 0: guard the division, or divide by a "
                              "non-zero value")


def binary(cls, a, b) -> Expr:
    """Build ``cls(a, b)`` after promotion, folding integer constants.

    Example::

        >>> binary(Add, IntImm(2), 3).value
        5
    """
    name = cls.__name__
    a, b = _unify(a, b, f"'{cls.symbol}'")
    dt = a.dtype
    if name == "Div" and D.is_integer(dt):
        raise DTypeError(f"'/' is true division and needs float operands, found {dt}; "
                         "use '//' (floor division) or T.truncdiv for integers")
    if D.is_bool(dt) and not issubclass(cls, CmpOp):
        raise DTypeError(f"'{cls.symbol}' is not defined on bool operands; cast to an "
                         "integer dtype first")
    if name in _DIVISIONS and isinstance(b, IntImm) and b.value == 0:
        zero_division(f"{a} {cls.symbol} {b}")
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        r = _FOLD[name](a.value, b.value)
        return IntImm(int(r), "bool" if issubclass(cls, CmpOp) else dt)
    return cls(a, b)


def logical(cls, a, b) -> Expr:
    """Build ``And``/``Or`` of two bool expressions, folding constants.

    Example::

        >>> logical(And, True, Var("i") < 2).dtype
        'bool'
    """
    a, b = as_expr(a, "bool"), as_expr(b, "bool")
    for x in (a, b):
        if not D.is_bool(x.dtype):
            raise DTypeError(f"'{cls.symbol}' expects bool operands, found {x.dtype}; "
                             "compare first, e.g. (x > 0) & (y > 0)")
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        v = (a.value and b.value) if cls is And else (a.value or b.value)
        return IntImm(v, "bool")
    return cls(a, b)


def cast(value, dtype: str) -> Expr:
    """Convert an expression (or Python number) to ``dtype``.

    Constants are converted at once, with C semantics (wrap for integers, truncation
    toward zero for float to int).

    Example::

        >>> cast(300, "int8").value
        44
    """
    dtype = D.canonical(dtype)
    e = as_expr(value)
    if e.dtype == dtype:
        return e
    if D.lanes(dtype) != e.lanes:
        if e.lanes == 1:
            return Broadcast(cast(e, D.element(dtype)), D.lanes(dtype))
        raise DTypeError(f"cast: cannot change lanes ({e.dtype} -> {dtype})")
    if isinstance(e, (IntImm, FloatImm)) and D.lanes(dtype) == 1:
        v = e.value
        if D.is_float(dtype):
            return FloatImm(float(v), dtype)
        if D.is_bool(dtype):
            return IntImm(1 if v else 0, "bool")
        if isinstance(v, float):
            if math.isnan(v) or math.isinf(v):
                return Cast(dtype, e)
            v = int(v)
        return IntImm(v, dtype)
    return Cast(dtype, e)


def make_float(value, dt: str) -> FloatImm:
    """A FloatImm holding ``value`` rounded to ``dt``.

    Example::

        >>> make_float(1e10, "float16").value
        inf
    """
    return FloatImm(float_value(float(value), dt), dt)


#: the bitwise ops (TVM's names) and their arities
BITWISE = {"bitwise_and": 2, "bitwise_or": 2, "bitwise_xor": 2, "bitwise_not": 1,
           "shift_left": 2, "shift_right": 2}


def bitwise(op: str, *args) -> Expr:
    """The ``Call`` of bitwise op ``op`` on ``args``, checked: integer operands of one
    dtype (a Python int takes the other operand's dtype); the semantics are those of
    :mod:`cuvil_tir.ops.bitwise` (where this builder is also ``make``).

    Example::

        >>> import cuvil_tir as T
        >>> bitwise("bitwise_xor", T.var("u", "uint8"), 1).args[1].dtype
        'uint8'
    """
    if len(args) != BITWISE[op]:
        raise DTypeError(f"T.{op} takes {BITWISE[op]} operand(s), found {len(args)}")
    ref = next((a for a in args if isinstance(a, Expr)), None)
    dt = ref.dtype if ref is not None else "int32"
    vals = tuple(as_expr(a, dt) for a in args)
    for v in vals:
        if D.is_bool(v.dtype):
            raise DTypeError(f"T.{op} takes integer operands, found {v} of dtype bool; "
                             "'&', '|' and '~' are logical only when every operand is "
                             "bool: compare the integer first, e.g. (x > 0) & c")
        if not D.is_integer(v.dtype):
            raise DTypeError(f"T.{op} takes integer operands, found {v} of dtype "
                             f"{v.dtype}; cast it first, e.g. T.Cast('int32', x)")
    if len({v.dtype for v in vals}) > 1:
        raise DTypeError(f"T.{op}: the operands have dtypes "
                         f"{' and '.join(v.dtype for v in vals)}; cast one so they agree")
    return Call(vals[0].dtype, op, vals)
