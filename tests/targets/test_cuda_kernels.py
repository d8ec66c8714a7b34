"""Larger cuda kernels through the interpreter: double-buffered GEMM, conv2d."""

from __future__ import annotations

import numpy as np
import pytest

import cuvil_tir as T
from targets.toolkit import cuda_recipes as recipes
from tests.workloads import conv2d_nchw

from .cuda_helpers import build, compile_all, rand, sch_for


def _gemm_db():
    A = T.placeholder((32, 32), name="A")
    B = T.placeholder((32, 32), name="B")
    r = T.reduce_axis((0, 32), name="k")
    C = T.compute((32, 32), lambda i, j: T.sum(A[i, r] * B[r, j], axis=r), name="C")
    sch = sch_for(T.create_prim_func([A, B, C]))
    recipes.gemm(sch, bm=16, bn=16, bk=8, tm=2, tn=2, vector=4, double_buffer=True)
    return build(sch, "gemm_db")


CONV = conv2d_nchw(2, 3, 8, 8, 4)


def _tensorcore(m=64, n=64, k=64):
    A = T.placeholder((m, k), "float16", name="A")
    B = T.placeholder((k, n), "float16", name="B")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((m, n), lambda i, j: T.sum(A[i, r].astype("float32")
                                             * B[r, j].astype("float32"), axis=r), name="C")
    sch = sch_for(T.create_prim_func([A, B, C]))
    recipes.gemm_tensorcore(sch, bm=32, bn=32, bk=32)
    return build(sch, "tc_gemm")


def _conv():
    sch = sch_for(CONV.func)
    recipes.conv2d(sch, threads=32)
    return build(sch, "conv")


def _dynamic_shared(n=16384):
    A = T.placeholder((n,), name="A")
    B = T.compute((n,), lambda i: A[n - 1 - i] * 2.0, name="B")
    sch = sch_for(T.create_prim_func([A, B]))
    blk = sch.get_block("B")
    bx, _, tx = sch.split(sch.get_loops(blk)[0], [1, None, 256])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sh = sch.cache_read(blk, 0, "shared")
    sch.compute_at(sh, bx)
    _, t = sch.split(sch.get_loops(sh)[-1], [None, 256])
    sch.bind(t, "threadIdx.x")
    return build(sch, "dyn")


GEMM_DB = _gemm_db()
DYN = _dynamic_shared()
CONV_MOD = _conv()
TC = _tensorcore()


def test_kernels_compile_for_sm80_and_sm90():
    ptx = compile_all([GEMM_DB[0], CONV_MOD[0], TC[0], DYN[0]])
    for text in ptx.values():
        assert ".entry gemm_db_kernel0(" in text and ".entry conv_kernel0(" in text
        assert "mma.sync.aligned" in text or "wmma.mma.sync" in text


def test_fp16_tensor_core_gemm_matches_numpy():
    mod, low = TC
    src = mod.get_source("cuda")
    # the C tile stays in its fragment: zeroed, accumulated, stored once
    assert "cvl_wmma_mma<32, half>(&A_shared[" in src and "wmma::mma_sync" in src
    assert "fill_fragment(C_wmma_accumulator[0], 0.0f)" in src
    assert src.count("__syncthreads();") == 2
    a = rand((64, 64)).astype("float16")
    b = rand((64, 64), seed=1).astype("float16")
    c = np.zeros((64, 64), "float32")
    T.interpret(low, a, b, c, check_races=True)
    np.testing.assert_allclose(c, a.astype("float32") @ b.astype("float32"), rtol=1e-4,
                               atol=1e-3)


def test_tensor_core_needs_a_warp_on_threadidx_x():
    A = T.placeholder((32, 32), "float16", name="A")
    B = T.placeholder((32, 32), "float16", name="B")
    r = T.reduce_axis((0, 32), name="k")
    C = T.compute((32, 32), lambda i, j: T.sum(A[i, r].astype("float32")
                                               * B[r, j].astype("float32"), axis=r), name="C")
    sch = sch_for(T.create_prim_func([A, B, C]))
    blk = sch.get_block("C")
    i, j, k = sch.get_loops(blk)
    bi, ii = sch.split(i, [None, 16])
    bj, jj = sch.split(j, [None, 16])
    sch.reorder(bi, bj, ii, jj, k)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.decompose_reduction(blk, ii)
    sch.tensorize(ii, "cuda.wmma_16x16x32_f16f32")
    with pytest.raises(T.LoweringError, match="calls tensor cores with threadIdx.x = 1"):
        T.lower(sch, "cuda")


def test_double_buffered_gemm_matches_numpy():
    mod, low = GEMM_DB
    src = mod.get_source("cuda")
    assert "float A_shared[256];" in src         # two stages of a 16 x 8 tile
    assert "if (k_0 < 3) {" in src
    assert "*(float4*)(&A_shared[" in src
    a, b = rand((32, 32)), rand((32, 32), seed=1)
    c = np.zeros((32, 32), "float32")
    T.interpret(low, a, b, c, check_races=True)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_conv2d_matches_numpy():
    mod, low = CONV_MOD
    src = mod.get_source("cuda")
    assert "__shared__ __align__(32) float W_shared[28];" in src
    arrays = CONV.make_inputs(np.random.default_rng(0))
    T.interpret(low, *arrays, check_races=True)
    CONV.check(arrays)


def test_more_than_48kb_of_shared_memory_is_dynamic():
    mod, low = DYN
    src = mod.get_source("cuda")
    assert "extern __shared__ __align__(32) unsigned char cvl_dyn_smem[];" in src
    assert "float* A_shared = (float*)(cvl_dyn_smem + 0);" in src
    assert mod.runtime.launch_plan() == [("dyn_kernel0", (1, 1, 1), (256, 1, 1), 65536)]
    a, b = rand(16384), np.zeros(16384, "float32")
    T.interpret(low, a, b, check_races=True)
    np.testing.assert_array_equal(b, a[::-1] * np.float32(2))


def test_shared_memory_beyond_the_architecture_is_refused():
    A = T.placeholder((65536,), name="A")
    B = T.compute((65536,), lambda i: A[65535 - i] * 2.0, name="B")
    sch = sch_for(T.create_prim_func([A, B]))
    blk = sch.get_block("B")
    bx, _, tx = sch.split(sch.get_loops(blk)[0], [1, None, 256])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sh = sch.cache_read(blk, 0, "shared")
    sch.compute_at(sh, bx)
    _, t = sch.split(sch.get_loops(sh)[-1], [None, 256])
    sch.bind(t, "threadIdx.x")
    with pytest.raises(T.LoweringError, match="needs 262144 bytes of shared memory; "
                       "sm_90 offers 232448 per block"):
        T.lower(sch, __import__("targets").Target("cuda", arch="sm_90"))
