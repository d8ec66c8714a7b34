"""A function's loop and block variables, and its index arithmetic, in another integer
dtype: what ``tensorize`` does to an intrinsic written with int32 indices before it
matches a loop nest of int64 shapes (TensorIR rewrites the intrinsic the same way).

Index positions are loop bounds, block iteration domains and bindings, predicates,
buffer indices and access regions; their int32/int64 constants take the new dtype and
their variables are the retyped ones.  Data values keep their dtype (an int32
accumulator stays int32).

Example::

    >>> from cuvil_tir.te.examples import matmul
    >>> f = with_index_dtype(matmul(4, 4, 4), "int64")
    >>> from cuvil_tir.analysis import tree
    >>> loops = [l for _, l in tree.loops_above(f, tree.find_block(f, "C"))]
    >>> [l.loop_var.dtype for l in loops], str(loops[0].extent)
    (['int64', 'int64', 'int64'], 'T.int64(4)')
"""

from __future__ import annotations

import dataclasses

from cuvil_tir.expr import Var
from cuvil_tir.function import PrimFunc
from cuvil_tir.stmt import BlockRealize, For, IterVar, Range
from cuvil_tir.visitor import Mutator
from cuvil_tir.analysis import tree

from .primitives.index_maps import retype_index

_INDEX = ("int32", "int64")


def index_dtype(func_or_stmt) -> str | None:
    """The dtype of the first loop or block variable of a function or statement (None
    without any).

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> index_dtype(matmul(4, 4, 4))
        'int32'
    """
    for _, s in tree.walk(func_or_stmt):
        if isinstance(s, For):
            return s.loop_var.dtype
        if isinstance(s, BlockRealize) and s.block.iter_vars:
            return s.block.iter_vars[0].var.dtype
    return None


class _Retype(Mutator):
    def __init__(self, dtype: str):
        self.dtype = dtype
        self.vmap: dict = {}        # id(old var) -> new var

    def index(self, e):
        return retype_index(e, self.dtype, self.vmap)

    def fresh(self, v: Var) -> Var:
        if v.dtype in _INDEX and id(v) not in self.vmap:
            self.vmap[id(v)] = Var(v.name, self.dtype)
        return self.vmap.get(id(v), v)

    def visit_Var(self, v):
        return self.vmap.get(id(v), v)

    def visit_For(self, s):
        var = self.fresh(s.loop_var)
        return dataclasses.replace(s, loop_var=var, min=self.index(s.min),
                           extent=self.index(s.extent), body=self.visit(s.body))

    def visit_Range(self, r):
        return Range(self.index(r.min), self.index(r.extent))

    def visit_IterVar(self, iv):
        return IterVar(self.fresh(iv.var), self.visit(iv.dom), iv.kind)

    def visit_BlockRealize(self, s):
        block = self.visit(s.block)      # binds the iter vars first
        return BlockRealize(tuple(self.index(v) for v in s.iter_values),
                            self.index(s.predicate), block)

    def visit_BufferLoad(self, e):
        return dataclasses.replace(e, indices=tuple(self.index(i) for i in e.indices))

    def visit_BufferStore(self, s):
        return dataclasses.replace(s, value=self.visit(s.value),
                           indices=tuple(self.index(i) for i in s.indices))


def with_index_dtype(func: PrimFunc, dtype: str) -> PrimFunc:
    """``func`` with its loop and block variables and index arithmetic in ``dtype``
    (``"int32"`` or ``"int64"``); see the module docstring.

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> index_dtype(with_index_dtype(matmul(2, 2, 2), "int64"))
        'int64'
    """
    return func.with_body(_Retype(dtype).visit(func.body))


__all__ = ["index_dtype", "with_index_dtype"]
