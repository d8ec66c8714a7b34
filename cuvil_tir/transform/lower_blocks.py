"""``lower_blocks`` (convert blocks to loops): remove every Block and BlockRealize.

* block iter vars are replaced by their iter values;
* a predicate that is not constant true becomes an ``IfThenElse`` around the block;
* a block ``init`` runs under ``IfThenElse(all reduce iter values == their domain
  min)``, before the body; the condition is simplified with the enclosing loop
  bounds, so when the reduction loops are gone the init is unconditional;
* ``alloc_buffers`` become ``Allocate(buffer, …)`` around the block's body (the root
  block's at the top of the function body);
* first, a reduction whose range may be empty at run time gets its identity written
  where the range is empty (:mod:`.empty_reductions`).

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((4, 4), name="A")
    >>> k = T.reduce_axis((0, 4), name="k")
    >>> S = T.compute((4,), lambda i: T.sum(A[i, k], axis=k), name="S")
    >>> print(lower_blocks(T.create_prim_func([A, S])).body)
    for i in T.serial(4):
        for k in T.serial(4):
            if k == 0:
                S[i] = T.float32(0)
            S[i] = S[i] + A[i, k]
"""

from __future__ import annotations

from ..arith import Analyzer
from ..expr import EQ, IntImm, cast
from ..function import PrimFunc
from ..op import all as all_of
from ..stmt import Allocate, Block, IfThenElse, Range, seq
from ..visitor import Mutator, substitute
from .empty_reductions import write_empty_reductions
from .storage_align import record_storage_align


def _is_true(e) -> bool:
    return isinstance(e, IntImm) and e.value != 0


class _LowerBlocks(Mutator):
    def __init__(self):
        self.ana = Analyzer(index_no_overflow=True)

    def visit_For(self, loop):
        saved = dict(self.ana.bounds)
        self.ana.bind(loop.loop_var, Range(loop.min, loop.extent))
        try:
            return self.generic_visit(loop)
        finally:
            self.ana.bounds = saved

    def visit_BlockRealize(self, br):
        return self.lower(br.block, br.iter_values, br.predicate)

    def visit_Block(self, block):
        # a block not under a BlockRealize (hand-built IR): no iter values to bind
        return self.lower(block, tuple(iv.var for iv in block.iter_vars), IntImm(1, "bool"))

    def lower(self, block: Block, values: tuple, predicate):
        vmap = {iv.var: v for iv, v in zip(block.iter_vars, values)}
        body = self.visit(substitute(block.body, vmap))
        if block.init is not None:
            init = self.visit(substitute(block.init, vmap))
            conds = [EQ(v, cast(iv.dom.min, v.dtype))
                     for iv, v in zip(block.iter_vars, values) if iv.kind == "reduce"]
            cond = self.ana.simplify(all_of(*conds)) if conds else IntImm(1, "bool")
            if _is_true(cond):
                body = seq(init, body)
            elif not (isinstance(cond, IntImm) and cond.value == 0):
                body = seq(IfThenElse(cond, init), body)
        pred = self.ana.simplify(predicate)
        if not _is_true(pred):
            body = IfThenElse(pred, body)
        for buf in reversed(block.alloc_buffers):
            body = Allocate(buf, body)
        return body


def lower_blocks(func: PrimFunc) -> PrimFunc:
    """``func`` without blocks (see the module docstring).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((8,), name="A")
        >>> B = T.compute((8,), lambda i: A[i] * 2.0, name="B")
        >>> type(lower_blocks(T.create_prim_func([A, B])).body).__name__
        'For'
    """
    func = record_storage_align(func)   # block alignments outlive the blocks
    func = write_empty_reductions(func)
    return func.with_body(_LowerBlocks().visit(func.body))


