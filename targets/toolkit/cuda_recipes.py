"""GPU schedules for common workloads, shared by the tests, tutorial 07 and
``benchmarks/cuda.py``.  Each takes a :class:`schedules.Schedule` of the te function
and binds it for the ``cuda`` target; each is a handful of ordinary primitives, meant
to be read as examples.

Example::

    >>> import cuvil_tir as T, schedules as S
    >>> A = T.placeholder((256,), name="A")
    >>> sch = S.Schedule(T.create_prim_func([A, T.compute((256,), lambda i: A[i] + 1.0, name="B")]))
    >>> elementwise(sch, "B", threads=128)
    >>> [l.thread_tag for l in __import__("cuvil_tir").transform.gpu_threads.thread_loops(sch.func.body.block.body)]
    ['blockIdx.x', 'threadIdx.x']
"""

from __future__ import annotations

from cuvil_tir.analysis import tree
from cuvil_tir import dtype as D
from cuvil_tir import float8 as F8
from cuvil_tir.swizzle import Swizzle
from schedules.errors import ScheduleArgumentError
from targets.cuda.fragments import ACC_SCOPE, FILL_INTRIN, STORE_INTRIN
from targets.cuda import mma, wgmma
from targets.cuda.mma_fp8 import mma_name
from targets.cuda.tma_copy import TMA_KEY
from targets.cuda.warp_specialize import WS_KEY
from targets.cuda.tensorcore import wmma_name

# the Hopper GEMM written at the level of tiles (tensor copies, warp specialization)
from .cuda_tma_gemm import gemm_tma_wgmma  # noqa: F401


def elementwise(sch, block: str, threads: int = 256) -> None:
    """Fuse all loops of ``block``, split by ``threads``, bind blocks and threads.

    Example::

        >>> elementwise.__name__
        'elementwise'
    """
    loops = sch.get_loops(sch.get_block(block))
    fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    bx, tx = sch.split(fused, [None, threads])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")


def gemm(sch, block: str = "C", bm: int = 32, bn: int = 32, bk: int = 8, tm: int = 4,
         tn: int = 4, vector: int = 1, double_buffer: bool = False,
         stages: int | None = None, epilogue: str | None = None) -> None:
    """Shared-memory tiled GEMM: a ``bm x bn`` tile per thread block, ``tm x tn`` per
    thread accumulated in ``local`` registers, ``bk``-deep slices of A and B staged
    through ``shared`` memory by all threads together (``vector`` elements per thread
    and copy: 4 gives 16-byte loads); ``double_buffer`` keeps two stages of each
    tile so the next slice is fetched before the current one is used (``stages=N``:
    N tiles in flight), as TVM's ``software_pipeline_stage`` on the slice loop.
    ``epilogue``: the name of an elementwise block consuming C (bias, activation,
    cast), fused into the write-back of the accumulators (:func:`fuse_epilogue`).

    Example::

        >>> gemm.__name__
        'gemm'
    """
    blk = sch.get_block(block)
    loops = sch.get_loops(blk)
    i, j, k = loops[0], loops[1], loops[-1]
    by, ty, ti = sch.split(i, [None, bm // tm, tm])
    bx, tx, tj = sch.split(j, [None, bn // tn, tn])
    ko, ki = sch.split(k, [None, bk])
    if len(loops) == 4:             # a split-K slice (gemm_split_k): one per blockIdx.z
        sch.reorder(loops[2], by, bx, ko, ty, tx, ki, ti, tj)
        sch.bind(loops[2], "blockIdx.z")
    else:
        sch.reorder(by, bx, ko, ty, tx, ki, ti, tj)
    sch.bind(by, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    for loop in (ki, ti, tj):
        sch.unroll(loop)            # the tm x tn accumulators stay in registers
    cl = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(cl, bx)
    wi, wj = sch.get_loops(cl)[-2:]
    wy, wi = sch.split(wi, [bm // tm, tm])
    wx, wj = sch.split(wj, [bn // tn, tn])
    sch.reorder(wy, wx, wi, wj)
    sch.bind(wy, "threadIdx.y")
    sch.bind(wx, "threadIdx.x")
    for idx in (0, 1):
        sh = sch.cache_read(blk, idx, "shared")
        sch.compute_at(sh, ko)
        ax0, ax1 = sch.get_loops(sh)[-2:]
        if vector > 1:
            # the vector is the innermost axis, so its offsets stay provably aligned
            ax1, vec = sch.split(ax1, [None, vector])
            sch.vectorize(vec)
        fused = sch.fuse(ax0, ax1)
        _, t1, t0 = sch.split(fused, [None, bm // tm, bn // tn])
        sch.bind(t1, "threadIdx.y")
        sch.bind(t0, "threadIdx.x")
    stages = stages or (2 if double_buffer else 1)
    if stages > 1:                  # the two copies, then the product
        sch.annotate(ko, "software_pipeline_stage", [0, 0, stages - 1])
    sch.decompose_reduction(blk, ko)    # zero the accumulators once, before the k loop
    fuse_epilogue(sch, epilogue)


def gemm_split_k(sch, splits: int, block: str = "C", threads: int = 256, **tiles) -> None:
    """GEMM with the reduction split ``splits`` ways (split-K, for shapes whose
    ``M x N`` tiles are too few to fill the GPU while ``K`` is long): ``rfactor``
    makes ``splits`` partial products, each a tiled GEMM (:func:`gemm`, ``tiles``)
    over its share of ``K`` with the split on ``blockIdx.z``; a second kernel adds
    them up, ``threads`` outputs per block.  The partials live in a ``global``
    temporary the host program allocates.

    Example::

        >>> gemm_split_k.__name__
        'gemm_split_k'
    """
    blk = sch.get_block(block)
    k = sch.get_loops(blk)[-1]
    ks, _ = sch.split(k, [splits, None])
    rf = sch.rfactor(ks, 0)
    gemm(sch, block=_block_node(sch, rf).name, **tiles)
    i, j, kk = sch.get_loops(sch.get_block(block))
    bo, tx = sch.split(sch.fuse(i, j), [None, threads])
    sch.bind(bo, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")


def fuse_epilogue(sch, epilogue: str | None) -> None:
    """Fuse the elementwise block ``epilogue`` (a bias, an activation, a cast of the
    GEMM's result) into the write-back of the accumulators: the GEMM's own output then
    never reaches memory (``reverse_compute_inline``).

    Example::

        >>> fuse_epilogue(None, None)
    """
    if epilogue is not None:
        sch.reverse_compute_inline(sch.get_block(epilogue))


def row_reduce(sch, block: str, threads: int = 128) -> None:
    """One row per thread block, the reduction split over ``threads`` threads
    (each adds a contiguous run, then warp shuffles and shared memory combine them).

    Example::

        >>> row_reduce.__name__
        'row_reduce'
    """
    blk = sch.get_block(block)
    i, k = sch.get_loops(blk)
    tx, _ = sch.split(k, [threads, None])
    sch.bind(i, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")


def softmax(sch, threads: int = 128) -> None:
    """Fused row softmax (the four stages of ``T.compute`` max/exp/sum/divide): one
    row per block, ``exp`` inlined, the row max and sum kept in ``shared`` memory and
    computed by cross-thread reductions, the output written coalesced.

    Example::

        >>> softmax.__name__
        'softmax'
    """
    mx, ex, sm, out = (sch.get_block(n) for n in ("row_max", "exp", "row_sum", "softmax"))
    sch.compute_inline(ex)
    i, j = sch.get_loops(out)
    _, tx = sch.split(j, [None, threads])
    sch.bind(i, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    for b in (sm, mx):
        sch.set_scope(b, 0, "shared")
        sch.compute_at(b, i)
        t, _ = sch.split(sch.get_loops(b)[-1], [threads, None])
        sch.bind(t, "threadIdx.x")


def conv2d(sch, threads: int = 64, pad_block: str = "pad", block: str = "conv") -> None:
    """Direct NCHW conv2d: padding inlined, one (batch, output channel) pair and
    ``threads`` output pixels per thread block, each thread accumulating its pixel in
    a ``local`` register, the channel's filter staged once per block in ``shared``.

    Example::

        >>> conv2d.__name__
        'conv2d'
    """
    sch.compute_inline(sch.get_block(pad_block))
    blk = sch.get_block(block)
    b, f, y, x = sch.get_loops(blk)[:4]
    bf = sch.fuse(b, f)
    bo, tx = sch.split(sch.fuse(y, x), [None, threads])
    sch.bind(bf, "blockIdx.y")
    sch.bind(bo, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    cl = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(cl, tx)
    reads = [r.buffer.name for r in _block_node(sch, blk).reads]
    ws = sch.cache_read(blk, reads.index("W"), "shared")
    sch.compute_at(ws, bo)
    fused = sch.fuse(*sch.get_loops(ws)[2:])
    _, t = sch.split(fused, [None, threads])
    sch.bind(t, "threadIdx.x")


def _block_node(sch, rv):
    return tree.get(sch.func, tree.find_block(sch.func, rv.name)).block


def _lanes(sch, loops, split):
    """Fuse ``loops`` and spread them over the given thread axes (outer first)."""
    fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    parts = sch.split(fused, [None] + [n for _, n in split])
    for loop, (tag, _) in zip(parts[1:], split):
        sch.bind(loop, tag)


def _stage_inputs(sch, blk, ko, rows, pad, vector, warps, annotate=None) -> list:
    """Stage A and B (reads 0, 1 of ``blk``) in ``shared`` memory at each ``ko`` slice,
    their rows (of ``rows`` elements) padded by ``pad`` elements, copied ``vector``
    elements at a time by the threads ``warps`` names (``annotate``: a key given to
    the copy's outermost loop, e.g. ``"cuda.tma"``); the copy blocks."""
    out = []
    for idx, row in enumerate(rows):
        sh = sch.cache_read(blk, idx, "shared")
        sch.compute_at(sh, ko)
        depth = len(sch.get_loops(sh)) - 2
        ax0, ax1 = sch.get_loops(sh)[-2:]
        if pad:
            sch.storage_align(sh, 0, 0, row, pad)
        if vector > 1:
            ax1, vec = sch.split(ax1, [None, vector])
            sch.vectorize(vec)
        _lanes(sch, [ax0, ax1], warps)
        if annotate is not None:
            sch.annotate(sch.get_loops(sh)[depth], annotate, 1)
        out.append(sh)
    return out


def gemm_tensorcore(sch, block: str = "C", bm: int = 64, bn: int = 64, bk: int = 32,
                    epilogue: str | None = None, warp_m: int = 16, warp_n: int = 16,
                    accumulator: str = "registers", vector: int = 1,
                    pad: int | None = None) -> None:
    """fp16, bf16 or fp8 GEMM on tensor cores with fp32 accumulation: a ``bm x bn`` tile
    per block, a ``warp_m x warp_n`` tile per warp (multiples of 16: warps on
    threadIdx.z/y, lanes on threadIdx.x), A and B slices of depth ``bk`` staged in
    ``shared`` memory, each 16 x 16 tile computed by
    ``cuda.wmma_16x16x{bk}_{f16,bf16}f32`` or, for fp8 (sm_89+, accumulated in
    shared memory), ``cuda.mma_16x16x{bk}_{e4m3,e5m2}f32`` (the inputs' dtype).  ``accumulator``:
    ``"registers"`` keeps the warp's C tiles in ``wmma.accumulator`` fragments for the
    whole K loop (zeroed by ``cuda.wmma_fill_16x16_f32``, stored once by
    ``cuda.wmma_store_16x16_f32``; :mod:`targets.cuda.fragments`), ``"shared"``
    accumulates in shared memory (each K slice loads and stores the C tile).
    ``epilogue`` as for :func:`gemm`, applied as the C tile leaves through shared
    memory.  ``vector``: elements per thread and copy into shared memory (8: 16-byte
    loads of float16/bfloat16).  ``pad``: elements added to each staged row of A and B
    (``storage_align``; by default 16 bytes' worth, which makes the rows of a fragment
    load fall in different shared-memory banks).

    Example::

        >>> gemm_tensorcore.__name__
        'gemm_tensorcore'
    """
    if accumulator not in ("registers", "shared"):
        raise ScheduleArgumentError(f"gemm_tensorcore: accumulator must be 'registers' or "
                                    f"'shared', found {accumulator!r}")
    if accumulator == "shared":
        warp_m = warp_n = 16
    for name, v, tile in (("warp_m", warp_m, bm), ("warp_n", warp_n, bn)):
        if v % 16 or tile % v:
            raise ScheduleArgumentError(f"gemm_tensorcore: {name}={v} must be a multiple "
                                        f"of 16 dividing the block tile {tile}")
    blk = sch.get_block(block)
    dtype = _block_node(sch, blk).reads[0].buffer.dtype
    if F8.is_float8(dtype):
        if accumulator != "shared":
            raise ScheduleArgumentError(f"gemm_tensorcore: {dtype} inputs accumulate in "
                                        "shared memory (accumulator='shared'): "
                                        "wmma.accumulator fragments take float16 and "
                                        "bfloat16 steps only")
        intrin = mma_name(bk, dtype)
    else:
        intrin = wmma_name(bk, dtype)
    if pad is None:
        pad = 128 // D.bits(dtype)
    wz, wy, fm, fn = bm // warp_m, bn // warp_n, warp_m // 16, warp_n // 16
    warps = [("threadIdx.z", wz), ("threadIdx.y", wy), ("threadIdx.x", 32)]
    i, j, k = sch.get_loops(blk)
    by, ty, io, ii = sch.split(i, [None, wz, fm, 16])
    bx, tx, jo, jj = sch.split(j, [None, wy, fn, 16])
    ko, ki = sch.split(k, [None, bk])
    sch.reorder(by, bx, ko, ty, tx, io, jo, ii, jj, ki)
    sch.bind(by, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(ty, "threadIdx.z")
    sch.bind(tx, "threadIdx.y")
    staged = accumulator == "shared" or epilogue is not None
    out = sch.cache_write(blk, 0, "shared") if staged else None
    acc = sch.cache_write(blk, 0, ACC_SCOPE) if accumulator == "registers" else None
    for cache in (acc, out):
        if cache is not None:
            sch.reverse_compute_at(cache, bx)
    if out is not None:
        _lanes(sch, sch.get_loops(out)[-2:], warps)
    _stage_inputs(sch, blk, ko, (bk, bn), pad, vector, warps)
    init = sch.decompose_reduction(blk, ko)
    if acc is None:
        _lanes(sch, sch.get_loops(init)[-2:], [("threadIdx.x", 32)])
    else:
        for loop in sch.get_loops(init)[-4:-2]:
            sch.unroll(loop)
        sch.tensorize(sch.get_loops(init)[-2], FILL_INTRIN)
        r0, r1 = sch.get_loops(acc)[-2:]
        wa, fa, ra = sch.split(r0, [wz, fm, 16])
        wb, fb, rb = sch.split(r1, [wy, fn, 16])
        sch.reorder(wa, wb, fa, fb, ra, rb)
        sch.bind(wa, "threadIdx.z")
        sch.bind(wb, "threadIdx.y")
        sch.unroll(fa)
        sch.unroll(fb)
        sch.tensorize(ra, STORE_INTRIN)
    # the warp's fragments are indexed by constants once their loops are unrolled
    sch.unroll(io)
    sch.unroll(jo)
    sch.tensorize(ii, intrin)
    fuse_epilogue(sch, epilogue)


def gemm_mma(sch, block: str = "C", bm: int = 128, bn: int = 128, bk: int = 32,
             warp_m: int = 64, warp_n: int = 64, vector: int | None = None,
             pad: int | None = None, swizzle: bool = False, stages: int = 1,
             cp_async: bool = False) -> None:
    """fp16, bf16 (fp32 accumulation) or int8 (int32) GEMM on ``mma.sync`` fed by
    ``ldmatrix`` (:mod:`targets.cuda.mma`): a ``bm x bn`` tile per block, a ``warp_m x
    warp_n`` tile per warp (warps on threadIdx.z/y, lanes on threadIdx.x) accumulated
    in the warp's registers (``warp`` scope) for the whole K loop, A and B slices of
    depth ``bk`` staged in ``shared`` memory by all threads (``vector`` elements per
    copy; by default 16 bytes' worth), each warp's slice one ``cuda.mma_{warp_m}x{warp_n}x{bk}`` step.  int8 reads
    B as ``[N, K]`` (``C[i, j] += A[i, k] * B[j, k]``).  ``pad``: elements added to
    each staged row (``storage_align``; by default 16 bytes' worth, which puts the 8
    rows of an ``ldmatrix`` in different banks).  ``swizzle``: no padding; instead
    the staged tiles are laid out through an XOR swizzle (``transform_layout`` with
    :func:`mma_swizzle`), which makes the loads conflict-free without wasting
    shared memory.  ``stages``: slices of A and B in flight (``software_pipeline_stage``
    on the K loop: the next slices are copied while the warps compute on this one).
    ``cp_async`` (with ``stages`` > 1): the copies are asynchronous (TVM's
    ``software_pipeline_async_stages`` on stage 0: ``cp.async`` of 16 bytes, sm_80+,
    one group per K slice, waited for before the warps read it).

    Example::

        >>> gemm_mma.__name__
        'gemm_mma'
    """
    for name, v, tile in (("warp_m", warp_m, bm), ("warp_n", warp_n, bn)):
        if v not in mma.WARP_TILES or tile % v:
            raise ScheduleArgumentError(f"gemm_mma: {name}={v} must be one of "
                                        f"{mma.WARP_TILES} dividing the block tile {tile}")
    blk = sch.get_block(block)
    dtype = _block_node(sch, blk).reads[0].buffer.dtype
    intrin = mma.mma_name(warp_m, warp_n, bk, dtype)
    if pad is None:
        pad = 0 if swizzle else 128 // D.bits(dtype)
    vector = vector or 128 // D.bits(dtype)
    wz, wy = bm // warp_m, bn // warp_n
    warps = [("threadIdx.z", wz), ("threadIdx.y", wy), ("threadIdx.x", 32)]
    i, j, k = sch.get_loops(blk)
    by, ty, ii = sch.split(i, [None, wz, warp_m])
    bx, tx, jj = sch.split(j, [None, wy, warp_n])
    ko, ki = sch.split(k, [None, bk])
    sch.reorder(by, bx, ko, ty, tx, ii, jj, ki)
    sch.bind(by, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(ty, "threadIdx.z")
    sch.bind(tx, "threadIdx.y")
    acc = sch.cache_write(blk, 0, mma.WARP_SCOPE)
    sch.reverse_compute_at(acc, bx)
    rows = (bk, bk if dtype == "int8" else bn)
    staged = _stage_inputs(sch, blk, ko, rows, pad, vector, warps)
    if stages > 1:                  # the two copies, then the product
        sch.annotate(ko, "software_pipeline_stage", [0, 0, stages - 1])
        if cp_async:
            sch.annotate(ko, "software_pipeline_async_stages", [0])
    elif cp_async:
        raise ScheduleArgumentError("gemm_mma: cp_async overlaps the copies of later K "
                                    "slices with this one's product; it needs stages >= 2, "
                                    f"found stages={stages}")
    init = sch.decompose_reduction(blk, ko)
    sch.tensorize(sch.get_loops(init)[-2], mma.fill_name(warp_m, warp_n, dtype))
    r0, r1 = sch.get_loops(acc)[-2:]
    wa, ra = sch.split(r0, [wz, warp_m])
    wb, rb = sch.split(r1, [wy, warp_n])
    sch.reorder(wa, wb, ra, rb)
    sch.bind(wa, "threadIdx.z")
    sch.bind(wb, "threadIdx.y")
    sch.tensorize(ra, mma.store_name(warp_m, warp_n, dtype))
    sch.tensorize(ii, intrin)
    if swizzle:
        for sh, row in zip(staged, rows):
            sch.transform_layout(sh, 0, mma_swizzle(dtype, row).index_map())


def gemm_wgmma(sch, block: str = "C", bm: int = 128, bn: int = 128,
               tma: bool = False, stages: int = 1,
               warp_specialize: bool | tuple = False) -> None:
    """fp16 or bf16 GEMM ``C = A @ B.T`` (B ``[N, K]``, fp32 accumulation) on Hopper's
    warpgroup tensor cores (``wgmma``, sm_90a; :mod:`targets.cuda.wgmma`): a ``bm x bn``
    tile per block, ``bm / 64`` warpgroups (threadIdx.y; 128 threads each on
    threadIdx.x), each holding its ``64 x bn`` accumulators in registers for the whole
    K loop, 64-deep slices of A and B staged in shared memory by all threads (16-byte
    copies) through the 128-byte swizzle that ``wgmma`` reads.  ``tma``: the tensor
    engine copies each slice instead (the copy annotated ``"cuda.tma"``:
    :mod:`targets.cuda.tma_copy`), straight into the swizzled layout.  ``stages``:
    slices of A and B in flight (``software_pipeline_stage`` on the K loop; with
    ``tma``, a ring of ``stages`` shared buffers each completing on its own mbarrier,
    :mod:`targets.cuda.tma_ring`).  ``warp_specialize`` (with ``tma`` and ``stages``
    > 1): one more warpgroup issues the copies while the ``bm / 64`` others compute,
    "full" and "empty" mbarriers between them (the K loop annotated
    ``"cuda.warp_specialize"``, :mod:`targets.cuda.warp_specialize`); a pair
    ``(producer, consumer)`` of register counts also moves registers from the producer
    to the consumers (``setmaxnreg``, e.g. ``(40, 232)`` with ``bm=128``).

    Example::

        >>> gemm_wgmma.__name__
        'gemm_wgmma'
    """
    if bm % 64 or bn not in wgmma.WGMMA_N:
        raise ScheduleArgumentError(f"gemm_wgmma: bm must be a multiple of 64 and bn one "
                                    f"of {wgmma.WGMMA_N}; found {bm} and {bn}")
    blk = sch.get_block(block)
    dtype = _block_node(sch, blk).reads[0].buffer.dtype
    intrin = wgmma.wgmma_name(bn, dtype)
    groups = bm // 64
    threads = [("threadIdx.y", groups), ("threadIdx.x", 128)]
    i, j, k = sch.get_loops(blk)
    by, ty, ii = sch.split(i, [None, groups, 64])
    bx, jj = sch.split(j, [None, bn])
    row = wgmma.row_elements(dtype)        # K of one call: a 128-byte row
    ko, ki = sch.split(k, [None, row])
    sch.reorder(by, bx, ko, ty, ii, jj, ki)
    sch.bind(by, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    acc = sch.cache_write(blk, 0, wgmma.WARPGROUP_SCOPE)
    sch.reverse_compute_at(acc, bx)
    staged = _stage_inputs(sch, blk, ko, (row, row), 0, 128 // D.bits(dtype), threads,
                           TMA_KEY if tma else None)
    if stages > 1:                  # the two copies, then the product
        sch.annotate(ko, "software_pipeline_stage", [0, 0, stages - 1])
    if warp_specialize:
        if not (tma and stages > 1):
            raise ScheduleArgumentError(f"gemm_wgmma: warp_specialize gives the tensor copies "
                                        f"of a ring to a producer warpgroup; it needs tma=True "
                                        f"and stages >= 2, found tma={tma}, stages={stages}")
        sch.annotate(ko, WS_KEY, 1 if warp_specialize is True else list(warp_specialize))
    init = sch.decompose_reduction(blk, ko)
    sch.tensorize(sch.get_loops(init)[-2], f"cuda.wgmma_fill_64x{bn}_f32")
    r0, r1 = sch.get_loops(acc)[-2:]
    wa, ra = sch.split(r0, [groups, 64])
    sch.bind(wa, "threadIdx.y")
    sch.tensorize(ra, f"cuda.wgmma_store_64x{bn}_f32")
    sch.tensorize(ii, intrin)
    for sh in staged:
        sch.transform_layout(sh, 0, wgmma.swizzle_of(dtype).index_map())


def mma_swizzle(dtype: str, row: int):
    """The XOR swizzle of a shared tile with rows of ``row`` elements read by
    ``ldmatrix`` (CUTLASS's 128-byte swizzle): the 16-byte chunks of a row trade
    places by the row's index so that 8 consecutive rows at one chunk lie in 8
    different 16-byte bank groups of a 128-byte line.

    Example::

        >>> mma_swizzle("float16", 64), mma_swizzle("float16", 32)
        (Swizzle(bits=3, base=3, shift=0), Swizzle(bits=2, base=3, shift=1))
    """
    base = (128 // D.bits(dtype)).bit_length() - 1          # a chunk: 16 bytes
    chunks = row >> base
    if chunks < 2 or chunks & (chunks - 1):
        raise ScheduleArgumentError(f"mma_swizzle: rows of {row} {dtype} elements hold "
                                    f"{row / (1 << base):g} 16-byte chunks; a swizzle "
                                    "needs a power of two of at least 2")
    bits = min(chunks, 8).bit_length() - 1
    # rows sharing a 128-byte line differ in their low bits: the swizzle reads the next
    return Swizzle(bits, base, 3 - bits)


__all__ = ["conv2d", "elementwise", "fuse_epilogue", "gemm", "gemm_mma", "gemm_split_k",
           "gemm_tma_wgmma", "gemm_wgmma", "gemm_tensorcore", "mma_swizzle", "row_reduce",
           "softmax"]
