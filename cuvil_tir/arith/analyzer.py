"""The Analyzer: known variable ranges and facts, bounds, proofs and simplification.

Example::

    >>> import cuvil_tir as T
    >>> i = T.var("i")
    >>> a = Analyzer()
    >>> a.bind(i, T.Range.from_extent(16))
    >>> a.const_int_bound(i * 2 + 1)
    (1, 31)
    >>> a.can_prove(i < 16), str(a.simplify(T.min(i, 16)))
    (True, 'i')
"""

from __future__ import annotations

from contextlib import contextmanager

from .. import dtype as D
from ..expr import (EQ, GE, GT, LE, LT, NE, And, CmpOp, Expr, IntImm, Not, Or, Var,
                    as_expr)
from ..stmt import Range
from . import interval as I
from .affine import Key, is_index_dtype
from .const_bound import ConstIntBound
from .rewrite import Simplifier

_FLIP = {"LT": "GE", "LE": "GT", "GT": "LE", "GE": "LT", "EQ": "NE", "NE": "EQ"}


class Analyzer:
    """Holds what is known about variables; answers bound and proof queries.

    ``index_no_overflow=True`` lets rewrites assume int32/int64 arithmetic does not
    wrap even on variables without known bounds (the usual assumption on index
    expressions; the lowering passes use it).  Otherwise rules that need it check that
    the exact range fits the dtype.

    Example::

        >>> import cuvil_tir as T
        >>> x = T.var("x")
        >>> a = Analyzer()
        >>> a.bind(x, T.const(3))
        >>> str(a.simplify(x * 2 + 1))
        '7'
    """

    def __init__(self, index_no_overflow: bool = False):
        self.index_no_overflow = index_no_overflow
        self.bounds: dict[Key, tuple] = {}
        self.values: dict = {}
        self.ranges: dict = {}
        self.facts: dict[Key, bool] = {}

    # knowledge ------------------------------------------------------------------------------
    def bind(self, var: Var, value) -> None:
        """Bind ``var`` to a ``Range`` (its domain) or to an expression (its value).

        Example::

            >>> import cuvil_tir as T
            >>> a = Analyzer(); i = T.var("i")
            >>> a.bind(i, T.Range(T.const(2), T.const(3)))
            >>> a.const_int_bound(i)
            (2, 4)
        """
        if isinstance(value, Range):
            self.ranges[var] = value
            lo = self.const_int_bound(value.min)[0]
            hi = self.const_int_bound(value.min + value.extent - 1)[1] \
                if is_index_dtype(value.min.dtype) else I.POS_INF
            self.bounds[Key(var)] = (lo, max(lo, hi))
            return
        value = as_expr(value, var.dtype)
        self.values[var] = value
        self.bounds[Key(var)] = self.const_int_bound(value)

    def update_bound(self, e: Expr, iv: tuple) -> None:
        """Intersect the known interval of ``e`` (a variable or any atom) with ``iv``.

        Example::

            >>> import cuvil_tir as T
            >>> a = Analyzer(); n = T.size_var("n")
            >>> a.update_bound(n, (1, 64)); a.const_int_bound(n)
            (1, 64)
        """
        k = Key(e)
        old = self.bounds.get(k)
        self.bounds[k] = iv if old is None else I.intersect(old, iv)

    @contextmanager
    def bound_scope(self, var: Var, value: Expr):
        """Within the block, ``var`` is bounded like ``value`` (for ``Let``)."""
        k = Key(var)
        saved = self.bounds.get(k)
        self.bounds[k] = self.const_int_bound(value)
        try:
            yield
        finally:
            if saved is None:
                self.bounds.pop(k, None)
            else:
                self.bounds[k] = saved

    @contextmanager
    def constraint(self, cond: Expr):
        """Within the block, ``cond`` is assumed true: facts and tighter bounds.

        Conjunctions of integer comparisons tighten the bounds of each term;
        any condition is also remembered as a fact for :meth:`can_prove`.

        Example::

            >>> import cuvil_tir as T
            >>> a = Analyzer(); i = T.var("i")
            >>> a.bind(i, T.Range.from_extent(16))
            >>> with a.constraint(i < 10):
            ...     a.const_int_bound(i)
            (0, 9)
        """
        saved_b, saved_f = dict(self.bounds), dict(self.facts)
        try:
            self._assume(cond, True)
            yield
        finally:
            self.bounds, self.facts = saved_b, saved_f

    def _assume(self, cond: Expr, truth: bool) -> None:
        if isinstance(cond, Not):
            self._assume(cond.a, not truth)
            return
        if isinstance(cond, (And, Or)) and (isinstance(cond, And) == truth):
            self._assume(cond.a, truth)
            self._assume(cond.b, truth)
            return
        if isinstance(cond, IntImm):
            return
        self.facts[Key(cond)] = truth
        if isinstance(cond, CmpOp) and is_index_dtype(cond.a.dtype):
            name = type(cond).__name__
            if not truth:
                name = _FLIP[name]
            self._tighten(cond.a, cond.b, name)
            cls = {"LT": LT, "LE": LE, "GT": GT, "GE": GE, "EQ": EQ, "NE": NE}[name]
            self.facts[Key(cls(cond.a, cond.b))] = True
            self.facts[Key(cls(cond.b, cond.a) if name in ("EQ", "NE") else
                           {"LT": GT, "LE": GE, "GT": LT, "GE": LE}[name](cond.b, cond.a))] = True

    def _tighten(self, a: Expr, b: Expr, name: str) -> None:
        """From ``a <name> b`` derive bounds for each term of ``a - b``."""
        simp = Simplifier(self)
        fa, fb = simp.affine(a), simp.affine(b)
        if fa is None or fb is None:
            return
        d = fa.combine(fb, -1, normalize=False)
        if name == "NE":
            self._exclude(d)
            return
        # d <name> 0, turned into lo <= d <= hi on the exact integers
        lo, hi = {"LT": (I.NEG_INF, -1), "LE": (I.NEG_INF, 0), "GT": (1, I.POS_INF),
                  "GE": (0, I.POS_INF), "EQ": (0, 0)}[name]
        lo, hi = lo - d.const, hi - d.const
        terms = d.terms
        ivs = [I.scale(self.const_int_bound(t), c) for t, c in terms]
        for k, (t, c) in enumerate(terms):
            others = (0, 0)
            for m, iv in enumerate(ivs):
                if m != k:
                    others = I.add(others, iv)
            # c*t in [lo - others.hi, hi - others.lo]
            tlo, thi = lo - others[1], hi - others[0]
            if c > 0:
                new = (_ceil_div(tlo, c), _floor_div(thi, c))
            else:
                new = (_ceil_div(thi, c), _floor_div(tlo, c))
            self.update_bound(t, new)

    def _exclude(self, d) -> None:
        """From ``d != 0`` with ``d = c*t + k``, ``c = ±1``: the excluded value of ``t``
        trims its interval when it is an end (``i != 1`` with ``i`` in [0, 1] leaves
        [0, 0]); a value inside the interval leaves it as it is."""
        if len(d.terms) != 1 or abs(d.terms[0][1]) != 1:
            return
        t, c = d.terms[0]
        gone = -d.const * c
        lo, hi = self.const_int_bound(t)
        if lo == gone and hi != gone:
            self.update_bound(t, (lo + 1, hi))
        elif hi == gone and lo != gone:
            self.update_bound(t, (lo, hi - 1))

    def fact(self, cond: Expr) -> bool | None:
        """The known truth value of ``cond`` (None when nothing is known)."""
        return self.facts.get(Key(cond)) if self.facts else None

    # queries ----------------------------------------------------------------------------
    def const_int_bound(self, e: Expr) -> tuple:
        """Inclusive ``(lo, hi)`` of ``e``: ints, or ``±inf`` for non-integers.

        Example::

            >>> import cuvil_tir as T
            >>> Analyzer().const_int_bound(T.var("x", "uint8") // 16)
            (0, 15)
        """
        return ConstIntBound(self.bounds).bound(as_expr(e))

    def simplify(self, e, steps: int = 2) -> Expr:
        """``e`` rewritten by every rule of :mod:`~cuvil_tir.arith.rewrite`.

        Example::

            >>> import cuvil_tir as T
            >>> i, j = T.var("i"), T.var("j")
            >>> str(Analyzer().simplify((i * 4 + j) - i * 4))
            'j'
        """
        e = as_expr(e)
        for _ in range(steps):
            new = Simplifier(self).visit(e)
            if new is e:
                break
            e = new
        return e

    def can_prove(self, cond) -> bool:
        """Whether ``cond`` is provably true under what is known.

        Example::

            >>> import cuvil_tir as T
            >>> a = Analyzer(); n = T.size_var("n")
            >>> a.can_prove(n >= 0), a.can_prove(n > 0)
            (True, False)
        """
        c = self.simplify(as_expr(cond, "bool") if isinstance(cond, bool) else cond)
        return isinstance(c, IntImm) and D.is_bool(c.dtype) and c.value == 1


def _floor_div(x, c):
    if x in (I.POS_INF, I.NEG_INF):
        return x if c > 0 else -x
    return x // c


def _ceil_div(x, c):
    if x in (I.POS_INF, I.NEG_INF):
        return x if c > 0 else -x
    return -((-x) // c)
