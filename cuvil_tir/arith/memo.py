"""Simplification with nothing known, memoised: the same index expression is asked for
again and again.

``arith.simplify(e)`` without bounds depends on ``e`` alone (its structure, its
variables by identity, their dtypes), so its result can be kept: the schedule
primitives' region analyses and the lowering passes ask it for the same expressions
many times (3 of every 4 calls while a GEMM candidate is scheduled and built).  The IR
is immutable, so a kept result never goes stale; the table is keyed structurally
(:class:`~.affine.Key`: variables by identity) and holds at most :data:`SIZE` entries,
the oldest dropped first.  An expression that simplifies to itself is returned itself
(the caller's ``new is old`` test still says nothing changed).

Example::

    >>> import cuvil_tir as T
    >>> i = T.var("i")
    >>> str(simplify_free(i * 1 + 0)), str(simplify_free(i * 1 + 0))
    ('i', 'i')
    >>> e = i + 1
    >>> simplify_free(e) is e
    True
"""

from __future__ import annotations

from ..expr import Expr
from .affine import Key
from .analyzer import Analyzer

#: entries kept (a GEMM candidate's scheduling and build ask about 400 distinct ones)
SIZE = 4096

_TABLE: dict = {}   # Key(expr) -> simplified expr, or None: the expr itself


def simplify_free(expr):
    """``Analyzer().simplify(expr)`` (nothing known about any variable), memoised.

    Example::

        >>> import cuvil_tir as T
        >>> simplify_free(T.const(2) * 3).value
        6
    """
    if not isinstance(expr, Expr):
        return Analyzer().simplify(expr)
    key = Key(expr)
    got = _TABLE.get(key, key)
    if got is not key:
        return expr if got is None else got
    out = Analyzer().simplify(expr)
    if len(_TABLE) >= SIZE:
        del _TABLE[next(iter(_TABLE))]
    _TABLE[key] = None if out is expr else out
    return out


def clear() -> None:
    """Forget every kept result (tests; the results never go stale).

    Example::

        >>> clear()
    """
    _TABLE.clear()


__all__ = ["SIZE", "clear", "simplify_free"]
