"""Cuvil dtypes as LLVM types, and constants as LLVM IR literals.

Registers and memory differ for two dtypes: ``bool`` is ``i1`` in registers and
``i8`` in memory (numpy stores one byte per bool); ``bfloat16`` has no arithmetic of
its own and lives as its ``i16`` bit pattern, converted to ``float`` for every
operation.  ``float16`` is LLVM ``half`` (F16C makes its conversions native).

Example::

    >>> reg_type("float32x8"), mem_type("bool"), reg_type("bfloat16")
    ('<8 x float>', 'i8', 'i16')
    >>> const_text(1.5, "float32")
    '0x3FF8000000000000'
"""

from __future__ import annotations

import math
import struct

from cuvil_tir import dtype as D
from cuvil_tir.errors import CodegenError

_SCALAR = {
    "bool": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "i8", "uint16": "i16", "uint32": "i32", "uint64": "i64",
    "float16": "half", "bfloat16": "i16", "float32": "float", "float64": "double",
    "handle": "ptr",
}


def _vec(scalar: str, lanes: int) -> str:
    return scalar if lanes == 1 else f"<{lanes} x {scalar}>"


def reg_type(dt: str) -> str:
    """The LLVM type holding a value of ``dt`` in a register.

    Example::

        >>> reg_type("int8x4")
        '<4 x i8>'
    """
    e = D.element(dt)
    if e not in _SCALAR:
        hint = "; the fp8 dtypes are compiled by the cuda target" if D.is_float8(e) else ""
        raise CodegenError(f"llvm codegen: no LLVM type for dtype {dt!r}{hint}")
    return _vec(_SCALAR[e], D.lanes(dt))


def mem_type(dt: str) -> str:
    """The LLVM type of ``dt`` in memory (bool is one byte).

    Example::

        >>> mem_type("boolx4")
        '<4 x i8>'
    """
    e = D.element(dt)
    return _vec("i8", D.lanes(dt)) if e == "bool" else reg_type(dt)


def is_signed(dt: str) -> bool:
    """True when integer operations on ``dt`` are signed (int8 … int64).

    Example::

        >>> is_signed("int32"), is_signed("uint32")
        (True, False)
    """
    return D.is_int(dt)


def scalar_const(value, dt: str) -> str:
    """A scalar literal of element dtype ``dt`` (no type prefix).

    Example::

        >>> scalar_const(-1, "uint8"), scalar_const(True, "bool")
        ('255', 'true')
    """
    e = D.element(dt)
    if e == "bool":
        return "true" if value else "false"
    if D.is_integer(e):
        v = D.wrap_int(int(value), e)
        # LLVM reads integer literals as signed two's complement of the width;
        # an unsigned value is the same bits
        return str(v)
    if e == "bfloat16":
        return str(bf16_bits(float(value)))
    return const_text(float(value), e)


def const_text(value: float, dt: str) -> str:
    """A float literal in LLVM's exact hexadecimal forms.

    ``float`` and ``double`` literals are the double bit pattern of the value rounded
    to the type; ``half`` uses the ``0xH`` form.

    Example::

        >>> const_text(float("inf"), "float16")
        '0xH7C00'
    """
    if dt == "float16":
        (bits,) = struct.unpack("<H", struct.pack("<e", _clamp_half(value)))
        return f"0xH{bits:04X}"
    if dt == "float32":
        value = struct.unpack("<f", struct.pack("<f", _round_f32(value)))[0]
    (bits,) = struct.unpack("<Q", struct.pack("<d", value))
    return f"0x{bits:016X}"


def _round_f32(v: float) -> float:
    if math.isnan(v) or math.isinf(v):
        return v
    try:
        struct.pack("<f", v)
    except OverflowError:
        return math.copysign(math.inf, v)
    return v


def _clamp_half(v: float) -> float:
    if not math.isnan(v) and abs(v) >= 65520.0:
        return math.copysign(math.inf, v)
    return v


def bf16_bits(v: float) -> int:
    """The bfloat16 bit pattern of ``v``, rounded to nearest even (as ml_dtypes).

    Example::

        >>> hex(bf16_bits(1.0))
        '0x3f80'
    """
    if math.isnan(v):
        return 0x7FC0
    (b,) = struct.unpack("<I", struct.pack("<f", _round_f32(v)))
    b += 0x7FFF + ((b >> 16) & 1)
    return (b >> 16) & 0xFFFF


def splat(scalar_text: str, dt: str) -> str:
    """A constant of ``dt`` with every lane ``scalar_text`` (scalar: unchanged).

    Example::

        >>> splat("1", "int32x2")
        '<i32 1, i32 1>'
    """
    n = D.lanes(dt)
    if n == 1:
        return scalar_text
    t = _SCALAR[D.element(dt)]
    return "<" + ", ".join(f"{t} {scalar_text}" for _ in range(n)) + ">"
