"""The rewrite rules of :meth:`Analyzer.simplify`, applied bottom-up by one mutator.

Rules, each semantics-preserving (tested numerically with hypothesis):

* constant folding of every operator (:mod:`~cuvil_tir.arith.fold`);
* integer ``+ - *`` to the canonical affine form (``(i*4 + j) - i*4 -> j``, ``x*1``,
  ``x+0``, ``0*x``);
* ``floordiv``/``floormod`` by a positive constant ``c``: ``(c*q + r) // c -> q + k``
  and ``% c -> r - k*c`` when ``r`` provably lies in ``[k*c, (k+1)*c)``, else
  ``q + r // c`` / ``r % c``; ``(x // a) // b -> x // (a*b)``; ``(x % a) % b -> x % b``
  when ``b`` divides ``a``; truncating ``Div``/``Mod`` become floor ones when both
  sides are provably non-negative;
* ``min``/``max``, comparisons, ``and``/``or``/``not`` decided by bounds and facts;
* ``Select``/``if_then_else`` with a known condition (arms simplified under it);
* vector algebra on ``Ramp``/``Broadcast``.

Rules that move terms across an integer operation require the exact value range to
fit the dtype (no wrap-around), unless the analyzer was made with
``index_no_overflow=True``, which assumes it for int32/int64 (index arithmetic).

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.arith import Analyzer
    >>> i, j = T.var("i"), T.var("j")
    >>> a = Analyzer(); a.bind(i, T.Range.from_extent(4)); a.bind(j, T.Range.from_extent(8))
    >>> str(a.simplify((i * 8 + j) // 8)), str(a.simplify((i * 8 + j) % 8))
    ('i', 'j')
"""

from __future__ import annotations

import math

from .. import dtype as D
from .. import ops
from ..expr import (EQ, NE, Add, CmpOp, And, Broadcast, BufferLoad, Call, Cast,
                    Div, FloatImm, FloorDiv, FloorMod, IntImm, Let, Min, Mod, Mul, Not, Ramp,
                    Select, Sub, Var)
from ..node import same
from ..visitor import Mutator, post_order_visit, substitute
from . import interval as I
from .affine import Affine, Key, is_index_dtype
from .compare_form import negate, normal_compare
from .fold import fold_binary, fold_call, fold_cast

_TRUE = IntImm(1, "bool")
_FALSE = IntImm(0, "bool")


def _const(e, v=None) -> bool:
    """Whether ``e`` is a scalar integer constant (equal to ``v`` when given)."""
    return isinstance(e, IntImm) and (v is None or e.value == v)


def _fconst(e, v) -> bool:
    return isinstance(e, FloatImm) and e.value == v


class Simplifier(Mutator):
    """Bottom-up rewriting with the bounds and facts of an :class:`Analyzer`.

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.arith import Analyzer
        >>> x = T.var("x")
        >>> str(Simplifier(Analyzer()).visit(x * 1 + 0))
        'x'
    """

    def __init__(self, analyzer):
        self.ana = analyzer

    # helpers ------------------------------------------------------------------------------
    def bound(self, e) -> tuple:
        return self.ana.const_int_bound(e)

    def fits(self, iv, dt) -> bool:
        if self.ana.index_no_overflow and D.element(dt) in ("int32", "int64"):
            return True
        return I.fits(iv, dt)

    def exact(self, aff: Affine) -> tuple:
        """Exact interval of an affine form (no wrap-around)."""
        iv = (aff.const, aff.const)
        for t, c in aff.terms:
            iv = I.add(iv, I.scale(self.bound(t), c))
        return iv

    def affine(self, e) -> Affine | None:
        """The affine form of ``e`` when it is exact (no wrap-around), else None."""
        aff = Affine.of(e)
        if not self.fits(self.exact(aff), e.dtype):
            return None
        return aff

    def diff_bound(self, a, b) -> tuple | None:
        """Exact interval of ``a - b`` for integer scalars (None if it may wrap)."""
        fa, fb = self.affine(a), self.affine(b)
        if fa is None or fb is None:
            return None
        return self.exact(fa.combine(fb, -1, normalize=False))

    # leaves --------------------------------------------------------------------------------
    def visit_Var(self, v):
        r = self.ana.values.get(v)
        return v if r is None else r

    # arithmetic -----------------------------------------------------------------------------
    def _binary(self, e):
        a, b = self.visit(e.a), self.visit(e.b)
        f = fold_binary(type(e).__name__, a, b)
        if f is not None:
            return f, a, b
        vec = self._vector(type(e), a, b)
        if vec is not None:
            return vec, a, b
        return None, a, b

    def _rebuild(self, e, a, b):
        return e if (a is e.a and b is e.b) else type(e)(a, b)

    def _vector(self, cls, a, b):
        if isinstance(a, Broadcast) and isinstance(b, Broadcast) and a.lanes == b.lanes:
            return Broadcast(self.visit(cls(a.value, b.value)), a.lanes)
        if cls in (Add, Sub) and isinstance(a, Ramp) and isinstance(b, Broadcast):
            return Ramp(self.visit(cls(a.base, b.value)), a.stride, a.lanes)
        if cls is Add and isinstance(a, Broadcast) and isinstance(b, Ramp):
            return Ramp(self.visit(Add(a.value, b.base)), b.stride, b.lanes)
        if cls in (Add, Sub) and isinstance(a, Ramp) and isinstance(b, Ramp) \
                and a.lanes == b.lanes:
            return Ramp(self.visit(cls(a.base, b.base)), self.visit(cls(a.stride, b.stride)),
                        a.lanes)
        if cls is Mul and isinstance(a, Ramp) and isinstance(b, Broadcast):
            return Ramp(self.visit(Mul(a.base, b.value)), self.visit(Mul(a.stride, b.value)),
                        a.lanes)
        if cls is Mul and isinstance(a, Broadcast) and isinstance(b, Ramp):
            return Ramp(self.visit(Mul(b.base, a.value)), self.visit(Mul(b.stride, a.value)),
                        b.lanes)
        return None

    def _linear(self, e):
        r, a, b = self._binary(e)
        if r is not None:
            return r
        out = self._rebuild(e, a, b)
        if is_index_dtype(out.dtype):
            # the affine form is exact modulo 2**bits, so no bound check is needed
            return _canonical(out)
        if D.is_float(out.dtype):
            if isinstance(out, Mul) and _fconst(b, 1.0):
                return a
            if isinstance(out, Mul) and _fconst(a, 1.0):
                return b
            if isinstance(out, Sub) and _fconst(b, 0.0):
                return a
        return out

    visit_Add = _linear
    visit_Sub = _linear
    visit_Mul = _linear

    def visit_FloorDiv(self, e):
        r, a, b = self._binary(e)
        if r is not None:
            return r
        out = self._rebuild(e, a, b)
        if not is_index_dtype(out.dtype):
            return out
        if _const(b, 0) or _const(a, 0):
            return IntImm(0, out.dtype)     # x // 0 == 0 in Cuvil
        if _const(b, 1):
            return a
        if _const(b) and b.value > 0:
            return self._floordiv_const(out, a, b.value)
        ba, bb = self.bound(a), self.bound(b)
        if bb[0] > 0 and 0 <= ba[0] and ba[1] < bb[0]:
            return IntImm(0, out.dtype)
        split = self._over_var(a, b)
        if split is not None:
            c, _, q = split
            return IntImm(c + q, out.dtype)
        return out

    def _over_var(self, a, b):
        """``(c, rest, q)`` with ``a == c*b + rest`` and ``rest // b == q`` (a constant),
        for a variable ``b`` known positive: ``(n*32 - 1) // n`` is 31 when ``n >= 1``;
        None when ``a`` has no such form."""
        if not isinstance(b, Var) or self.bound(b)[0] <= 0:
            return None
        aff = self.affine(a)
        c = aff.coeffs.get(Key(b)) if aff is not None else None
        if not c:
            return None
        rest = Affine(aff.dtype, {k: v for k, v in aff.coeffs.items() if k != Key(b)},
                      aff.const)
        lo, hi = self.exact(rest)
        bmin = self.bound(b)[0]
        if 0 <= lo and hi < bmin:
            return c, rest, 0
        if -bmin <= lo and hi <= -1:
            return c, rest, -1
        return None

    def _floordiv_const(self, out, a, c):
        dt = out.dtype
        if isinstance(a, FloorDiv) and _const(a.b) and a.b.value > 0 \
                and self.fits((a.b.value * c,) * 2, dt):
            return self.visit(FloorDiv(a.a, IntImm(a.b.value * c, dt)))
        aff = self.affine(a)
        if aff is None:
            return out
        q, r = aff.split(c)
        rb = self.exact(r)
        if not (self.fits(self.exact(q), dt) and self.fits(rb, dt)):
            return out
        if rb[0] // c == rb[1] // c:
            q.const += rb[0] // c
            return q.to_expr()
        reduced = self._common_factor(r, c)
        if q.is_const() and reduced is None:
            return out  # moving only a constant out of the division reads worse
        rest = FloorDiv(r.to_expr(), IntImm(c, dt)) if reduced is None else reduced
        return Affine.of(Add(q.to_expr(), rest)).to_expr()

    def _common_factor(self, r: Affine, c: int):
        """``r // c`` with the factor ``g`` common to ``c`` and every coefficient of
        ``r`` divided out: ``(i * 8 + 7) // 16`` is ``i // 2``, since ``g*y + k0`` with
        ``0 <= k0 < g`` lies in one block of ``g*m`` values (None when ``g`` is 1)."""
        g = c
        for _, k in r.terms:
            g = math.gcd(g, k)
        if g == 1 or r.is_const():
            return None
        y = Affine(r.dtype, {key: k // g for key, k in r.coeffs.items()}, r.const // g)
        m = c // g
        return y.to_expr() if m == 1 else self.visit(FloorDiv(y.to_expr(), IntImm(m, r.dtype)))

    def visit_FloorMod(self, e):
        r, a, b = self._binary(e)
        if r is not None:
            return r
        out = self._rebuild(e, a, b)
        if not is_index_dtype(out.dtype):
            return out
        dt = out.dtype
        if _const(b, 0) or _const(b, 1) or _const(a, 0):
            return IntImm(0, dt)            # x % 0 == 0 in Cuvil; x % 1 == 0
        if _const(b) and b.value > 0:
            c = b.value
            if isinstance(a, FloorMod) and _const(a.b) and a.b.value > 0 \
                    and a.b.value % c == 0:
                return self.visit(FloorMod(a.a, b))
            aff = self.affine(a)
            if aff is None:
                return out
            q, rem = aff.split(c)
            rb = self.exact(rem)
            if not self.fits(rb, dt):
                return out
            if rb[0] // c == rb[1] // c:
                rem.const -= rb[0] // c * c
                return rem.to_expr()
            if q.is_const() and aff.const == rem.const:
                return out
            return FloorMod(rem.to_expr(), b)
        ba, bb = self.bound(a), self.bound(b)
        if bb[0] > 0 and 0 <= ba[0] and ba[1] < bb[0]:
            return a
        split = self._over_var(a, b)
        if split is not None:
            _, rest, q = split
            return self.visit(rest.to_expr() - b * q) if q else rest.to_expr()
        return out

    def _trunc(self, e, floor_cls):
        r, a, b = self._binary(e)
        if r is not None:
            return r
        out = self._rebuild(e, a, b)
        if not is_index_dtype(out.dtype):
            if D.is_float(out.dtype) and type(e) is Div and _fconst(b, 1.0):
                return a
            return out
        if _const(b, 0):
            return IntImm(0, out.dtype)
        if self.bound(a)[0] >= 0 and self.bound(b)[0] > 0:
            return self.visit(floor_cls(a, b))
        if _const(b, 1):
            return a if floor_cls is FloorDiv else IntImm(0, out.dtype)
        return out

    def visit_Div(self, e):
        return self._trunc(e, FloorDiv)

    def visit_Mod(self, e):
        return self._trunc(e, FloorMod)

    def _minmax(self, e):
        r, a, b = self._binary(e)
        if r is not None:
            return r
        if same(a, b):
            return a
        out = self._rebuild(e, a, b)
        if not is_index_dtype(out.dtype):
            return out
        is_min = isinstance(out, Min)
        d = self.diff_bound(a, b)
        ba, bb = self.bound(a), self.bound(b)
        if (d is not None and d[1] <= 0) or ba[1] <= bb[0]:
            return a if is_min else b
        if (d is not None and d[0] >= 0) or ba[0] >= bb[1]:
            return b if is_min else a
        return out

    visit_Min = _minmax
    visit_Max = _minmax

    # comparisons and logic ----------------------------------------------------------------
    def _compare(self, e):
        r, a, b = self._binary(e)
        if r is not None:
            return r
        out = self._rebuild(e, a, b)
        known = self.ana.fact(out)
        if known is not None:
            return IntImm(int(known), "bool")
        if not is_index_dtype(a.dtype):
            return normal_compare(self, out)
        name = type(out).__name__
        if same(a, b):
            return IntImm(int(name in ("EQ", "LE", "GE")), "bool")
        d = self.diff_bound(a, b)
        if d is None:
            ba, bb = self.bound(a), self.bound(b)
            d = I.sub(ba, bb)
        lo, hi = d
        decided = {
            "LT": True if hi < 0 else (False if lo >= 0 else None),
            "LE": True if hi <= 0 else (False if lo > 0 else None),
            "GT": True if lo > 0 else (False if hi <= 0 else None),
            "GE": True if lo >= 0 else (False if hi < 0 else None),
            "EQ": True if lo == hi == 0 else (False if lo > 0 or hi < 0 else None),
            "NE": False if lo == hi == 0 else (True if lo > 0 or hi < 0 else None),
        }[name]
        if decided is None and name == "EQ":
            out = self._sum_is_zero(out, a, b)
            if not isinstance(out, EQ):
                return out
        return normal_compare(self, out) if decided is None else IntImm(int(decided), "bool")

    def _sum_is_zero(self, out, a, b):
        """``c1*t1 + c2*t2 + … == 0`` with every ``ci*ti >= 0`` (no wrap-around) holds iff
        each ``ti == 0``: the init condition of a split reduction."""
        fa, fb = self.affine(a), self.affine(b)
        if fa is None or fb is None:
            return out
        d = fa.combine(fb, -1, normalize=False)
        terms = d.terms
        if d.const != 0 or len(terms) < 2:
            return out
        if not all(c > 0 and self.bound(t)[0] >= 0 for t, c in terms):
            return out
        cond = None
        for t, _ in terms:
            eq = EQ(t, IntImm(0, t.dtype))
            cond = eq if cond is None else And(cond, eq)
        return cond

    visit_LT = _compare
    visit_LE = _compare
    visit_GT = _compare
    visit_GE = _compare
    visit_EQ = _compare
    visit_NE = _compare

    def _logic(self, e):
        is_and = isinstance(e, And)
        a = self.visit(e.a)
        if _const(a):
            if bool(a.value) != is_and:
                return a
            return self.visit(e.b)
        # the right side is simplified knowing the left side's value
        with self.ana.constraint(a if is_and else Not(a)):
            b = self.visit(e.b)
        if _const(b):
            return a if bool(b.value) == is_and else b
        if same(a, b):
            return a
        if (isinstance(b, Not) and same(b.a, a)) or (isinstance(a, Not) and same(a.a, b)):
            return _FALSE if is_and else _TRUE
        return self._rebuild(e, a, b)

    visit_And = _logic
    visit_Or = _logic

    def visit_Not(self, e):
        a = self.visit(e.a)
        if _const(a):
            return IntImm(int(not a.value), "bool")
        if isinstance(a, Not):
            return a.a
        if isinstance(a, CmpOp) and (is_index_dtype(a.a.dtype) or type(a) in (EQ, NE)):
            return normal_compare(self, negate(a))
        return e if a is e.a else Not(a)

    # conditionals ------------------------------------------------------------------------
    def _arms(self, cond, t, f):
        if _const(cond):
            return (self.visit(t), None) if cond.value else (None, self.visit(f))
        with self.ana.constraint(cond):
            t2 = self.visit(t)
        with self.ana.constraint(Not(cond)):
            f2 = self.visit(f)
        return t2, f2

    def visit_Select(self, e):
        c = self.visit(e.condition)
        if _const(c) or not (_speculation_unsafe(e.true_value) or
                             _speculation_unsafe(e.false_value)):
            t, f = self._arms(c, e.true_value, e.false_value)
        else:
            # a Select evaluates both arms whatever ``c`` is: an arm's load (or
            # division) simplified under ``c``, a guard dropped or an index rewritten,
            # would run out of bounds where ``c`` fails
            t, f = self.visit(e.true_value), self.visit(e.false_value)
        if t is None or f is None:
            return f if t is None else t
        if same(t, f):
            return t
        if c is e.condition and t is e.true_value and f is e.false_value:
            return e
        return Select(c, t, f)

    def visit_Call(self, e):
        arms = ops.branches(e)
        if arms is not None:
            c = self.visit(arms[0])
            t, f = self._arms(c, arms[1], arms[2])
            if t is None or f is None:
                return f if t is None else t
            if same(t, f):
                return t
            args = (c, t, f)
        else:
            args = tuple(self.visit(x) for x in e.args)
            folded = fold_call(e.dtype, e.op, args)
            if folded is not None:
                return folded
        if all(x is y for x, y in zip(args, e.args)):
            return e
        return Call(e.dtype, e.op, args)

    def visit_Cast(self, e):
        v = self.visit(e.value)
        if v.dtype == e.dtype:
            return v
        f = fold_cast(e.dtype, v)
        if f is not None:
            return f
        if isinstance(v, Broadcast):
            return Broadcast(self.visit(Cast(D.element(e.dtype), v.value)), v.lanes)
        return e if v is e.value else Cast(e.dtype, v)

    def visit_Let(self, e):
        v = self.visit(e.value)
        if isinstance(v, (IntImm, FloatImm, Var)):
            return self.visit(substitute(e.body, {e.var: v}))
        with self.ana.bound_scope(e.var, v):
            body = self.visit(e.body)
        return e if (v is e.value and body is e.body) else Let(e.var, v, body)

    def visit_Ramp(self, e):
        base, stride = self.visit(e.base), self.visit(e.stride)
        if _const(stride, 0):
            return Broadcast(base, e.lanes)
        return e if (base is e.base and stride is e.stride) else Ramp(base, stride, e.lanes)

    def visit_BufferLoad(self, e):
        idx = self.visit_tuple(e.indices)
        return e if idx is e.indices else BufferLoad(e.buffer, idx)


def _speculation_unsafe(e) -> bool:
    """Whether evaluating ``e`` where it is not needed may fault: it loads from memory
    (a buffer, a guarded ``T.if_then_else``) or divides by a non-constant integer."""
    found = []

    def visit(n):
        if isinstance(n, BufferLoad) or (isinstance(n, Call) and ops.branches(n)
                                         is not None):
            found.append(n)
        elif isinstance(n, (Div, Mod, FloorDiv, FloorMod)) and D.is_integer(n.dtype) \
                and not isinstance(n.b, IntImm):
            found.append(n)
    post_order_visit(e, visit)
    return bool(found)


#: an index sum's canonical form (:func:`_canonical`) by :class:`Key` of the sum; None
#: where the sum is its own canonical form
_CANON: dict = {}
#: sums kept (a GEMM candidate's build asks about 3000, 5 in 6 of them asked before)
CANON_SIZE = 8192


def _canonical(e):
    """The canonical affine form of the index sum ``e``, joined where a fused index is
    read back at its parts: a function of ``e`` alone (no bounds), so kept.  A sum
    already in that form is returned itself, so the caller sees that nothing changed
    (no second step, no rebuilt parents)."""
    key = Key(e)
    got = _CANON.get(key, key)
    if got is not key:
        return e if got is None else got
    canon = _join_divmod(Affine.of(e)).to_expr()
    itself = same(canon, e)
    if len(_CANON) >= CANON_SIZE:
        del _CANON[next(iter(_CANON))]
    _CANON[key] = None if itself else canon
    return e if itself else canon


def _join_divmod(aff: Affine) -> Affine:
    """``k*c * (x // c) + k * (x % c)`` is ``k * x`` (floor division, any sign): the
    inverse of a fused index read back at its parts."""
    for t, kc in aff.terms:
        if not (isinstance(t, FloorDiv) and _const(t.b) and t.b.value > 0):
            continue
        c = t.b.value
        mod = Key(FloorMod(t.a, t.b))
        k = aff.coeffs.get(mod)
        if k is None or kc != k * c:
            continue
        coeffs = {key: v for key, v in aff.coeffs.items() if key != mod and key != Key(t)}
        x = Affine.of(t.a)
        out = Affine(aff.dtype, coeffs, aff.const).combine(x, k)
        return _join_divmod(out)
    return _join_symbolic_divmod(aff)


def _join_symbolic_divmod(aff: Affine) -> Affine:
    """``k * (x // n * n) + k * (x % n)`` is ``k * x`` for a symbolic ``n`` too (floor
    division: ``x // n * n + x % n == x`` for every ``n != 0``)."""
    for t, k in aff.terms:
        if not isinstance(t, Mul):
            continue
        for q, n in ((t.a, t.b), (t.b, t.a)):
            if not (isinstance(q, FloorDiv) and same(q.b, n)):
                continue
            mod = Key(FloorMod(q.a, n))
            if aff.coeffs.get(mod) != k:
                continue
            coeffs = {key: v for key, v in aff.coeffs.items() if key != mod and key != Key(t)}
            out = Affine(aff.dtype, coeffs, aff.const).combine(Affine.of(q.a), k)
            return _join_symbolic_divmod(out)
    return aff
