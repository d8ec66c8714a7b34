"""The 8-bit float dtypes ``float8_e4m3fn`` and ``float8_e5m2`` (the names TVM and
ml_dtypes use; NVIDIA's ``__nv_fp8_e4m3`` / ``__nv_fp8_e5m2``, Hopper's fp8 tensor-core
inputs).

* ``float8_e4m3fn``: 1 sign, 4 exponent (bias 7) and 3 mantissa bits; no infinities,
  NaN is ``S.1111.111``; the largest finite value is 448, the smallest subnormal 2**-9;
* ``float8_e5m2``: 1 sign, 5 exponent (bias 15) and 2 mantissa bits, IEEE-like
  (infinities, NaNs); the largest finite value is 57344, the smallest subnormal 2**-16.

Both are stored as their bit patterns (``uint8`` arrays) and computed in float32: a
value is rounded to the nearest fp8 value, ties to even, and saturated to the largest
finite value (CUDA's conversion with ``__NV_SATFINITE``, PTX ``cvt.rn.satfinite``:
infinities too); NaN stays NaN.  The interpreter and constant folding use these
tables, the CUDA backend the hardware conversion, so both give the same bits.

Example::

    >>> [float(x) for x in decode(np.array([0x38, 0x7E, 0x01], np.uint8), "float8_e4m3fn")]
    [1.0, 448.0, 0.001953125]
    >>> [hex(b) for b in encode(np.array([1.0, 1000.0, 1.0625], np.float32), "float8_e4m3fn")]
    ['0x38', '0x7e', '0x38']
"""

from __future__ import annotations

import numpy as np

#: the fp8 dtypes: (exponent bits, mantissa bits, IEEE-like infinities)
FORMATS = {"float8_e4m3fn": (4, 3, False), "float8_e5m2": (5, 2, True)}


def _table(fmt: str) -> np.ndarray:
    e_bits, m_bits, ieee = FORMATS[fmt]
    bias = (1 << (e_bits - 1)) - 1
    out = np.empty(256, np.float64)
    for code in range(256):
        s, e, m = code >> 7, (code >> m_bits) & ((1 << e_bits) - 1), code & ((1 << m_bits) - 1)
        top = e == (1 << e_bits) - 1
        if ieee and top:
            v = np.inf if m == 0 else np.nan
        elif not ieee and top and m == (1 << m_bits) - 1:
            v = np.nan
        elif e == 0:
            v = m / (1 << m_bits) * 2.0 ** (1 - bias)
        else:
            v = (1 + m / (1 << m_bits)) * 2.0 ** (e - bias)
        out[code] = -v if s else v
    return out


_VALUES = {f: _table(f) for f in FORMATS}
#: the non-negative finite values of each format, by code (ascending)
_POSITIVE = {f: v[:128][np.isfinite(v[:128])] for f, v in _VALUES.items()}
_NAN = {"float8_e4m3fn": 0x7F, "float8_e5m2": 0x7E}


def is_float8(dt: str) -> bool:
    """Whether ``dt`` (an element dtype) is an fp8 dtype.

    Example::

        >>> is_float8("float8_e5m2"), is_float8("float16")
        (True, False)
    """
    return dt in FORMATS


def largest(dt: str) -> float:
    """The largest finite value of fp8 dtype ``dt``.

    Example::

        >>> largest("float8_e4m3fn"), largest("float8_e5m2")
        (448.0, 57344.0)
    """
    return float(_POSITIVE[dt][-1])


def decode(bits, dt: str):
    """The float32 values of fp8 bit patterns (an array, or one int).

    Example::

        >>> float(decode(0x7C, "float8_e5m2"))
        inf
    """
    return _VALUES[dt][np.asarray(bits, np.uint8)].astype(np.float32)


def encode(values, dt: str):
    """The fp8 bit patterns nearest to ``values`` (ties to even, saturating, NaN kept).

    Example::

        >>> hex(int(encode(-0.0, "float8_e5m2"))), hex(int(encode(np.inf, "float8_e5m2")))
        ('0x80', '0x7b')
    """
    x = np.asarray(values, np.float64)
    mag = np.abs(x)
    pos = _POSITIVE[dt]
    hi = np.clip(np.searchsorted(pos, mag, side="left"), 0, len(pos) - 1)
    lo = np.clip(hi - 1, 0, len(pos) - 1)
    d_lo, d_hi = np.abs(mag - pos[lo]), np.abs(pos[hi] - mag)
    code = np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(lo % 2 == 0, lo, hi)))
    code = np.where(mag >= pos[-1], len(pos) - 1, code)       # saturate (inf too)
    sign = np.signbit(x).astype(np.int64) << 7
    out = (code | sign).astype(np.uint8)
    out = np.where(np.isnan(x), np.uint8(_NAN[dt]) | sign.astype(np.uint8), out)
    return out.astype(np.uint8) if out.ndim else np.uint8(out)


def round_to(value, dt: str):
    """``value`` rounded to fp8 dtype ``dt``, as a float32.

    Example::

        >>> float(round_to(0.3, "float8_e4m3fn"))
        0.3125
    """
    return np.float32(decode(encode(value, dt), dt))


__all__ = ["FORMATS", "decode", "encode", "is_float8", "largest", "round_to"]
