"""The normal form of comparisons that :meth:`Analyzer.simplify` leaves undecided.

Two comparisons that mean the same thing should print the same, so that a schedule's
output can be compared with another (TVM's, a golden text) and read at a glance:

* ``a > b`` is written ``b < a`` and ``a >= b`` is written ``b <= a`` (any dtype);
* ``!(a < b)`` is ``b <= a``, ``!(a <= b)`` is ``b < a``;
* for integer indices, constant offsets move to one side: ``x - 1 >= 0`` is
  ``1 <= x``, ``x + 3 < 10`` is ``x < 7``, ``c == x + 2`` is ``x == c - 2``; between two
  non-constant sides they merge as ``x + 1 < y + 2`` -> ``x <= y``,
  ``x < y - 2`` -> ``x + 2 < y``.

This is the form TVM's simplifier gives (its comparisons are ``<`` and ``<=``).
Offsets move only when no side can wrap around (the exact value ranges fit the dtype,
or the analyzer assumes index arithmetic does not overflow).

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.arith import Analyzer
    >>> i = T.var("i")
    >>> a = Analyzer(index_no_overflow=True)
    >>> str(a.simplify(i - 16 >= 0)), str(a.simplify(i + 3 < 10)), str(a.simplify(i > 2))
    ('16 <= i', 'i < 7', '2 < i')
"""

from __future__ import annotations

from ..expr import EQ, LE, LT, NE
from .affine import Affine, is_index_dtype

_NOT = {"LT": lambda a, b: LE(b, a), "LE": lambda a, b: LT(b, a),
        "GT": lambda a, b: LE(a, b), "GE": lambda a, b: LT(a, b),
        "EQ": NE, "NE": EQ}


def negate(cmp):
    """``!cmp`` as one comparison in the normal form's orientation (``<``, ``<=``).

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> str(negate(i < 16))
        '16 <= i'
    """
    return _NOT[type(cmp).__name__](cmp.a, cmp.b)


def _parts(simp, e):
    """``(rest, const)`` of an exact affine ``e`` (None if it may wrap around)."""
    aff = simp.affine(e)
    if aff is None:
        return None
    rest = Affine(aff.dtype, dict(aff.coeffs), 0)
    return rest, aff.const


def normal_compare(simp, cmp):
    """``cmp`` (a comparison whose sides are simplified) in the normal form.

    ``simp`` is the :class:`~cuvil_tir.arith.rewrite.Simplifier` (for exact ranges).

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.arith import Analyzer
        >>> from cuvil_tir.arith.rewrite import Simplifier
        >>> i, j = T.var("i"), T.var("j")
        >>> simp = Simplifier(Analyzer(index_no_overflow=True))
        >>> str(normal_compare(simp, (i + 1 < j + 2)))
        'i <= j'
    """
    name = type(cmp).__name__
    a, b = cmp.a, cmp.b
    if name == "GT":
        name, a, b = "LT", b, a
    elif name == "GE":
        name, a, b = "LE", b, a
    out = {"LT": LT, "LE": LE, "EQ": EQ, "NE": NE}[name](a, b) \
        if (a is not cmp.a or name not in ("LT", "LE", "EQ", "NE")) else cmp
    if not is_index_dtype(a.dtype):
        return out
    pa, pb = _parts(simp, a), _parts(simp, b)
    if pa is None or pb is None:
        return out
    (ra, ca), (rb, cb) = pa, pb
    if ca == 0 and cb == 0 and not (name in ("EQ", "NE") and ra.is_const()):
        return out
    if name in ("EQ", "NE"):
        new = _equal(ra, ca, rb, cb)
        kind = name
    elif name == "LT":
        new = _less(ra, ca, rb, cb)
        kind = None if new is None else new[2]
    else:   # a <= b is !(b < a): !(l < r) is r <= l, !(l <= r) is r < l
        flipped = _less(rb, cb, ra, ca)
        new = None if flipped is None else (flipped[1], flipped[0])
        kind = None if flipped is None else ("LE" if flipped[2] == "LT" else "LT")
    if new is None:
        return out
    left, right = new[0], new[1]
    for side in (left, right):
        if not simp.fits(simp.exact(side), a.dtype):
            return out
    cls = {"LT": LT, "LE": LE, "EQ": EQ, "NE": NE}[kind]
    return cls(left.to_expr(), right.to_expr())


def _const(dtype, v) -> Affine:
    return Affine(dtype, {}, v)


def _less(ra, ca, rb, cb):
    """``ra + ca < rb + cb`` as ``(left, right, "LT"|"LE")`` affine sides, or None."""
    dt = ra.dtype
    if ra.is_const():
        return _const(dt, ca - cb), rb, "LT"
    if rb.is_const():
        return ra, _const(dt, cb - ca), "LT"
    diff = cb - ca
    if diff == 0:
        return ra, rb, "LT"
    if diff == 1:
        return ra, rb, "LE"
    if diff < 0 and cb != 0:
        return ra.combine(_const(dt, -diff)), rb, "LT"
    if diff > 0 and ca != 0:
        return ra, rb.combine(_const(dt, diff)), "LT"
    return None


def _equal(ra, ca, rb, cb):
    """``ra + ca == rb + cb`` with the constant on the right (``x == 3``)."""
    dt = ra.dtype
    if ra.is_const() and not rb.is_const():
        ra, ca, rb, cb = rb, cb, ra, ca
    if rb.is_const():
        return ra, _const(dt, cb - ca), "EQ"
    if ca == cb:
        return ra, rb, "EQ"
    return None
