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


def schedule_gemm_cores(func, cores=4, tile=(128, 128, 64), t=16, axis="asc.core",
                        gemm="asc.mmad_16x16x16_i8", levels=ASCEND, double=True):
    """GEMM ``C = A @ B`` on ``cores`` cores: the rows split into one strip per core
    (bound to ``axis``), each strip tiled ``tile`` (rows, columns, reduction) and the
    tiles of ``t`` tensorized; B goes to the shared L2 once (above the bound loop),
    every tile through L1 and L0, the accumulators zero-filled by the DMA and read out
    through UB.  Sizes that do not divide are padded (``pad_einsum``)."""
    sch = func if isinstance(func, S.Schedule) else S.Schedule(func)
    (n, k), (_, m) = (tuple(int(d.value) for d in p.shape) for p in sch.func.params[:2])
    ti, n_pad = core_rows(n, cores, tile[0], t)
    tj, tk = min(tile[1], _ceil(m, t) * t), min(tile[2], _ceil(k, t) * t)
    blk = sch.get_block("C")
    pad = [cores * ti, tj, tk] if n_pad != n or m % tj or k % tk else None
    a_l1, b_l2, b_l1, a_l0, b_l0, c_ub, c_l0 = _stage_gemm(sch, blk, levels, pad)
    jo, ko, ii = tile_gemm_loops(sch, blk, (ti, tj, tk), t)
    ic, _ = sch.split(sch.get_loops(blk)[0], [cores, None])    # a strip per core
    for copy in (a_l0, b_l0, a_l1, b_l1):         # consumers first: each under ko
        sch.compute_at(copy, ko)
    sch.reverse_compute_at(c_l0, jo)
    sch.reverse_compute_at(c_ub, jo)
    init = sch.decompose_reduction(blk, ko)
    sch.tensorize(ii, gemm)
    whole_tile(sch, init)
    sch.bind(ic, axis)
    if double:      # every tile of the k loop two deep; the read-out a step behind
        sch.annotate(ko, "software_pipeline_stage", [0, 1, 0, 1, 2])
        sch.annotate(jo, "software_pipeline_stage", [0, 0, 1, 1])
    return sch


__all__ = ["ASCEND", "core_rows", "schedule_gemm_cores"]
