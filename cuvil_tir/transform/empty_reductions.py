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
from ..op import any as any_of
from ..stmt import IfThenElse, SeqStmt
from ..visitor import used_vars


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
    reduce_ids = {id(v) for iv, val in zip(br.block.iter_vars, br.iter_values)
                  if iv.kind == "reduce" for v in used_vars(val)}
    above = tree.loops_above(func, path)
    at = next((k for k, (_, l) in enumerate(above) if id(l.loop_var) in reduce_ids), None)
    if at is None:
        return func
    loops = [l for _, l in above[at:]]
    if init_blocker(br, loops) is not None:
        return func
    nest = IfThenElse(ana.simplify(any_of(*empty)), init_nest(br, loops, name + "_empty",
                                                              "_empty"))
    lpath = above[at][0]
    old = tree.get(func, lpath)
    if lpath and isinstance(lpath[-1], tuple) and lpath[-1][0] == "seq":
        return tree.replace(func, lpath, [nest, old])    # spliced into the sequence
    return tree.replace(func, lpath, SeqStmt((nest, old)))


__all__ = ["write_empty_reductions"]
