"""A fused int8 GEMM + bias + ReLU + requantize on an accelerator: the GEMM accumulates
in the accumulator memory, and the epilogue runs there on the vector unit (a bias add
broadcast along rows, ReLU, requantize = shift and clip to int8), so only the int8
result leaves the device.

``Q[i, j] = requant(max(sum_k A[i, k] * B[k, j] + bias[j], 0))`` with
``requant(x) = int8(clip(floor(x / 2**shift), -128, 127))``.

Example::

    >>> import targets
    >>> from targets.accel.examples.toy_npu import toy_npu
    >>> _ = targets.register_target(toy_npu, replace=True)
    >>> mod = targets.build(schedule_fused(fused_gemm(32, 64, 32)), "toy-npu", name="fused")
    >>> "toy_npu_requant_16x16(" in mod.get_source("c")
    True
"""

import cuvil_tir as T
import schedules as S

from targets.toolkit.npu.gemm import tile_gemm_loops, whole_tile
from targets.accel.examples.toy_npu import requant


def fused_gemm(n, m, k, requantize=requant):
    """The workload of the module doc (``A: (n, k)``, ``B: (k, m)`` int8, ``bias: (m,)``
    int32, ``Q: (n, m)`` int8)."""
    A = T.placeholder((n, k), "int8", name="A")
    B = T.placeholder((k, m), "int8", name="B")
    bias = T.placeholder((m,), "int32", name="bias")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((n, m), lambda i, j: T.sum(T.cast(A[i, r], "int32") *
                                             T.cast(B[r, j], "int32"), axis=r), name="C")
    D = T.compute((n, m), lambda i, j: C[i, j] + bias[j], name="D")
    R = T.compute((n, m), lambda i, j: T.max(D[i, j], T.const(0, "int32")), name="R")
    Q = T.compute((n, m), lambda i, j: requantize(R[i, j]), name="Q")
    return T.create_prim_func([A, B, bias, Q])


def fused_gemm_bias_init(n, m, k, requantize=requant):
    """The same ``Q`` as :func:`fused_gemm`, written as a Gemmini-style device computes
    it: the accumulator starts from the bias (``T.sum(..., init=bias[j])``) and ``Q``
    is the ReLU and requantization of the accumulator, one element-wise step that a
    DMA can apply on read-out.

    Example::

        >>> f = fused_gemm_bias_init(32, 32, 32)
        >>> [p.name for p in f.params]
        ['A', 'B', 'bias', 'Q']
    """
    A = T.placeholder((n, k), "int8", name="A")
    B = T.placeholder((k, m), "int8", name="B")
    bias = T.placeholder((m,), "int32", name="bias")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((n, m), lambda i, j: T.sum(T.cast(A[i, r], "int32") *
                                             T.cast(B[r, j], "int32"), axis=r,
                                             init=bias[j]), name="C")
    Q = T.compute((n, m), lambda i, j: requantize(T.max(C[i, j], T.const(0, "int32"))),
                  name="Q")
    return T.create_prim_func([A, B, bias, Q])


def schedule_fused_readout(func, tile_i=64, tile_j=64, tile_k=64, t=16,
                           scopes=("gem.spad", "gem.spad", "gem.acc"),
                           gemm="gemmini.matmul_16x16x16_i8", double=False):
    """:func:`fused_gemm_bias_init` on a device without a vector unit: A and B staged,
    C kept in the accumulator (``scopes[2]``), its initialisation a DMA load of the
    bias broadcast down the tile's rows, the GEMM tensorized, and ``Q`` computed under
    the output-tile loop, where it is the DMA's store with activation."""
    (n, k), (_, m) = (tuple(int(d.value) for d in p.shape) for p in func.params[:2])
    sch = S.Schedule(func)
    blk = sch.get_block("C")
    a = sch.cache_read(blk, 0, scopes[0])
    b = sch.cache_read(blk, 1, scopes[1])
    sch.set_scope(blk, 0, scopes[2])
    jo, ko, ii = tile_gemm_loops(sch, blk, (min(tile_i, n), min(tile_j, m),
                                            min(tile_k, k)), t)
    sch.compute_at(a, ko)
    sch.compute_at(b, ko)
    sch.reverse_compute_at(sch.get_block("Q"), jo)
    init = sch.decompose_reduction(blk, ko)
    sch.tensorize(ii, gemm)
    whole_tile(sch, init)
    if double:      # loads a step ahead of the product; the read-out a step behind
        sch.annotate(ko, "software_pipeline_stage", [0, 0, 1])
        sch.annotate(jo, "software_pipeline_stage", [0, 0, 1])
    return sch


EPILOGUE = (("D", "toy.bias_add_16x16_i32"), ("R", "toy.relu_16x16_i32"),
            ("Q", "toy.requant_16x16_i8"))


def schedule_fused(func, tile_i=32, tile_j=64, tile_k=64, t=16, acc="npu.acc",
                   scopes=("npu.inp", "npu.wgt"), gemm="toy.gemm_16x16x16_i8",
                   zero="toy.zero_16x16_i32", epilogue=EPILOGUE, double=False):
    """Stage A and B, keep C, the bias and every epilogue result in ``acc``, tile the
    GEMM, move the epilogue under the output-tile loop and tensorize each of its
    blocks in ``t`` x ``t`` tiles (sizes must be multiples of the tiles)."""
    (n, k), (_, m) = (tuple(int(d.value) for d in p.shape) for p in func.params[:2])
    tile_i, tile_j, tile_k = min(tile_i, n), min(tile_j, m), min(tile_k, k)
    sch = S.Schedule(func)
    blk = sch.get_block("C")
    a = sch.cache_read(blk, 0, scopes[0])
    b = sch.cache_read(blk, 1, scopes[1])
    for name, _ in (("C", None),) + tuple(epilogue[:-1]):
        sch.set_scope(sch.get_block(name), 0, acc)
    out = sch.cache_write(sch.get_block(epilogue[-1][0]), 0, acc)
    jo, ko, ii = tile_gemm_loops(sch, blk, (tile_i, tile_j, tile_k), t)
    sch.compute_at(a, ko)
    sch.compute_at(b, ko)
    for name, _ in epilogue:
        sch.reverse_compute_at(sch.get_block(name), jo)
    sch.reverse_compute_at(out, jo)
    # staged after the move: its consumer must already sit under the tile loop
    sch.compute_at(sch.cache_read(sch.get_block(epilogue[0][0]), 1, acc), jo)
    for name, intrin in epilogue:
        x, y = sch.get_loops(sch.get_block(name))[-2:]
        xo, xi = sch.split(x, [None, t])
        yo, yi = sch.split(y, [None, t])
        sch.reorder(xo, yo, xi, yi)
        sch.tensorize(xi, intrin)
    init = sch.decompose_reduction(blk, ko)
    sch.tensorize(ii, gemm)
    sch.tensorize(sch.get_loops(init)[-2], zero)
    if double:      # the copies of A and B, then the product: two tiles in flight
        sch.annotate(ko, "software_pipeline_stage", [0, 0, 1])
    return sch
