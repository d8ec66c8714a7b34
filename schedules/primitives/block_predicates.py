"""A block's predicate (``T.where``) when a primitive rebuilds the block's loops: which
of its conditions are domain guards the new loops re-derive, and which must be carried.

Example::

    >>> GUARD_ENUMERATE_LIMIT
    65536
"""

from __future__ import annotations
import numpy as np

from cuvil_tir.analysis.regions import tree_same
from cuvil_tir.arith import Analyzer
from cuvil_tir.expr import Expr, IntImm
from cuvil_tir.stmt import Block, BlockRealize, For, Range, SeqStmt  # noqa: F401 (doctest)
from cuvil_tir.visitor import Mutator, used_vars

from ..errors import BlockLocationError, fail
from .layout import eval_np
from cuvil_tir.op import conjuncts


class _ToIterVars(Mutator):
    """Every subexpression equal to one of the realize's iter values becomes the iter
    variable it binds."""

    def __init__(self, realize):
        self.pairs = list(zip(realize.iter_values, (iv.var for iv in realize.block.iter_vars)))

    def visit(self, n):
        if isinstance(n, Expr):
            for value, var in self.pairs:
                if tree_same(n, value):
                    return var
        return Mutator.visit(self, n)


def predicate_conditions(func, realize, loops, prim, error=BlockLocationError) -> list:
    """The conditions of ``realize``'s predicate (``T.where``) over its block's iteration
    variables that the variables' domains do not already imply.

    A primitive that rebuilds the block's loops (``compute_at``,
    ``reverse_compute_at``, ``reverse_compute_inline``) re-derives the domain guards of
    a split; any other condition (``T.where(i % 3 != 1)``) must be carried over, or
    the block would run where it did not.  Refused when a condition uses a loop of
    ``loops`` (the ``For`` nodes that go away) other than through an iter value, unless
    it holds wherever the iter values lie in their domains (a guard).

    Example::

        >>> import cuvil_tir as T
        >>> v, i = T.var("v"), T.var("i")
        >>> from cuvil_tir.stmt import IterVar
        >>> blk = Block("B", (IterVar(v, Range.from_extent(8)),), (), (), SeqStmt(()))
        >>> br = BlockRealize((i,), T.all(i < 8, i % 3 != 1), blk)
        >>> loop = For(i, T.const(0), T.const(8), "serial", br)
        >>> [str(c) for c in predicate_conditions(None, br, [loop], "compute_at")]
        ['v % 3 != 1']
    """
    pred = realize.predicate
    if isinstance(pred, IntImm) and pred.value != 0:
        return []
    blk = realize.block
    ana = Analyzer(index_no_overflow=True)
    for iv in blk.iter_vars:
        ana.bind(iv.var, iv.dom)
    gone = {id(lp.loop_var) for lp in loops}
    out = []
    for raw in conjuncts(pred):
        c = _ToIterVars(realize).visit(raw)
        stray = [v.name for v in used_vars(c) if id(v) in gone]
        if stray and implied_by_domain(realize, raw, loops):
            continue
        if stray:
            raise fail(error, prim, f"block {blk.name!r} runs under the predicate "
                       f"T.where({pred}), whose condition {c} uses the loop(s) {stray} "
                       "other than through the block's iteration variables; moving the "
                       "block would drop it. Express the condition over the iteration "
                       "variables (or bind them to those loops) first", func, blk)
        c = ana.simplify(c)
        if not ana.can_prove(c):
            out.append(c)
    return out


#: nests of at most this many iterations are enumerated to recognise a domain guard
GUARD_ENUMERATE_LIMIT = 1 << 16


def implied_by_domain(realize, cond, loops) -> bool:
    """Whether ``cond`` (over the loops ``loops`` around the block) holds at every
    iteration whose iter values lie in their domains: then it is a domain guard (a split of a fused loop gives ``i_0 * 4 + i_1 < 32`` with
    values ``(i_0 * 4 + i_1) // 8``) and rebuilding the domain keeps it.  Decided by
    enumerating a small constant nest; False when it cannot be decided.

    Example::

        >>> import cuvil_tir as T
        >>> v, i = T.var("v"), T.var("i")
        >>> from cuvil_tir.stmt import IterVar
        >>> blk = Block("B", (IterVar(v, Range.from_extent(5)),), (), (), SeqStmt(()))
        >>> br = BlockRealize((i,), i < 5, blk)
        >>> loop = For(i, T.const(0), T.const(6), "serial", br)
        >>> implied_by_domain(br, i < 5, [loop]), implied_by_domain(br, i < 3, [loop])
        (True, False)
    """
    nest = list(loops)
    if any(not isinstance(x, IntImm) for lp in nest for x in (lp.min, lp.extent)):
        return False
    total = 1
    for lp in nest:
        total *= lp.extent.value
    if total > GUARD_ENUMERATE_LIMIT:
        return False
    grids = np.meshgrid(*[np.arange(lp.min.value, lp.min.value + lp.extent.value)
                          for lp in nest], indexing="ij")
    env = {id(lp.loop_var): g.ravel() for lp, g in zip(nest, grids)}
    inside = np.ones(total, dtype=bool)
    for iv, val in zip(realize.block.iter_vars, realize.iter_values):
        v = eval_np(val, env)
        if v is None or not all(isinstance(x, IntImm) for x in (iv.dom.min, iv.dom.extent)):
            return False
        lo = iv.dom.min.value
        inside &= (v >= lo) & (v < lo + iv.dom.extent.value)
    held = eval_np(cond, env)
    return held is not None and bool(np.all(np.broadcast_to(held, inside.shape) | ~inside))


__all__ = ["predicate_conditions", "implied_by_domain", "GUARD_ENUMERATE_LIMIT"]
