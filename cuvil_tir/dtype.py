"""Dtypes are plain strings: ``"float32"``, ``"int8"``, ``"bool"``, ``"float32x8"``.

This module parses and validates them and holds the promotion rule used by every
Python operator on expressions:

* the same dtype on both sides gives that dtype;
* a Python ``int``/``float``/``bool`` literal takes the dtype of the other operand
  (a float literal next to an integer expression is an error: cast explicitly);
* two signed integers, or two unsigned integers, of different widths give the wider one;
* two floats of different widths give the wider one (``bfloat16`` with ``float16``
  gives ``float32``, the two fp8 dtypes give ``float16``);
* anything else (int with float, signed with unsigned, bool with numbers, different
  vector lanes) raises :class:`~cuvil_tir.DTypeError` naming both dtypes and the fix.

Example::

    >>> from cuvil_tir import dtype
    >>> dtype.promote("int32", "int64")
    'int64'
    >>> dtype.lanes("float32x8"), dtype.element("float32x8")
    (8, 'float32')
"""

from __future__ import annotations

import re
import warnings
from functools import lru_cache

import numpy as np

from .errors import DTypeError
from .float8 import round_to

_SCALARS = {
    "bool": ("bool", 1),
    "int8": ("int", 8), "int16": ("int", 16), "int32": ("int", 32), "int64": ("int", 64),
    "uint8": ("uint", 8), "uint16": ("uint", 16), "uint32": ("uint", 32), "uint64": ("uint", 64),
    "float16": ("float", 16), "bfloat16": ("bfloat", 16),
    "float8_e4m3fn": ("float8", 8), "float8_e5m2": ("float8", 8),
    "float32": ("float", 32), "float64": ("float", 64),
    "handle": ("handle", 64),
}
_VECTOR = re.compile(r"^([a-z]+[0-9]*(?:_[a-z0-9]+)?)x([0-9]+)$")

#: the codes of float dtypes (the fp8 dtypes are "float8")
_FLOAT_CODES = ("float", "bfloat", "float8")
#: every scalar dtype a tensor element may have
SCALAR_DTYPES = tuple(k for k in _SCALARS if k != "handle")


@lru_cache(maxsize=None)
def parse(dt: str) -> tuple[str, int, int]:
    """Split a dtype into ``(code, bits, lanes)``; raise ``DTypeError`` if unknown.

    Example::

        >>> parse("float32x4")
        ('float', 32, 4)
    """
    if not isinstance(dt, str):
        if isinstance(dt, np.dtype) or (isinstance(dt, type) and issubclass(dt, np.generic)):
            dt = np.dtype(dt).name
        else:
            raise DTypeError(f"expected a dtype string such as 'float32', found {dt!r}")
    lanes = 1
    base = dt
    m = _VECTOR.match(dt)
    if m and m.group(1) in _SCALARS:
        base, lanes = m.group(1), int(m.group(2))
        if lanes < 1:
            raise DTypeError(f"dtype {dt!r}: vector lanes must be >= 1")
    if base not in _SCALARS:
        known = ", ".join(SCALAR_DTYPES)
        raise DTypeError(f"unknown dtype {dt!r}; expected one of {known}, "
                         "optionally with a lane suffix such as 'float32x8'")
    code, bits = _SCALARS[base]
    return code, bits, lanes


def canonical(dt) -> str:
    """Return the canonical string of ``dt`` (accepts numpy dtypes too).

    Example::

        >>> import numpy as np
        >>> canonical(np.float32)
        'float32'
    """
    if isinstance(dt, str):
        parse(dt)
        return dt
    if isinstance(dt, np.dtype) or (isinstance(dt, type) and issubclass(dt, np.generic)):
        name = np.dtype(dt).name
        parse(name)
        return name
    raise DTypeError(f"expected a dtype string such as 'float32', found {dt!r}")


def element(dt: str) -> str:
    """The scalar element dtype of a (possibly vector) dtype.

    Example::

        >>> element("int8x16")
        'int8'
    """
    got = _ELEMENTS.get(dt) if isinstance(dt, str) else None
    if got is not None:
        return got
    parse(dt)
    m = _VECTOR.match(dt)
    got = m.group(1) if m and m.group(1) in _SCALARS else dt
    if isinstance(dt, str):
        # asked for every node a pass builds or checks (a GEMM candidate's lowering
        # asks some 20000 times for a dozen dtypes): known dtypes answer from here
        _ELEMENTS[dt] = got
    return got


_ELEMENTS: dict = {}    # dtype string -> its element dtype, for the dtypes parse accepts


def lanes(dt: str) -> int:
    """Number of vector lanes (1 for scalars).

    Example::

        >>> lanes("float32")
        1
    """
    return parse(dt)[2]


def bits(dt: str) -> int:
    """Bits of one element.

    Example::

        >>> bits("bfloat16")
        16
    """
    return parse(dt)[1]


def with_lanes(dt: str, n: int) -> str:
    """The dtype with ``n`` lanes of ``dt``'s element.

    Example::

        >>> with_lanes("float32", 8)
        'float32x8'
    """
    e = element(dt)
    return e if n == 1 else f"{e}x{n}"


def itemsize(dt: str) -> int:
    """Bytes of one element (bool takes one byte in memory).

    Example::

        >>> itemsize("float16")
        2
    """
    code, b, _ = parse(dt)
    return 1 if code == "bool" else b // 8


def is_float(dt: str) -> bool:
    """True for float16/bfloat16/float32/float64 and the fp8 dtypes (and their vectors).

    Example::

        >>> is_float("bfloat16")
        True
    """
    return parse(dt)[0] in _FLOAT_CODES


def is_float8(dt: str) -> bool:
    """True for ``float8_e4m3fn`` and ``float8_e5m2`` (:mod:`cuvil_tir.float8`), which
    are stored as their bits and computed in float32.

    Example::

        >>> is_float8("float8_e4m3fnx4"), is_float8("float16")
        (True, False)
    """
    return parse(dt)[0] == "float8"


def is_int(dt: str) -> bool:
    """True for signed integers.

    Example::

        >>> is_int("int8"), is_int("uint8")
        (True, False)
    """
    return parse(dt)[0] == "int"


def is_uint(dt: str) -> bool:
    """True for unsigned integers.

    Example::

        >>> is_uint("uint16")
        True
    """
    return parse(dt)[0] == "uint"


def is_integer(dt: str) -> bool:
    """True for signed or unsigned integers.

    Example::

        >>> is_integer("uint8"), is_integer("bool")
        (True, False)
    """
    return parse(dt)[0] in ("int", "uint")


def is_bool(dt: str) -> bool:
    """True for bool (and bool vectors).

    Example::

        >>> is_bool("boolx4")
        True
    """
    return parse(dt)[0] == "bool"


def to_numpy(dt: str) -> np.dtype:
    """The numpy dtype storing one element (bfloat16 is stored as uint16 bits).

    Example::

        >>> to_numpy("float16")
        dtype('float16')
    """
    e = element(dt)
    if e == "bfloat16":
        return np.dtype("uint16")
    if parse(e)[0] == "float8":
        return np.dtype("uint8")
    if e == "handle":
        raise DTypeError("the 'handle' dtype has no numpy equivalent")
    return np.dtype(e)


def int_range(dt: str) -> tuple[int, int]:
    """Inclusive ``(lo, hi)`` of an integer or bool dtype.

    Example::

        >>> int_range("int8")
        (-128, 127)
    """
    code, b, _ = parse(dt)
    if code == "bool":
        return 0, 1
    if code == "int":
        return -(1 << (b - 1)), (1 << (b - 1)) - 1
    if code == "uint":
        return 0, (1 << b) - 1
    raise DTypeError(f"int_range: expected an integer dtype, found {dt!r}")


def wrap_int(value: int, dt: str) -> int:
    """Wrap a Python int into ``dt``'s range, as fixed-width hardware (and numpy) does.

    Example::

        >>> wrap_int(130, "int8")
        -126
    """
    code, b, _ = parse(dt)
    if code == "bool":
        return 1 if value else 0
    value &= (1 << b) - 1
    if code == "int" and value >= 1 << (b - 1):
        value -= 1 << b
    return value


def promote(a: str, b: str, where: str = "binary operation") -> str:
    """The result dtype of combining two expression dtypes (see the module docstring).

    Example::

        >>> promote("float16", "float32")
        'float32'
    """
    if a == b:
        return a
    ca, ba, la = parse(a)
    cb, bb, lb = parse(b)
    if la != lb and la != 1 and lb != 1:
        raise DTypeError(f"{where}: cannot combine {a} with {b}: vector lanes differ "
                         f"({la} vs {lb})")
    n = max(la, lb)
    fa, fb = ca in _FLOAT_CODES, cb in _FLOAT_CODES
    if fa and fb:
        if {ca, cb} == {"float", "bfloat"} and ba == bb == 16:
            return with_lanes("float32", n)
        if ca == cb == "float8" and element(a) != element(b):
            return with_lanes("float16", n)
        if ba == bb:
            return with_lanes(element(a), n)
        return with_lanes(element(a) if ba > bb else element(b), n)
    if ca == cb and ca in ("int", "uint"):
        return with_lanes(element(a) if ba >= bb else element(b), n)
    if ca == cb:
        return with_lanes(element(a), n)
    raise DTypeError(f"{where}: cannot combine {a} with {b}; Cuvil does not guess a "
                     f"common dtype. Cast one side explicitly, e.g. T.cast(x, '{a}') "
                     f"or x.astype('{b}')")

def round_bf16(x: float) -> float:
    """Round a float to the nearest bfloat16 value (ties to even), as float.

    Example::

        >>> round_bf16(1.00390625)
        1.0
    """
    f = np.float32(x)
    if np.isnan(f):
        return float("nan")
    bits = int(f.view(np.uint32))
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return float(np.uint32(bits).view(np.float32))


def float_value(value: float, dt: str) -> float:
    """``value`` rounded to the precision of float dtype ``dt``.

    Example::

        >>> float_value(0.1, "float32") == 0.1
        False
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dt == "bfloat16":
            return round_bf16(value)
        if is_float8(dt):
            return float(round_to(value, dt))
        return float(np.dtype(dt).type(value))
