"""The small C functions generated code calls, emitted once per source when used.

Each helper is ``static inline`` C99 and carries Cuvil's semantics where C's differ:

* integer division and modulo never trap: by zero they give 0, ``INT_MIN / -1`` wraps
  to ``INT_MIN`` (:mod:`cuvil_tir.intdiv`); ``floordiv``/``floormod`` round toward
  negative infinity;
* shifts wrap, and an amount outside ``[0, bits)`` is defined
  (:mod:`cuvil_tir.ops.bitwise`);
* float ``min``/``max`` propagate NaN, like ``numpy.minimum``;
* ``float16`` and ``bfloat16`` are stored as their 16-bit patterns and computed in
  ``float``, rounded (to nearest even) after every operation, as numpy does;
* internal buffer sizes are computed in exact 64-bit arithmetic with overflow checks.

A helper's name encodes its dtype (``cvl_floordiv_int32``); :func:`helper` returns
``(name, definition)`` so a printer can collect the definitions it used.

Example::

    >>> name, text = helper("floordiv", "int32", "int32_t")
    >>> name, text.splitlines()[0]
    ('cvl_floordiv_int32', 'static inline int32_t cvl_floordiv_int32(int32_t a, int32_t b) {')
"""

from __future__ import annotations

from cuvil_tir import dtype as D
from cuvil_tir.errors import CodegenError

_F16 = """\
static inline float cvl_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1fu) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else {  /* subnormal: normalise */
        exp = 113u;
        while (!(man & 0x400u)) { man <<= 1; exp--; }
        bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
    }
    union { uint32_t u; float f; } v; v.u = bits; return v.f;
}
static inline uint16_t cvl_f32_to_f16(float f) {
    union { uint32_t u; float f; } v; v.f = f;
    uint32_t x = v.u, sign = (x >> 16) & 0x8000u, absx = x & 0x7fffffffu;
    if (absx > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((absx >> 13) & 0x3ffu));
    if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  /* rounds to inf */
    if (absx < 0x38800000u) {  /* subnormal half (or zero) */
        if (absx < 0x33000000u) return (uint16_t)sign;
        uint32_t e = absx >> 23, m = (absx & 0x7fffffu) | 0x800000u, shift = 126u - e;
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = absx + 0xfffu + ((absx >> 13) & 1u) - 0x38000000u;
    return (uint16_t)(sign | (r >> 13));
}
static inline float cvl_round_f16(float f) { return cvl_f16_to_f32(cvl_f32_to_f16(f)); }
"""

_BF16 = """\
static inline float cvl_bf16_to_f32(uint16_t h) {
    union { uint32_t u; float f; } v; v.u = (uint32_t)h << 16; return v.f;
}
static inline uint16_t cvl_f32_to_bf16(float f) {
    union { uint32_t u; float f; } v; v.f = f;
    if (f != f) return (uint16_t)0x7fc0u;
    return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}
static inline float cvl_round_bf16(float f) { return cvl_bf16_to_f32(cvl_f32_to_bf16(f)); }
"""

_SIZE = """\
/* exact 64-bit size arithmetic: *bad is set on overflow or a negative size */
static inline int64_t cvl_size_mul(int64_t a, int64_t b, int *bad) {
    if (a < 0 || b < 0) { *bad = 1; return 0; }
    if (a != 0 && b > INT64_MAX / a) { *bad = 1; return 0; }
    return a * b;
}
static inline int64_t cvl_size_add(int64_t a, int64_t b, int *bad) {
    if (a < 0 || b < 0 || a > INT64_MAX - b) { *bad = 1; return 0; }
    return a + b;
}
"""

_INT_DIV = {
    # signed; b == 0 -> 0; b == -1 -> wrapped negation (INT_MIN / -1 == INT_MIN)
    "div": "if (b == 0) return 0;\n    if (b == -1) return ({t})(0 - ({u})a);\n"
           "    return ({t})(a / b);",
    "mod": "if (b == 0 || b == -1) return 0;\n    return ({t})(a % b);",
    "floordiv": "if (b == 0) return 0;\n    if (b == -1) return ({t})(0 - ({u})a);\n"
                "    {t} q = ({t})(a / b), r = ({t})(a % b);\n"
                "    return (r != 0 && ((r < 0) != (b < 0))) ? ({t})(q - 1) : q;",
    "floormod": "if (b == 0 || b == -1) return 0;\n    {t} r = ({t})(a % b);\n"
                "    return (r != 0 && ((r < 0) != (b < 0))) ? ({t})(r + b) : r;",
}
_UINT_DIV = {"div": "return b == 0 ? 0 : ({t})(a / b);",
             "mod": "return b == 0 ? 0 : ({t})(a % b);"}
_UINT_DIV["floordiv"], _UINT_DIV["floormod"] = _UINT_DIV["div"], _UINT_DIV["mod"]


def helper(kind: str, dtype: str, ctype: str) -> tuple[str, str]:
    """``(name, C definition)`` of the helper ``kind`` on element dtype ``dtype``.

    ``kind`` is ``div mod floordiv floormod`` (integers), ``min max`` (any number),
    ``floormod`` (floats too), ``abs``, ``shift_left``, ``shift_right`` (integers);
    ``ctype`` is the C type holding a
    value of ``dtype`` (``float`` for float16/bfloat16).

    Example::

        >>> helper("min", "float32", "float")[0]
        'cvl_min_float32'
    """
    name = f"cvl_{kind}_{D.element(dtype)}"
    head = f"static inline {ctype} {name}({ctype} a, {ctype} b) {{\n    "
    if kind in ("min", "max"):
        op = "<" if kind == "min" else ">"
        if D.is_float(dtype):
            # NaN-propagating, like numpy.minimum / llvm.minimum
            body = f"if (a != a) return a;\n    return (b {op} a || b != b) ? b : a;"
        else:
            body = f"return (b {op} a) ? b : a;"
        return name, head + body + "\n}\n"
    if kind == "abs" and D.is_integer(dtype):
        unsigned = f"uint{D.bits(dtype)}_t"
        return name, (f"static inline {ctype} {name}({ctype} a) {{\n    return a < 0 ? "
                      f"({ctype})(0 - ({unsigned})a) : a;\n}}\n")
    if kind == "floormod" and D.is_float(dtype):
        f = "f" if ctype == "float" else ""
        body = (f"{ctype} r = fmod{f}(a, b);\n    return (r != 0 && ((r < 0) != (b < 0)))"
                " ? r + b : r;")
        return name, head + body + "\n}\n"
    if kind in ("shift_left", "shift_right") and D.is_integer(dtype):
        # Cuvil's shifts (cuvil_tir.ops.bitwise): wrapping, and an amount outside
        # [0, bits) leaves 0 (or the sign, shifting a negative value right)
        bits, signed = D.bits(dtype), D.is_int(dtype)
        ok = f"b >= 0 && b < {bits}" if signed else f"b < {bits}u"
        if kind == "shift_left":
            val = f"({ctype})((uint{bits}_t)a << b)"
            out = "0"
        else:
            val = f"({ctype})(a >> b)"
            out = "(a < 0 ? -1 : 0)" if signed else "0"
        return name, head + f"return ({ok}) ? {val} : {out};" + "\n}\n"
    if kind in _INT_DIV and D.is_integer(dtype):
        table = _INT_DIV if D.is_int(dtype) else _UINT_DIV
        body = table[kind].format(t=ctype, u=f"uint{D.bits(dtype)}_t")
        return name, head + body + "\n}\n"
    raise CodegenError(f"C printer: no helper {kind!r} for dtype {dtype}")


def half_helpers(element: str) -> tuple[str, str]:
    """``(key, C definitions)`` of the conversions of ``float16`` or ``bfloat16``.

    Example::

        >>> "cvl_f32_to_bf16" in half_helpers("bfloat16")[1]
        True
    """
    if element == "float16":
        return "f16", _F16
    if element == "bfloat16":
        return "bf16", _BF16
    raise CodegenError(f"C printer: {element} is not a 16-bit float dtype")


def size_helpers() -> tuple[str, str]:
    """``(key, C definitions)`` of the checked size arithmetic used by heap buffers.

    Example::

        >>> "cvl_size_mul" in size_helpers()[1]
        True
    """
    return "size", _SIZE
