"""Inverting index maps that linearize a box row-major, with symbolic extents.

``x * 32 * n + y * n + w`` over ``x < 1, y < 32, w < n`` numbers the points of the box
one to one: each result of such a map is ``sum(p_k * stride_k)`` over some of the
indices, ``stride_k`` the product of the extents of the indices after ``p_k``.  Its
inverse is ``p_k = r // stride_k % extent_k`` (the first index without ``%``; an index of
extent 1 is 0); the order of the indices is read from their coefficients.  :mod:`cuvil_tir.analysis.index_map` handles constant coefficients
(``i // 4, i % 4``); this covers the symbolic ones TensorIR's dynamic-shape layouts
use (:func:`cuvil_tir.analysis.map_inverse.inverse` tries both).  Each result is checked equal to the row-major linearization it claims to be, so a
map that is not one (``y * n + w`` with ``w < 2 * n``) is not inverted.

Example::

    >>> import cuvil_tir as T
    >>> n = T.size_var("n")
    >>> y, w, r = T.var("y"), T.var("w"), T.var("r")
    >>> inv = linear_inverse((T.const(32), n), [y, w], [y * n + w], [r])
    >>> str(inv[y]), str(inv[w])
    ('r // n', 'r % n')
"""

from __future__ import annotations

from .. import arith
from ..expr import IntImm, const
from ..stmt import Range
from ..visitor import substitute, used_vars


def linear_inverse(old_shape, params, exprs, idx, ana=None):
    """``{param: expression over idx}`` when every result of the map is a row-major
    linearization of its own indices (see the module docstring); None otherwise.
    ``ana`` may know facts about size variables (their signs)."""
    ana = ana if ana is not None else arith.Analyzer(index_no_overflow=True)
    extent = {id(p): n for p, n in zip(params, old_shape)}
    for p, n in zip(params, old_shape):
        ana.bind(p, Range(const(0, p.dtype), n))
    owner: dict = {}
    inv: dict = {}
    for k, x in enumerate(exprs):
        used = {id(v) for v in used_vars(x)}
        mine = [p for p in params if id(p) in used]
        if any(id(p) in owner for p in mine):
            return None                   # an index in two results
        for p in mine:
            owner[id(p)] = k
        mine = _row_major(x, mine, extent, ana) or mine
        strides, acc = [], const(1, x.dtype)
        for p in reversed(mine):
            strides.append(acc)
            acc = acc * extent[id(p)] if not _one(acc) else extent[id(p)]
        strides.reverse()
        linear = const(0, x.dtype)
        for p, s in zip(mine, strides):
            linear = linear + p * s
        if not ana.can_prove(ana.simplify(x - linear) == const(0, x.dtype)):
            return None
        first = True
        for p, s in zip(mine, strides):
            if _one(extent[id(p)]):
                inv[p] = const(0, p.dtype)
                continue
            q = idx[k] if _one(s) else idx[k] // s
            inv[p] = ana.simplify(q if first else q % extent[id(p)])
            first = False
    if len(owner) != len(params) and any(not _one(extent[id(p)]) for p in params
                                         if id(p) not in owner):
        return None                       # an index no result determines
    for p in params:
        inv.setdefault(p, const(0, p.dtype))
    return inv


def _row_major(x, mine, extent, ana):
    """``mine`` outermost first as ``x`` numbers them (the index whose coefficient is 1
    innermost, then the one whose coefficient is that index's extent …); None when the
    coefficients do not say."""
    zero = {p: const(0, p.dtype) for p in mine}
    base = substitute(x, zero)
    coef = {id(p): ana.simplify(substitute(x, {**zero, p: const(1, p.dtype)}) - base)
            for p in mine}
    order, stride, left = [], const(1, x.dtype), list(mine)
    while left:
        p = next((p for p in left if ana.can_prove(coef[id(p)] == stride)), None)
        if p is None:
            return None
        order.append(p)
        left.remove(p)
        stride = ana.simplify(stride * extent[id(p)])
    return order[::-1]


def _one(e) -> bool:
    return isinstance(e, IntImm) and e.value == 1


__all__ = ["linear_inverse"]
