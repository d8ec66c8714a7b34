"""When ``reorder`` may permute a loop nest: TensorIR's affine-binding rule.

Reorder is legal when every block under the reordered loops has an *affine binding*
in those loops (loops outside the outermost reordered one are fixed: their values are
constants for the nest, TensorIR's partial affineness):

- each iter value is quasi-affine in the nest's loops (``i * 16 + j``, ``i // 4``;
  not ``i * j % 8``), and not strided (some loop steps it by 1: ``l * 16`` alone leaves
  gaps in its domain; ``k_0 * 2 + k_1`` with ``k_1`` outside the nest has none, the
  outer loop fills them);
- each condition of the block's ``T.where`` is quasi-affine and bounds loops that feed
  one iter value (``i_0 * 16 + i_1 < 127`` after a split).  A condition coupling the
  loops of several iter values (``i * 64 + j < 100`` with ``vi = i, vj = j``) makes the
  block's iteration domain something other than a box of its variables.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((4, 4), name="A")
    >>> f = T.create_prim_func([A, T.compute((4, 4), lambda i, j: A[i, j], name="B")])
    >>> nest = f.body.block.body
    >>> reorder_blocker(nest) is None
    True
"""

from __future__ import annotations

from cuvil_tir.analysis import tree
from cuvil_tir.arith.affine import Affine, quasi_affine
from cuvil_tir.expr import (EQ, GE, GT, LE, LT, NE, Cast)
from cuvil_tir.op import conjuncts
from cuvil_tir.stmt import For
from cuvil_tir.visitor import post_order_visit, used_vars


def reorder_blocker(nest, outer=()):
    """``(block name, why)`` of the first block under the loop ``nest`` (a For) whose
    binding is not affine in the nest's loops, or None.  ``outer``: the variables of
    the loops around ``nest``."""
    loops = set()
    post_order_visit(nest, lambda n: loops.add(n.loop_var) if isinstance(n, For) else None)
    for br in tree.blocks_under(nest):
        why = binding_blocker(br, loops, outer)
        if why is not None:
            return br.block.name, why
    return None


def binding_blocker(br, loops, outer=()):
    """Why the binding of the block realize ``br`` is not affine in ``loops`` (a set
    of loop variables; other variables are constants, ``outer`` those of loops around
    them), or None when it is.  This is
    the one definition of an affine binding: ``reorder`` requires it of every block
    under the nest, and :func:`schedules.block_flags.block_flags` reports it.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4, 4), name="A")
        >>> f = T.create_prim_func([A, T.compute((4, 4), lambda i, j: A[i, j], name="B")])
        >>> br = tree.get(f, tree.find_block(f, "B"))
        >>> binding_blocker(br, {l.loop_var for _, l in tree.loops_above(f,
        ...                                                 tree.find_block(f, "B"))})
    """
    feeds = []
    for iv, val in zip(br.block.iter_vars, br.iter_values):
        if not quasi_affine(val, loops):
            return (f"binds {iv.var.name} to {val}, which is not quasi-affine in its "
                    "loops: the order of its iterations may matter (two of them can "
                    "write one element)")
        if _strided(val, loops, set(outer)):
            return (f"binds {iv.var.name} to {val}, a strided map of its loops (no loop "
                    "steps it by 1: its domain has gaps)")
        feeds.append({v for v in used_vars(val) if v in loops})
    for cond in conjuncts(br.predicate):
        why = _predicate_blocker(cond, loops, feeds)
        if why is not None:
            return f"has the predicate {br.predicate}, {why}"
    return None


def _strided(e, loops, outer) -> bool:
    """Every term over the loops (the nest's or the outer ones) has a constant
    coefficient other than +-1, and some term is over the nest's loops."""
    if isinstance(e, Cast):
        return _strided(e.value, loops, outer)
    terms = [(k, any(v in loops for v in used_vars(atom)))
             for atom, k in Affine.of(e).terms
             if any(v in loops or v in outer for v in used_vars(atom))]
    return any(inner for _, inner in terms) and all(abs(k) != 1 for k, _ in terms)


def _predicate_blocker(cond, loops, feeds):
    if not isinstance(cond, (LT, LE, GT, GE, EQ, NE)) or not (
            quasi_affine(cond.a, loops) and quasi_affine(cond.b, loops)):
        return "which is not a condition on quasi-affine expressions"
    used = {v for v in used_vars(cond) if v in loops}
    if used and not any(used <= f for f in feeds):
        names = ", ".join(sorted(v.name for v in used))
        return (f"whose condition {cond} couples loops ({names}) that feed different "
                "iter values: its iteration domain is not a box of its variables")
    return None


__all__ = ["reorder_blocker", "binding_blocker"]
