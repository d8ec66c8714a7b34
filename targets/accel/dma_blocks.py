"""3-D DMA commands: a loop of 2-D loads folded into one command (``DMA(dims=3)``).

A staged copy becomes a 2-D strided load under its outer loops
(:mod:`~targets.accel.transfer`); a DMA that takes a third dimension moves the
innermost of those loops in the same command, paying its latency once::

    for t in 0..9: <hal>_dma_load_pad(&W_s[t * 512], &W[t * 192], 16, 32, 8, 24, 32, 24)
    =>  <hal>_dma_load_pad_3d(&W_s[0], &W[0], 16, 32, 8, 24, 32, 24, 9, 512, 192)

(``blocks``, then the byte strides between blocks in the destination and the source:
the filter taps of a conv's weights, the column blocks of a fractal ``zN`` layout, the
channel blocks of ``NC1HWC0``).  The loop folds when its body is the one load, the
sizes do not change with it and both addresses move by a constant stride.

Example::

    >>> from targets.accel.examples.toy_npu import toy_npu
    >>> block_names(toy_npu)
    {'toy_npu_dma_load': 'toy_npu_dma_load_3d', 'toy_npu_dma_load_pad': 'toy_npu_dma_load_pad_3d'}
"""

from __future__ import annotations

from cuvil_tir import dtype as D
from cuvil_tir.expr import Add, Call, IntImm, Mul, Sub
from cuvil_tir.op import call_extern
from cuvil_tir.stmt import BufferRegion, Evaluate, For, Range
from cuvil_tir.visitor import Mutator, substitute, used_vars

from .copy_nest import row_strides
from .dma_engines import call_name, dma_decls


def block_names(acc) -> dict:
    """``{2-D load: its 3-D form}`` of accelerator ``acc``'s DMA."""
    return {call_name(acc.hal, e, n): call_name(acc.hal, e, n + "_3d")
            for e in acc.dma.engines if e.direction == "load" for n in ("load", "load_pad")}


def _coef(e, var):
    """The coefficient of ``var`` in ``e`` when ``e`` is ``var`` times a constant plus
    terms without it (any terms: a copy index ``k % 2`` of a multi-buffered tile),
    else None."""
    if not any(v is var for v in used_vars(e)):
        return 0
    if e is var:
        return 1
    if isinstance(e, (Add, Sub)):
        a, b = _coef(e.a, var), _coef(e.b, var)
        return None if a is None or b is None else a + (b if isinstance(e, Add) else -b)
    if isinstance(e, Mul):
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(y, IntImm):
                c = _coef(x, var)
                return None if c is None else c * y.value
    return None


def _stride(region, var):
    """Elements the region's first element moves per step of ``var``, else None."""
    total = 0
    for r, s in zip(region.region, row_strides(region.buffer)):
        c = _coef(r.min, var)
        if c is None:
            return None
        total += c * s
    return total


class _Fold(Mutator):
    def __init__(self, acc):
        self.names = block_names(acc)
        self.folded = {v: k for k, v in self.names.items()}    # 3-D name -> 2-D name

    def visit_For(self, s):
        body = self.visit(s.body)
        call = body.value if isinstance(body, Evaluate) else None
        if not (isinstance(call, Call) and getattr(call, "op", None) == "call_extern"
                and (call.args[0].value in self.names or call.args[0].value in self.folded)
                and isinstance(s.extent, IntImm)
                and isinstance(s.min, IntImm)):
            return s if body is s.body else For(s.loop_var, s.min, s.extent, s.kind, body,
                                                s.thread_tag, s.annotations)
        name, (dst, src, *sizes) = call.args[0].value, call.args[2:]
        var = s.loop_var
        item = [D.itemsize(r.buffer.dtype) for r in (dst, src)]
        strides = [_stride(r, var) for r in (dst, src)]
        keep = For(s.loop_var, s.min, s.extent, s.kind, body, s.thread_tag, s.annotations)
        if None in strides or any(v is var for e in sizes for v in used_vars(e)):
            return keep
        strides = [st * it for st, it in zip(strides, item)]
        blocks = s.extent.value
        if name in self.folded:      # a 3-D load already: this loop must continue it
            *sizes, n, dbs, sbs = sizes
            if [dbs.value * n.value, sbs.value * n.value] != strides:
                return keep
            blocks, strides = blocks * n.value, [dbs.value, sbs.value]
            name = self.folded[name]
        first = {var: s.min}
        regions = [BufferRegion(r.buffer, tuple(Range(substitute(x.min, first), x.extent)
                                                for x in r.region)) for r in (dst, src)]
        return Evaluate(call_extern(
            "int32", self.names[name], *regions, *sizes, IntImm(blocks, "int32"),
            IntImm(strides[0], "int32"), IntImm(strides[1], "int32"), effect="writes:0"))


def fold_blocks(body, acc):
    """``body`` with every foldable loop of 2-D loads as one 3-D command (module doc)."""
    return _Fold(acc).visit(body)


def blocks_header(acc) -> list:
    """The HAL declarations of the 3-D loads."""
    return (["/* 3-D loads: blocks of the 2-D load, strides between blocks in bytes */"]
            + dma_decls(acc, "load_3d") + dma_decls(acc, "load_pad_3d"))


def blocks_sim(acc, events: dict) -> str:
    """The simulator's 3-D loads: each block copied as its 2-D load would, the
    latency charged once."""
    return f"""static int32_t cvl_dma_3d(int e, int what, void *dst, const void *src, int32_t rows,
        int32_t row_bytes, int32_t vr, int32_t vb, int32_t ds, int32_t ss, int32_t blocks,
        int32_t dbs, int32_t sbs) {{
    int lo[1] = {{0}}, hi[1] = {{-1}};
    if (rows <= 0 || row_bytes <= 0 || blocks <= 0) return 0;
    if (vr < 0) vr = 0;
    if (vb < 0) vb = 0;
    if (vr > rows) vr = rows;
    if (vb > row_bytes) vb = row_bytes;
    cvl_banks(dst, (int64_t)(blocks - 1) * dbs + (int64_t)(rows - 1) * ds + row_bytes, lo, hi);
    for (int32_t b = 0; b < blocks; ++b)
        for (int32_t r = 0; r < rows; ++r) {{
            uint8_t *d = (uint8_t *)dst + (int64_t)b * dbs + (int64_t)r * ds;
            int32_t n = r < vr ? vb : 0;
            if (n > 0) memcpy(d, (const uint8_t *)src + (int64_t)b * sbs + (int64_t)r * ss,
                              (size_t)n);
            if (n < row_bytes) memset(d + n, 0, (size_t)(row_bytes - n));
        }}
    int64_t beats = ((int64_t)row_bytes + cvl_dw[e] - 1) / cvl_dw[e];
    cvl_issue(e, what, cvl_dlat[e], cvl_dlat[e] + (int64_t)blocks * rows * beats, lo, hi, 1);
    cvl_sim_stats.bytes_in += (int64_t)blocks * vr * vb;
    return 0;
}}
static int32_t cvl_x_load_3d(int e, void *dst, const void *src, int32_t rows, int32_t row_bytes,
        int32_t dst_stride, int32_t src_stride, int32_t blocks, int32_t dst_block_stride,
        int32_t src_block_stride) {{
    return cvl_dma_3d(e, {events["dma_load_3d"]}, dst, src, rows, row_bytes, rows, row_bytes,
                      dst_stride, src_stride, blocks, dst_block_stride, src_block_stride);
}}
static int32_t cvl_x_load_pad_3d(int e, void *dst, const void *src, int32_t rows, int32_t row_bytes,
        int32_t valid_rows, int32_t valid_row_bytes, int32_t dst_stride, int32_t src_stride,
        int32_t blocks, int32_t dst_block_stride, int32_t src_block_stride) {{
    return cvl_dma_3d(e, {events["dma_load_pad_3d"]}, dst, src, rows, row_bytes, valid_rows,
                      valid_row_bytes, dst_stride, src_stride, blocks, dst_block_stride,
                      src_block_stride);
}}"""


__all__ = ["block_names", "blocks_header", "blocks_sim", "fold_blocks"]
