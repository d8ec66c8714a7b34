"""Arithmetic analysis: integer bounds, symbolic bounds, proofs and simplification.

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir import arith
    >>> i, j = T.var("i"), T.var("j")
    >>> r = {i: T.Range.from_extent(4), j: T.Range.from_extent(8)}
    >>> str(arith.simplify((i * 8 + j) // 8, r))
    'i'
    >>> [str(x) for x in arith.bound_of(i * 8 + j, r)]
    ['0', '31']
"""

from __future__ import annotations

from ..expr import Expr
from ..stmt import Range
from .affine import Affine
from .analyzer import Analyzer
from .bound import bound_of
from .interval import NEG_INF, POS_INF
from .memo import simplify_free


def simplify(expr: Expr, bounds: dict | None = None) -> Expr:
    """Simplify ``expr``; ``bounds`` maps variables to a ``Range`` or to ``(lo, hi)``
    inclusive integer bounds.

    Example::

        >>> import cuvil_tir as T
        >>> x = T.var("x")
        >>> str(simplify(x * 1 + 0 - x))
        '0'
    """
    if not bounds:
        return simplify_free(expr)   # a pure function of expr: memoised
    ana = Analyzer()
    for v, b in bounds.items():
        if isinstance(b, Range):
            ana.bind(v, b)
        else:
            ana.update_bound(v, (b[0], b[1]))
    return ana.simplify(expr)


def const_int_bound(expr: Expr, bounds: dict | None = None) -> tuple:
    """Inclusive constant ``(lo, hi)`` of ``expr`` (``bounds`` as for :func:`simplify`).

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> const_int_bound(i % 8 + 1, {i: (0, 100)})
        (1, 8)
    """
    ana = Analyzer()
    for v, b in (bounds or {}).items():
        if isinstance(b, Range):
            ana.bind(v, b)
        else:
            ana.update_bound(v, (b[0], b[1]))
    return ana.const_int_bound(expr)


__all__ = ["Affine", "Analyzer", "NEG_INF", "POS_INF", "bound_of", "const_int_bound",
           "simplify"]
