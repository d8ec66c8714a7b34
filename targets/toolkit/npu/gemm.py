"""An int8 GEMM and its schedule for an accelerator: stage A, B into the input and
weight memories and C into the accumulator, pad the computation to whole tiles when a
size is not a multiple of the tile (``pad_einsum``: the DMA zero-fills the edge tiles
on load and writes back only their valid part), tile, tensorize the inner 16x16x16
(or ``t``) block and the accumulator's zeroing, and optionally double-buffer the
staged tiles (TVM's ``software_pipeline_stage`` on the k-tile loop, whose copies run a
step ahead of the product, and on the output-tile loop, whose copy-out runs a step
behind).

Example::

    >>> import targets
    >>> from targets.accel.examples.toy_npu import toy_npu
    >>> _ = targets.register_target(toy_npu, replace=True)
    >>> sch = schedule_gemm(gemm(64), double=True)
    >>> mod = targets.build(sch, "toy-npu", name="gemm64")
    >>> "toy_npu_gemm_16x16x16(" in mod.get_source("c")
    True
"""

import cuvil_tir as T
import schedules as S


def gemm(n, m=None, k=None, in_dtype="int8", acc_dtype="int32"):
    """``C[n, m] = sum_k A[n, k] * B[k, m]`` with products in ``acc_dtype``."""
    m, k = m or n, k or n
    A = T.placeholder((n, k), in_dtype, name="A")
    B = T.placeholder((k, m), in_dtype, name="B")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((n, m), lambda i, j: T.sum(T.cast(A[i, r], acc_dtype) *
                                             T.cast(B[r, j], acc_dtype), axis=r), name="C")
    return T.create_prim_func([A, B, C])


def tile_gemm_loops(sch, blk, tiles, t):
    """Split the GEMM block's ``i, j, k`` loops into staged tiles of ``tiles`` and
    ``t``-sized intrinsic tiles, ordered ``io jo ko | i2 j2 k2 | ii ji ki``; returns
    ``(jo, ko, ii)``: the output-tile loop, the reduction-tile loop (where staged
    inputs are computed) and the first loop of the intrinsic's tile.

    Example::

        >>> import schedules as S
        >>> sch = S.Schedule(gemm(64))
        >>> jo, ko, ii = tile_gemm_loops(sch, sch.get_block("C"), (32, 32, 32), 16)
        >>> len(sch.get_loops(sch.get_block("C")))
        9
    """
    (i, j, k), (ti, tj, tk) = sch.get_loops(blk), tiles
    io, i1 = sch.split(i, [None, ti])
    i2, ii = sch.split(i1, [None, t])
    jo, j1 = sch.split(j, [None, tj])
    j2, ji = sch.split(j1, [None, t])
    ko, k1 = sch.split(k, [None, tk])
    k2, ki = sch.split(k1, [None, t])
    sch.reorder(io, jo, ko, i2, j2, k2, ii, ji, ki)
    return jo, ko, ii


def whole_tile(sch, init):
    """Fuse the accumulator initialisation's ``i2 j2 ii ji`` loops back into the rows
    and columns of its tile, so that a DMA fill (or a bias preload) is one transfer
    of the whole tile instead of one per intrinsic tile.

    Example::

        >>> import schedules as S
        >>> sch = S.Schedule(gemm(64))
        >>> blk = sch.get_block("C")
        >>> _ = tile_gemm_loops(sch, blk, (32, 32, 32), 16)
        >>> init = sch.decompose_reduction(blk, sch.get_loops(blk)[2])
        >>> whole_tile(sch, init)
        >>> [int(sch.get(lp).extent) for lp in sch.get_loops(init)[2:]]
        [32, 32]
    """
    i2, j2, ii, ji = sch.get_loops(init)[-4:]
    sch.reorder(i2, ii, j2, ji)
    sch.fuse(i2, ii)
    sch.fuse(j2, ji)


def schedule_gemm(func, tile=64, t=16, gemm="toy.gemm_16x16x16_i8",
                  zero="toy.zero_16x16_i32", scopes=("npu.inp", "npu.wgt", "npu.acc"),
                  double=False):
    """The schedule of the module doc (``tile``: the staged tile, ``t``: the intrinsic's).

    ``func`` may be a fresh ``S.Schedule`` (a tuning space passes its own, with a
    sampled ``tile``)."""
    sch = func if isinstance(func, S.Schedule) else S.Schedule(func)
    func = sch.func
    blk = sch.get_block("C")
    a = sch.cache_read(blk, 0, scopes[0])
    b = sch.cache_read(blk, 1, scopes[1])
    c = sch.cache_write(blk, 0, scopes[2])
    a_shape, b_shape = (tuple(int(d.value) for d in p.shape) for p in func.params[:2])
    if any(n % tile for n in a_shape + b_shape):
        sch.pad_einsum(blk, [tile, tile, tile])
    jo, ko, ii = tile_gemm_loops(sch, blk, (tile, tile, tile), t)
    sch.compute_at(a, ko)
    sch.compute_at(b, ko)
    sch.reverse_compute_at(c, jo)
    init = sch.decompose_reduction(blk, ko)
    sch.tensorize(ii, gemm)
    if zero:
        sch.tensorize(sch.get_loops(init)[-2], zero)
    else:
        whole_tile(sch, init)
    if double:
        sch.annotate(ko, "software_pipeline_stage", [0, 0, 1])     # copy A, copy B | GEMM
        sch.annotate(jo, "software_pipeline_stage", [0, 0, 1])     # zero, k loop | copy out
    return sch
