"""The inverse of an index map: the one solver the schedule primitives and the
backends use.

Given block variables (each over its domain) and the indices an access computes from
them, :func:`inverse` gives each variable as an expression of the index values, valid
at every point of the domain.  It tries, in order:

- the injective quasi-affine maps of :func:`cuvil_tir.analysis.index_map.inverse`
  (digits ``c * ((v % m) // d)`` forming a mixed radix: ``v // 4, v % 4``);
- the two forms TensorIR's iter maps also accept: a unit block variable (extent 1)
  need not appear (it is its domain's minimum), and indices may divide one *fused* sum
  of several variables (``f // 128, f % 128`` with ``f = (vi * 32 + vj) * 8 + vk``:
  the sum is inverted as a fresh variable first, its values forming one interval, then
  split into its variables' digits);
- the row-major linearizations with symbolic extents of
  :func:`cuvil_tir.analysis.linear_maps.linear_inverse` (``y * n + w``).

Anything else not injective (``B[vi * 16 + vj, vi * 16 + vj]``: ``vk`` is not
determined) raises :class:`NotInvertible` with the first solver's reason.

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.stmt import IterVar, Range
    >>> vi, vj, vk = T.var("vi"), T.var("vj"), T.var("vk")
    >>> ivs = [IterVar(v, Range.from_extent(n)) for v, n in ((vi, 8), (vj, 16), (vk, 4))]
    >>> f = (vi * 16 + vj) * 4 + vk
    >>> inv = inverse(ivs, [f // 32, f % 32])
    >>> [str(inv[v]) for v in (vi, vj, vk)]
    ['(x0 * 32 + x1) // 64', '(x0 * 32 + x1) % 64 // 4', 'x1 % 4']
"""

from __future__ import annotations

from ..arith import Analyzer
from ..expr import FloorDiv, FloorMod, IntImm, Var
from ..stmt import IterVar, Range
from ..visitor import Mutator, post_order_visit, substitute, used_vars
from . import index_map
from .index_map import NotInvertible
from .linear_maps import linear_inverse
from .regions import bounds, simplify, tree_same


def index_vars(indices) -> list:
    """One placeholder variable per index (what the inverse of a map is written over).

    Example::

        >>> import cuvil_tir as T
        >>> [v.name for v in index_vars([T.var("i"), T.var("j")])]
        ['x0', 'x1']
    """
    return _PLACEHOLDERS.setdefault(tuple(e.dtype for e in indices), [
        Var(f"x{d}", e.dtype) for d, e in enumerate(indices)])


_PLACEHOLDERS: dict = {}


def inverse(iter_vars, indices, values=None) -> dict:
    """``{block var: expression over values}`` with ``indices`` at those expressions
    equal to ``values`` (default: the placeholders ``index_vars(indices)``), for every
    point of the block's domain; :class:`NotInvertible` when Cuvil cannot invert it
    (then it may not be one-to-one).

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.stmt import IterVar, Range
        >>> n, y, w = T.size_var("n"), T.var("y"), T.var("w")
        >>> ivs = [IterVar(y, Range.from_extent(32)), IterVar(w, Range.from_extent(n))]
        >>> inv = inverse(ivs, [y * n + w], [T.var("r")])
        >>> str(inv[y]), str(inv[w])
        ('r // n', 'r % n')
    """
    xs = index_vars(indices) if values is None else list(values)
    unit = {iv.var: iv.dom.min for iv in iter_vars
            if isinstance(simplify(iv.dom.extent), IntImm)
            and simplify(iv.dom.extent).value == 1}
    rest = [iv for iv in iter_vars if iv.var not in unit]
    if unit:
        indices = [simplify(substitute(e, unit)) for e in indices]
    try:
        found = _digits_or_fused(rest, indices, xs)
    except NotInvertible as why:
        found = _simplified(rest, indices, xs)
        if found is None:
            # symbolic strides (x * n + y): a row-major linearization, or nothing
            found = _linear(rest, indices, xs)
        if found is None:
            raise why from None
    return {**found, **unit}


def _digits_or_fused(ivs, indices, xs) -> dict:
    try:
        return index_map.inverse(ivs, indices, xs)
    except NotInvertible as why:
        return _through_fused_sums(ivs, indices, xs, why)


def _simplified(ivs, indices, xs):
    """The inverse of the indices simplified over the domain, where a digit that never
    varies is a constant (``v // 2`` with ``v < 2`` is 0); None if that does not help."""
    ana = Analyzer(index_no_overflow=True)
    for iv in ivs:
        ana.bind(iv.var, iv.dom)
    simpler = [ana.simplify(e) for e in indices]
    if all(tree_same(a, b) for a, b in zip(simpler, indices)):
        return None
    try:
        return _digits_or_fused(ivs, simpler, xs)
    except NotInvertible:
        return None


def _linear(ivs, indices, xs):
    if any(not isinstance(simplify(iv.dom.min), IntImm) or simplify(iv.dom.min).value
           for iv in ivs):
        return None                     # a row-major numbering starts every index at 0
    return linear_inverse([iv.dom.extent for iv in ivs], [iv.var for iv in ivs],
                          list(indices), list(xs))


def at(inv: dict, indices) -> dict:
    """The inverse evaluated at ``indices``: ``{block var: expression}``.

    Example::

        >>> import cuvil_tir as T
        >>> v, i = T.var("v"), T.var("i")
        >>> str(at({v: index_vars([i])[0] - 1}, [i + 1])[v])
        'i'
    """
    sub = dict(zip(index_vars(indices), indices))
    return {v: simplify(substitute(e, sub)) for v, e in inv.items()}


def _through_fused_sums(ivs, indices, xs, why) -> dict:
    """Invert with each fused sum (a // or % numerator over several block variables)
    replaced by a fresh variable ranging over the sum's values, then each sum itself."""
    block_vars = {iv.var for iv in ivs}
    sums: list = []
    for e in indices:
        post_order_visit(e, lambda n: _note_sum(n, block_vars, sums))
    if not sums:
        raise why
    fresh, inner = [], []
    for k, s in enumerate(sums):
        doms = {iv.var: iv.dom for iv in ivs}
        lo, hi = bounds(s, doms)
        f = Var(f"fused{k}", s.dtype)
        fresh.append(IterVar(f, Range(lo, simplify(hi - lo + 1))))
        inner.append([iv for iv in ivs if iv.var in used_vars(s)])
    replaced = [_ReplaceSums(sums, [iv.var for iv in fresh]).visit(e) for e in indices]
    covered = {v for group in inner for v in (iv.var for iv in group)}
    left = [v.name for e in replaced for v in used_vars(e) if v in covered]
    if left:
        raise NotInvertible(f"block variable {left[0]} appears both inside a fused sum "
                            "and outside it") from why
    outer = [iv for iv in ivs if iv.var not in covered] + fresh
    found = index_map.inverse(outer, replaced, xs)
    out = {v: e for v, e in found.items() if all(v is not iv.var for iv in fresh)}
    for s, fiv, group in zip(sums, fresh, inner):
        out.update(index_map.inverse(group, [s], [found[fiv.var]]))
    return out


def _note_sum(node, block_vars, sums) -> None:
    if not isinstance(node, (FloorDiv, FloorMod)) or not isinstance(node.b, IntImm):
        return
    a = node.a
    if isinstance(a, (FloorDiv, FloorMod)) or isinstance(a, Var):
        return
    if sum(v in block_vars for v in used_vars(a)) < 2:
        return
    if not any(tree_same(a, s) for s in sums):
        sums.append(a)


class _ReplaceSums(Mutator):
    def __init__(self, sums, fresh):
        self.pairs = list(zip(sums, fresh))

    def visit(self, node):
        for s, f in self.pairs:
            if tree_same(node, s):
                return f
        return super().visit(node)


__all__ = ["NotInvertible", "index_vars", "inverse", "at"]
