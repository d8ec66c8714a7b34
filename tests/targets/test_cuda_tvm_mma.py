"""TVM's mma.sync tensorize schedule ported line by line (targets/cuda/tvm_mma.py): the
steps of ``mma_schedule`` in TVM's ``python/tvm/testing/tir.py`` (as its
``test_tir_schedule_tensorize_ldmatrix_mma_numeric.py`` runs them) with TVM's index
maps and intrinsic names, for float16 and int8, B as ``[K, N]`` and as ``[N, K]``:
the interpreter's numbers (with races) against numpy, nvcc for sm_80 without a
warning and ``ldmatrix``/``mma.sync`` in the machine code; the lanes' registers of
the CUDA helpers modelled on the PTX ISA's fragment layouts; TVM's names Cuvil
declines."""

from __future__ import annotations

import re

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir.errors import CodegenError
from targets.cuda.codegen import combine
from targets.cuda.ldmatrix import ldmatrix_x4
from targets.cuda.nvcc import sass
from targets.cuda.tvm_mma import (DECLINED, TVM_NAMES, from_warp, layout_16x16,
                                  layout_16x32, layout_32x16, stored_shape, to_warp)


def index_map_16x16(i, j):
    return (i // 16, j // 16, *layout_16x16(i % 16, j % 16))


def index_map_16x32(i, j):
    return (i // 16, j // 32, *layout_16x32(i % 16, j % 32))


def index_map_32x16(i, j):
    return (i // 32, j // 16, *layout_32x16(i % 32, j % 16))


def matmul(m, n, k, in_dtype, out_dtype, b_transposed):
    b_shape = (n, k) if b_transposed else (k, n)
    b_index = "vj, vk" if b_transposed else "vk, vj"
    zero = "T.float32(0)" if out_dtype == "float32" else "0"
    return T.parse(f'''
@T.prim_func
def main(A: T.Buffer(({m}, {k}), "{in_dtype}"), B: T.Buffer({b_shape}, "{in_dtype}"),
         C: T.Buffer(({m}, {n}), "{out_dtype}")):
    for i, j, k in T.grid({m}, {n}, {k}):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = {zero}
            C[vi, vj] = C[vi, vj] + T.Cast("{out_dtype}", A[vi, vk]) * T.Cast("{out_dtype}", B[{b_index}])
''')


def mma_schedule(workload, k_inner, in_dtype, b_transposed, i_factors, j_factors,
                 k_factors, index_map_A, index_map_B, index_map_C, ldmatrix_a_intrin,
                 ldmatrix_b_intrin, mma_intrin, mma_fill_intrin, mma_store_intrin,
                 shared_scope="shared"):
    """TVM's ``tvm.testing.tir.mma_schedule``, step by step, on a Cuvil schedule
    (``transform_layout`` names the buffer Cuvil's way: index, then read/write)."""
    sch = S.Schedule(workload)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i, i_tc = sch.split(i, factors=[None, 16])
    j, j_tc = sch.split(j, factors=[None, 16])
    k, k_tc = sch.split(k, factors=[None, k_inner])
    sch.reorder(i, j, k, i_tc, j_tc, k_tc)
    block_inner = sch.blockize(i_tc)
    block_outer, block_inner = block_inner, block
    num_ty = i_factors[2] * j_factors[2]
    i0, i1, i2, i3, i4 = sch.split(i, factors=i_factors)
    j0, j1, j2, j3, j4 = sch.split(j, factors=j_factors)
    k0, k1, k2 = sch.split(k, k_factors)
    sch.reorder(i0, j0, i1, j1, j2, i2, k0, k1, i3, j3, k2, i4, j4)
    block_idx = sch.fuse(i0, j0)
    block_idy = sch.fuse(i1, j1)
    thread_idy = sch.fuse(j2, i2)
    sch.bind(block_idx, "blockIdx.x")
    sch.bind(block_idy, "blockIdx.y")
    sch.bind(thread_idy, "threadIdx.y")

    def fetch_to_shared(block, idx, ndim):
        block_read = sch.cache_read(block, idx, shared_scope)
        sch.compute_at(block_read, k0)
        vector_size = 16 if in_dtype == "int8" else 8
        warp_size = 32
        fused = sch.fuse(*sch.get_loops(block_read)[-ndim:])
        _, f_1, f_2, f_3 = sch.split(fused, factors=[None, num_ty, warp_size, vector_size])
        sch.bind(f_2, "threadIdx.x")
        sch.bind(f_1, "threadIdx.y")
        sch.vectorize(f_3)
        offset = 8 if in_dtype == "float16" else 16
        sch.storage_align(block_read, 0, axis=-2, factor=32, offset=offset)
        return block_read

    fetch_to_shared(block_outer, 0, 2)
    fetch_to_shared(block_outer, 1, 2)
    A_warp = sch.cache_read(block_outer, 0, "warp")
    B_warp = sch.cache_read(block_outer, 1, "warp")
    sch.compute_at(A_warp, k1)
    sch.compute_at(B_warp, k1)
    C_warp = sch.cache_write(block_outer, 0, "warp")
    sch.reverse_compute_at(C_warp, thread_idy)
    ii, jj = sch.get_loops(C_warp)[-2:]
    io, ii = sch.split(ii, factors=[None, 16])
    jo, ji = sch.split(jj, factors=[None, 16])
    sch.reorder(io, jo, ii, ji)
    sch.decompose_reduction(block_outer, sch.get_loops(block_outer)[3])
    block_init_c = sch.get_block("C_init")

    def tile_wmma_fragment(block_read, height, width):
        i, j = sch.get_loops(block_read)[-2:]
        i0, i1 = sch.split(i, factors=[None, height])
        j0, j1 = sch.split(j, factors=[None, width])
        sch.reorder(i0, j0, i1, j1)
        return i1

    loop_a = tile_wmma_fragment(A_warp, 16, k_inner)
    if b_transposed:
        loop_b = tile_wmma_fragment(B_warp, 16, k_inner)
    else:
        loop_b = tile_wmma_fragment(B_warp, k_inner, 16)
    sch.transform_layout(A_warp, 0, index_map_A, "write")
    sch.transform_layout(B_warp, 0, index_map_B, "write")
    sch.transform_layout(C_warp, 0, index_map_C, "read")
    sch.tensorize(loop_a, ldmatrix_a_intrin)
    sch.tensorize(loop_b, ldmatrix_b_intrin)
    sch.tensorize(sch.get_loops(block_inner)[-3], mma_intrin)
    sch.tensorize(sch.get_loops(block_init_c)[-2], mma_fill_intrin)
    sch.tensorize(sch.get_loops(C_warp)[-2], mma_store_intrin)
    return sch


#: per input dtype: TVM's k_inner, accumulator and K factors (smaller than its test's:
#: two thread blocks of four warps, each warp a 32 x 32 tile)
SIZES = {"float16": (16, "float32", [2, 2, 1]), "int8": (32, "int32", [2, 1, 1])}
I_FACTORS, J_FACTORS = [2, 1, 2, 2, 1], [1, 1, 2, 1, 2]
#: (in dtype, B as [N, K]) -> TVM's index maps of A and B and its five intrinsics
CASES = {
    ("float16", False): (index_map_16x16, index_map_16x16, "mma_ldmatrix_f16_a",
                         "mma_ldmatrix_f16_b", "mma_f16f16f32", "mma_fill_16x16_f32",
                         "mma_store_16x16_f32_global_"),
    ("float16", True): (index_map_16x16, index_map_16x16, "mma_ldmatrix_f16_a",
                        "mma_ldmatrix_f16_b_trans", "mma_f16f16f32_trans_b",
                        "mma_fill_16x16_f32", "mma_store_16x16_f32_global_"),
    ("int8", False): (index_map_16x32, index_map_32x16, "mma_ldmatrix_i8_a",
                      "mma_ldmatrix_i8_b", "mma_i8i8i32", "mma_fill_16x16_i32",
                      "mma_store_16x16_i32_global_"),
    ("int8", True): (index_map_16x32, index_map_16x32, "mma_ldmatrix_i8_a",
                     "mma_ldmatrix_i8_b_trans", "mma_i8i8i32_trans_b",
                     "mma_fill_16x16_i32", "mma_store_16x16_i32_global_"),
}
M, N, K = 128, 64, 64


def _name(in_dtype, b_transposed):
    return f"tvm_mma_{in_dtype}_{'nt' if b_transposed else 'nn'}"


def _build(in_dtype, b_transposed):
    k_inner, out_dtype, k_factors = SIZES[in_dtype]
    map_a, map_b, lda, ldb, mma, fill, store = CASES[(in_dtype, b_transposed)]
    sch = mma_schedule(matmul(M, N, K, in_dtype, out_dtype, b_transposed), k_inner,
                       in_dtype, b_transposed, I_FACTORS, J_FACTORS, k_factors, map_a,
                       map_b, index_map_16x16, lda, ldb, mma, fill, store)
    return targets.build(sch, targets.Target("cuda", arch="sm_80"),
                         name=_name(in_dtype, b_transposed))


MODS = {case: _build(*case) for case in CASES}


@pytest.mark.parametrize("case", list(CASES), ids=lambda c: f"{c[0]}-{'nt' if c[1] else 'nn'}")
def test_tvm_mma_schedule_computes_the_product(case):
    in_dtype, b_transposed = case
    rng = np.random.default_rng(0)
    lo, hi = (-3, 4) if in_dtype == "float16" else (-128, 128)
    a = rng.integers(lo, hi, (M, K)).astype(in_dtype)
    b = rng.integers(lo, hi, (N, K) if b_transposed else (K, N)).astype(in_dtype)
    out = SIZES[in_dtype][1]
    c = np.zeros((M, N), out)
    T.interpret(MODS[case].lowered, a, b, c, check_races=True)
    bb = b.T if b_transposed else b
    want = (a.astype("float64") @ bb.astype("float64")).astype(out)
    np.testing.assert_array_equal(c, want)


def test_the_kernels_compile_to_ldmatrix_and_mma_sync():
    code = sass(combine([m.runtime.program for m in MODS.values()]), "sm_80")
    for (in_dtype, b_transposed), mod in MODS.items():
        (kernel,) = [t for name, t in code.items()
                     if _name(in_dtype, b_transposed) + "_" in name]
        step = "HMMA" if in_dtype == "float16" else "IMMA"
        assert re.search(rf"\b{step}\.16816", kernel) or re.search(rf"\b{step}\.168", kernel)
        # int8 B as [K, N] is loaded by 16 loads per lane (as TVM's codegen does), A
        # by ldmatrix always
        assert "LDSM" in kernel


def test_the_cuda_names_tvm_intrinsics():
    src = MODS[("float16", False)].get_source("cuda")
    assert "cvl_tvm_ldmatrix<0, 40>(&A_shared_warp[" in src       # rows padded 32 + 8
    assert "cvl_tvm_ldmatrix<4, 72>(&B_shared_warp[" in src
    assert "cvl_tvm_mma<0>(" in src and "cvl_tvm_store(&C_warp[" in src
    # a warp buffer is per lane: 2 x 2 tiles of 8 accumulators
    assert "float C_warp[32];" in src


# the CUDA helpers' registers, modelled lane by lane -------------------------------------

def _ldsm(tile, dtype, matrix, trans):
    """What ``cvl_tvm_ldmatrix`` leaves in each lane's registers (``[32, L]``): the
    addresses it computes and ``ldmatrix.x4`` (targets/cuda/ldmatrix.py), or, for int8
    B as [K, N], its 16 loads."""
    ld = tile.shape[1]
    flat = tile.reshape(-1)
    e = 16 if dtype == "int8" else 8
    if dtype == "int8" and matrix == "B" and not trans:
        out = np.zeros((32, 16), tile.dtype)
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            for lid in range(16):
                out[lane, lid] = flat[(16 * ((lid & 7) >> 2) + 4 * t + (lid & 3)) * ld
                                      + 8 * (lid >> 3) + g]
        return out
    offs = [ld * 8 * (x >> 4) + ld * (x & 7) + e * ((x & 15) >> 3) if trans
            else ld * (x & 15) + e * (x >> 4) for x in range(32)]
    if dtype == "int8":      # 16 int8 elements as 8 16-bit pairs (ldmatrix is .b16)
        rows = np.array([flat[o: o + 16].view(np.int16) for o in offs])
        return ldmatrix_x4(rows).reshape(32, 8).view(np.int8).reshape(32, 16)
    rows = np.array([flat[o: o + 8] for o in offs])
    return ldmatrix_x4(rows, trans=(matrix == "B") != trans).reshape(32, 8)


def _fragments(dtype):
    """The PTX ISA's m16n8k16 (float16) / m16n8k32 (int8) fragments: per lane, the
    (row, column) of each A element, each B element of the 8-column half ``h`` and
    each C element, in register order."""
    per = 2 if dtype == "float16" else 4
    k = 8 * per

    def lane(x):
        g, t = x >> 2, x & 3
        a = [(g + 8 * (r & 1), per * t + e + k // 2 * (r >> 1)) for r in range(4)
             for e in range(per)]
        b = {h: [(per * t + e + k // 2 * r, 8 * h + g) for r in range(2) for e in range(per)]
             for h in (0, 1)}
        c = {h: [(g + 8 * r, 8 * h + 2 * t + e) for r in range(2) for e in range(2)]
             for h in (0, 1)}
        return a, b, c
    return lane


@pytest.mark.parametrize("dtype,trans_a,trans_b", [
    ("float16", False, False), ("float16", False, True), ("float16", True, False),
    ("float16", True, True), ("int8", False, False), ("int8", False, True)])
def test_the_lanes_registers_feed_mma_sync_as_ptx_lays_it_out(dtype, trans_a, trans_b):
    # ldmatrix's registers, read as cvl_tvm_mma passes them to the two m16n8 steps
    # (A's 4 words; B's words 0-1, then 2-3), then cvl_tvm_store's places: the
    # product the PTX fragments define
    rng = np.random.default_rng(1)
    npt = np.float16 if dtype == "float16" else np.int8
    sa, sb = stored_shape(dtype, "A", trans_a), stored_shape(dtype, "B", trans_b)
    a_st = rng.integers(-3, 4, sa).astype(npt)
    b_st = rng.integers(-3, 4, sb).astype(npt)
    a = a_st.T if trans_a else a_st
    b = b_st.T if trans_b else b_st
    ra, rb = _ldsm(a_st, dtype, "A", trans_a), _ldsm(b_st, dtype, "B", trans_b)
    frag = _fragments(dtype)
    c = np.zeros((16, 16), np.int64)
    half = rb.shape[1] // 2
    for lane in range(32):
        fa, fb, _ = frag(lane)
        assert [a[p] for p in fa] == list(ra[lane])
        for h in (0, 1):
            assert [b[p] for p in fb[h]] == list(rb[lane, h * half:(h + 1) * half])
    # the accumulators: registers 0-3 the first half's, 4-7 the second's; the store
    regs = np.zeros((32, 8), np.int64)
    full = a.astype(np.int64) @ b.astype(np.int64)
    for lane in range(32):
        _, _, fc = frag(lane)
        regs[lane] = [full[p] for h in (0, 1) for p in fc[h]]
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for lid in range(8):
            c[8 * ((lid & 3) >> 1) + g, 8 * (lid >> 2) + 2 * t + (lid & 1)] = regs[lane, lid]
    np.testing.assert_array_equal(c, full)
    # C's registers are TVM's layout of C: the interpreter's tiles and the GPU's agree
    np.testing.assert_array_equal(from_warp(regs, (16, 16)), full)


def test_the_warp_layouts_are_one_to_one():
    for shape in ((16, 16), (16, 32), (32, 16)):
        t = np.arange(shape[0] * shape[1]).reshape(shape)
        w = to_warp(t)
        assert sorted(w.reshape(-1)) == list(range(t.size))
        np.testing.assert_array_equal(from_warp(w, shape), t)


# names ----------------------------------------------------------------------------------

def test_tvm_names_are_registered():
    names = set(S.TensorIntrin.names())
    assert set(TVM_NAMES) <= names
    assert {"mma_ldmatrix_f16_b_trans_dyn", "mma_f16f16f32_trans_a_trans_b",
            "mma_store_16x16_f32_shared_dyn_"} <= names


@pytest.mark.parametrize("name", ["mma_f16f16f16", "mma_ldmatrix_e4m3_a",
                                  "mma_store_16x16_f16_global_"])
def test_a_tvm_name_cuvil_cannot_back_is_refused_with_its_reason(name):
    with pytest.raises(ValueError, match=r"CVL-E103.*\(TVM's\) is not backed by Cuvil: "
                       + re.escape(DECLINED[name][:30])):
        S.TensorIntrin.get(name)
    assert S.TensorIntrin.get(name, allow_missing=True) is None


def test_a_warp_tile_at_a_ragged_offset_is_refused():
    from targets.cuda.tvm_mma import registers

    class _Printer:
        class ana:
            simplify = staticmethod(lambda e: e)
    w = T.decl_buffer((64,), "float16", "W", scope="warp")
    with pytest.raises(CodegenError, match="a warp tile of W starts at 8, not a whole tile"):
        registers(_Printer(), w[8])
