"""Loop domains cut by a block's predicate: ``T.where(ax0 < 1)`` under ``for ax0 in
range(3)`` means the block runs for ``ax0`` in ``[0, 1)`` only, so what it reads or
writes over that loop is one row, not three.

A region relaxed over the loops a block sits under (a cache's copy, a blockized outer
block's regions) covers the instances that run; counting those the predicate excludes
makes a copy read elements no store wrote and write them back over others, and makes
an outer block declare more than its parent does.  :func:`tighten` reads each
conjunct ``c * v + rest < 0`` (from ``<``, ``<=``, ``>``, ``>=``, ``==``) with ``v`` a relaxed
variable of constant domain and ``rest`` bounded to a constant over the domains, and
cuts ``v``'s range to where the conjunct can hold.  Anything else is left as it is: the
result is never smaller than what runs.

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.stmt import Range
    >>> a, b = T.var("a"), T.var("b")
    >>> doms = {a: Range.from_extent(3), b: Range.from_extent(4)}
    >>> out = tighten(doms, (a < 1) & (b * 2 + a >= 3))
    >>> [(str(r.min), str(r.extent)) for r in out.values()]
    [('0', '1'), ('2', '2')]
"""

from __future__ import annotations

from ..arith.affine import Affine, is_index_dtype
from ..errors import ScheduleError
from ..expr import EQ, GE, GT, LE, LT, IntImm, const
from ..op import conjuncts
from ..stmt import Range
from .index_bounds import bounds


def bound_conjuncts(predicate) -> list:
    """The conjuncts of ``predicate``, an equality ``a == b`` as ``a <= b`` and
    ``a >= b`` (a padding block's ``T.where(ax0 == 1)`` runs one row).

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> [str(c) for c in bound_conjuncts((i == 1) & (i < 4))]
        ['i <= 1', 'i >= 1', 'i < 4']
    """
    out = []
    for c in conjuncts(predicate):
        out += [LE(c.a, c.b), GE(c.a, c.b)] if isinstance(c, EQ) else [c]
    return out


def below_zero(cond):
    """``e`` with ``cond`` equivalent to ``e < 0`` (integers), or None.

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> str(below_zero(i <= 3)), below_zero(i != 3)
        ('i - 3 - 1', None)
    """
    if isinstance(cond, LT):
        return cond.a - cond.b
    if isinstance(cond, LE):
        return cond.a - cond.b - const(1, cond.a.dtype)
    if isinstance(cond, GT):
        return cond.b - cond.a
    if isinstance(cond, GE):
        return cond.b - cond.a - const(1, cond.a.dtype)
    return None


def _int(e):
    return e.value if isinstance(e, IntImm) else None


def tighten(doms: dict, predicate) -> dict:
    """``doms`` (``{var: Range}``) with each range cut by ``predicate`` (see the module
    docstring); the input is not changed.

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> tighten({i: Range.from_extent(8)}, i * 3 < 7)[i].extent.value
        3
        >>> r = tighten({i: Range.from_extent(8)}, i == 5)[i]
        >>> r.min.value, r.extent.value
        (5, 1)
    """
    out = dict(doms)
    if predicate is None or (isinstance(predicate, IntImm) and predicate.value):
        return out
    by_id = {id(v): v for v in out}
    for cond in bound_conjuncts(predicate):
        e = below_zero(cond)
        if e is None or not is_index_dtype(e.dtype):
            continue
        aff = Affine.of(e)
        for term, c in aff.terms:
            v = by_id.get(id(term))
            if v is None or c == 0:
                continue
            lo, ext = _int(out[v].min), _int(out[v].extent)
            if lo is None or ext is None:
                continue
            rest = Affine.of(e - term * const(c, e.dtype)).to_expr()
            others = {k: r for k, r in out.items() if k is not v}
            try:
                rest_lo, _ = bounds(rest, others)
            except ScheduleError:       # not boundable: no cut from this conjunct
                continue
            if _int(rest_lo) is None:
                continue
            if c > 0:
                # c * v < -rest <= -rest_lo: v <= (-rest_lo - 1) // c
                ext = min(ext, (-_int(rest_lo) - 1) // c - lo + 1)
            else:
                # |c| * v > rest >= rest_lo: v >= rest_lo // |c| + 1
                new_lo = _int(rest_lo) // -c + 1
                if new_lo > lo:
                    ext, lo = ext - (new_lo - lo), new_lo
            ext = max(ext, 0)
            if (lo, ext) != (_int(out[v].min), _int(out[v].extent)):
                out[v] = Range(const(lo, out[v].min.dtype), const(ext, out[v].extent.dtype))
    return out


__all__ = ["tighten", "bound_conjuncts", "below_zero"]
