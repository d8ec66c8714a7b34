"""Dot products of small groups accumulated into wider lanes: x86's ``vpdpbusd``
(AVX512-VNNI, AVX-VNNI) and ``vdpbf16ps`` (AVX512-BF16) as ops of the registry.

``x86.dpbusd(acc, a, b)``: ``acc`` is ``int32xL``, ``b`` is ``int8x(4L)``, ``a`` is
``uint8x(4L)`` or ``uint8x4`` (one group of 4 bytes, the same for every lane, as a
GEMM broadcasts a row of A)::

    result[l] = acc[l] + sum(int32(a[4l + q]) * int32(b[4l + q]) for q in 0..3)

in wrapping int32 arithmetic (the instruction does not saturate; ``vpdpbusds`` would).
Four products of a ``uint8`` and an ``int8`` (at most ``4 * 255 * 128``) never
overflow the group's sum.

``x86.dpbf16ps(acc, a, b)``: ``acc`` is ``float32xL``, ``b`` is ``bfloat16x(2L)``,
``a`` is ``bfloat16x(2L)`` or ``bfloat16x2`` (one pair for every lane)::

    t = acc[l] + a[2l + 1] * b[2l + 1]     # then
    result[l] = t + a[2l] * b[2l]

each step in float32, rounded to nearest even once (a product of two bfloat16 is exact
in float32, so the fused and the unfused step agree), denormal inputs read as zero and
denormal results flushed to zero: Intel's definition of the instruction, which the
interpreter follows exactly.  A GEMM that sums ``k`` in order gets the pair's two
products added in the other order and without denormals: a difference within float32
rounding, not an error of the op.

Each backend that writes them says so in its own folder (the llvm target: its LLVM
intrinsics, :mod:`targets.llvm.x86_dot`); every other backend (``c`` and ``cuda``
included) refuses them with a coded error, and the tensor intrinsics built on them are
not available there (:meth:`cuvil_tir.tensor_intrin.TensorIntrin.available`).  The interpreter runs them through
``lanes_reference`` (:class:`cuvil_tir.ops.OpDef`).

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.expr import Ramp
    >>> acc = T.decl_buffer((16,), "int32", "acc")
    >>> a = T.decl_buffer((4,), "uint8", "a")
    >>> b = T.decl_buffer((64,), "int8", "b")
    >>> e = dpbusd(acc[Ramp(T.const(0), T.const(1), 16)], a[Ramp(T.const(0), T.const(1), 4)], b[Ramp(T.const(0), T.const(1), 64)])
    >>> e.dtype, e.op
    ('int32x16', 'x86.dpbusd')
    >>> int(dpbusd_reference(np.zeros(1, "int32"), np.array([1, 2, 3, 255]),
    ...                      np.array([1, 1, 1, -1]))[0])
    -249
"""

from __future__ import annotations

import numpy as np

from .. import dtype as D
from ..errors import DTypeError
from . import OpDef, register_op
from ..expr import Call

DPBUSD = "x86.dpbusd"
DPBF16PS = "x86.dpbf16ps"

_F32_MIN_NORMAL = np.float32(2.0 ** -126)


def _groups(a, group: int, lanes: int):
    """``a``'s lanes as ``(lanes, group)``: a single group is the same for every lane."""
    a = np.asarray(a).reshape(-1)
    if a.size == group:
        return np.broadcast_to(a, (lanes, group))
    return a.reshape(lanes, group)


def dpbusd_reference(acc, a, b):
    """``x86.dpbusd`` on numpy arrays of lanes (module doc): int32 lanes, wrapping."""
    acc = np.asarray(acc).reshape(-1)
    n = acc.size
    prod = _groups(a, 4, n).astype(np.int64) * _groups(b, 4, n).astype(np.int64)
    total = acc.astype(np.int64) + prod.sum(axis=1)
    return ((total + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)


def _daz(x):
    x = np.asarray(x, np.float32)
    return np.where(np.abs(x) < _F32_MIN_NORMAL, np.float32(0) * np.sign(x), x)


def _round_f32(x, y):
    """``x + y`` (float64 arrays: a float32 and an exact product) rounded once to
    float32: the float64 sum's own rounding error decides a float32 tie it lands on."""
    s = x + y
    bp = s - x
    err = (x - (s - bp)) + (y - bp)          # TwoSum: s + err == x + y exactly
    r = s.astype(np.float32)
    lo = np.where(r.astype(np.float64) > s, np.nextafter(r, np.float32(-np.inf)), r)
    hi = np.nextafter(lo, np.float32(np.inf))
    tie = (s - lo.astype(np.float64) == hi.astype(np.float64) - s) & (err != 0) & \
        np.isfinite(s) & (lo != hi)
    fixed = np.where(err > 0, hi, lo)
    return np.where(tie, fixed, r)


def dpbf16ps_reference(acc, a, b):
    """``x86.dpbf16ps`` on numpy arrays of lanes (module doc): float32 lanes.

    Example::

        >>> dpbf16ps_reference(np.float32([1.0]), np.float32([2.0, 3.0]),
        ...                    np.float32([0.5, 0.25])).tolist()
        [2.75]
    """
    acc = _daz(np.asarray(acc, np.float32).reshape(-1))
    n = acc.size
    av = _daz(_groups(np.asarray(a, np.float32), 2, n)).astype(np.float64)
    bv = _daz(_groups(np.asarray(b, np.float32), 2, n)).astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        t = _daz(_round_f32(acc.astype(np.float64), av[:, 1] * bv[:, 1]))
        r = _daz(_round_f32(t.astype(np.float64), av[:, 0] * bv[:, 0]))
    return r


def _check(name: str, acc, a, b, acc_t: str, a_t: str, b_t: str, group: int):
    n = D.lanes(acc.dtype)
    want = (D.with_lanes(acc_t, n), (D.with_lanes(a_t, group),
                                      D.with_lanes(a_t, group * n)),
            D.with_lanes(b_t, group * n))
    if D.element(acc.dtype) != acc_t or a.dtype not in want[1] or b.dtype != want[2]:
        raise DTypeError(
            f"{name}(acc, a, b): expected acc {acc_t}xL, a {want[1][0]} (one group for "
            f"every lane) or {want[1][1]}, b {want[2]} (L = {n} here), found "
            f"{acc.dtype}, {a.dtype}, {b.dtype}; cast or reload the operands")


def dpbusd(acc, a, b):
    """The ``x86.dpbusd`` call (module doc); its operands' dtypes are checked.

    Example::

        >>> import cuvil_tir as T
        >>> try:
        ...     dpbusd(T.var("x"), T.var("y"), T.var("z"))
        ... except T.DTypeError as err:
        ...     print(err.code)
        CVL-E101
    """
    _check("x86.dpbusd", acc, a, b, "int32", "uint8", "int8", 4)
    return Call(acc.dtype, DPBUSD, (acc, a, b))


def dpbf16ps(acc, a, b):
    """The ``x86.dpbf16ps`` call (module doc); its operands' dtypes are checked.

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.expr import Ramp
        >>> acc = T.decl_buffer((16,), "float32", "acc")
        >>> ab = T.decl_buffer((32,), "bfloat16", "ab")
        >>> dpbf16ps(acc[Ramp(T.const(0), T.const(1), 16)], ab[Ramp(T.const(0), T.const(1), 2)], ab[Ramp(T.const(0), T.const(1), 32)]).dtype
        'float32x16'
    """
    _check("x86.dpbf16ps", acc, a, b, "float32", "bfloat16", "bfloat16", 2)
    return Call(acc.dtype, DPBF16PS, (acc, a, b))


_VNNI_256 = (("avxvnni",), ("avx512vnni", "avx512vl"))
_BF16_256 = (("avx512bf16", "avx512vl"),)
#: the ISA extensions (LLVM's names) each op needs, by the lanes of its result: a tuple
#: of alternatives, each a tuple of extensions that together suffice
ISA = {DPBUSD: {16: (("avx512vnni",),), 8: _VNNI_256, 4: _VNNI_256},
       DPBF16PS: {16: (("avx512bf16",),), 8: _BF16_256, 4: _BF16_256}}


def describe_isa(alternatives: tuple) -> str:
    """``alternatives`` (as in :data:`ISA`) in words.

    Example::

        >>> describe_isa(ISA[DPBUSD][8])
        'avxvnni, or avx512vnni with avx512vl'
    """
    return ", or ".join(" with ".join(alt) for alt in alternatives)


def missing_isa(op: str, lanes: int, have) -> str | None:
    """None when the ISA extensions ``have`` let a target run ``op`` on ``lanes``
    lanes, else what is missing, in words (for the error a backend raises).

    Example::

        >>> missing_isa(DPBUSD, 16, {"avx512vnni"}) is None
        True
        >>> missing_isa(DPBUSD, 8, {"avx512vnni"})
        'needs avxvnni, or avx512vnni with avx512vl'
        >>> missing_isa(DPBF16PS, 2, {"avx512bf16"})
        'works on 4, 8 or 16 float32 lanes, found 2'
    """
    table = ISA[op]
    if lanes not in table:
        acc = "int32" if op == DPBUSD else "float32"
        return f"works on 4, 8 or 16 {acc} lanes, found {lanes}"
    if any(set(alt) <= set(have) for alt in table[lanes]):
        return None
    return f"needs {describe_isa(table[lanes])}"


register_op(OpDef(DPBUSD, 3, "any", lanes_reference=dpbusd_reference,
                  doc="acc[l] + the dot product of 4 uint8 of a and 4 int8 of b "
                      "(x86 vpdpbusd)"))
register_op(OpDef(DPBF16PS, 3, "any", lanes_reference=dpbf16ps_reference,
                  doc="acc[l] + the dot product of 2 bfloat16 of a and of b, in float32 "
                      "(x86 vdpbf16ps)"))

__all__ = ["DPBF16PS", "DPBUSD", "ISA", "describe_isa", "dpbf16ps", "dpbf16ps_reference",
           "dpbusd", "dpbusd_reference", "missing_isa"]
