"""``rolling_buffer``: keep only a sliding window of an intermediate buffer.

A producer computed under a tile loop of its consumer (``compute_at``) writes, at each
iteration ``v`` of that loop, a window ``[v * stride, v * stride + extent)`` of its
buffer along some axis.  When consecutive windows overlap (a 3x3 pooling over a tile of
4 rows needs 6 rows, 2 of them shared with the previous tile), the buffer can shrink to
one window along that axis, indexed modulo the window's extent, and each iteration
computes only the rows the previous one did not: the block gets the predicate
``v < 1 or overlap <= offset-in-window``.

Before ``rolling_buffer(B, 0)`` (``B`` computed at ``i_0`` of ``C``)::

    B = T.alloc_buffer((10,))
    for i_0 in range(2):
        for ax0 in range(6):   B[i_0 * 4 + ax0] = ...
        for i_1 in range(4):   C[...] = B[i_0 * 4 + i_1] + B[i_0 * 4 + i_1 + 2]

after::

    B = T.alloc_buffer((6,))
    for i_0 in range(2):
        for ax0 in range(6):
            T.where(i_0 < 1 or 2 <= ax0)        # rows 0, 1 of the tile: kept from i_0 - 1
            B[(i_0 * 4 + ax0) % 6] = ...
        for i_1 in range(4):   C[...] = B[(i_0 * 4 + i_1) % 6] + B[(i_0 * 4 + i_1 + 2) % 6]

The rolled axis is the one whose window moves with the outermost loop (the other
overlapping axes keep their size and only skip what an earlier iteration computed).
Block variables whose binding uses that loop become ``opaque``: the block no longer
writes a distinct element per value.

Refused (``StorageError``): a parameter buffer, more than one writer, a writer that
reads the buffer without an init, consumers outside the shared loop or before the
producer, a consumer reading outside the window the producer writes at the same
iteration, predicates that skip more than out-of-bounds elements, windows that are not
``v``, ``v * c`` or ``v * c // d`` plus a constant extent, or no overlapping axis.

Example::

    >>> import cuvil_tir as T
    >>> import schedules as S
    >>> A = T.placeholder((12,), "int32", name="A")
    >>> r = T.reduce_axis((0, 3), name="r")
    >>> B = T.compute((10,), lambda i: T.sum(A[i + r], axis=r), name="B")
    >>> s = T.reduce_axis((0, 3), name="s")
    >>> C = T.compute((8,), lambda i: T.sum(B[i + s], axis=s), name="C")
    >>> sch = S.Schedule(T.create_prim_func([A, C]))
    >>> io, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], [2, 4])
    >>> sch.compute_at(sch.get_block("B"), io)
    >>> sch.rolling_buffer(sch.get_block("B"), 0)
    >>> [int(d) for d in sch.func.body.block.alloc_buffers[0].shape]
    [6]
"""

from __future__ import annotations

import itertools

from cuvil_tir.buffer import Buffer
from cuvil_tir.expr import (LE, LT, And, BufferLoad, FloorDiv, FloorMod, IntImm, Mul, Or,
                            Var, const)
from cuvil_tir.stmt import BufferRegion, BufferStore, IterVar, Range
from cuvil_tir.visitor import Mutator, substitute, used_vars

from cuvil_tir.analysis import tree
from cuvil_tir.analysis.regions import (bound_region, is_param, iter_map, loop_doms,
                                        provably_le, readers, region_of, relax, simplify,
                                        tree_same, writers)
from ..analysis import block_path
from ..errors import StorageError, fail
from ..primitive import BLOCK, INDEX, primitive
from cuvil_tir.op import conjuncts as _conjuncts
from .nests import subtrees, with_fields

PRIM = "rolling_buffer"
_ENUMERATE_LIMIT = 1 << 14    # outer iterations a containment check may enumerate


def _window(dim):
    """``(var, stride)`` of a window start ``v``, ``v * c`` or ``v * c // d``; ``(None,
    0)`` for a constant start; None for anything else."""
    m = dim.min
    if isinstance(m, IntImm):
        return None, 0
    if isinstance(m, Var):
        return m, 1
    div = 1
    if isinstance(m, FloorDiv) and isinstance(m.b, IntImm) and m.b.value > 0:
        m, div = m.a, m.b.value
    if isinstance(m, Mul):
        v, c = (m.a, m.b) if isinstance(m.a, Var) else (m.b, m.a)
        if isinstance(v, Var) and isinstance(c, IntImm) and c.value > 0:
            return v, -(-c.value // div)       # the largest step between two windows
    return None


def holds_everywhere(cond_nonneg, loops):
    """Whether ``cond_nonneg >= 0`` for every value of the loops (``(path, For)``
    pairs) it uses: a proof by simplification, else by enumerating those loops'
    constant domains (up to 16384 points); False when neither applies.

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.stmt import For, Evaluate
        >>> i = T.var("i")
        >>> loop = For(i, T.const(0), T.const(5), "serial", Evaluate(T.const(0)))
        >>> holds_everywhere(i * 5 // 2 + 4 - (i * 5 + 4) // 2, [((), loop)])
        True
    """
    e = simplify(cond_nonneg)
    if isinstance(e, IntImm):
        return e.value >= 0
    doms = {id(f.loop_var): f for _, f in loops}
    used = list({id(v): v for v in used_vars(e)}.values())
    if not used or any(id(v) not in doms for v in used):
        return False
    ranges = []
    for v in used:
        f = doms[id(v)]
        if not isinstance(f.min, IntImm) or not isinstance(f.extent, IntImm):
            return False
        ranges.append(range(f.min.value, f.min.value + f.extent.value))
    total = 1
    for r in ranges:
        total *= len(r)
    if total > _ENUMERATE_LIMIT:
        return False
    for point in itertools.product(*ranges):
        vm = {v: const(x, v.dtype) for v, x in zip(used, point)}
        got = simplify(substitute(e, vm))
        if not isinstance(got, IntImm) or got.value < 0:
            return False
    return True


def _bad(reason, func):
    return fail(StorageError, PRIM, reason, func)


def _target(func, block, index):
    bpath = block_path(func, block, PRIM)
    br = tree.get(func, bpath)
    blk = br.block
    if not 0 <= index < len(blk.writes):
        raise _bad(f"write_buffer_index {index} is out of range: block {blk.name!r} writes "
                   f"{len(blk.writes)} buffer(s) {[w.buffer.name for w in blk.writes]}",
                   func)
    buf = blk.writes[index].buffer
    if is_param(func, buf):
        raise _bad(f"buffer {buf.name!r} is a function parameter: the caller sees all of "
                   "it, so it cannot shrink to a window; roll an intermediate buffer "
                   "(cache_write the block first)", func)
    if buf.strides:
        raise _bad(f"buffer {buf.name!r} has explicit strides; a rolling window needs a "
                   "dense buffer", func)
    return bpath, br, buf


def _shared_loop(func, bpath, rpaths, name):
    """The innermost loop enclosing the writer and every reader."""
    common = None
    for p, _ in tree.loops_above(func, bpath):
        if all(r[:len(p)] == p for r in rpaths):
            common = p
    if common is None:
        raise _bad(f"block {name!r} shares no loop with the blocks reading its buffer: "
                   "nothing rolls. Tile the consumer and compute_at the block under a "
                   "tile loop first", func)
    return common


def _check_order(func, lpath, bpath, rpaths, name):
    items = subtrees(tree.get(func, lpath).body)
    step = len(lpath) + 1

    def pos(p):
        k = p[step] if len(p) > step and isinstance(p[step], tuple) else None
        return k[1] if k is not None and len(items) > 1 else 0
    wpos = pos(bpath)
    if any(pos(r) <= wpos for r in rpaths):
        raise _bad(f"a block reading the buffer of {name!r} runs before it (or in the same "
                   "subtree) at each iteration of the shared loop; the window would be "
                   "read before it is written", func)


def _check_predicate(br, buf, wreg):
    """Only guards ``index < n`` with ``n >= shape`` (compute_at's bounds guards) may
    skip instances: anything else leaves elements of the window to earlier iterations,
    which the rolled buffer may have overwritten."""
    if isinstance(br.predicate, IntImm) and br.predicate.value:
        return True
    bound = [simplify(d.min) for d in bound_region(br, wreg).region]
    for c in _conjuncts(br.predicate):
        if not (isinstance(c, LT) and any(
                tree_same(simplify(c.a), b) and provably_le(s, simplify(c.b))
                for b, s in zip(bound, buf.shape))):
            return False
    return True


def _info(func, bpath, br, buf):
    blk = br.block
    wreg = region_of(blk.writes, buf)
    if any(not (isinstance(d.extent, IntImm) and d.extent.value == 1) for d in wreg.region):
        raise _bad(f"block {blk.name!r} writes a region of {buf.name!r} per instance "
                   f"({wreg}); rolling needs one element per block instance", func)
    if region_of(blk.reads, buf) is not None and blk.init is None:
        raise _bad(f"block {blk.name!r} reads {buf.name!r} without an init: skipping "
                   "instances would change what it accumulates", func)
    scope_path = tree.enclosing_block(func, bpath)
    ws = writers(func, scope_path, buf)
    if len(ws) != 1:
        raise _bad(f"buffer {buf.name!r} is written by "
                   f"{[b.block.name for _, b in ws]}; only a buffer with a single writer "
                   "can roll", func)
    rs = [(p, b) for p, b in readers(func, scope_path, buf) if p != bpath]
    if not rs:
        raise _bad(f"buffer {buf.name!r} of block {blk.name!r} has no reader; there is no "
                   "window to keep", func)
    rpaths = [p for p, _ in rs]
    lpath = _shared_loop(func, bpath, rpaths, blk.name)
    _check_order(func, lpath, bpath, rpaths, blk.name)
    if not _check_predicate(br, buf, wreg):
        raise _bad(f"block {blk.name!r} has the predicate {br.predicate}, which skips more "
                   "than out-of-bounds elements; its windows would rely on elements an "
                   "earlier iteration computed and the rolled buffer overwrote", func)
    outer = tree.loops_above(func, lpath) + [(lpath, tree.get(func, lpath))]
    why = _iteration_dependent(func, scope_path, bpath, br, outer, set())
    if why:
        raise _bad(f"{why}: an element kept from an earlier iteration would differ from "
                   "the one the original recomputes", func)
    n = len(lpath)
    inner = {p: f for p, f in tree.loops_above(func, bpath) if len(p) > n}
    window = relax(bound_region(br, wreg), loop_doms(inner.items()))
    return blk, wreg, rs, outer, window


def _iteration_dependent(func, scope_path, bpath, br, outer, seen):
    """Why the values block ``br`` stores may differ between iterations of the loops
    ``outer`` for one element (None when each element's value is fixed): its write
    indices must be its distinct data-parallel variables, its reductions must run
    inside one iteration, and the buffers it reads under the shared loop must come
    from blocks of the same kind."""
    blk = br.block
    if blk.name in seen:
        return None
    seen.add(blk.name)
    outer_ids = {id(f.loop_var) for _, f in outer}
    own = {id(iv.var) for iv in blk.iter_vars}
    spatial = {id(iv.var) for iv in blk.iter_vars if iv.kind != "reduce"}
    for w in blk.writes:
        # a rolled buffer (``v % n``) still names one logical element per v
        idx = [d.min.a if isinstance(d.min, FloorMod) and isinstance(d.min.b, IntImm)
               else d.min for d in w.region]
        ids = [id(e) for e in idx if isinstance(e, Var) and id(e) in spatial]
        if len(ids) != len(idx) or len(set(ids)) != len(ids) or set(ids) != spatial:
            return (f"block {blk.name!r} writes {w}, not one distinct data-parallel "
                    "variable per index")
    for iv, val in zip(blk.iter_vars, br.iter_values):
        if iv.kind == "reduce" and any(id(u) in outer_ids for u in used_vars(val)):
            return (f"block {blk.name!r} reduces over {iv.var.name}, bound to a loop the "
                    "buffer rolls with")
    stray = [v.name for s in (blk.body, blk.init) if s is not None
             for v in used_vars(s) if id(v) in outer_ids and id(v) not in own]
    if stray:
        return f"block {blk.name!r} uses the loop(s) {sorted(set(stray))} directly"
    lpath = outer[-1][0]
    for r in blk.reads:
        for wp, wb in writers(func, scope_path, r.buffer):
            if wp != bpath and wp[:len(lpath)] == lpath:
                why = _iteration_dependent(func, scope_path, wp, wb, outer, seen)
                if why:
                    return why
    return None


def _axes(func, blk, buf, window, outer):
    """Per axis ``(loop var or None, overlap)``, and the rolled axis."""
    loop_ids = {id(f.loop_var): f for _, f in outer}
    axes = []
    for d in window.region:
        got = _window(d)
        if got is None or not isinstance(d.extent, IntImm):
            raise _bad(f"the window of {buf.name!r} that block {blk.name!r} writes per "
                       f"iteration starts at {d.min} with extent {d.extent}; rolling needs "
                       "a start v, v * c or v * c // d of a loop v and a constant extent",
                       func)
        var, stride = got
        overlap = d.extent.value - stride if var is not None else 0
        if var is None or overlap <= 0:
            axes.append((None, 0))
            continue
        f = loop_ids.get(id(var))
        if f is None or not (isinstance(f.min, IntImm) and f.min.value == 0):
            raise _bad(f"the window of {buf.name!r} moves with {var.name}, which is not a "
                       "loop from 0 above the shared loop", func)
        axes.append((var, overlap))
    used = [v for v, _ in axes if v is not None]
    if len({id(v) for v in used}) != len(used):
        raise _bad(f"one loop moves two axes of the window of {buf.name!r}; only one axis "
                   "per loop can roll", func)
    for _, f in outer:
        k = next((k for k, (v, _) in enumerate(axes) if v is f.loop_var), None)
        if k is not None:
            return axes, k
    raise _bad(f"the windows of {buf.name!r} that block {blk.name!r} writes at consecutive "
               f"iterations do not overlap (window {window}); there is nothing to keep "
               "between iterations, so nothing rolls", func)


def _check_readers(func, rs, buf, window, outer, lpath):
    n = len(lpath)
    for rp, rb in rs:
        reg = region_of(rb.block.reads, buf)
        inner = [(p, f) for p, f in tree.loops_above(func, rp) if len(p) > n]
        need = relax(bound_region(rb, reg), loop_doms(inner))
        for w, r in zip(window.region, need.region):
            if not (holds_everywhere(r.min - w.min, outer) and holds_everywhere(
                    (w.min + w.extent) - (r.min + r.extent), outer)):
                raise _bad(f"block {rb.block.name!r} reads {need} of {buf.name!r} per "
                           f"iteration, not within the window {window} its producer "
                           "writes there (or Cuvil cannot prove it is)", func)


class _Roll(Mutator):
    """Accesses of ``old`` become ``new`` with the rolled axis taken modulo its extent;
    the blocks in ``blocks`` get opaque iter vars where the binding uses ``var``, and
    the writer its predicate."""

    def __init__(self, old, new, axis, extent, var, blocks, writer, pred):
        self.old, self.new, self.axis = old, new, axis
        self.extent, self.var, self.blocks = extent, var, blocks
        self.writer, self.pred = writer, pred

    def _idx(self, indices):
        e = indices[self.axis]
        out = list(indices)
        out[self.axis] = FloorMod(e, const(self.extent, e.dtype))
        return tuple(out)

    def visit_buffer(self, buf):
        return self.new if buf is self.old else buf

    def visit_BufferLoad(self, ld):
        ld = self.generic_visit(ld)
        return BufferLoad(ld.buffer, self._idx(ld.indices)) if ld.buffer is self.new else ld

    def visit_BufferStore(self, st):
        st = self.generic_visit(st)
        if st.buffer is not self.new:
            return st
        return BufferStore(st.buffer, st.value, self._idx(st.indices))

    def visit_BufferRegion(self, r):
        r = self.generic_visit(r)
        if r.buffer is not self.new:
            return r
        dims = list(r.region)
        d = dims[self.axis]
        dims[self.axis] = Range(FloorMod(d.min, const(self.extent, d.min.dtype)), d.extent)
        return BufferRegion(r.buffer, tuple(dims))

    def visit_BlockRealize(self, br):
        new = self.generic_visit(br)
        if br.block.name not in self.blocks:
            return new
        ivs = tuple(IterVar(iv.var, iv.dom, "opaque")
                    if iv.kind == "spatial" and any(u is self.var for u in used_vars(val))
                    else iv for iv, val in zip(new.block.iter_vars, new.iter_values))
        pred = new.predicate
        if br.block.name == self.writer:
            for c in self.pred:
                pred = c if isinstance(pred, IntImm) and pred.value else And(pred, c)
        return with_fields(new, predicate=pred, block=with_fields(new.block, iter_vars=ivs))


@primitive(PRIM, block=BLOCK, write_buffer_index=INDEX, error=StorageError)
def rolling_buffer(func, block, write_buffer_index: int):
    """Shrink the block's ``write_buffer_index``-th write buffer to the window it
    writes per iteration of the loop it shares with its readers, along the axis that
    window moves on with the outermost loop, indexed modulo the window's extent; the
    block skips what the previous iteration already computed.  Results are unchanged.

    Before/after ``rolling_buffer(B, 0)`` with ``B`` computed at ``C``'s tile loop
    ``i_0`` (tiles of 4, windows of 6)::

        B = alloc((10,))                          B = alloc((6,))
        for i_0 in range(2):                      for i_0 in range(2):
          for ax0 in range(6):                      for ax0 in range(6):
                                                      T.where(i_0 < 1 or 2 <= ax0)
            B[i_0*4 + ax0] = ...                      B[(i_0*4 + ax0) % 6] = ...

    Example::

        >>> import cuvil_tir as T
        >>> from schedules.handles import BlockRV
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] * 2.0, name="B")])
        >>> try:
        ...     rolling_buffer(f, BlockRV("B"), 0)
        ... except StorageError as err:
        ...     print(err.reason[:43])
        buffer 'B' is a function parameter: the cal
    """
    bpath, br, buf = _target(func, block, write_buffer_index)
    blk, wreg, rs, outer, window = _info(func, bpath, br, buf)
    axes, axis = _axes(func, blk, buf, window, outer)
    lpath = outer[-1][0]
    _check_readers(func, rs, buf, window, outer, lpath)
    extent = window.region[axis].extent.value
    # each overlapping axis skips the instances an earlier iteration computed
    vm = iter_map(br)
    point = [simplify(substitute(d.min, vm)) for d in wreg.region]
    preds = []
    for k, (var, overlap) in enumerate(axes):
        if var is None:
            continue
        offset = simplify(point[k] - window.region[k].min)
        if any(u is var for u in used_vars(offset)):
            raise _bad(f"the position of block {blk.name!r} inside its window of "
                       f"{buf.name!r} ({offset}) still depends on {var.name}; Cuvil cannot "
                       "tell which instances an earlier iteration computed", func)
        preds.append(Or(LT(var, const(1, var.dtype)), LE(const(overlap, offset.dtype), offset)))
    shape = list(buf.shape)
    shape[axis] = const(extent, shape[axis].dtype)
    new = Buffer(tuple(shape), buf.dtype, buf.name, (), buf.scope, buf.align)
    names = {blk.name} | {b.block.name for _, b in rs}
    roll = _Roll(buf, new, axis, extent, axes[axis][0], names, blk.name, preds)
    return func.with_body(roll.visit(func.body)), None


__all__ = ["rolling_buffer"]
