"""``pad_einsum(block, padding)``: pad an einsum block's iteration domain up to
multiples, so that a tensor intrinsic always sees whole tiles (TVM's ``pad_einsum``).

The block computes ``out[...] = out[...] + a[...] * b[...]`` (or a plain spatial
``out[...] = f(a[...], ...)``) over iter vars whose domains are not multiples of the
intrinsic's tile.  Each iter var's extent is rounded up to a multiple of its entry of
``padding``; an intermediate the block touches (a stage made by
``cache_read``/``cache_write``) grows to cover the padded domain, and a function
parameter is replaced, inside the block, by a padded copy (``X_pad``, see
:mod:`.pad_params`).  The block that
produces a padded input fills the new part with zeros (``T.if_then_else(v < n, x,
0)``), so the products there vanish; the consumer of a padded output keeps reading
only the valid part.  On an accelerator the zero-filling copy becomes a DMA that pads
on load and the write-back a DMA of the valid part (:mod:`targets.accel.transfer`).

Before / after ``pad_einsum(C, [16, 16, 16])`` on a 100x70x50 GEMM staged in ``A_s``,
``B_s``, ``C_s``::

    A_s[i, k] = A[i, k]            (100x50)      A_s[i, k] = if_then_else(i < 100 and
                                                     k < 50, A[i, k], 0)   (112x64)
    C_s[i, j] += A_s[i, k] * B_s[k, j]            C_s[i, j] += ...      (112x80x64)
    C[i, j] = C_s[i, j]            (100x70)      C[i, j] = C_s[i, j]   (100x70)

Example::

    >>> import schedules as S
    >>> from targets.toolkit.npu.gemm import gemm
    >>> sch = S.Schedule(gemm(20, 20, 20))
    >>> blk = sch.get_block("C")
    >>> _ = sch.cache_read(blk, 0, "global"), sch.cache_read(blk, 1, "global")
    >>> _ = sch.cache_write(blk, 0, "global")
    >>> sch.pad_einsum(blk, [16, 16, 16])
    >>> [int(d.value) for d in sch.func.body.block.alloc_buffers[0].shape]
    [32, 32]
"""

from __future__ import annotations

from cuvil_tir.errors import ScheduleError
from cuvil_tir.expr import LT, Add, BufferLoad, Cast, IntImm, Mul, Var, const
from cuvil_tir.op import conjuncts, if_then_else
from cuvil_tir.stmt import Block, BlockRealize, BufferStore, For, IterVar, Range
from cuvil_tir.visitor import Mutator, post_order_visit, used_vars

from cuvil_tir.analysis import tree
from cuvil_tir.analysis.regions import simplify
from cuvil_tir.arith.analyzer import Analyzer
from ..errors import schedule_error
from ..primitive import BLOCK, INT_LIST, primitive
from cuvil_tir.arith.affine import linear_form
from .pad_params import _reads_output, pad_params
from .reduction import resolve_block

PRIM = "pad_einsum"


class PadEinsumError(ScheduleError):
    """``pad_einsum`` cannot pad this block (not an einsum, a parameter to pad, ...).

    Example::

        >>> PadEinsumError("pad_einsum: x").code
        'CVL-E103'
    """


def _fail(reason, func=None, node=None):
    return schedule_error(PadEinsumError, PRIM, reason, func, node)


def _products(e) -> bool:
    """Whether ``e`` is a product of (cast) loads, so a zero factor makes it zero."""
    if isinstance(e, Mul):
        return _products(e.a) and _products(e.b)
    if isinstance(e, Cast):
        return _products(e.value)
    return isinstance(e, BufferLoad)


def _single_loop_nest(func, path, blk, realize, what):
    """``{id(loop var): iter var index}``: every iter var is bound to its own loop (min
    0, extent = domain) that holds only this block, or is a unit domain bound to 0."""
    loops = {id(f.loop_var): (p, f) for p, f in tree.loops_above(func, path)}
    out = {}
    for k, (iv, val) in enumerate(zip(blk.iter_vars, realize.iter_values)):
        if isinstance(val, IntImm) and val.value == 0 and isinstance(iv.dom.extent, IntImm) \
                and iv.dom.extent.value == 1:
            continue
        if not (isinstance(val, Var) and id(val) in loops):
            raise _fail(f"{what} {blk.name!r} binds iter var {iv.var.name!r} to {val}, "
                        "not to a loop of its own; pad_einsum before splitting or fusing "
                        "its loops", func, blk)
        p, f = loops[id(val)]
        if not (isinstance(f.min, IntImm) and f.min.value == 0
                and _same(f.extent, iv.dom.extent)):
            raise _fail(f"{what} {blk.name!r}: loop {f.loop_var.name!r} does not run over "
                        f"the whole domain of {iv.var.name!r}", func, blk)
        if len(tree.blocks_under(f.body)) != 1:
            raise _fail(f"{what} {blk.name!r}: loop {f.loop_var.name!r} holds other blocks "
                        "too", func, blk)
        out[id(val)] = k
    return out


def _loops_to_pad(func, blk, loops, changed):
    """Every iter var whose domain grows must have a loop (not a unit domain bound to 0)."""
    bound = set(loops.values())
    for k, iv in enumerate(blk.iter_vars):
        if changed[k] and k not in bound:
            raise _fail(f"block {blk.name!r}: iter var {iv.var.name!r} has no loop to pad "
                        "(a unit domain); use padding 1 for the iterations that index it",
                        func, blk)


def _check_output_indexed(func, blk, store, changed):
    """Every padded spatial iter var must index the output: one it does not index (a
    unit dimension folded to 0 by ``transform_layout``, say) makes the padded
    iterations write, and re-initialise, the elements of the valid ones."""
    seen = {id(v) for i in store.indices for v in used_vars(i)}
    for iv in blk.iter_vars:
        if iv.kind != "reduce" and changed[id(iv.var)] and id(iv.var) not in seen:
            idx = ", ".join(str(i) for i in store.indices)
            raise _fail(f"block {blk.name!r}: spatial iter var {iv.var.name!r} must index "
                        f"its output to be padded, found {store.buffer.name}[{idx}] "
                        "without it: the padded iterations would overwrite the valid "
                        f"ones. Use padding 1 for {iv.var.name!r}", func, blk)


def _accesses(blk) -> list:
    out = []
    post_order_visit(blk.body, lambda n: out.append(n)
                     if isinstance(n, (BufferLoad, BufferStore)) else None)
    return out


def _writers(func, buf) -> list:
    out = []
    for path, s in tree.walk(func):
        if isinstance(s, BlockRealize) and s.block.iter_vars and \
                any(w.buffer is buf for w in s.block.writes):
            out.append((path, s))
    return out


def _check_padding(padding, blk):
    n = len(blk.iter_vars)
    if not isinstance(padding, (list, tuple)) or len(padding) != n or not all(
            isinstance(p, int) and not isinstance(p, bool) and p > 0 for p in padding):
        raise _fail(f"padding must be {n} positive ints (one per iter var of block "
                    f"{blk.name!r}: {[iv.var.name for iv in blk.iter_vars]}), found "
                    f"{padding!r}")
    for iv in blk.iter_vars:
        if not (isinstance(iv.dom.min, IntImm) and iv.dom.min.value == 0):
            raise _fail(f"block {blk.name!r}: iter var {iv.var.name!r} has domain "
                        f"[{iv.dom.min}, {iv.dom.min} + {iv.dom.extent}); pad_einsum needs "
                        "domains starting at 0")


def _check_producer_predicate(func, path, realize) -> None:
    """A producer's ``T.where`` is dropped when padded: its grown loops must run the
    producer over the padding to write the zeros there, which a guard kept from the
    old extents would skip (the padded elements left unwritten, then read by the
    einsum).  So the guard must provably hold over the producer's old loops (a copy's
    bound clipped to its buffer, say); any other guard is refused."""
    pred = realize.predicate
    if isinstance(pred, IntImm) and pred.value:
        return
    ana = Analyzer()
    loops = [f for _, f in tree.loops_above(func, path)]
    for f in loops:
        ana.bind(f.loop_var, Range(f.min, f.extent))

    def below_extent(c):        # `v < extent of v's loop`: symbolic, so said directly
        return isinstance(c, LT) and isinstance(c.a, Var) and any(
            f.loop_var is c.a and isinstance(f.min, IntImm) and f.min.value == 0
            and _same(f.extent, c.b) for f in loops)

    left = [c for c in conjuncts(pred) if not (below_extent(c) or ana.can_prove(c))]
    if left:
        raise _fail(f"producer {realize.block.name!r} runs under T.where({pred}), which "
                    "would skip the padding it must fill with zeros; pad_einsum before "
                    "the step that guarded it (a split, a compute_at)", func, realize.block)


def _same(a, b) -> bool:
    """``a == b`` provably (equal constants, or a zero difference)."""
    d = simplify(a - b)
    return isinstance(d, IntImm) and d.value == 0


def _round_up(extent, p):
    """``extent`` rounded up to a multiple of ``p``: an int for a constant extent, else
    ``(extent + p - 1) // p * p`` (TensorIR's form)."""
    if isinstance(extent, IntImm):
        return -(-extent.value // p) * p
    return extent if p == 1 else (extent + (p - 1)) // p * p


def _expr(n, dtype="int32"):
    return const(n, dtype) if isinstance(n, int) else n


def _wider(a, b, orig):
    """The larger of two needed sizes of one dimension (``orig``: its size now)."""
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b)
    return b if _same(_expr(a), _expr(orig)) else a


def _new_shapes(func, blk, old: dict, ext: dict) -> dict:
    """``{buffer: new shape}`` for every buffer of ``blk`` that must grow (a dimension is
    an int when constant, else an expression)."""
    grow = {}
    for acc in _accesses(blk):
        buf = acc.buffer
        shape = [int(d.value) if isinstance(d, IntImm) else d for d in buf.shape]
        need = list(shape)
        for d, e in enumerate(acc.indices):
            lin = linear_form(e)
            if lin is None or any(c < 0 or k not in ext for k, (_, c) in lin[0].items()):
                raise _fail(f"block {blk.name!r}: index {e} of {buf.name!r} is not an "
                            "affine form of its iter vars with non-negative coefficients",
                            func, blk)
            terms = lin[0].items()
            if all(isinstance(ext[k], int) for k, _ in terms) and isinstance(shape[d], int):
                top = lin[1] + sum(c * (ext[k] - 1) for k, (_, c) in terms) + 1
                was = lin[1] + sum(c * (old[k] - 1) for k, (_, c) in terms) + 1
                if top > was and was != shape[d]:
                    # the padded iterations would reach the buffer's own elements past
                    # the block's: read as padding (not zeros) or overwritten
                    raise _fail(f"block {blk.name!r}: index {e} of {buf.name!r} reaches "
                                f"{was} of the {shape[d]} elements along its dimension "
                                f"{d}; padded, it would reach {min(top, shape[d])}, "
                                f"elements of {buf.name!r} the block does not "
                                f"{'write' if buf is blk.body.buffer else 'read'} now, "
                                "which would stand in for padding. pad_einsum pads only "
                                "an index that reaches the whole dimension", func, blk)
                need[d] = max(need[d], top)
                continue
            top = simplify(lin[1] + sum((c * (_expr(ext[k]) - 1) for k, (_, c) in terms),
                                        const(0, e.dtype)) + 1)
            was = simplify(lin[1] + sum((c * (_expr(old[k]) - 1) for k, (_, c) in terms),
                                        const(0, e.dtype)) + 1)
            if _same(top, was):
                continue
            if not _same(was, _expr(shape[d])):
                raise _fail(f"block {blk.name!r}: index {e} of {buf.name!r} reaches {was} "
                            f"along a dimension of extent {buf.shape[d]}: with symbolic "
                            "extents pad_einsum pads only an index that reaches the whole "
                            "dimension", func, blk)
            need[d] = top
        if any(not _same(_expr(a), _expr(b)) for a, b in zip(need, shape)):
            grow[buf] = [_wider(a, b, n) for a, b, n in zip(grow.get(buf, shape), need,
                                                             shape)]
    return grow


@primitive(PRIM, block=BLOCK, padding=INT_LIST)
def pad_einsum(func, block, padding):
    """Round the block's iteration domain up to multiples of ``padding`` (module doc).

    Before/after ``pad_einsum(C, [16, 16, 16])`` on a 100x70x50 GEMM::

        A_s[i, k] = A[i, k]                 A_s[i, k] = if_then_else(i < 100 and
        C_s[i, j] += A_s[i, k] * B_s[k, j]       k < 50, A[i, k], 0)    (112x64)
        (100x70x50)                         C_s[i, j] += ...        (112x80x64)

    Function parameters are not resized: the block works on padded copies of them
    (:mod:`.pad_params`).

    Example::

        >>> import schedules as S
        >>> from targets.toolkit.npu.gemm import gemm
        >>> sch = S.Schedule(gemm(20, 20, 20))
        >>> sch.pad_einsum(sch.get_block("C"), [16, 16, 16])
        >>> [b.name for b in sch.func.body.block.alloc_buffers]
        ['A_pad', 'B_pad', 'C_pad']
    """
    path = resolve_block(func, block, PRIM)
    realize = tree.get(func, path)
    blk = realize.block
    _check_padding(padding, blk)
    by_loop = _single_loop_nest(func, path, blk, realize, "block")
    old = {id(iv.var): _round_up(iv.dom.extent, 1) for iv in blk.iter_vars}
    ext = {id(iv.var): _round_up(iv.dom.extent, p) for iv, p in zip(blk.iter_vars, padding)}
    changed = {k: not _same(_expr(ext[k]), _expr(old[k])) for k in ext}
    if not any(changed.values()):
        return func, None
    _loops_to_pad(func, blk, by_loop, [changed[id(iv.var)] for iv in blk.iter_vars])
    store = blk.body
    reduce_padded = any(iv.kind == "reduce" and changed[id(iv.var)] for iv in blk.iter_vars)
    if not isinstance(store, BufferStore):
        raise _fail(f"block {blk.name!r} is not one store (an einsum)", func, blk)
    if reduce_padded and not (isinstance(store.value, Add) and isinstance(store.value.a, BufferLoad)
                              and store.value.a.buffer is store.buffer
                              and _products(store.value.b)):
        raise _fail(f"block {blk.name!r} is not a sum of products (out = out + a * b ...): "
                    "pad_einsum pads inputs with zeros, which leaves only such a sum "
                    "unchanged along a padded reduction", func, blk)
    _check_output_indexed(func, blk, store, changed)
    grow = _new_shapes(func, blk, old, ext)
    if store.buffer in grow and blk.init is None and _reads_output(blk, store.buffer) \
            and not any(p is store.buffer for p in func.params):   # (pad_params says it)
        # the init (decomposed, or an outer block's after blockize) covers the old
        # shape only: the padded elements would accumulate onto nothing written
        raise _fail(f"block {blk.name!r} updates {store.buffer.name!r} without an init: "
                    "its padded elements would start uninitialised. Pad before "
                    "decompose_reduction or blockize", func, blk)
    outer = tree.enclosing_block(func, path)
    if outer != ():
        # the blocks around it declare the old extents: padded, it would access
        # outside what they declare (a loop_partition part, a blockized tile)
        raise _fail(f"block {blk.name!r} is inside block "
                    f"{tree.get(func, outer).block.name!r}, whose regions cover only the "
                    "unpadded iterations; pad_einsum before the step that nested it "
                    "(loop_partition, blockize)", func, blk)
    # a parameter's size is the caller's: the block works on a padded copy of it
    params = {b: grow.pop(b) for b in list(grow) if any(p is b for p in func.params)}
    written = {store.buffer}
    producers = {}
    for buf in grow:
        if buf in written:
            continue
        ws = _writers(func, buf)
        if len(ws) != 1:
            raise _fail(f"input {buf.name!r} of block {blk.name!r} must have exactly one "
                        f"producer block to fill its padding with zeros, found {len(ws)}; "
                        "stage it with cache_read first", func, blk)
        ppath, preal = ws[0]
        pblk = preal.block
        st = pblk.body
        if not (isinstance(st, BufferStore) and st.buffer is buf and pblk.init is None
                and len(st.indices) == len(pblk.iter_vars)
                and all(i is iv.var for i, iv in zip(st.indices, pblk.iter_vars))):
            raise _fail(f"producer {pblk.name!r} of {buf.name!r} must store "
                        f"{buf.name}[v0, v1, ...] indexed by its iter vars in order (a copy "
                        "such as cache_read makes)", func, pblk)
        ploops = _single_loop_nest(func, ppath, pblk, preal, "producer")
        _check_producer_predicate(func, ppath, preal)
        _loops_to_pad(func, pblk, ploops, [not _same(_expr(n), d) for n, d in
                                           zip(grow[buf], buf.shape)])
        producers[pblk.name] = (ploops, buf)
    new_buf = {b: b.with_changes(shape=tuple(_expr(n) for n in shape), strides=())
               for b, shape in grow.items()}
    g = _Pad(blk.name, by_loop, ext, producers, grow, new_buf).visit_root(func, blk)
    if params:
        g = pad_params(g, blk.name, {b: tuple(_expr(n) for n in s) for b, s in params.items()},
                       lambda why, node: _fail(why, func, node))
    return g, None


class _Pad(Mutator):
    def __init__(self, name, by_loop, ext, producers, grow, new_buf):
        self.name, self.by_loop, self.ext = name, by_loop, ext
        self.producers, self.grow, self.new_buf = producers, grow, new_buf
        self.loop_ext = {}          # id(loop var) -> new extent

    def visit_root(self, func, blk):
        for lv, k in self.by_loop.items():
            self.loop_ext[lv] = self.ext[id(blk.iter_vars[k].var)]
        for ploops, buf in self.producers.values():
            for lv, k in ploops.items():
                self.loop_ext[lv] = self.grow[buf][k]
        return func.with_body(self.visit(func.body))

    def visit_buffer(self, buf):
        return self.new_buf.get(buf, buf)

    def visit_For(self, f):
        body = self.visit(f.body)
        n = self.loop_ext.get(id(f.loop_var))
        if n is None:
            return f if body is f.body else For(f.loop_var, f.min, f.extent, f.kind, body,
                                                f.thread_tag, f.annotations)
        return For(f.loop_var, f.min, _expr(n, f.extent.dtype), f.kind, body, f.thread_tag,
                   f.annotations)

    def visit_BlockRealize(self, r):
        out = self.generic_visit(r)
        if r.block.name in self.producers:      # its guard held over the old loops
            return BlockRealize(out.iter_values, const(True, "bool"), out.block)
        return out

    def visit_Block(self, b):
        out = self.generic_visit(b)
        if b.name == self.name:
            ivs = tuple(IterVar(iv.var, Range(iv.dom.min, _expr(self.ext[id(iv.var)],
                                                                iv.dom.extent.dtype)), iv.kind)
                        for iv in out.iter_vars)
            return Block(out.name, ivs, out.reads, out.writes, out.body, out.init,
                         out.alloc_buffers, out.annotations)
        if b.name in self.producers:
            _, buf = self.producers[b.name]
            shape, old = self.grow[buf], buf.shape
            ivs = tuple(IterVar(iv.var, Range(iv.dom.min, _expr(n, iv.dom.extent.dtype)),
                                iv.kind) for iv, n in zip(out.iter_vars, shape))
            st = out.body
            conds = [iv.var < o for iv, o, n in zip(out.iter_vars, old, shape)
                     if not _same(_expr(n), o)]
            cond = conds[0]
            for c in conds[1:]:
                cond = cond & c
            value = if_then_else(cond, st.value, const(0, st.value.dtype))
            return Block(out.name, ivs, out.reads, out.writes,
                         BufferStore(st.buffer, value, st.indices), out.init,
                         out.alloc_buffers, out.annotations)
        return out


__all__ = ["PadEinsumError", "pad_einsum"]
