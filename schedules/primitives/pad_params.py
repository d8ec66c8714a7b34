"""``pad_einsum`` of a block that reads or writes function parameters.

A parameter's size is the caller's, so it cannot grow in place as a stage does; as in
TensorIR, the padded block works on a padded copy ``X_pad`` instead:

* an input ``X`` is copied into ``X_pad`` before the block's loop nest, zero outside
  ``X`` (``X_pad[v] = T.if_then_else(v1 < n, X[v], 0)``), so the padded products
  vanish;
* an output ``X`` is computed into ``X_pad`` and its valid part copied back after the
  nest (``X[v] = X_pad[v]`` over ``X``'s shape).

An output the block updates without an init (``C = C + ...`` after
``decompose_reduction``) is refused: its padded copy would start uninitialised.

Example::

    >>> import schedules as S
    >>> from cuvil_tir.te.examples import matmul
    >>> sch = S.Schedule(matmul(20, 20, 20))
    >>> sch.pad_einsum(sch.get_block("C"), [16, 16, 16])
    >>> [b.name for b in sch.func.body.block.alloc_buffers]
    ['A_pad', 'B_pad', 'C_pad']
"""

from __future__ import annotations

from cuvil_tir.buffer import Buffer
from cuvil_tir.expr import BufferLoad, IntImm, Var, const
from cuvil_tir.op import if_then_else
from cuvil_tir.stmt import (Block, BlockRealize, BufferRegion, BufferStore, IterVar, Range,
                            SeqStmt)
from cuvil_tir.visitor import Mutator, post_order_visit

from cuvil_tir.analysis import tree
from ..analysis import fresh_name
from .nests import make_nest, with_fields


def _point(buf, vs) -> BufferRegion:
    return BufferRegion(buf, tuple(Range(v, const(1, v.dtype)) for v in vs))


def _copy_nest(name, dst, src, shape, grown):
    """The nest ``dst[v] = src[v]`` over ``shape``; where ``grown`` (``(dim, valid
    extent)`` pairs), ``src`` is read only below the valid extent, zero above."""
    vs = [Var(f"v{d}", s.dtype) for d, s in enumerate(shape)]
    ivs = tuple(IterVar(v, Range(const(0, s.dtype), s), "spatial") for v, s in zip(vs, shape))
    value = src.load(list(vs))
    if grown:
        cond = None
        for d, valid in grown:
            c = vs[d] < valid
            cond = c if cond is None else cond & c
        value = if_then_else(cond, value, const(0, src.dtype))
    blk = Block(name, ivs, (_point(src, vs),), (_point(dst, vs),),
                BufferStore(dst, value, tuple(vs)))
    return make_nest(blk, [None] * len(vs), {}, preserve_unit_loops=True)


class _Swap(Mutator):
    """Every access of ``mapping``'s buffers inside block ``name`` goes to the copy."""

    def __init__(self, name, mapping):
        self.name, self.mapping, self.inside = name, mapping, False

    def visit_buffer(self, buf):
        return self.mapping.get(buf, buf) if self.inside else buf

    def visit_Block(self, b):
        if b.name != self.name:
            return self.generic_visit(b)
        self.inside = True
        try:
            return self.generic_visit(b)
        finally:
            self.inside = False


def _reads_output(blk, buf) -> bool:
    found = []
    post_order_visit(blk.body, lambda n: found.append(n)
                     if isinstance(n, BufferLoad) and n.buffer is buf else None)
    return bool(found)


def pad_params(func, name: str, params: dict, fail):
    """``func`` with block ``name`` computing on padded copies of the parameters in
    ``params`` (``{buffer: padded shape}``); ``fail(reason, node)`` builds the error."""
    path = tree.find_block(func, name)
    blk = tree.get(func, path).block
    outputs = {id(w.buffer) for w in blk.writes}
    for buf in params:
        if id(buf) in outputs and blk.init is None and _reads_output(blk, buf):
            raise fail(f"block {name!r} updates the parameter {buf.name!r} without an "
                       "init: its padded copy would start uninitialised. Pad before "
                       "decompose_reduction", blk)
    taken = {b.block.name for b in tree.blocks_under(func.body)} | \
        {b.name for b in func.buffers}
    for b in tree.blocks_under(func.body):
        taken |= {x.name for x in b.block.alloc_buffers}
    copies, ins, outs = {}, [], []
    for buf, shape in params.items():
        pad_name = fresh_name(f"{buf.name}_pad", taken)
        taken.add(pad_name)
        dims = tuple(s if isinstance(s, IntImm) or not isinstance(s, int) else
                     const(s, old.dtype) for s, old in zip(shape, buf.shape))
        pad = Buffer(dims, buf.dtype, pad_name, (), buf.scope, buf.align)
        copies[buf] = pad
        if id(buf) in outputs:
            outs.append(_copy_nest(pad_name, buf, pad, buf.shape, ()))
        else:
            grown = [(d, old) for d, (new, old) in enumerate(zip(dims, buf.shape))
                     if str(new) != str(old)]
            ins.append(_copy_nest(pad_name, pad, buf, dims, grown))
    g = func.with_body(_Swap(name, copies).visit(func.body))
    above = tree.loops_above(g, path)
    at = above[0][0] if above else path
    scope_path = tree.enclosing_block(g, path)     # above `at`: unmoved by the insertion
    group = ins + [tree.get(g, at)] + outs
    if at and isinstance(at[-1], tuple) and at[-1][0] == "seq":
        g = tree.replace(g, at, group)            # spliced into the parent sequence
    else:
        g = tree.replace(g, at, SeqStmt(tuple(group)))
    scope = tree.get(g, scope_path)
    new_scope = with_fields(scope.block, alloc_buffers=scope.block.alloc_buffers +
                            tuple(copies[b] for b in params if id(b) not in outputs) +
                            tuple(copies[b] for b in params if id(b) in outputs))
    return tree.replace(g, scope_path, BlockRealize(scope.iter_values, scope.predicate,
                                                    new_scope))


__all__ = ["pad_params"]
