"""``exp``, ``log``, ``tanh`` and ``sigmoid`` of float32 vectors, in vector registers.

LLVM lowers ``llvm.exp.v16f32`` (and a libm ``tanhf`` per lane) to sixteen scalar
calls.  These are polynomial versions that stay in vector registers, in two grades:

* **accurate** (the default): within 2 ulp of the float64 result on the whole float32
  range -- subnormal inputs and results, overflow to ``inf``, ``inf``, ``-0`` and NaN
  behave as in libm (``tests/targets/test_vector_math.py`` measures every one on a
  sweep of all float32 values);
* **fast** (``fast_math`` with ``afn``, "approximate functions"): shorter polynomials,
  subnormal inputs of ``log`` not rescaled, and ``sigmoid`` by its plain formula
  ``1 / (1 + exp(-x))`` (its tiny results are lost to an overflowing ``exp(-x)``): a
  few ulp where inputs and results are normal floats.

The algorithms are the classic ones: ``exp`` by ``n = round(x log2 e)``,
``r = x - n ln2`` (ln2 in two parts, so the reduction is exact) and a degree-7
polynomial (Cephes' ``expf``), then ``* 2**n`` in two factors so subnormal results
round once; ``log`` by ``x = m 2**k`` with ``m`` in ``[sqrt(2)/2, sqrt(2))``,
``s = (m - 1) / (m + 1)`` and an even polynomial in ``s`` (fdlibm's ``logf``); ``tanh``
by an odd polynomial below 0.625 (Cephes) and ``1 - 2 / (exp(2|x|) + 1)`` above;
``sigmoid`` by ``1 / (1 + e)`` for ``x >= 0`` and ``e / (1 + e)`` below, with
``e = exp(-|x|)``, so tiny results are not lost to an overflowing ``exp(-x)``.

Example::

    >>> from targets.llvm.builder import IRBuilder
    >>> b = IRBuilder()
    >>> r = vector_math(b, "exp", "%x", 8)
    >>> any("@llvm.floor.v8f32" in line for line in b.lines)
    True
"""

from __future__ import annotations

from . import intrinsics as I
from .builder import IRBuilder
from .types import const_text

# Cephes expf: exp(r) ~ 1 + r + r^2 * P(r) on |r| <= ln2 / 2
_EXP_P = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
          1.6666665459e-1, 5.0000001201e-1)
_LN2_HI, _LN2_LO = 0.693359375, -2.12194440e-4
_LOG2E = 1.44269504088896341
_EXP_LO, _EXP_HI = -104.0, 89.0     # past these, exp is 0 or inf in float32

# fdlibm logf: log(1+f) = f - f^2/2 + s*(f^2/2 + R(s)), s = f / (2 + f)
_LG = (0.66666662693, 0.40000972152, 0.28498786688, 0.24279078841)
_LOG_LN2_HI, _LOG_LN2_LO = 6.9313812256e-01, 9.0580006145e-06
_SQRT_HALF_BITS = 0x3F3504F3

# Cephes tanhf: tanh(x) ~ x + x^3 * P(x^2) for |x| < 0.625
_TANH_P = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
           -3.33332819422e-1)
_TANH_SMALL = 0.625
_TANH_ONE = 9.1                    # tanh(x) rounds to 1 in float32 past 9.01


class _Vec:
    """Emitting float32 vector arithmetic of ``lanes`` lanes into ``b``."""

    def __init__(self, b: IRBuilder, lanes: int):
        self.b, self.n = b, lanes
        self.vt, self.it = f"<{lanes} x float>", f"<{lanes} x i32>"
        self.bt = f"<{lanes} x i1>"
        self.dt = f"float32x{lanes}"

    def f(self, v: float) -> str:
        c = const_text(v, "float32")
        return "<" + ", ".join(f"float {c}" for _ in range(self.n)) + ">"

    def i(self, v: int) -> str:
        return "<" + ", ".join(f"i32 {v}" for _ in range(self.n)) + ">"

    def op(self, text: str) -> str:
        return self.b.op(text)

    def bin(self, code: str, x: str, y: str) -> str:
        return self.op(f"{code} {self.vt} {x}, {y}")

    def call(self, name: str, *args: str) -> str:
        fn = I.declare_intrinsic(self.b, name, self.dt, len(args))
        return self.op(f"call {self.vt} @{fn}({', '.join(f'{self.vt} {a}' for a in args)})")

    def fma(self, a: str, m: str, c: str) -> str:
        return self.call("fma", a, m, c)

    def poly(self, x: str, coeffs) -> str:
        """Horner: ``((c0 x + c1) x + c2) ...``."""
        p = self.f(coeffs[0])
        for c in coeffs[1:]:
            p = self.fma(p, x, self.f(c))
        return p

    def cmp(self, pred: str, x: str, y: str) -> str:
        return self.op(f"fcmp {pred} {self.vt} {x}, {y}")

    def select(self, c: str, x: str, y: str) -> str:
        return self.op(f"select {self.bt} {c}, {self.vt} {x}, {self.vt} {y}")

    def bits(self, x: str) -> str:
        return self.op(f"bitcast {self.vt} {x} to {self.it}")

    def floats(self, x: str) -> str:
        return self.op(f"bitcast {self.it} {x} to {self.vt}")

    def ibin(self, code: str, x: str, y: str) -> str:
        return self.op(f"{code} {self.it} {x}, {y}")


def _exp(v: _Vec, x: str, fast: bool) -> str:
    xc = v.call("maxnum", x, v.f(_EXP_LO))
    xc = v.call("minnum", xc, v.f(_EXP_HI))
    n = v.call("floor", v.fma(xc, v.f(_LOG2E), v.f(0.5)))
    r = v.fma(n, v.f(-_LN2_HI), xc)
    r = v.fma(n, v.f(-_LN2_LO), r)
    p = v.poly(r, _EXP_P[1:] if fast else _EXP_P)
    y = v.bin("fadd", v.fma(p, v.bin("fmul", r, r), r), v.f(1.0))
    # 2**n as 2**(n >> 1) * 2**(n - (n >> 1)): each factor is a normal float (n may be
    # 128 just below overflow), and a subnormal result is rounded once, by the second
    ni = v.op(f"fptosi {v.vt} {n} to {v.it}")
    n1 = v.ibin("ashr", ni, v.i(1))
    for k in (n1, v.ibin("sub", ni, n1)):
        top = v.ibin("shl", v.ibin("add", k, v.i(127)), v.i(23))
        y = v.bin("fmul", y, v.floats(top))
    return v.select(v.cmp("uno", x, x), x, y)


def _log(v: _Vec, x: str, fast: bool) -> str:
    k0 = v.i(0)
    xs = x
    if not fast:
        # a subnormal x is scaled into the normal range first: x * 2**25, k - 25
        tiny = v.cmp("olt", x, v.f(2.0 ** -126))
        xs = v.select(tiny, v.bin("fmul", x, v.f(2.0 ** 25)), x)
        k0 = v.op(f"select {v.bt} {tiny}, {v.it} {v.i(-25)}, {v.it} {v.i(0)}")
    # x = m * 2**k with m in [sqrt(1/2), sqrt(2)): shift the exponent field so that
    # mantissas from sqrt(1/2) up count in the next power of two
    ix = v.ibin("add", v.bits(xs), v.i(0x3F800000 - _SQRT_HALF_BITS))
    k = v.ibin("sub", v.ibin("ashr", ix, v.i(23)), v.i(127))
    k = v.ibin("add", k, k0)
    mb = v.ibin("add", v.ibin("and", ix, v.i(0x007FFFFF)), v.i(_SQRT_HALF_BITS))
    f = v.bin("fsub", v.floats(mb), v.f(1.0))
    s = v.bin("fdiv", f, v.bin("fadd", f, v.f(2.0)))
    z = v.bin("fmul", s, s)
    w = v.bin("fmul", z, z)
    if fast:
        r = v.bin("fmul", z, v.fma(w, v.f(_LG[2]), v.f(_LG[0])))
        r = v.fma(w, v.f(_LG[1]), r)
    else:
        t1 = v.bin("fmul", w, v.fma(w, v.f(_LG[3]), v.f(_LG[1])))
        t2 = v.bin("fmul", z, v.fma(w, v.f(_LG[2]), v.f(_LG[0])))
        r = v.bin("fadd", t2, t1)
    hfsq = v.bin("fmul", v.bin("fmul", f, f), v.f(0.5))
    dk = v.op(f"sitofp {v.it} {k} to {v.vt}")
    y = v.fma(s, v.bin("fadd", hfsq, r), v.bin("fmul", dk, v.f(_LOG_LN2_LO)))
    y = v.bin("fadd", v.bin("fsub", y, hfsq), f)
    y = v.fma(dk, v.f(_LOG_LN2_HI), y)
    # log(+inf) = inf, log(0) = -inf, log(x < 0) = NaN, NaN stays
    y = v.select(v.cmp("oeq", x, v.f(float("inf"))), x, y)
    y = v.select(v.cmp("oeq", x, v.f(0.0)), v.f(float("-inf")), y)
    y = v.select(v.cmp("olt", x, v.f(0.0)), v.f(float("nan")), y)
    return v.select(v.cmp("uno", x, x), x, y)


def _copysign(v: _Vec, mag: str, sign_of: str) -> str:
    sign = v.ibin("and", v.bits(sign_of), v.i(-0x80000000))
    return v.floats(v.ibin("or", v.bits(mag), sign))


def _tanh(v: _Vec, x: str, fast: bool) -> str:
    z = v.bin("fmul", x, x)
    # x + x z P(z), with the sign of x (tanh(-0) is -0)
    small = _copysign(v, v.fma(v.bin("fmul", v.poly(z, _TANH_P), z), x, x), x)
    a = v.call("fabs", x)
    e = _exp(v, v.bin("fmul", v.call("minnum", a, v.f(_TANH_ONE)), v.f(2.0)), fast)
    big = v.bin("fsub", v.f(1.0), v.bin("fdiv", v.f(2.0), v.bin("fadd", e, v.f(1.0))))
    big = _copysign(v, big, x)
    y = v.select(v.cmp("olt", a, v.f(_TANH_SMALL)), small, big)
    return v.select(v.cmp("uno", x, x), x, y)


def _sigmoid(v: _Vec, x: str, fast: bool) -> str:
    if fast:
        e = _exp(v, v.bin("fsub", v.f(-0.0), x), True)
        return v.bin("fdiv", v.f(1.0), v.bin("fadd", v.f(1.0), e))
    # e = exp(-|x|) <= 1 never overflows: 1 / (1 + e) for x >= 0, e / (1 + e) below
    e = _exp(v, v.bin("fsub", v.f(-0.0), v.call("fabs", x)), False)
    num = v.select(v.cmp("oge", x, v.f(0.0)), v.f(1.0), e)
    return v.bin("fdiv", num, v.bin("fadd", v.f(1.0), e))


_FUNCS = {"exp": _exp, "log": _log, "tanh": _tanh, "sigmoid": _sigmoid}
#: the intrinsics with a vector version here
VECTOR_MATH = tuple(_FUNCS)


def vector_math(b: IRBuilder, name: str, x: str, lanes: int, fast: bool = False) -> str:
    """``name`` (one of :data:`VECTOR_MATH`) of the ``<lanes x float>`` register ``x``;
    ``fast``: the looser grade (module doc).  Returns the result register.

    Example::

        >>> b = IRBuilder()
        >>> vector_math(b, "log", "%x", 4).startswith("%")
        True
    """
    return _FUNCS[name](_Vec(b, lanes), x, fast)


__all__ = ["VECTOR_MATH", "vector_math"]
