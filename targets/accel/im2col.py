"""im2col in the DMA: a conv2d's input gathered by the load engine straight into the
matrix unit's layout (``DMA(im2col=True)``).

A conv2d written as one GEMM over ``q = (r, s, c)`` (``conv2d_im2col`` in
:mod:`targets.toolkit.npu.conv2d`) reads ``I[b, y + q // (kw*C), x + (q // C) % kw,
q % C]``; ``reindex_cache_read`` stages that read as the patch matrix ``P[x, q]`` of an
output row, and its copy nest ``for x: for q: P[x, q] = I[...]`` (zero past ``q <
kh*kw*C`` after ``pad_einsum``) is one DMA command::

    <hal>_dma_load_im2col(dst, src, rows, row_bytes, valid_rows, valid_bytes,
                          seg_bytes, dst_stride, src_row_stride, src_px_stride)

Row ``x`` of the destination is segments of ``seg_bytes = kw*C*item`` bytes, one per
filter row ``r`` (the ``kw`` pixels ``x .. x + kw - 1`` of input row ``y + r``,
contiguous in NHWC) up to ``valid_bytes``, then zeros; rows past ``valid_rows`` are
zeros.  Cost:
the latency, then per row one burst of whole beats per segment and per zero tail.

Example::

    >>> import cuvil_tir as T
    >>> q, x = T.var("q"), T.var("x")
    >>> idx = (T.const(0), q // 24, x + q // 8 % 3, q % 8)
    >>> im2col_shape(idx, q, x)
    (3, 8)
"""

from __future__ import annotations

from cuvil_tir import dtype as D
from cuvil_tir.arith.affine import linear_form
from cuvil_tir.expr import Add, FloorDiv, FloorMod, IntImm
from cuvil_tir.op import call_extern
from cuvil_tir.stmt import BufferRegion, Evaluate, Range
from cuvil_tir.visitor import substitute, used_vars

from .copy_nest import dim_of, row_strides, valid_part
from .dma_engines import dma_decls


def _terms(e) -> list:
    return _terms(e.a) + _terms(e.b) if isinstance(e, Add) else [e]


def _const(e):
    return e.value if isinstance(e, IntImm) else None


def _uses(e, var) -> bool:
    return any(v is var for v in used_vars(e))


def _split(e, q):
    """``(terms using q, the rest)`` of an index."""
    ts = _terms(e)
    return [t for t in ts if _uses(t, q)], [t for t in ts if not _uses(t, q)]


def im2col_shape(indices, q, x):
    """``(kw, C)`` when the last three ``indices`` gather an im2col patch over the
    column loop var ``q`` and the row loop var ``x`` (module doc), else None."""
    if len(indices) < 3 or any(_uses(e, q) for e in indices[:-3]):
        return None
    (hq, hrest), (wq, wrest), (cq, crest) = (_split(e, q) for e in indices[-3:])
    if len(hq) != 1 or len(wq) != 1 or len(cq) != 1 or crest:
        return None
    c_mod, w_mod, h_div = cq[0], wq[0], hq[0]
    if not (isinstance(c_mod, FloorMod) and c_mod.a is q and _const(c_mod.b)):
        return None
    c = _const(c_mod.b)
    if not (isinstance(w_mod, FloorMod) and isinstance(w_mod.a, FloorDiv)
            and w_mod.a.a is q and _const(w_mod.a.b) == c and _const(w_mod.b)):
        return None
    kw = _const(w_mod.b)
    if not (isinstance(h_div, FloorDiv) and h_div.a is q and _const(h_div.b) == kw * c):
        return None
    # the row loop moves the pixel by one and nothing else
    for rest, want in ((hrest, 0), (wrest, 1)):
        total = sum(rest[1:], rest[0]) if rest else IntImm(0, "int32")
        lin = linear_form(total)
        coef = 0 if lin is None else lin[0].get(id(x), (x, 0))[1]
        if lin is None or coef != want:
            return None
    return None if any(_uses(e, x) for e in indices[:-3]) else (kw, c)


def im2col_call(acc, nest, region_of, where, name=None):
    """The ``<hal>_dma_load_im2col`` call (or ``name``: another engine's) of copy
    ``nest`` (row loop: the patch matrix's rows, column loop: its ``q``), else None
    when it is no im2col gather."""
    if len(nest.loops) < 2 or nest.fill or nest.op is not None:
        return None
    row, col = nest.loops[-2], nest.loops[-1]
    st, ld = nest.store, nest.load
    shape = im2col_shape(ld.indices, col.loop_var, row.loop_var)
    if shape is None:
        return None
    dst, src = st.buffer, ld.buffer
    item = D.itemsize(src.dtype)
    kw, c = shape
    rd = dim_of(st.indices, row.loop_var)
    if rd is None or dim_of(st.indices, col.loop_var) != len(dst.shape) - 1 or \
            src.dtype != dst.dtype:
        return None
    rows, cols = row.extent.value, col.extent.value
    rs = row_strides(src)
    if rs[-1] != 1 or rs[-2] != c:      # the window's kw pixels are not contiguous
        return None
    vr, vc = (rows, cols) if nest.guard is None else \
        valid_part(nest.guard, row, col, rows, cols, where)
    first = {f.loop_var: f.min for f in (row, col)}
    base = [substitute(e, first) for e in ld.indices]
    src_region = BufferRegion(src, tuple(Range(m, IntImm(1, "int32")) for m in base))
    dst_stride = row_strides(dst)[rd] * item
    call = call_extern("int32", name or f"{acc.hal}_dma_load_im2col", region_of(dst, st.indices),
                       src_region, rows, cols * item, vr, vc * item, kw * c * item,
                       dst_stride, rs[-3] * item, rs[-2] * item, effect="writes:0")
    return Evaluate(call)


def im2col_header(acc) -> list:
    """The HAL declaration (when the DMA has the mode)."""
    return ["/* im2col: rows x row_bytes patch rows, segment t of seg_bytes read at "
            "src + t * src_row_stride + row * src_px_stride; zero past valid_bytes and "
            "valid_rows */",
            ] + dma_decls(acc, "load_im2col")


def im2col_sim(acc, event: int) -> str:
    """The simulator's gather and its cost (module doc)."""
    return f"""static int32_t cvl_x_load_im2col(int e, void *dst, const void *src, int32_t rows,
        int32_t row_bytes, int32_t valid_rows, int32_t valid_bytes,
        int32_t seg_bytes, int32_t dst_stride, int32_t src_row_stride,
        int32_t src_px_stride) {{
    int lo[1] = {{0}}, hi[1] = {{-1}};
    if (rows <= 0 || row_bytes <= 0 || seg_bytes <= 0) return 0;
    if (valid_rows > rows) valid_rows = rows;
    if (valid_bytes > row_bytes) valid_bytes = row_bytes;
    if (valid_rows < 0) valid_rows = 0;
    if (valid_bytes < 0) valid_bytes = 0;
    cvl_banks(dst, (int64_t)(rows - 1) * dst_stride + row_bytes, lo, hi);
    int64_t beats = 0, read = 0, kh = ((int64_t)valid_bytes + seg_bytes - 1) / seg_bytes;
    for (int32_t r = 0; r < rows; ++r) {{
        uint8_t *d = (uint8_t *)dst + (int64_t)r * dst_stride;
        memset(d, 0, (size_t)row_bytes);
        if (r >= valid_rows) continue;
        for (int64_t t = 0; t < kh; ++t) {{
            int64_t at = (int64_t)t * seg_bytes, n = valid_bytes - at;
            if (n > seg_bytes) n = seg_bytes;
            if (n <= 0) break;
            memcpy(d + at, (const uint8_t *)src + (int64_t)t * src_row_stride
                   + (int64_t)r * src_px_stride, (size_t)n);
            read += n;
        }}
    }}
    /* per row: one burst per segment, one for the zero tail */
    int64_t w = cvl_dw[e], seg_beats = ((int64_t)seg_bytes + w - 1) / w;
    int64_t tail = row_bytes - (int64_t)valid_bytes;
    beats = (int64_t)rows * (kh * seg_beats + (tail > 0 ? (tail + w - 1) / w : 0));
    cvl_issue(e, {event}, cvl_dlat[e], cvl_dlat[e] + beats, lo, hi, 1);
    cvl_sim_stats.bytes_in += read;
    return 0;
}}"""


__all__ = ["im2col_call", "im2col_header", "im2col_shape", "im2col_sim"]
