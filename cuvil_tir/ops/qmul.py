"""``q_multiply_shift``: TVM's fixed-point multiply of two Q-numbers, exactly.

``q_multiply_shift(x, y, q, s)`` (``x`` an int32 expression; ``y``, ``q``, ``s`` int32
constants) is, with ``ls = max(s, 0)`` and ``rs = max(-s, 0)``::

    int32(((int64(x) << ls) * y + (1 << (rs + q - 1))) >> (rs + q))

(the product in 64 bits, rounded half up, arithmetic shift, wrapped back to 32 bits);
when ``y`` is ``1 << 30`` (a power of two), TVM's lowering computes instead, in 32
bits, ``x << (s - 1)`` for ``s > 1`` and ``(x + (1 << (-s))) >> (1 - s)`` for
``s < 1``.  Both are what Cuvil computes, on every backend, through :func:`expand`
(shifts by constants are multiplications and floor divisions by powers of two, which
wrap the same way).  Arguments for which TVM's lowering shifts by a negative amount
or by the width of the type (undefined) are refused when the call is built.

Example::

    >>> import cuvil_tir as T
    >>> c = q_multiply_shift(T.var("x"), 1 << 30, 31, 3)
    >>> str(expand(*c.args))
    'x * 4'
"""

from __future__ import annotations

from ..errors import DTypeError
from . import OpDef, register_op
from .bitwise import make
from ..expr import IntImm, Cast, FloorDiv, Call, as_expr

QMUL = "q_multiply_shift"


def _const(e) -> int | None:
    return int(e.value) if isinstance(e, IntImm) else None


def _wrap32(v: int) -> int:
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)


def expand(x, y, q, s):
    """``q_multiply_shift(x, y, q, s)`` in terms of casts, products, sums and floor
    divisions by powers of two (the module docstring's formula).

    Example::

        >>> import cuvil_tir as T
        >>> str(expand(T.var("x"), T.const(3), T.const(31), T.const(0)))
        'T.Cast("int32", (T.Cast("int64", x) * T.int64(3) + T.int64(1073741824)) // T.int64(2147483648))'
    """
    yv, qv, sv = _const(y), _const(q), _const(s)
    if yv == 1 << 30:
        if sv > 1:           # x << (s - 1) in 32 bits: a product that wraps
            return x * IntImm(_wrap32(1 << (sv - 1)), "int32")
        e = 1 - sv           # (x + (1 << (e - 1))) >> e, the sum in 32 bits
        t = x + IntImm(1 << (e - 1), "int32")
        return Cast("int32", FloorDiv(Cast("int64", t), IntImm(1 << e, "int64")))
    ls, total = max(sv, 0), max(-sv, 0) + qv
    wide = Cast("int64", x)
    if ls:
        wide = wide * IntImm(1 << ls, "int64")
    wide = wide * IntImm(yv, "int64")
    return Cast("int32", FloorDiv(wide + IntImm(1 << (total - 1), "int64"),
                                  IntImm(1 << total, "int64")))


register_op(OpDef(QMUL, 4, "any", effect="pure", expand=expand,
                  doc="TVM's fixed-point multiply: int32(round((x * y) >> (q - s)))"))


def q_multiply_shift(x, y, q, s, dtype: str = "int32"):
    """The ``q_multiply_shift`` call, checked to be defined (see the module docstring).

    Example::

        >>> import cuvil_tir as T
        >>> q_multiply_shift(T.var("x"), 1457846997, 31, 0).dtype
        'int32'
    """
    x = as_expr(x, "int32")
    y, q, s = (as_expr(v, "int32") for v in (y, q, s))
    if dtype != "int32" or x.dtype != "int32":
        raise DTypeError(f"T.q_multiply_shift: x and the result are int32, found "
                         f"{x.dtype} and dtype={dtype!r}")
    yv, qv, sv = _const(y), _const(q), _const(s)
    if None in (yv, qv, sv):
        raise DTypeError("T.q_multiply_shift: the multiplier y, q and the shift s must be "
                         f"int32 constants, found {y}, {q}, {s}")
    if yv == 1 << 30:
        ok, why = (sv > 1 and sv - 1 < 32) or (sv < 1 and 1 - sv < 32), \
            "shifts by s - 1, which must be nonzero and below 32"
    else:
        ls, total = max(sv, 0), max(-sv, 0) + qv
        ok, why = ls < 63 and 1 <= total <= 62, \
            "shifts left by max(s, 0) < 63 and right by max(-s, 0) + q in [1, 62]"
    if not ok:
        raise DTypeError(f"T.q_multiply_shift(x, {yv}, {qv}, {sv}): TVM's lowering {why}; "
                         "other shifts are undefined")
    return Call("int32", QMUL, (x, y, q, s))


QMUL_AXIS = "q_multiply_shift_per_axis"


def expand_per_axis(x, y, ls, rs, q, lshift, rshift):
    """``q_multiply_shift_per_axis`` as TVM's lowering computes it, in Cuvil's integer
    ops: ``int32((((int64(x) << ls if lshift) * y) + (1 << (rs + q - 1))) >> (rs + q))``
    (``rshift`` is not read, as in TVM; shifts follow :mod:`cuvil_tir.ops.bitwise`).

    Example::

        >>> import cuvil_tir as T
        >>> e = expand_per_axis(T.var("x"), T.var("y"), T.var("l"), T.var("r"),
        ...                     T.const(31), T.const(False), T.const(True))
        >>> e.dtype
        'int32'
    """
    wide = Cast("int64", x)
    if _const(lshift):
        wide = make("shift_left", wide, Cast("int64", ls))
    wide = wide * Cast("int64", y)
    total = Cast("int64", rs) + IntImm(_const(q), "int64")
    one = IntImm(1, "int64")
    wide = make("shift_right", wide + make("shift_left", one, total - one), total)
    return Cast("int32", wide)


register_op(OpDef(QMUL_AXIS, 7, "any", effect="pure", expand=expand_per_axis,
                  doc="TVM's fixed-point multiply with per-axis shifts"))


def q_multiply_shift_per_axis(x, y, ls, rs, q, is_lshift_required, is_rshift_required,
                              dtype: str = "int32"):
    """The ``q_multiply_shift_per_axis`` call (TVM's per-channel requantization): ``x``,
    ``y`` and the shifts ``ls``/``rs`` int32 expressions, ``q`` an int constant in
    ``[1, 62]``, the two flags bool constants.

    Example::

        >>> import cuvil_tir as T
        >>> c = q_multiply_shift_per_axis(T.var("x"), T.var("y"), 0, T.var("r"), 31,
        ...                               False, True)
        >>> c.op, len(c.args)
        ('q_multiply_shift_per_axis', 7)
    """
    vals = [as_expr(v, "int32") for v in (x, y, ls, rs)]
    if dtype != "int32" or any(v.dtype != "int32" for v in vals):
        raise DTypeError(f"T.q_multiply_shift_per_axis: x, y, ls, rs and the result are "
                         f"int32, found {', '.join(v.dtype for v in vals)} and "
                         f"dtype={dtype!r}")
    qv = _const(as_expr(q, "int32"))
    if qv is None or not 1 <= qv <= 62:
        raise DTypeError(f"T.q_multiply_shift_per_axis: q must be an int constant in "
                         f"[1, 62], found {q}")
    flags = []
    for name, f in (("is_lshift_required", is_lshift_required),
                    ("is_rshift_required", is_rshift_required)):
        fv = _const(as_expr(f, "bool"))
        if fv is None:
            raise DTypeError(f"T.q_multiply_shift_per_axis: {name} must be a bool "
                             f"constant, found {f}")
        flags.append(IntImm(int(bool(fv)), "bool"))
    return Call("int32", QMUL_AXIS, (*vals, IntImm(qv, "int32"), *flags))


__all__ = ["QMUL", "QMUL_AXIS", "expand", "expand_per_axis", "q_multiply_shift",
           "q_multiply_shift_per_axis"]
