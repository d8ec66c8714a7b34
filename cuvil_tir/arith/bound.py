"""Symbolic bounds: the inclusive range an expression covers when variables range.

``bound_of(expr, {var: Range})`` returns ``(lo, hi)`` expressions over the variables
*not* in the mapping.  It is exact for affine expressions in which each ranged
variable appears once, and conservative (a superset) otherwise: divisions and
modulos by constants, min/max, products with sign-known factors, selects, ramps and
casts are bounded symbolically; anything else falls back to constant bounds.

Integer overflow is not modelled (index arithmetic is assumed not to wrap).

Example::

    >>> import cuvil_tir as T
    >>> i, j, io = T.var("i"), T.var("j"), T.var("io")
    >>> lo, hi = bound_of(io * 4 + i, {i: T.Range.from_extent(4)})
    >>> str(lo), str(hi)
    ('io * 4', 'io * 4 + 3')
"""

from __future__ import annotations

from .. import dtype as D
from .. import ops
from ..expr import (Broadcast, Call, Cast, Div, Expr, FloatImm, FloorDiv, FloorMod, IntImm, Max,
                    Min, Mul, Ramp, Select, Var, Add, SizeVar)
from ..node import same
from ..op import max_value, min_value
from ..visitor import used_vars
from .affine import Affine, is_index_dtype
from .analyzer import Analyzer

_MAX_DEPTH = 8


class _Unbounded(Exception):
    """A term is only bounded by its dtype: arithmetic on the bound would wrap."""


class _SymBound:
    def __init__(self, var_ranges: dict, analyzer: Analyzer):
        self.ranges = var_ranges
        self.ana = analyzer
        self.depth = 0

    def depends(self, e) -> bool:
        return any(v in self.ranges for v in used_vars(e))

    def simp(self, e):
        return self.ana.simplify(e)

    def bound(self, e: Expr) -> tuple:
        if not self.depends(e):
            return e, e
        if self.depth > _MAX_DEPTH:
            return self.fallback(e)
        self.depth += 1
        try:
            if isinstance(e, Var):
                r = self.ranges[e]
                lo, hi = r.min, self.simp(r.min + r.extent - 1)
                # a range may depend on other ranged variables (nested tiles)
                return self.bound(lo)[0], self.bound(hi)[1]
            if is_index_dtype(e.dtype):
                return self.affine(Affine.of(self.simp(e)))
            return self.atom(e)
        finally:
            self.depth -= 1

    def extreme(self, *es) -> None:
        for e in es:
            if isinstance(e, IntImm) and e.value in D.int_range(e.dtype):
                raise _Unbounded()

    def affine(self, aff: Affine) -> tuple:
        lo = Affine(aff.dtype, const=aff.const)
        hi = Affine(aff.dtype, const=aff.const)
        for t, c in aff.terms:
            if not self.depends(t):
                tl = th = Affine.of(t)
            else:
                a, b = self.atom(t) if not isinstance(t, Var) else self.bound(t)
                self.extreme(a, b)
                tl, th = Affine.of(a), Affine.of(b)
            if c > 0:
                lo, hi = lo.combine(tl, c), hi.combine(th, c)
            else:
                lo, hi = lo.combine(th, c), hi.combine(tl, c)
        return self.simp(lo.to_expr()), self.simp(hi.to_expr())

    def nonneg(self, e) -> bool:
        return self.ana.const_int_bound(e)[0] >= 0 or _nonneg_shape(e)

    def positive_divisor(self, b) -> bool:
        # x // 0 is 0 in Cuvil, as are both bounds: a divisor built from size vars
        # (``x // n`` of a dynamic shape) keeps the bounds monotone
        return self.ana.const_int_bound(b)[0] > 0 or _nonneg_shape(b)

    def nonpos(self, e) -> bool:
        return self.ana.const_int_bound(e)[1] <= 0

    def xor(self, e):
        """``a ^ b`` with one side in ``[0, 2**k)`` changes the other's low ``k`` bits
        only (an XOR swizzle of chunks): the other's bounds rounded to ``2**k``."""
        for x, y in ((e.args[0], e.args[1]), (e.args[1], e.args[0])):
            ly, hy = self.bound(y)
            if isinstance(ly, IntImm) and isinstance(hy, IntImm) and ly.value >= 0:
                unit = IntImm(1 << hy.value.bit_length(), e.dtype)
                lx, hx = self.bound(x)
                return (self.simp(FloorDiv(lx, unit) * unit),
                        self.simp(FloorDiv(hx, unit) * unit + (unit.value - 1)))
        return None

    def atom(self, e) -> tuple:
        if isinstance(e, Var):
            return self.bound(e)
        if isinstance(e, (FloorDiv, Div)) and not self.depends(e.b):
            b = e.b
            if self.positive_divisor(b) and \
                    (isinstance(e, FloorDiv) or self.nonneg(self.bound(e.a)[0])):
                la, ha = self.bound(e.a)
                return self.simp(FloorDiv(la, b)), self.simp(FloorDiv(ha, b))
            if isinstance(e, FloorDiv) and self.ana.const_int_bound(b)[1] < 0:
                la, ha = self.bound(e.a)
                return self.simp(FloorDiv(ha, b)), self.simp(FloorDiv(la, b))
        if isinstance(e, FloorMod) and isinstance(e.b, IntImm) and e.b.value > 0:
            la, ha = self.bound(e.a)
            qa, qb = self.simp(FloorDiv(la, e.b)), self.simp(FloorDiv(ha, e.b))
            if same(qa, qb):
                return self.simp(la - qa * e.b), self.simp(ha - qa * e.b)
            return IntImm(0, e.dtype), IntImm(e.b.value - 1, e.dtype)
        if isinstance(e, FloorMod) and not self.depends(e.b) and \
                self.ana.const_int_bound(e.b)[0] > 0:
            return IntImm(0, e.dtype), self.simp(e.b - 1)
        if isinstance(e, (Min, Max)):
            la, ha = self.bound(e.a)
            lb, hb = self.bound(e.b)
            cls = type(e)
            return self.simp(cls(la, lb)), self.simp(cls(ha, hb))
        if isinstance(e, Mul):
            return self.mul(e)
        if isinstance(e, Call) and e.op == "bitwise_xor":
            got = self.xor(e)
            if got is not None:
                return got
        arms = ops.branches(e)
        if isinstance(e, Select) or arms is not None:
            t, f = (e.true_value, e.false_value) if isinstance(e, Select) else arms[1:]
            lt, ht = self.bound(t)
            lf, hf = self.bound(f)
            if is_index_dtype(e.dtype) or D.is_float(e.dtype):
                return self.simp(Min(lt, lf)), self.simp(Max(ht, hf))
        if isinstance(e, Ramp) and isinstance(e.stride, IntImm):
            lb, hb = self.bound(e.base)
            span = e.stride.value * (e.lanes - 1)
            if span >= 0:
                return lb, self.simp(hb + span)
            return self.simp(lb + span), hb
        if isinstance(e, Broadcast):
            return self.bound(e.value)
        if isinstance(e, Cast) and is_index_dtype(e.dtype) and is_index_dtype(e.value.dtype) \
                and D.bits(e.dtype) >= D.bits(e.value.dtype) \
                and D.is_int(e.dtype) == D.is_int(e.value.dtype):
            lo, hi = self.bound(e.value)
            return Cast(e.dtype, lo), Cast(e.dtype, hi)
        return self.fallback(e)

    def mul(self, e: Mul) -> tuple:
        a, b = e.a, e.b
        if self.depends(a) and not self.depends(b):
            a, b = b, a
        if not self.depends(a):
            lb, hb = self.bound(b)
            self.extreme(lb, hb)
            if self.nonneg(a):
                return self.simp(a * lb), self.simp(a * hb)
            if self.nonpos(a):
                return self.simp(a * hb), self.simp(a * lb)
            return self.fallback(e)
        la, ha = self.bound(a)
        lb, hb = self.bound(b)
        self.extreme(la, ha, lb, hb)
        if self.nonneg(la) and self.nonneg(lb):
            return self.simp(la * lb), self.simp(ha * hb)
        return self.fallback(e)

    def fallback(self, e) -> tuple:
        lo, hi = self.ana.const_int_bound(e)
        dt = D.element(e.dtype)
        if D.is_float(dt):
            return (FloatImm(lo, dt) if lo != -float("inf") else min_value(dt),
                    FloatImm(hi, dt) if hi != float("inf") else max_value(dt))
        return IntImm(int(lo), dt), IntImm(int(hi), dt)


def _nonneg_shape(e) -> bool:
    """Non-negative by construction from size vars and non-negative constants, when
    index arithmetic does not wrap (``(n + 9) // 10`` whose constant bound wraps)."""
    if isinstance(e, IntImm):
        return e.value >= 0
    if isinstance(e, SizeVar):
        return True
    if isinstance(e, (Add, Mul, Min, Max)):
        return _nonneg_shape(e.a) and _nonneg_shape(e.b)
    if isinstance(e, (FloorDiv, FloorMod)) and isinstance(e.b, IntImm) and e.b.value > 0:
        return _nonneg_shape(e.a)
    return False


def _assume_nonempty(ana: Analyzer, r) -> None:
    """Bounds over an empty range say nothing, so a range may be taken as non-empty:
    an extent ``c * n`` (``c > 0``) then means ``n >= 1`` (a loop over ``n * 32``
    fused iterations makes ``x % n`` range over ``[0, n - 1]``)."""
    aff = Affine.of(r.extent) if is_index_dtype(r.extent.dtype) else None
    if aff is None or aff.const != 0 or len(aff.coeffs) != 1:
        return
    ((t, c),) = aff.terms
    if isinstance(t, Var) and c > 0:
        ana.update_bound(t, (1, D.int_range(t.dtype)[1]))


def bound_of(expr: Expr, var_ranges: dict, analyzer: Analyzer | None = None) -> tuple:
    """Inclusive symbolic ``(lo, hi)`` of ``expr`` when each ``var`` ranges over its
    ``Range`` (see the module docstring).  ``analyzer`` may carry facts about the
    other variables (e.g. bounds of outer loops).

    Example::

        >>> import cuvil_tir as T
        >>> i, n = T.var("i"), T.size_var("n")
        >>> lo, hi = bound_of(i // 4, {i: T.Range(T.const(0), n)})
        >>> str(lo), str(hi)
        ('0', '(n - 1) // 4')
    """
    ana = analyzer if analyzer is not None else Analyzer(index_no_overflow=True)
    saved = dict(ana.bounds), dict(ana.ranges)
    try:
        for v, r in var_ranges.items():
            ana.bind(v, r)
        for r in var_ranges.values():
            _assume_nonempty(ana, r)
        try:
            return _SymBound(var_ranges, ana).bound(expr)
        except _Unbounded:
            # constant bounds of the whole expression still see through min/max
            # clamps (``max(min(cast(f), 15), 0)`` is in [0, 15])
            return _SymBound(var_ranges, ana).fallback(expr)
    finally:
        ana.bounds, ana.ranges = saved
