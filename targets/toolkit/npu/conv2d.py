"""An int8 conv2d (NHWC input, HWIO weights) on an accelerator's GEMM intrinsic, as a
per-(kh, kw) accumulation of GEMMs: for each filter tap the 16 output pixels of a row
tile times 16 input channels times 16 output channels is one 16x16x16 call, the staged
input tile being the rows of the input the tap shifts to (an affine index map in the
staging copy).  Channel counts and widths that are not multiples of 16 are padded with
``pad_einsum`` (the DMA zero-fills).  The weights are staged once; one output row's
inputs are staged per output row (double-buffered on request: a three-stage
pipeline of loads, products and stores), its accumulators
written back once.

Example::

    >>> import targets
    >>> from targets.accel.examples.toy_npu import toy_npu
    >>> _ = targets.register_target(toy_npu, replace=True)
    >>> mod = targets.build(schedule_conv2d(conv2d(1, 6, 6, 8, 8)), "toy-npu", name="conv")
    >>> "toy_npu_gemm_16x16x16(" in mod.get_source("c")
    True
"""

import cuvil_tir as T
import schedules as S

from targets.toolkit.npu.gemm import whole_tile


def conv2d(n, h, w, c, k, kh=3, kw=3, in_dtype="int8", acc_dtype="int32"):
    """``O[b, y, x, o] = sum I[b, y + r, x + s, ci] * W[r, s, ci, o]`` (valid padding,
    stride 1) with products in ``acc_dtype``."""
    inp = T.placeholder((n, h, w, c), in_dtype, name="I")
    wgt = T.placeholder((kh, kw, c, k), in_dtype, name="W")
    rh = T.reduce_axis((0, kh), name="rh")
    rw = T.reduce_axis((0, kw), name="rw")
    rc = T.reduce_axis((0, c), name="rc")
    out = T.compute((n, h - kh + 1, w - kw + 1, k), lambda b, y, x, o: T.sum(
        T.cast(inp[b, y + rh, x + rw, rc], acc_dtype) * T.cast(wgt[rh, rw, rc, o], acc_dtype),
        axis=[rh, rw, rc]), name="O")
    return T.create_prim_func([inp, wgt, out])


def schedule_conv2d(func, t=16, gemm="toy.gemm_16x16x16_i8", zero="toy.zero_16x16_i32",
                    scopes=("npu.inp", "npu.wgt", "npu.acc"), double=False):
    """The schedule of the module doc (``t``: the intrinsic's tile)."""
    sch = S.Schedule(func)
    blk = sch.get_block("O")
    a = sch.cache_read(blk, 0, scopes[0])
    sch.cache_read(blk, 1, scopes[1])          # the weights: staged once, at the top
    o = sch.cache_write(blk, 0, scopes[2])
    sch.pad_einsum(blk, [1, 1, t, t, 1, 1, t])
    b, y, x, oc, rh, rw, rc = sch.get_loops(blk)
    xo, xi = sch.split(x, [None, t])
    oo, oi = sch.split(oc, [None, t])
    co, ci = sch.split(rc, [None, t])
    sch.reorder(b, y, xo, oo, rh, rw, co, xi, oi, ci)
    sch.compute_at(a, y)
    sch.reverse_compute_at(o, y)
    # the DMA zeroes a whole output row of accumulators at once (init above xo)
    init = sch.decompose_reduction(blk, rh if zero else xo)
    return _finish(sch, init, xi, y, gemm, zero, double)


def _finish(sch, init, xi, y, gemm, zero, double):
    """Tensorize the product and the zeroing (or let the DMA fill the output row's
    accumulators with zeros, at once), pipeline the rows on request."""
    sch.tensorize(xi, gemm)
    if zero:
        sch.tensorize(sch.get_loops(init)[-2], zero)
    else:
        whole_tile(sch, init)
    if double:      # load row y + 2 | compute row y + 1 | store row y
        sch.annotate(y, "software_pipeline_stage", [0, 1, 2] if zero else [0, 1, 1, 2])
    return sch


def conv2d_im2col(n, h, w, c, k, kh=3, kw=3, in_dtype="int8", acc_dtype="int32"):
    """The conv2d of :func:`conv2d` as one GEMM over ``q = (r, s, ci)`` (im2col): the
    weights are the ``[kh*kw*c, k]`` matrix (HWIO flattened: ``W.reshape(-1, k)``), the
    input is read at ``I[b, y + q // (kw*c), x + (q // c) % kw, q % c]``."""
    inp = T.placeholder((n, h, w, c), in_dtype, name="I")
    wgt = T.placeholder((kh * kw * c, k), in_dtype, name="W")
    q = T.reduce_axis((0, kh * kw * c), name="q")
    out = T.compute((n, h - kh + 1, w - kw + 1, k), lambda b, y, x, o: T.sum(
        T.cast(inp[b, y + q // (kw * c), x + (q // c) % kw, q % c], acc_dtype)
        * T.cast(wgt[q, o], acc_dtype), axis=q), name="O")
    return T.create_prim_func([inp, wgt, out])


def schedule_conv2d_im2col(func, t=16, gemm="toy.gemm_16x16x16_i8",
                           zero="toy.zero_16x16_i32",
                           scopes=("npu.inp", "npu.wgt", "npu.acc"), double=False):
    """:func:`conv2d_im2col` on a device whose DMA gathers im2col patches
    (``DMA(im2col=True)``): per output row, the patch matrix ``P[x, q]`` is staged in
    the matrix unit's layout (``reindex_cache_read``: one DMA command), ``q`` padded to
    whole tiles (the DMA zero-fills), and the row is a GEMM of ``P`` by the staged
    weights; double-buffered on request as :func:`schedule_conv2d`."""
    sch = S.Schedule(func)
    blk = sch.get_block("O")
    a = sch.reindex_cache_read(blk, 0, scopes[0], lambda b, y, x, o, q: (b, y, x, q))
    sch.cache_read(blk, 1, scopes[1])          # the weights: staged once, at the top
    o = sch.cache_write(blk, 0, scopes[2])
    sch.pad_einsum(blk, [1, 1, t, t, t])
    b, y, x, oc, q = sch.get_loops(blk)
    xo, xi = sch.split(x, [None, t])
    oo, oi = sch.split(oc, [None, t])
    qo, qi = sch.split(q, [None, t])
    sch.reorder(b, y, xo, oo, qo, xi, oi, qi)
    sch.compute_at(a, y)
    sch.reverse_compute_at(o, y)
    init = sch.decompose_reduction(blk, qo if zero else xo)
    return _finish(sch, init, xi, y, gemm, zero, double)
