"""Scalar semantics of every dtype, as Python functions the interpreter's closures call.

Values are represented as follows: integers as Python ``int`` wrapped into the dtype's
range after every operation (two's complement, like numpy's fixed-width integers);
``bool`` as Python ``bool``; ``float16``/``float32``/``float64`` as numpy scalars of
that type, so arithmetic rounds in the dtype; ``bfloat16`` as a ``numpy.float32``
holding a bfloat16-representable value, rounded back to nearest-even after every
operation (arrays store bfloat16 as ``uint16`` bits).  Vectors are tuples of lanes.

Integer division and modulo by zero give 0 (the Cuvil convention, numpy's result)
instead of raising.

Example::

    >>> add = binary_op("Add", "int8")
    >>> add(127, 1)
    -128
    >>> binary_op("Div", "int32")(-7, 2), binary_op("FloorDiv", "int32")(-7, 2)
    (-3, -4)
    >>> binary_op("FloorMod", "int32")(5, 0)
    0
"""

from __future__ import annotations

import math
import operator

import numpy as np

from .. import dtype as D
from .. import float8 as F8
from .. import ops
from ..errors import LoweringError
from ..intdiv import floordiv, floormod, truncdiv, truncmod

# bfloat16 bits -> float32 value, for every one of the 65536 bit patterns
_BF16_TO_F32 = (np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)).view(np.float32)
_F32 = np.float32


def bf16_bits(x) -> int:
    """The bfloat16 bits nearest (ties to even) to the float ``x``.

    Example::

        >>> hex(bf16_bits(1.0)), hex(bf16_bits(float("nan")))
        ('0x3f80', '0x7fc0')
    """
    f = np.float32(x)
    u = int(f.view(np.uint32))
    if f != f:
        return ((u >> 16) & 0x8000) | 0x7FC0
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def bf16_from_bits(bits: int):
    """The float32 value of bfloat16 ``bits``.

    Example::

        >>> float(bf16_from_bits(0x3F80))
        1.0
    """
    return _BF16_TO_F32[bits]


def round_bf16(x):
    """``x`` rounded to the nearest bfloat16, as a float32 value.

    Example::

        >>> float(round_bf16(1.00390625))  # halfway between 1 and 1 + 2**-7: ties to even
        1.0
    """
    return _BF16_TO_F32[bf16_bits(x)]


def _wrapper(dt: str):
    """A function wrapping a Python int into integer dtype ``dt``."""
    code, bits, _ = D.parse(dt)
    mask = (1 << bits) - 1
    if code == "uint":
        return lambda v: v & mask
    half = 1 << (bits - 1)
    return lambda v: ((v + half) & mask) - half


def to_dtype(dt: str):
    """A function converting a Python number to the value representation of ``dt``.

    Example::

        >>> to_dtype("uint8")(300), type(to_dtype("float16")(1.5)).__name__
        (44, 'float16')
    """
    e = D.element(dt)
    if e == "bool":
        return bool
    if D.is_integer(e):
        return _wrapper(e)
    if e == "bfloat16":
        return round_bf16
    if F8.is_float8(e):
        return lambda v: F8.round_to(v, e)
    return np.dtype(e).type


def _rounded(e: str) -> bool:
    """Whether float dtype ``e`` is computed in float32 and rounded after each op."""
    return e == "bfloat16" or F8.is_float8(e)


def _fmin(a, b):
    # NaN-propagating, like numpy.minimum and llvm.minimum
    if a != a:
        return a
    return b if (b < a or b != b) else a


def _fmax(a, b):
    if a != a:
        return a
    return b if (b > a or b != b) else a


_CMP = {"EQ": operator.eq, "NE": operator.ne, "LT": operator.lt, "LE": operator.le,
        "GT": operator.gt, "GE": operator.ge}


def _int_ops(dt: str) -> dict:
    w = _wrapper(dt)
    return {
        "Add": lambda a, b: w(a + b), "Sub": lambda a, b: w(a - b),
        "Mul": lambda a, b: w(a * b),
        "FloorDiv": lambda a, b: w(floordiv(a, b)), "FloorMod": floormod,
        "Div": lambda a, b: w(truncdiv(a, b)), "Mod": truncmod, "Min": min, "Max": max,
    }


def _float_ops() -> dict:
    return {"Add": operator.add, "Sub": operator.sub, "Mul": operator.mul,
            "Div": operator.truediv, "FloorDiv": operator.floordiv,
            "FloorMod": operator.mod, "Mod": np.fmod, "Min": _fmin, "Max": _fmax}


def _round_after(fn, e: str = "bfloat16"):
    if F8.is_float8(e):
        return lambda *args: F8.round_to(fn(*args), e)
    return lambda *args: round_bf16(fn(*args))


def binary_op(kind: str, dt: str):
    """The function computing binary node ``kind`` on scalars of element dtype ``dt``.

    ``dt`` is the operands' dtype (for comparisons too).

    Example::

        >>> binary_op("Mul", "uint8")(16, 17)
        16
    """
    e = D.element(dt)
    if kind in _CMP:
        return _CMP[kind]
    if kind == "And":
        return lambda a, b: bool(a) and bool(b)
    if kind == "Or":
        return lambda a, b: bool(a) or bool(b)
    if e == "bool":
        # only reachable with hand-built nodes: compute as uint1
        ops = _int_ops("uint8")
        fn = ops[kind]
        return lambda a, b: bool(fn(int(a), int(b)) & 1)
    if D.is_integer(e):
        return _int_ops(e)[kind]
    fn = _float_ops()[kind]
    return _round_after(fn, e) if _rounded(e) else fn


def cast_op(src: str, dst: str):
    """The function converting a scalar of ``src`` to ``dst`` (C semantics).

    Float to integer truncates toward zero, then wraps; NaN, infinities and values
    beyond the 32/64-bit conversion range give what x86 and numpy give.

    Example::

        >>> cast_op("float32", "int8")(np.float32(-3.7)), cast_op("int32", "uint8")(-1)
        (-3, 255)
    """
    s, d = D.element(src), D.element(dst)
    if s == d:
        return lambda v: v
    if d == "bool":
        return lambda v: bool(v != 0)
    if D.is_integer(d):
        w = _wrapper(d)
        if D.is_float(s):
            return _float_to_int(d, w)
        return lambda v: w(int(v))
    # float destination
    if d == "bfloat16":
        return lambda v: round_bf16(float(v))
    if F8.is_float8(d):
        return lambda v: F8.round_to(float(v), d)
    t = np.dtype(d).type
    if D.is_float(s):
        return t
    return lambda v: t(int(v))


def _float_to_int(d: str, w):
    # x86 (and so numpy) converts through a 32- or 64-bit signed integer; NaN, inf and
    # values outside that integer's range give its "indefinite" value, the minimum
    width = 64 if D.bits(d) == 64 or d == "uint32" else 32
    lo, hi = -(1 << (width - 1)), 1 << (width - 1)
    if d == "uint64":
        hi = 1 << 64

    def f2i(v):
        if math.isnan(v) or math.isinf(v):
            return w(lo)
        i = int(v)
        return w(i if lo <= i < hi else lo)
    return f2i


def intrinsic_op(name: str, dt: str):
    """The function computing op ``name`` on scalars of dtype ``dt``, from the op
    registry's reference semantics (``int_reference`` on integers, ``reference`` on
    floats).

    A conditional op (``if_then_else``) is not here: it is lazy, so the compiler
    handles it.

    Example::

        >>> float(intrinsic_op("round", "float32")(np.float32(2.5)))
        2.0
        >>> intrinsic_op("abs", "int8")(-128)
        -128
    """
    e = D.element(dt)
    spec = ops.get_op(name) if ops.has_op(name) else None
    if D.is_integer(e):
        if spec is None or spec.int_reference is None:
            raise LoweringError(f"intrinsic {name!r} is defined on floats, found dtype {dt}")
        return spec.int_reference(e)
    if not D.is_float(e):
        raise LoweringError(f"intrinsic {name!r} on dtype {dt} is not defined")
    t = np.float32 if _rounded(e) else np.dtype(e).type
    if spec is None or spec.reference is None:
        known = [n for n in ops.list_ops() if ops.get_op(n).reference is not None]
        raise LoweringError(f"unknown intrinsic {name!r}; the interpreter knows "
                            f"{', '.join(known)}")
    fn = spec.reference(t)
    return _round_after(fn, e) if _rounded(e) else fn


def load_converter(dt: str):
    """A function turning an element read from a storage array into a value.

    Example::

        >>> float(load_converter("bfloat16")(np.uint16(0x4000)))
        2.0
    """
    e = D.element(dt)
    if e == "bfloat16":
        return lambda v: _BF16_TO_F32[v]
    if F8.is_float8(e):
        return lambda v: F8.decode(int(v), e)
    if e == "bool":
        return bool
    if D.is_integer(e):
        return int
    return None


def tile_values(stored, dt: str):
    """The values of an array of ``dt`` elements as stored (bfloat16 bits become
    float32 values; other dtypes are their values already).

    Example::

        >>> tile_values(np.array([0x3F80, 0x4000], np.uint16), "bfloat16").tolist()
        [1.0, 2.0]
    """
    if D.element(dt) == "bfloat16":
        return _BF16_TO_F32[np.asarray(stored, np.uint16)]
    if F8.is_float8(D.element(dt)):
        return F8.decode(stored, D.element(dt))
    return stored


def tile_storage(values, dt: str):
    """An array of values stored as ``dt`` elements (bfloat16: nearest, ties to even).

    Example::

        >>> [hex(x) for x in tile_storage(np.array([1.0, 2.0], np.float32), "bfloat16")]
        ['0x3f80', '0x4000']
    """
    if D.element(dt) == "bfloat16":
        u = np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)
        bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        nan = np.isnan(np.asarray(values, np.float32))
        return np.where(nan, (((u >> 16) & 0x8000) | 0x7FC0).astype(np.uint16), bits)
    if F8.is_float8(D.element(dt)):
        return F8.encode(values, D.element(dt))
    return values


def store_converter(dt: str):
    """A function turning a value into what a storage array of ``dt`` holds.

    Example::

        >>> hex(store_converter("bfloat16")(np.float32(2.0)))
        '0x4000'
    """
    e = D.element(dt)
    if F8.is_float8(e):
        return lambda v: int(F8.encode(v, e))
    return bf16_bits if e == "bfloat16" else None
