"""``decompose_padding``: split a padding block into a constant fill and an in-bound copy.

A padding block stores ``T.if_then_else(cond, value, pad)`` (or ``T.Select``) where
``cond`` bounds some of its iteration variables by constants (``3 <= vi and vi < 228``)
and ``pad`` is a constant.  ``decompose_padding(block, loop)`` inserts, right before
``loop`` (an ancestor of the block), a copy of the loops from ``loop`` down to the
block around a new block ``<name>_pad_const`` that stores ``pad`` everywhere the block
writes; the block itself then stores ``value`` only where ``cond`` holds.  Its bounded
iteration variables start at 0 over the in-bound range (a loop bound only to one of them
shrinks; otherwise the bounds become a predicate).  ``can_decompose_padding`` answers
whether the primitive applies.

Before/after ``decompose_padding(block, i)``::

    for i in range(140):                          for i in range(140):
        y[vi] = T.if_then_else(6 <= vi and            y[vi] = 0               # block_pad_const
                vi < 134, x[vi - 6], 0)           for i in range(128):
                                                      y[vi + 6] = x[vi]       # block

Refused (``PaddingError``): a block that is not one complete store of that pattern, a
trivial condition (nothing to pad), a loop that is not the block's, a buffer with
another writer, or another block under the loop reading the buffer first (it would see
the fill value), or reading it at all when the buffer is a parameter.

Example::

    >>> import cuvil_tir as T
    >>> import schedules as S
    >>> X = T.placeholder((4,), name="X")
    >>> P = T.compute((6,), lambda i: T.if_then_else(T.all(i >= 1, i < 5), X[i - 1],
    ...                                              T.const(0.0)), name="P")
    >>> sch = S.Schedule(T.create_prim_func([X, P]))
    >>> sch.decompose_padding("P", sch.get_loops("P")[0])
    BlockRV('P_pad_const')
    >>> [loop.extent.value for loop in sch.func.body.block.body.seq]
    [6, 4]
"""

from __future__ import annotations

from cuvil_tir.expr import (GE, GT, LE, LT, And, BufferLoad, Expr, IntImm, Select,
                            Var, const)
from cuvil_tir.stmt import BlockRealize, BufferStore, For, IterVar, Range, seq
from cuvil_tir import ops
from cuvil_tir.errors import ScheduleError
from cuvil_tir.visitor import Mutator, post_order_visit, substitute, used_vars

from cuvil_tir.analysis import tree
from cuvil_tir.analysis.regions import is_param, precedes, readers, simplify, writers
from ..analysis import block_path, fresh_block_name, loop_path
from ..errors import fail
from ..primitive import BLOCK, LOOP, primitive
from ..handles import BlockRV
from cuvil_tir.op import conjuncts as _conjuncts
from .nests import subtrees, with_fields
from .inline import SimplifyIndices

PRIM = "decompose_padding"


class PaddingError(ScheduleError):
    """``decompose_padding`` cannot split the block into a fill and an in-bound copy.

    Example::

        >>> PaddingError("decompose_padding: block B is not a padding block").code
        'CVL-E103'
    """


def _pattern(blk):
    """``(store, cond, value, pad)`` of a padding block, or a reason string."""
    if blk.init is not None or any(iv.kind != "spatial" for iv in blk.iter_vars):
        return "it is not a complete block (it has an init or non-spatial iter vars)"
    st = blk.body
    if not isinstance(st, BufferStore):
        return "its body is not a single buffer store"
    v = st.value
    if ops.branches(v) is not None:
        cond, value, pad = ops.branches(v)
    elif isinstance(v, Select):
        cond, value, pad = v.condition, v.true_value, v.false_value
    else:
        return f"it stores {v}, not T.if_then_else(cond, value, pad) or T.Select"
    loads = []
    post_order_visit(pad, lambda n: loads.append(n) if isinstance(n, (BufferLoad, Var))
                     else None)
    if loads:
        return f"its pad value {pad} is not a constant"
    if any(r.buffer is st.buffer for r in blk.reads):
        return f"it reads the buffer {st.buffer.name!r} it pads"
    return st, cond, value, pad


def _bounds(blk, cond):
    """``{iter var: (lo, hi)}``: the constant bounds ``cond`` puts on the iter vars, or a
    reason string."""
    ivs = {id(iv.var): iv for iv in blk.iter_vars}
    box = {}
    for c in _conjuncts(cond):
        got = None
        if isinstance(c, (LT, LE, GT, GE)):
            a, b = simplify(c.a), simplify(c.b)
            if isinstance(a, Var) and id(a) in ivs and isinstance(b, IntImm):
                var, k = a, b.value
                got = {LT: (None, k), LE: (None, k + 1), GT: (k + 1, None),
                       GE: (k, None)}[type(c)]
            elif isinstance(b, Var) and id(b) in ivs and isinstance(a, IntImm):
                var, k = b, a.value
                got = {LT: (k + 1, None), LE: (k, None), GT: (None, k),
                       GE: (None, k + 1)}[type(c)]
        if got is None:
            return f"the condition {c} is not a constant bound on one iteration variable"
        iv = ivs[id(var)]
        lo0, hi0 = box.get(id(var), (iv.dom.min.value, iv.dom.min.value + iv.dom.extent.value))
        lo = max(lo0, got[0]) if got[0] is not None else lo0
        hi = min(hi0, got[1]) if got[1] is not None else hi0
        box[id(var)] = (lo, hi)
    out = {}
    for iv in blk.iter_vars:
        if id(iv.var) not in box:
            continue
        lo, hi = box[id(iv.var)]
        if (lo, hi) != (iv.dom.min.value, iv.dom.min.value + iv.dom.extent.value):
            if hi <= lo:
                return f"the condition leaves no in-bound value of {iv.var.name}"
            out[iv.var] = (lo, hi)
    if not out:
        return f"the condition {cond} holds on the whole iteration domain: nothing pads"
    return out


def _analyse(func, block, loop):
    """Everything the primitive needs, or ``(None, reason)``."""
    bpath = block_path(func, block, PRIM)
    br = tree.get(func, bpath)
    blk = br.block
    if any(not (isinstance(iv.dom.min, IntImm) and isinstance(iv.dom.extent, IntImm))
           for iv in blk.iter_vars):
        return None, f"block {blk.name!r} has a symbolic iteration domain"
    got = _pattern(blk)
    if isinstance(got, str):
        return None, f"block {blk.name!r} is not a padding block: {got}"
    st, cond, value, pad = got
    box = _bounds(blk, cond)
    if isinstance(box, str):
        return None, f"block {blk.name!r}: {box}"
    lpath = loop_path(func, loop, PRIM)
    chain = [(p, f) for p, f in tree.loops_above(func, bpath) if len(p) >= len(lpath)]
    if not chain or chain[0][0] != lpath:
        return None, (f"loop {tree.get(func, lpath).loop_var.name} is not a loop of block "
                      f"{blk.name!r} (in its scope); pass one of sch.get_loops(block)")
    buf = st.buffer
    scope = tree.enclosing_block(func, bpath)
    ws = writers(func, scope, buf)
    if len(ws) != 1:
        return None, (f"buffer {buf.name!r} is written by {[b.block.name for _, b in ws]}; "
                      "the fill would overwrite the other writers' values")
    for rp, rb in readers(func, scope, buf):
        if rp[:len(lpath)] != lpath:
            continue
        if is_param(func, buf) or precedes(rp, bpath):
            return None, (f"block {rb.block.name!r} reads {buf.name!r} under loop "
                          f"{tree.get(func, lpath).loop_var.name}"
                          + (" before the padding block" if not is_param(func, buf) else
                             " and the buffer is a parameter") +
                          "; it would see the fill value. Decompose at a loop below it")
    return (bpath, br, st, value, pad, box, lpath, chain), None


def _fresh_chain(chain, leaf_realize):
    """A copy of the loops ``chain`` (fresh loop variables) around ``leaf_realize``."""
    vm = {f.loop_var: Var(f.loop_var.name, f.loop_var.dtype) for _, f in chain}
    node = substitute(leaf_realize, vm)
    for _, f in reversed(chain):
        node = For(vm[f.loop_var], f.min, f.extent, f.kind, node, f.thread_tag,
                   f.annotations)
    return node


def _exclusive_loop(chain, value, br):
    """The loop of ``chain`` that ``value`` (a binding) is, when nothing but the block
    runs under it, it starts at 0 with a constant extent, and neither another binding
    nor the predicate uses it (shrinking it shifts what it means)."""
    if not isinstance(value, Var):
        return None
    uses = sum(1 for v in br.iter_values for u in used_vars(v) if u is value)
    if uses != 1 or any(u is value for u in used_vars(br.predicate)):
        return None
    for p, f in chain:
        if f.loop_var is value and isinstance(f.min, IntImm) and f.min.value == 0 and \
                isinstance(f.extent, IntImm):
            return p if len(tree.blocks_under(f.body)) == 1 else None
    return None


def _bind_units(stmt, unit):
    class _M(Mutator):
        def visit_BlockRealize(self, br):
            new = self.generic_visit(br)
            return with_fields(new, iter_values=tuple(simplify(substitute(v, unit))
                                                      for v in new.iter_values),
                               predicate=simplify(substitute(new.predicate, unit)))
    return _M().visit(stmt)


class _Rebuild(Mutator):
    """Insert ``pad_nest`` before the loop at ``lpath``; shrink the loops in
    ``shrink``; replace the block realize at ``bpath``."""

    def __init__(self, loop, pad_nest, shrink, realize, new_realize):
        self.loop, self.pad_nest, self.shrink = loop, pad_nest, shrink
        self.realize, self.new_realize = realize, new_realize

    def visit(self, n):
        if isinstance(n, Expr):
            return n
        if n is self.realize:
            return self.new_realize
        new = super().visit(n)
        if isinstance(n, For) and id(n) in self.shrink:
            new = with_fields(new, extent=const(self.shrink[id(n)], n.extent.dtype))
        if hasattr(n, "body") and not isinstance(n, BlockRealize):
            items = subtrees(n.body)
            if any(s is self.loop for s in items):
                new_items = subtrees(new.body)
                k = next(k for k, s in enumerate(items) if s is self.loop)
                new = with_fields(new, body=seq(*new_items[:k], self.pad_nest,
                                                *new_items[k:]))
        return new


def _decompose(func, info):
    bpath, br, st, value, pad, box, lpath, chain = info
    blk = br.block
    name = fresh_block_name(func, f"{blk.name}_pad_const")
    pad_blk = with_fields(blk, name=name, reads=(), body=BufferStore(st.buffer, pad,
                                                                     st.indices))
    pad_nest = _fresh_chain(chain, with_fields(br, block=pad_blk))
    # the in-bound block: each bounded iter var v in [lo, hi) becomes v' in [0, hi - lo)
    vm, ivs, values, conds, shrink = {}, [], [], [], {}
    for iv, val in zip(blk.iter_vars, br.iter_values):
        if iv.var not in box:
            ivs.append(iv)
            values.append(val)
            continue
        lo, hi = box[iv.var]
        dt = iv.var.dtype
        new = Var(iv.var.name, dt)
        vm[iv.var] = simplify(new + const(lo, dt)) if lo else new
        ivs.append(IterVar(new, Range(const(0, dt), const(hi - lo, dt)), iv.kind))
        lp = _exclusive_loop(chain, val, br)
        if lp is not None and tree.get(func, lp).extent.value == iv.dom.extent.value and \
                iv.dom.min.value == 0:
            shrink[id(tree.get(func, lp))] = hi - lo
            values.append(val)
            continue
        values.append(simplify(val - const(lo, dt)) if lo else val)
        if lo > iv.dom.min.value:
            conds.append(LE(const(lo, dt), val))
        if hi < iv.dom.min.value + iv.dom.extent.value:
            conds.append(LT(val, const(hi, dt)))
    body = BufferStore(st.buffer, SimplifyIndices().visit(substitute(value, vm)),
                       tuple(simplify(substitute(i, vm)) for i in st.indices))
    regions = [tuple(type(r)(r.buffer, tuple(Range(simplify(substitute(d.min, vm)),
                                                   d.extent) for d in r.region))
                     for r in rs) for rs in (blk.reads, blk.writes)]
    in_blk = with_fields(blk, iter_vars=tuple(ivs), reads=regions[0], writes=regions[1],
                         body=body)
    pred = None
    for c in conds + (_conjuncts(br.predicate) if not (isinstance(br.predicate, IntImm)
                                                       and br.predicate.value) else []):
        pred = c if pred is None else And(pred, c)
    in_br = BlockRealize(tuple(values), pred if pred is not None else br.predicate, in_blk)
    # a unit loop above ``loop`` is a constant for both blocks (TensorIR's bindings)
    unit = {f.loop_var: f.min for _, f in tree.loops_above(func, lpath)
            if isinstance(f.extent, IntImm) and f.extent.value == 1}
    if unit:
        in_br = _bind_units(in_br, unit)
        pad_nest = _bind_units(pad_nest, unit)
    loop = tree.get(func, lpath)
    body = _Rebuild(loop, pad_nest, shrink, br, in_br).visit(func.body)
    return func.with_body(body), BlockRV(name)


@primitive(PRIM, block=BLOCK, loop=LOOP, returns=BLOCK, error=PaddingError)
def decompose_padding(func, block, loop):
    """Split the padding ``block`` (a store of ``T.if_then_else(cond, value, pad)`` with
    ``cond`` constant bounds on its iteration variables, ``pad`` a constant) into a block
    filling ``pad`` over everything it writes, inserted before ``loop`` under a copy of
    the loops from ``loop`` down, and the block itself storing ``value`` where ``cond``
    holds.  Returns the fill block (``<block>_pad_const``).

    Before/after ``decompose_padding(P, i)``::

        for i in range(6):                        for i in range(6): P[vi] = 0.0
            P[vi] = if_then_else(1 <= vi and      for i in range(4): P[vi + 1] = X[vi]
                    vi < 5, X[vi - 1], 0.0)

    Example::

        >>> import cuvil_tir as T
        >>> from schedules.handles import LoopRV
        >>> X = T.placeholder((4,), name="X")
        >>> P = T.compute((6,), lambda i: T.if_then_else(T.all(i >= 1, i < 5), X[i - 1],
        ...                                              T.const(0.0)), name="P")
        >>> f = T.create_prim_func([X, P])
        >>> g, rv = decompose_padding(f, BlockRV("P"), LoopRV(f.body.block.body.loop_var))
        >>> rv, [s.extent.value for s in g.body.block.body.seq]
        (BlockRV('P_pad_const'), [6, 4])
    """
    info, why = _analyse(func, block, loop)
    if info is None:
        raise fail(PaddingError, PRIM, why, func)
    return _decompose(func, info)


@primitive("can_decompose_padding", block=BLOCK, loop=LOOP, pure=True)
def can_decompose_padding(func, block, loop):
    """Whether :func:`decompose_padding` applies to ``block`` at ``loop`` (a padding block
    with a non-trivial condition, ``loop`` one of its loops, nothing reading the fill).

    Example::

        >>> import cuvil_tir as T
        >>> from schedules.handles import LoopRV
        >>> X = T.placeholder((4,), name="X")
        >>> f = T.create_prim_func([X, T.compute((4,), lambda i: X[i] + 1.0, name="Y")])
        >>> can_decompose_padding(f, BlockRV("Y"), LoopRV(f.body.block.body.loop_var))[1]
        False
    """
    info, _ = _analyse(func, block, loop)
    return func, info is not None


__all__ = ["decompose_padding", "can_decompose_padding", "PaddingError"]
