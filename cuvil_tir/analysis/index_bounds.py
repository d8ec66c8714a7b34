"""Bounds of index expressions over loop domains, for the region analyses
(:mod:`.regions`) and the domains a predicate cuts (:mod:`.predicate_doms`).

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.stmt import Range
    >>> i = T.var("i")
    >>> [x.value for x in bounds(i + 2, {i: Range.from_extent(3)})]
    [2, 4]
"""

from __future__ import annotations

from .. import arith
from ..errors import ScheduleError
from ..expr import Expr, IntImm, const


def simplify(e: Expr) -> Expr:
    """``cuvil_tir.arith.simplify`` of ``e``.

    Example::

        >>> import cuvil_tir as T
        >>> simplify(T.const(2) + 3).value
        5
    """
    return arith.simplify(e)


def bounds(e: Expr, doms: dict) -> tuple:
    """Inclusive ``(lo, hi)`` of ``e`` when each variable of ``doms`` ranges over its
    ``Range``; other variables stay symbolic.

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.stmt import Range
        >>> i = T.var("i")
        >>> lo, hi = bounds(i * 2 + 1, {i: Range.from_extent(4)})
        >>> (lo.value, hi.value)
        (1, 7)
    """
    lo, hi = arith.bound_of(e, doms)
    if lo is None or hi is None:
        raise ScheduleError(f"region analysis: cannot bound the index {e} over the loops "
                            f"{[v.name for v in doms]}; use affine indices")
    return (simplify(const(lo, e.dtype) if not isinstance(lo, Expr) else lo),
            simplify(const(hi, e.dtype) if not isinstance(hi, Expr) else hi))


def provably_le(a: Expr, b: Expr) -> bool:
    """True when ``a <= b`` is known (both fold to constants, or they are the same).

    Example::

        >>> import cuvil_tir as T
        >>> provably_le(T.const(1), T.const(3)), provably_le(T.var("i"), T.const(3))
        (True, False)
    """
    d = simplify(b - a)
    return isinstance(d, IntImm) and d.value >= 0


__all__ = ["bounds", "provably_le", "simplify"]
