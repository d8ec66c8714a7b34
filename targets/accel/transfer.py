"""Copies between host memory and an accelerator memory become DMA transfers, and
copies between two accelerator memories the on-chip moves the description declares
(intrinsic calls are checked in :mod:`~targets.accel.intrinsic_calls`).

A staged copy (what ``cache_read``/``cache_write`` leave after lowering) is a loop nest
``for r: for c: dst[..., r', c'] = src[..., r'', c'']`` with one side in host memory
and the other in an accelerator memory.  Its two innermost loops become one 2-D strided
transfer, ``<hal>_dma_load(dst, src, rows, row_bytes, dst_stride, src_stride)`` (or
``_dma_store``; strides in bytes); outer loops stay loops.  On the accelerator side a
row must be a whole number of the memory's access width and start on it, otherwise
the copy does not fit the memory and the error says which.

A copy whose edge tiles run past the end of the host array (a non-dividing tile) is
guarded: ``if (i < n) dst[...] = src[...]`` becomes a transfer of the valid rows and
bytes only (computed at run time), and the zero-filling copy ``pad_einsum`` leaves
(``dst[...] = if_then_else(i < n, src[...], 0)``) becomes
``<hal>_dma_load_pad(dst, src, rows, row_bytes, valid_rows, valid_row_bytes,
dst_stride, src_stride)``, which fills the rest of the tile with zeros, so the
intrinsics always see whole tiles.  Only a DMA described with ``padding=True`` pads.
The DMA's other modes (:mod:`~targets.accel.copy_nest`): a nest storing zeros is
``<hal>_dma_fill(dst, rows, row_bytes, dst_stride)``; a load whose source does not
move with the row loop repeats that row (``broadcast=True``, source stride 0); a
store of ``op.fn(src[...])`` is ``<hal>_dma_store_<op>(dst, src, rows, cols,
dst_stride, src_stride)`` (counts in elements: the dtypes differ).

Example::

    >>> import cuvil_tir as T
    >>> from targets.accel.examples.toy_npu import toy_npu
    >>> S = T.decl_buffer((4, 16), "int8", "S", scope="npu.inp")
    >>> G = T.decl_buffer((64, 64), "int8", "G")
    >>> r, c = T.var("r"), T.var("c")
    >>> nest = T.For(r, T.const(0), T.const(4), "serial", T.For(c, T.const(0), T.const(16),
    ...        "serial", T.BufferStore(S, G[r, c], (r, c))))
    >>> f = dma_transfers(T.PrimFunc([G], T.Allocate(S, nest)), toy_npu)
    >>> print(T.to_text(f.body.body).strip())
    T.evaluate(T.call_extern("int32", "toy_npu_dma_load", S[0:1, 0:16], G[0:1, 0:16], 4, 16, 16, 64, effect="writes:0"))
"""

from __future__ import annotations

from cuvil_tir import dtype as D
from cuvil_tir.expr import IntImm
from cuvil_tir.op import call_extern
from cuvil_tir.stmt import BufferRegion, Evaluate, For, Range
from cuvil_tir.visitor import Mutator, substitute

from .errors import AccelLoweringError
from .copy_nest import (continues, copy_nest, dim_of, extent, row_strides, transposed_loops,
                        valid_part)
from .dma_blocks import fold_blocks
from .dma_engines import EngineChooser, call_name
from .im2col import im2col_call


class _ToDMA(Mutator):
    def __init__(self, acc):
        self.acc = acc
        self.scopes = {m.scope: m for m in acc.memories_only}
        self.ops = list(acc.dma.store_ops) + [op for mv in acc.moves for op in mv.ops
                                              if op not in acc.dma.store_ops]
        self.chooser = EngineChooser(acc)

    def visit_For(self, s):
        nest = copy_nest(s, self.ops)
        if nest is None:
            return Mutator.generic_visit(self, s)
        dst_acc = nest.store.buffer.scope in self.scopes
        if nest.fill:
            if not dst_acc:
                return Mutator.generic_visit(self, s)
            return self.fill(nest, self.chooser.pick(
                "load", nest.store.buffer, f"the zero fill of {nest.store.buffer.name}"))
        src_acc = nest.load.buffer.scope in self.scopes
        if dst_acc != src_acc:
            eng = self.chooser.pick("load" if dst_acc else "store",
                                    nest.store.buffer if dst_acc else nest.load.buffer,
                                    f"the copy {nest.load.buffer.name} -> "
                                    f"{nest.store.buffer.name}")
        if dst_acc and src_acc:
            return self.move(nest)
        if dst_acc == src_acc:
            return Mutator.generic_visit(self, s)
        if dst_acc and self.acc.dma.transpose and transposed_loops(nest):
            return self.transposed(nest, eng, *transposed_loops(nest))
        if dst_acc and self.acc.dma.im2col and len(nest.loops) >= 2:
            inner = self._inner(nest.loops, f"the copy {nest.load.buffer.name} -> "
                                f"{nest.store.buffer.name}")[0]
            call = im2col_call(self.acc, nest, lambda b, idx: _region(b, idx, inner, inner[-1]),
                               f"the copy {nest.load.buffer.name} -> {nest.store.buffer.name}",
                               call_name(self.acc.hal, eng, "load_im2col"))
            if call is not None:
                return _outer(nest.loops, inner, call)
        return self.transfer(nest, dst_acc, eng)

    def transposed(self, nest, eng, row, col):
        """``dst[r, c] = src[c, r]``: ``<hal>_dma_load_t`` (whole tiles, one dtype)."""
        st, ld, dst, src = nest.store, nest.load, nest.store.buffer, nest.load.buffer
        where = f"the transposing copy {src.name} -> {dst.name}"
        if nest.guard is not None or nest.padded or nest.op is not None:
            raise AccelLoweringError(f"DMA: {where} is guarded, padded or applies an op; "
                                     "a transposing load moves whole tiles as they are")
        self._check_types(where, src, dst, None)
        inner = self._inner(nest.loops, where)[0]
        rd = dim_of(st.indices, row.loop_var)
        item = D.itemsize(dst.dtype)
        rows, cols = row.extent.value, col.extent.value
        dst_stride = row_strides(dst)[rd] * item
        src_stride = row_strides(src)[dim_of(ld.indices, col.loop_var)] * item
        self._check_rows(self.scopes[dst.scope], where, cols * item, rows, dst_stride, item,
                         dst.dtype)
        first = [substitute(e, {f.loop_var: f.min for f in inner}) for e in ld.indices]
        ext = [IntImm(1, "int32")] * (len(first) - 1) + [row.extent]
        call = call_extern("int32", call_name(self.acc.hal, eng, "load_t"),
                           _region(dst, st.indices, inner, col),
                           BufferRegion(src, tuple(Range(m, e) for m, e in zip(first, ext))),
                           rows, cols, item, dst_stride, src_stride, effect="writes:0")
        return _outer(nest.loops, inner, Evaluate(call))

    def move(self, nest):
        """A copy between two accelerator memories: the :class:`Move` declared for
        them (``<hal>_move_<src>_<dst>[_<op>]``), else refused."""
        st, ld, op = nest.store, nest.load, nest.op
        dst, src = st.buffer, ld.buffer
        where = f"the move {src.name} ({src.scope}) -> {dst.name} ({dst.scope})"
        mv = next((m for m in self.acc.moves if (m.src, m.dst) == (src.scope, dst.scope)),
                  None)
        if mv is None:
            have = ", ".join(f"{m.src} -> {m.dst}" for m in self.acc.moves) or "none"
            raise AccelLoweringError(
                f"{where}: accelerator '{self.acc.name}' declares no move from "
                f"'{src.scope}' to '{dst.scope}' (its moves: {have}); describe "
                f"Move({src.scope!r}, {dst.scope!r}, engine=..., width_bits=...) if the "
                "hardware has one, or stage the data through host memory")
        if op is not None and op not in mv.ops:
            raise AccelLoweringError(f"{where} applies {op.name!r}, which the move "
                                     f"{mv.src} -> {mv.dst} does not (its ops: "
                                     f"{[o.name for o in mv.ops]})")
        self._check_types(where, src, dst, op)
        if nest.guard is not None or nest.padded:
            raise AccelLoweringError(f"{where} is guarded (a partial tile); an on-chip "
                                     "move copies whole tiles")
        inner, col, row = self._inner(nest.loops, where)
        rows, cols = (row.extent.value if row is not None else 1), col.extent.value
        outer = continues(nest, row, ((dst, st.indices), (src, ld.indices)))
        inner, rows = outer + tuple(inner), rows * extent(outer)
        strides = []
        for buf, idx in ((dst, st.indices), (src, ld.indices)):
            cd = dim_of(idx, col.loop_var)
            rd = dim_of(idx, row.loop_var) if row is not None else None
            if cd != len(buf.shape) - 1 or (row is not None and rd is None):
                raise AccelLoweringError(
                    f"{where} is not a 2-D strided move ({buf.name} is indexed "
                    f"[{', '.join(map(str, idx))}]); reorder or transform the staged layout")
            item = D.itemsize(buf.dtype)
            strides.append((row_strides(buf)[rd] if rd is not None else 0) * item)
            self._check_rows(self.scopes[buf.scope], where, cols * item, rows, strides[-1],
                             item, buf.dtype)
        name = f"{self.acc.hal}_{mv.c_name}" + (f"_{op.name}" if op is not None else "")
        n = cols if op is not None else cols * D.itemsize(dst.dtype)
        call = call_extern("int32", name, _region(dst, st.indices, inner, col),
                           _region(src, ld.indices, inner, col), rows, n, *strides,
                           effect="writes:0")
        return _outer(nest.loops, inner, Evaluate(call))

    def _check_types(self, where, src, dst, op):
        if op is None and src.dtype != dst.dtype:
            raise AccelLoweringError(f"DMA: {where} converts {src.dtype} to {dst.dtype}; "
                                     "a DMA copies bytes: stage the same dtype, or "
                                     "describe a DMAOp that converts on the way out")
        if op is not None and (src.dtype, dst.dtype) != (op.in_dtype, op.out_dtype):
            raise AccelLoweringError(
                f"DMA: {where} is {src.dtype} -> {dst.dtype}, but op {op.name!r} "
                f"is {op.in_dtype} -> {op.out_dtype}")

    def _inner(self, loops, where):
        inner = loops[-2:] if len(loops) >= 2 else loops[-1:]
        for f in inner:
            if not (isinstance(f.extent, IntImm) and isinstance(f.min, IntImm)):
                raise AccelLoweringError(f"DMA: {where} has loop {f.loop_var.name} of "
                                         f"non-constant extent {f.extent}; tile it so the "
                                         "staged copy has a fixed size")
        return inner, inner[-1], (inner[0] if len(inner) == 2 else None)

    def _check_rows(self, mem, where, row_bytes, rows, stride, item, dtype):
        w = mem.width_bytes
        if row_bytes % w or (rows > 1 and stride % w):
            raise AccelLoweringError(
                f"DMA: {where}: a row of {row_bytes} bytes (stride {stride} bytes) "
                f"in memory '{mem.scope}' does not fit its access width of {w} bytes; make "
                f"the staged tile's rows a multiple of {w // item} {dtype} elements")

    def fill(self, nest, eng):
        """A tile of zeros written by the DMA (``<hal>_dma_fill``)."""
        st, dst = nest.store, nest.store.buffer
        where = f"the zero fill of {dst.name}"
        if not self.acc.dma.padding:
            raise AccelLoweringError(
                f"DMA: {where}: the DMA of accelerator '{self.acc.name}' cannot write "
                "zeros; describe it with DMA(..., padding=True) if the hardware "
                "zero-fills, or tensorize the initialisation with a zero intrinsic")
        inner, col, row = self._inner(nest.loops, where)
        if dim_of(st.indices, col.loop_var) != len(dst.shape) - 1 or (
                row is not None and dim_of(st.indices, row.loop_var) is None):
            return Mutator.generic_visit(self, nest.loops[0])
        item = D.itemsize(dst.dtype)
        rows = row.extent.value if row is not None else 1
        row_bytes = col.extent.value * item
        rd = dim_of(st.indices, row.loop_var) if row is not None else None
        stride = (row_strides(dst)[rd] if rd is not None else 0) * item
        self._check_rows(self.scopes[dst.scope], where, row_bytes, rows, stride, item,
                         dst.dtype)
        call = call_extern("int32", call_name(self.acc.hal, eng, "fill"),
                           _region(dst, st.indices, inner, col), rows, row_bytes, stride,
                           effect="writes:0")
        return _outer(nest.loops, inner, Evaluate(call))

    def transfer(self, nest, load: bool, eng):
        st, ld, op = nest.store, nest.load, nest.op
        dst, src = st.buffer, ld.buffer
        side = dst if load else src
        mem = self.scopes[side.scope]
        where = f"the copy {src.name} -> {dst.name}"
        if op is not None and op not in self.acc.dma.store_ops:
            raise AccelLoweringError(f"DMA: {where} applies {op.name!r}, which only an "
                                     "on-chip move does; add it to the DMA's store_ops")
        if op is not None and load:
            raise AccelLoweringError(
                f"DMA: {where} applies {op.name!r} on the way in; the DMA applies its "
                "store_ops on the way out only: compute it on the device")
        self._check_types(where, src, dst, op)
        inner, col, row = self._inner(nest.loops, where)
        broadcast = load and self.acc.dma.broadcast
        dims = {}
        for buf, idx in ((dst, st.indices), (src, ld.indices)):
            cd = dim_of(idx, col.loop_var)
            rd = dim_of(idx, row.loop_var) if row is not None else None
            if cd != len(buf.shape) - 1 or (row is not None and rd is None and
                                             not (broadcast and buf is src)):
                raise AccelLoweringError(
                    f"DMA: {where} is not a 2-D strided transfer (the innermost copy loop "
                    f"must run along the last dimension of both buffers, {buf.name} is "
                    f"indexed [{', '.join(map(str, idx))}]); reorder or transform the "
                    "staged layout" +
                    ("; a source row repeated down the tile needs DMA(broadcast=True)"
                     if row is not None and rd is None and cd == len(buf.shape) - 1 and load
                     else "") +
                    ("; a conv2d's patch gather (im2col) needs DMA(im2col=True)"
                     if buf is src and load and not self.acc.dma.im2col
                     and "//" in ", ".join(map(str, idx))
                     else ""))
            dims[id(buf)] = rd
        rows = row.extent.value if row is not None else 1
        cols = col.extent.value
        outer = continues(nest, row, ((dst, st.indices), (src, ld.indices)))
        inner, rows = outer + tuple(inner), rows * extent(outer)
        strides = {}
        for buf in (dst, src):
            rd = dims[id(buf)]
            strides[id(buf)] = (row_strides(buf)[rd] if rd is not None else 0) * \
                D.itemsize(buf.dtype)
        item = D.itemsize(side.dtype)
        self._check_rows(mem, where, cols * item, rows, strides[id(side)], item, side.dtype)
        first = _region(side, st.indices if load else ld.indices, inner, col)
        lead = first.region[-1].min
        if isinstance(lead, IntImm) and (lead.value * item) % mem.width_bytes:
            raise AccelLoweringError(
                f"DMA: {where} starts {lead.value * item} bytes into a row of memory "
                f"'{mem.scope}', not aligned to its access width of {mem.width_bytes} bytes")
        op_name = "load" if load else "store"
        # a plain copy counts bytes, a converting one elements (two dtypes)
        unit = 1 if op is not None else D.itemsize(dst.dtype)
        moved = [rows, cols * unit]
        if nest.guard is not None:
            vr, vc = valid_part(nest.guard, row, col, rows, cols, where)
            moved = [vr, vc * unit]
        if nest.padded:
            self._check_pad(where, src, load)
            op_name += "_pad"
            moved = [rows, cols * unit] + moved
        if op is not None:
            op_name += f"_{op.name}"
        name = call_name(self.acc.hal, eng, op_name)
        # a DMA writes its destination and only reads its source (a read-only
        # input array is fine)
        call = call_extern("int32", name, _region(dst, st.indices, inner, col),
                           _region(src, ld.indices, inner, col), *moved,
                           strides[id(dst)], strides[id(src)], effect="writes:0")
        return _outer(nest.loops, inner, Evaluate(call))

    def _check_pad(self, where, src, load):
        if not load:
            raise AccelLoweringError(f"DMA: {where} stores zeros past the edge of host "
                                     "memory; only a load pads")
        if not self.acc.dma.padding:
            raise AccelLoweringError(
                f"DMA: {where} zero-fills the part of the tile past the edge of "
                f"'{src.name}' (a padded computation, pad_einsum), but the DMA of "
                f"accelerator '{self.acc.name}' cannot pad; describe it with "
                "DMA(..., padding=True) if the hardware zero-fills, or use sizes that "
                "are multiples of the tile")


def _region(buf, idx, inner, col):
    """The first row of the tile a copy touches in ``buf`` (its inner loops at 0)."""
    first = [substitute(e, {f.loop_var: f.min for f in inner}) for e in idx]
    ext = [IntImm(1, "int32")] * len(idx)
    ext[-1] = col.extent
    return BufferRegion(buf, tuple(Range(m, e) for m, e in zip(first, ext)))


def _outer(loops, inner, body):
    """``body`` under the copy's loops outside its two inner ones."""
    for f in loops[:len(loops) - len(inner)][::-1]:
        body = For(f.loop_var, f.min, f.extent, f.kind, body, f.thread_tag, f.annotations)
    return body


def dma_transfers(func, acc):
    """Turn every staged copy between host and ``acc``'s memories into a DMA call."""
    body = _ToDMA(acc).visit(func.body)
    if acc.dma.dims >= 3:
        body = fold_blocks(body, acc)
    return func if body is func.body else func.with_body(body)


__all__ = ["dma_transfers"]
