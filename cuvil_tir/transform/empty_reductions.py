"""``write_empty_reductions``: a reduction over an empty range still writes its identity.

A reduction block runs its init when its reduce iter vars sit at their minimum.  Over a
range that is empty at run time (a matmul called with ``K = 0``, a
``T.reduce_axis((0, 0))``) no instance runs, and the output would keep whatever it
held, where numpy gives the identity (zeros for a sum).  So, before the outermost loop
that drives such a reduction, this pass adds the init over the spatial loops below that
loop (the nest ``decompose_reduction`` would make), run only when the range is empty::

    if K <= 0:
        for i_empty, j_empty in T.grid(4, 3):
            with T.block("C_empty"): C[vi, vj] = 0

The interpreter runs it before interpreting, ``lower_blocks`` before lowering: every
target and the reference agree.  A reduction whose range is provably non-empty is left
as it is; one whose init cannot be hoisted (its loops reach an instance twice) too.

Example::

    >>> import cuvil_tir as T
    >>> K = T.size_var("K")
    >>> A = T.placeholder((2, K), name="A")
    >>> r = T.reduce_axis((0, K), name="r")
    >>> f = T.create_prim_func([A, T.compute((2,), lambda i: T.sum(A[i, r], axis=r),
    ...                                      name="S")])
    >>> print(write_empty_reductions(f).body.block.body.body[0])
    if K <= 0:
        with T.block("S_empty"):
            v_i = T.axis.spatial(2, i)
            T.reads()
            T.writes(S[v_i])
            S[v_i] = T.float32(0)
"""

from __future__ import annotations

from ..analysis import tree
from ..analysis.init_placement import init_blocker, init_nest
from ..arith import Analyzer
from ..expr import GE, LE, const
from ..function import PrimFunc
from ..op import all as all_of, any as any_of
from ..stmt import Block, BlockRealize, For, IfThenElse, Range, SeqStmt
from ..visitor import substitute, used_vars


def write_empty_reductions(func: PrimFunc) -> PrimFunc:
    """``func`` with the identity written by every reduction whose range may be empty
    (see the module docstring).

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> f = matmul(4, 4, 4)
        >>> write_empty_reductions(f) is f
        True
    """
    names = [br.block.name for br in tree.blocks_under(func.body)
             if br.block.init is not None]
    for name in names:
        func = _write_empty(func, name)
    return func


def _write_empty(func: PrimFunc, name: str) -> PrimFunc:
    path = tree.find_block(func, name)
    br = tree.get(func, path)
    ana = Analyzer()
    empty = [LE(iv.dom.extent, const(0, iv.dom.extent.dtype))
             for iv in br.block.iter_vars if iv.kind == "reduce"
             and not ana.can_prove(GE(iv.dom.extent, const(1, iv.dom.extent.dtype)))]
    if not empty:
        return func
    # the loops above the block up to the root, through the blocks in between (a
    # loop_partition part, a blockized tile): the loop driving the reduction may be
    # outside the block that holds it
    chain = [(p, s) for p, s in tree.ancestors(func, path)
             if isinstance(s, (For, BlockRealize))]
    reduce_ids = {id(v) for iv, val in zip(br.block.iter_vars, br.iter_values)
                  if iv.kind == "reduce" for v in used_vars(_seen_from(val, chain))}
    at = next((k for k, (_, s) in enumerate(chain)
               if isinstance(s, For) and id(s.loop_var) in reduce_ids), None)
    if at is None:
        return func
    flat = _flattened(br, chain[at:])
    loops = [s for _, s in chain[at:] if isinstance(s, For)]
    if init_blocker(flat, loops) is not None:
        return func
    nest = IfThenElse(ana.simplify(any_of(*empty)), init_nest(flat, loops, name + "_empty",
                                                              "_empty"))
    lpath = chain[at][0]
    old = tree.get(func, lpath)
    if lpath and isinstance(lpath[-1], tuple) and lpath[-1][0] == "seq":
        return tree.replace(func, lpath, [nest, old])    # spliced into the sequence
    return tree.replace(func, lpath, SeqStmt((nest, old)))


def _seen_from(e, chain):
    """``e`` with the iter vars of the blocks of ``chain`` replaced by their values,
    innermost first: in terms of the loops (a block var equals its binding)."""
    for _, s in reversed(chain):
        if isinstance(s, BlockRealize) and s.block.iter_vars:
            e = substitute(e, dict(zip((iv.var for iv in s.block.iter_vars),
                                       s.iter_values)))
    return e


def _flattened(br, chain):
    """``br`` as if the loops of ``chain`` held it directly: its bindings, domains and
    init seen from them, its ``T.where`` joined by those of the blocks in between (it
    runs only where they hold)."""
    blk = br.block
    preds = [br.predicate] + [s.predicate for _, s in chain if isinstance(s, BlockRealize)]
    ivs = tuple(type(iv)(iv.var, Range(_seen_from(iv.dom.min, chain),
                                       _seen_from(iv.dom.extent, chain)), iv.kind)
                for iv in blk.iter_vars)
    inner = Block(blk.name, ivs, blk.reads, blk.writes, blk.body,
                  _seen_from(blk.init, chain), blk.alloc_buffers, blk.annotations)
    return BlockRealize(tuple(_seen_from(v, chain) for v in br.iter_values),
                        _seen_from(all_of(preds), chain), inner)


__all__ = ["write_empty_reductions"]
