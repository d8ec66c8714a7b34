"""The loop-nest edits the block primitives share: the :class:`Relocate` mutator, a
block's own loop nest (:func:`exclusive_nest`), a new nest around a moved block
(:func:`make_nest`), and small tree helpers.  ``compute_at``, ``reverse_compute_at``
(:mod:`.compute_location`), ``compute_inline`` (:mod:`.inline`) and the cache stages
use them.

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.analysis import tree
    >>> A = T.placeholder((8,), name="A")
    >>> f = T.create_prim_func([A, T.compute((8,), lambda i: A[i] * 2.0, name="B")])
    >>> [l.loop_var.name for l in nest_loops(tree.get(f, tree.loops_above(
    ...     f, tree.find_block(f, "B"))[0][0]))]
    ['i']
"""

from __future__ import annotations

import dataclasses

from cuvil_tir.expr import Add, Expr, IntImm, Max, Min, Var, const
from cuvil_tir.op import all as all_of
from cuvil_tir.stmt import Block, BlockRealize, For, Range, SeqStmt, seq
from cuvil_tir.visitor import Mutator, post_order_visit, substitute, used_vars

from cuvil_tir.analysis import tree
from ..errors import BlockLocationError, fail
from cuvil_tir.analysis.regions import bounds, provably_le, simplify, tree_same
from cuvil_tir.arith import Analyzer


class Relocate(Mutator):
    """Delete one statement (by identity) and rebuild one node (by identity) with
    ``place(new_node)``, in a single pass over the statements.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> Relocate().visit(f.body) is f.body
        True
    """

    def __init__(self, remove=None, target=None, place=None):
        self.remove = remove
        self.target = target
        self.place = place

    def visit(self, n):
        if isinstance(n, Expr):
            return n   # statements only: expressions are shared as they are
        new = super().visit(n)
        if self.target is not None and n is self.target:
            new = self.place(new)
        return new

    def visit_SeqStmt(self, s):
        items = [self.visit(x) for x in s.seq if x is not self.remove]
        if len(items) == len(s.seq) and all(a is b for a, b in zip(items, s.seq)):
            return s
        return seq(*items)


def with_fields(node, **changes):
    """A copy of a node with some fields replaced.

    Example::

        >>> import cuvil_tir as T
        >>> with_fields(Block("B", (), (), (), None), name="C").name
        'C'
    """
    return dataclasses.replace(node, **changes)


def subtrees(stmt) -> list:
    """The statements of a ``SeqStmt`` body, or ``[stmt]``.

    Example::

        >>> subtrees(SeqStmt(())) == []
        True
    """
    return list(stmt.seq) if isinstance(stmt, SeqStmt) else [stmt]


def block_names(stmt) -> set:
    """Names of all blocks inside ``stmt``.

    Example::

        >>> block_names(Block("B", (), (), (), SeqStmt(())))
        set()
    """
    return {b.block.name for b in tree.blocks_under(stmt)}


def exclusive_nest(func, block_path: tuple, prim: str) -> tuple:
    """``(path, stmt)`` of the block together with the loops that hold only it: what
    must go when the block moves or is inlined.  Its parent is a ``SeqStmt``.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: B[i], name="C")])
        >>> exclusive_nest(f, tree.find_block(f, "B"), "compute_inline")[0]
        ('block', 'body', ('seq', 0))
    """
    top = block_path
    while top and top[-1] == "body" and isinstance(tree.get(func, top[:-1]), For):
        top = top[:-1]
    if not top or not isinstance(top[-1], tuple):
        name = tree.get(func, block_path).block.name
        raise fail(BlockLocationError, prim, f"block {name!r} is the only statement of "
                   "its scope; there is nothing to move it next to")
    return top, tree.get(func, top)


def make_nest(block: Block, doms: list, outer: dict, preserve_unit_loops: bool = False,
              guards=None, clip: bool = False):
    """A loop nest running ``block`` over ``doms`` (``(min, extent)`` per iter var,
    over the loops of ``outer``, or None for the var's whole domain).

    Each var gets a loop ``axK`` (unless its extent is 1) and the value
    ``min + axK``; when a range may leave the var's domain (a boundary tile), the
    realize gets the predicate that keeps it inside (``T.where``).  ``guards(values)``
    may add conditions over the iter values; conditions that hold for every iteration
    of the new loops are dropped.  With ``clip``, a range that leaves the domain is cut
    to it where that needs no predicate (TensorIR's ``compute_at``); without, it is kept
    whole under the predicate (a padded tile stays one tile wide).

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.stmt import IterVar
        >>> v = T.var("v")
        >>> blk = Block("B", (IterVar(v, Range.from_extent(4)),), (), (), SeqStmt(()))
        >>> make_nest(blk, [None], {}).loop_var.name
        'ax0'
    """
    loops, values, preds = [], [], []
    units: dict = {}      # a kept unit loop is 0: the predicates read without it (TVM's)
    # a loop of extent 1 above is its start (TensorIR's simplifier writes 0, not i0_0)
    fixed = {v: r.min for v, r in outer.items()
             if isinstance(simplify(r.extent), IntImm) and simplify(r.extent).value == 1}
    for iv, dom in zip(block.iter_vars, doms):
        if dom is not None and fixed:
            dom = (simplify(substitute(dom[0], fixed)), simplify(substitute(dom[1], fixed)))
        dom = _clip(iv, dom, outer) if dom is not None and clip else dom
        lo, ext = (iv.dom.min, iv.dom.extent) if dom is None else dom
        ext = simplify(ext)
        if preserve_unit_loops or not (isinstance(ext, IntImm) and ext.value == 1):
            ax = Var(f"ax{len(loops)}", iv.var.dtype)
            loops.append((ax, ext))
            lo = simplify(lo)
            # TVM's form: the tile start plus the loop var, not re-simplified (so
            # ``hh_0 * 8 - 1 + ax0`` reads as "start + offset")
            val = ax if isinstance(lo, IntImm) and lo.value == 0 else Add(lo, ax)
            if isinstance(ext, IntImm) and ext.value == 1:
                units[ax] = const(0, ax.dtype)
        else:
            val = simplify(lo)
        values.append(val)
        if dom is None:
            continue
        if any(v in units for v in used_vars(val)):
            val = simplify(substitute(val, units))
        dmax = simplify(iv.dom.min + iv.dom.extent - 1)
        vlo, _ = bounds(lo, outer)
        _, vhi = bounds(simplify(lo + ext - 1), outer)
        if not provably_le(iv.dom.min, vlo):
            preds.append(val >= iv.dom.min)
        if not provably_le(vhi, dmax):
            preds.append(val < simplify(iv.dom.min + iv.dom.extent))   # TVM's form
    if guards is not None:
        preds.extend(guards([substitute(v, units) for v in values] if units else values))
    ana = Analyzer(index_no_overflow=True)
    for v, r in list(outer.items()) + [(ax, Range(const(0, ax.dtype), ext))
                                       for ax, ext in loops]:
        ana.bind(v, r)
    kept = []
    for p in (ana.simplify(p) for p in preds):
        # a producer's guard may restate a domain guard (reverse_compute_at)
        if not ana.can_prove(p) and not any(tree_same(p, q) for q in kept):
            kept.append(p)
    pred = all_of(*kept) if kept else const(True)
    nest = BlockRealize(tuple(values), pred, block)
    for ax, ext in reversed(loops):
        nest = For(ax, const(0, ax.dtype), ext, "serial", nest)
    return nest


def _clip(iv, dom, outer):
    """``dom`` (``(min, extent)`` over the loops of ``outer``) cut to the iter var's
    domain where that needs no predicate: ``dom`` itself when it stays inside the
    domain, None (the whole domain) when it covers it in every iteration, the constant
    intersection when there is one, else ``dom``."""
    lo, ext = simplify(dom[0]), simplify(dom[1])
    hi = simplify(lo + ext - 1)
    dmin, dmax = iv.dom.min, simplify(iv.dom.min + iv.dom.extent - 1)
    if _loose(lo) or _loose(hi):
        # a bound through a symbolic % or // is the index type's limit ((f * 4 + g) %
        # n below 2**31): a loop over it runs 2**31 times for n elements; the domain
        # cuts it (the iterator never leaves it)
        ana = Analyzer(index_no_overflow=True)
        for v, r in outer.items():
            ana.bind(v, r)
        lo = dmin if ana.can_prove(lo <= dmin) else simplify(Max(lo, dmin))
        hi = dmax if ana.can_prove(dmax <= hi) else simplify(Min(hi, dmax))
        return lo, simplify(hi - lo + 1)
    (lo_lo, lo_hi), (hi_lo, hi_hi) = bounds(lo, outer), bounds(hi, outer)
    if provably_le(dmin, lo_lo) and provably_le(hi_hi, dmax):
        return lo, ext
    if provably_le(lo_hi, dmin) and provably_le(dmax, hi_lo):
        return None
    ilo, ihi = simplify(Max(lo, dmin)), simplify(Min(hi, dmax))
    if isinstance(ilo, IntImm) and isinstance(ihi, IntImm) and ilo.value <= ihi.value:
        return ilo, const(ihi.value - ilo.value + 1, ext.dtype)
    return lo, ext


def _loose(e) -> bool:
    """Whether ``e`` names a constant near the index type's limits (a bound the
    analysis could not take)."""
    found = []
    post_order_visit(e, lambda n: found.append(n) if isinstance(n, IntImm)
                     and abs(n.value) >= 2 ** 30 else None)
    return bool(found)


def nest_loops(stmt) -> list:
    """Every ``For`` in ``stmt`` (outermost first along each path)."""
    out = []
    post_order_visit(stmt, lambda n: out.append(n) if isinstance(n, For) else None)
    return out[::-1]
