"""Schedules for a multi-core NPU with a memory hierarchy (the Ascend-like example):
tiles bound to the cores with ``sch.bind(loop, <core axis>)``, operands staged through
the levels with chained ``cache_read``/``cache_write`` (host -> L2 -> L1 -> L0B for
the weights, host -> L1 -> L0A for the activations, L0C -> UB -> host for the
results; each copy becomes the DMA or the on-chip move the description names) and
every level double-buffered (``software_pipeline_stage``).

Example::

    >>> import targets
    >>> from targets.accel.examples.ascend_like import ascend
    >>> from targets.toolkit.npu.gemm import gemm
    >>> _ = targets.register_target(ascend, replace=True)
    >>> mod = targets.build(schedule_gemm_cores(gemm(64), cores=2), "ascend-like", name="g")
    >>> "ascend_like_core(" in mod.get_source("c")
    True
"""

import schedules as S

from targets.toolkit.npu.fused import tensorize_epilogue
from targets.toolkit.npu.gemm import tile_gemm_loops, whole_tile

#: the Ascend-like levels: (L2, L1, L0A, L0B, L0C, UB)
ASCEND = ("asc.l2", "asc.l1", "asc.l0a", "asc.l0b", "asc.l0c", "asc.ub")


def _ceil(a, b):
    return -(-a // b)


def core_rows(n, cores, tile, t):
    """The rows per tile when ``n`` rows are spread over ``cores`` in tiles of at most
    ``tile`` (a multiple of ``t``), and the padded ``n``.

    Example::

        >>> core_rows(512, 4, 128, 16), core_rows(100, 4, 128, 16)
        ((128, 512), (32, 128))
    """
    ti = min(tile, _ceil(_ceil(n, cores), t) * t)
    return ti, _ceil(n, cores * ti) * cores * ti


def _stage_gemm(sch, blk, levels, pad):
    """The chains of the module doc for a block ``C += A @ B``, padded to the tiles
    ``pad`` (or None) where the data enters the chip (the DMA zero-fills, so every
    on-chip move copies whole tiles): returns the copies ``(a_l1, b_l2, b_l1, a_l0,
    b_l0, c_ub, c_l0)``."""
    l2, l1, l0a, l0b, l0c, ub = levels
    a_l1 = sch.cache_read(blk, 0, l1)
    b_l2 = sch.cache_read(blk, 1, l2)
    c_ub = sch.cache_write(blk, 0, ub)
    if pad is not None:
        sch.pad_einsum(blk, pad)
    b_l1 = sch.cache_read(blk, 1, l1)
    a_l0 = sch.cache_read(blk, 0, l0a)
    b_l0 = sch.cache_read(blk, 1, l0b)
    c_l0 = sch.cache_write(blk, 0, l0c)
    return a_l1, b_l2, b_l1, a_l0, b_l0, c_ub, c_l0


def _finish(sch, blk, init_at, tile, gemm, core_loop, axis):
    """Zero the accumulators with one DMA fill per tile (initialisation above
    ``init_at``), tensorize ``tile`` with ``gemm`` and bind ``core_loop`` to the
    cores."""
    init = sch.decompose_reduction(blk, init_at)
    sch.tensorize(tile, gemm)
    whole_tile(sch, init)
    sch.bind(core_loop, axis)


def schedule_gemm_cores(func, cores=4, tile=(128, 128, 64), t=16, axis="asc.core",
                        gemm="asc.mmad_16x16x16_i8", levels=ASCEND, double=True,
                        strip_bytes=128 << 10):
    """GEMM ``C = A @ B`` on ``cores`` cores: the rows split into one strip per core
    (bound to ``axis``), each strip tiled ``tile`` (rows, columns, reduction) and the
    tiles of ``t`` tensorized; B goes to the shared L2 once (above the bound loop),
    every tile through L1 and L0, the accumulators zero-filled by the DMA and read out
    through UB; a row tile's whole strip of A (up to ``strip_bytes``) is loaded into L1
    once, so A is read from DDR once.  Sizes that do not divide are padded
    (``pad_einsum``)."""
    sch = func if isinstance(func, S.Schedule) else S.Schedule(func)
    (n, k), (_, m) = (tuple(int(d.value) for d in p.shape) for p in sch.func.params[:2])
    ti, n_pad = core_rows(n, cores, tile[0], t)
    tj, tk = min(tile[1], _ceil(m, t) * t), min(tile[2], _ceil(k, t) * t)
    blk = sch.get_block("C")
    pad = [cores * ti, tj, tk] if n_pad != n or m % tj or k % tk else None
    a_l1, b_l2, b_l1, a_l0, b_l0, c_ub, c_l0 = _stage_gemm(sch, blk, levels, pad)
    jo, ko, ii = tile_gemm_loops(sch, blk, (ti, tj, tk), t)
    ic, _ = sch.split(sch.get_loops(blk)[0], [cores, None])    # a strip per core
    for copy in (a_l0, b_l0, b_l1):               # consumers first: each under ko
        sch.compute_at(copy, ko)
    # A's whole row strip once per row tile when it fits: each byte of A read once
    strip = ti * _ceil(k, tk) * tk <= strip_bytes
    sch.compute_at(a_l1, sch.get_loops(blk)[1] if strip else ko)
    sch.reverse_compute_at(c_l0, jo)
    sch.reverse_compute_at(c_ub, jo)
    _finish(sch, blk, ko, ii, gemm, ic, axis)
    if double:      # every tile of the k loop two deep; the read-out a step behind
        sch.annotate(ko, "software_pipeline_stage", [1, 0, 1, 2] if strip else
                     [0, 1, 0, 1, 2])
        sch.annotate(jo, "software_pipeline_stage", [0, 0, 1, 1])
    return sch


def schedule_conv2d_cores(func, cores=4, t=16, axis="asc.core", gemm="asc.mmad_16x16x16_i8",
                          levels=ASCEND, double=True, strip=None):
    """The int8 conv2d of :mod:`targets.toolkit.npu.conv2d` on ``cores`` cores: output
    rows spread over the cores (padded to a multiple of them), the weights loaded into
    the shared L2 once and from there into each core's L1 and L0B once, each output
    row's input rows staged through L1 and L0A, its accumulators zero-filled in L0C and
    read out through UB; with ``double`` the rows run as a pipeline (load row y + 3 |
    move y + 2 | compute y + 1 | read out y).  ``strip``: load a core's whole strip of
    input rows into L1 once (each input row read once, one DMA latency) instead of the
    three input rows of each output row; by default when a core has fewer output rows
    than the pipeline has stages (five), where the per-row loads' latency never hides
    behind the rows (a small layer on many cores)."""
    l2, l1, l0a, l0b, l0c, ub = levels
    sch = S.Schedule(func)
    blk = sch.get_block("O")
    a_l1 = sch.cache_read(blk, 0, l1)
    # the weights shared through L2 (one core: straight into its L1), staged before
    # pad_einsum so the DMA pads them
    w_l1 = sch.cache_read(blk, 1, l2 if cores > 1 else l1)
    o_ub = sch.cache_write(blk, 0, ub)
    sch.pad_einsum(blk, [1, cores, t, t, 1, 1, t])
    if cores > 1:
        w_l1 = sch.cache_read(blk, 1, l1)
    a_l0 = sch.cache_read(blk, 0, l0a)
    w_l0 = sch.cache_read(blk, 1, l0b)
    o_l0 = sch.cache_write(blk, 0, l0c)
    _, y, x, oc, rh, rw, rc = sch.get_loops(blk)
    yc, yi = sch.split(y, [cores, None])
    xo, xi = sch.split(x, [None, t])
    oo, oi = sch.split(oc, [None, t])
    co, ci = sch.split(rc, [None, t])
    sch.reorder(yc, yi, xo, oo, rh, rw, co, xi, oi, ci)
    if strip is None:
        strip = -(-int(func.params[-1].shape[1].value) // cores) < 5
    for copy, at in ((a_l0, yi), (a_l1, yc if strip else yi), (w_l0, yc), (w_l1, yc)):
        sch.compute_at(copy, at)
    sch.reverse_compute_at(o_l0, yi)
    sch.reverse_compute_at(o_ub, yi)
    _finish(sch, blk, xo, xi, gemm, yc, axis)
    if double:
        sch.annotate(yi, "software_pipeline_stage", [1, 2, 2, 3, 4] if strip else
                     [0, 1, 2, 2, 3, 4])
    return sch


#: the fused epilogue on the Ascend-like vector unit
ASCEND_EPILOGUE = (("D", "asc.bias_add_16x16_i32"), ("R", "asc.relu_16x16_i32"),
                   ("Q", "asc.requant_16x16_i8"))


def schedule_fused_cores(func, cores=4, tile=(64, 128, 64), t=16, axis="asc.core",
                         gemm="asc.mmad_16x16x16_i8", levels=ASCEND,
                         epilogue=ASCEND_EPILOGUE, double=True):
    """:func:`targets.toolkit.npu.fused.fused_gemm` on ``cores`` cores: the GEMM as in
    :func:`schedule_gemm_cores` accumulating in L0C; per output tile the vector unit
    moves it to UB and runs the epilogue there (bias staged into UB by the DMA), and
    only the int8 result goes back to host memory (sizes must be multiples of the
    tiles)."""
    l2, l1, l0a, l0b, l0c, ub = levels
    sch = S.Schedule(func)
    (n, k), (_, m) = (tuple(int(d.value) for d in p.shape) for p in sch.func.params[:2])
    ti, _ = core_rows(n, cores, tile[0], t)
    tj, tk = min(tile[1], m), min(tile[2], k)
    blk = sch.get_block("C")
    a_l1 = sch.cache_read(blk, 0, l1)
    sch.cache_read(blk, 1, l2)
    b_l1 = sch.cache_read(blk, 1, l1)
    a_l0 = sch.cache_read(blk, 0, l0a)
    b_l0 = sch.cache_read(blk, 1, l0b)
    sch.set_scope(blk, 0, l0c)
    c_ub = sch.cache_read(sch.get_block(epilogue[0][0]), 0, ub)
    for name, _ in epilogue[:-1]:
        sch.set_scope(sch.get_block(name), 0, ub)
    out = sch.cache_write(sch.get_block(epilogue[-1][0]), 0, ub)
    jo, ko, ii = tile_gemm_loops(sch, blk, (ti, tj, tk), t)
    ic, _ = sch.split(sch.get_loops(blk)[0], [cores, None])
    for copy in (a_l0, b_l0, a_l1, b_l1):
        sch.compute_at(copy, ko)
    sch.reverse_compute_at(c_ub, jo)
    for name, _ in epilogue:
        sch.reverse_compute_at(sch.get_block(name), jo)
    sch.reverse_compute_at(out, jo)
    # staged after the move: its consumer must already sit under the tile loop
    sch.compute_at(sch.cache_read(sch.get_block(epilogue[0][0]), 1, ub), jo)
    tensorize_epilogue(sch, epilogue, t)
    _finish(sch, blk, ko, ii, gemm, ic, axis)
    if double:      # the tiles two deep; the epilogue of a tile while the next computes
        sch.annotate(ko, "software_pipeline_stage", [0, 1, 0, 1, 2])
        sch.annotate(jo, "software_pipeline_stage", [0, 0] + [1] * (len(epilogue) + 3))
    return sch


__all__ = ["ASCEND", "ASCEND_EPILOGUE", "core_rows", "schedule_conv2d_cores",
           "schedule_fused_cores", "schedule_gemm_cores"]
