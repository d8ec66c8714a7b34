"""``mma.sync`` + ``ldmatrix`` tensor cores (targets/cuda/mma.py, ldmatrix.py): the
``gemm_mma`` recipe on float16, bfloat16 and int8 inputs with register accumulators,
checked through the interpreter (exact for int8), nvcc for sm_80 and sm_90a (warnings
are errors), ``ptxas -v`` (no spills) and SASS (HMMA / IMMA fed by LDSM); the lanes'
ldmatrix addresses against the PTX ISA's fragment layouts; the refusals."""

from __future__ import annotations

import re

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir import dtype as D
from cuvil_tir.errors import LoweringError, ScheduleArgumentError
from cuvil_tir.interp.scalar import tile_storage, tile_values
from targets.cuda import mma
from targets.cuda.codegen import combine
from targets.cuda.ldmatrix import lane_rows, ldmatrix_x4
from targets.cuda.nvcc import resource_usage, sass
from targets.toolkit import cuda_recipes as recipes

from .cuda_helpers import rand


def gemm_func(m, n, k, dtype):
    """``C = A @ B`` (int8: ``A @ B.T``, B of shape ``[n, k]``) accumulated in float32
    or int32."""
    acc = "int32" if dtype == "int8" else "float32"
    A = T.placeholder((m, k), dtype, name="A")
    B = T.placeholder((n, k) if dtype == "int8" else (k, n), dtype, name="B")
    r = T.reduce_axis((0, k), name="k")
    if dtype == "int8":
        C = T.compute((m, n), lambda i, j: T.sum(A[i, r].astype(acc) * B[j, r].astype(acc),
                                                 axis=r), name="C")
    else:
        C = T.compute((m, n), lambda i, j: T.sum(A[i, r].astype(acc) * B[r, j].astype(acc),
                                                 axis=r), name="C")
    return T.create_prim_func([A, B, C])


def build(dtype, arch="sm_80", m=128, n=128, k=64, **tiles):
    sch = S.Schedule(gemm_func(m, n, k, dtype))
    recipes.gemm_mma(sch, **({"bm": 64, "bn": 64, "bk": 32, "warp_m": 32, "warp_n": 32}
                             | tiles))
    return targets.build(sch, targets.Target("cuda", arch=arch), name=f"mma_{dtype}")


def inputs(dtype, m=128, n=128, k=64):
    if dtype == "int8":
        g = np.random.default_rng(0)
        a = g.integers(-128, 128, (m, k)).astype("int8")
        b = g.integers(-128, 128, (n, k)).astype("int8")
        return a, b, a.astype(np.int64) @ b.astype(np.int64).T
    a, b = (np.asarray(tile_storage(rand(s, seed=i), dtype)).astype(D.to_numpy(dtype))
            for i, s in enumerate(((m, k), (k, n))))
    va, vb = (tile_values(x, dtype).astype(np.float64) for x in (a, b))
    return a, b, va @ vb


MODS = {dt: build(dt) for dt in ("float16", "bfloat16", "int8")}


def check_gemm(mod, dtype, size=128) -> None:
    """Run ``mod`` through the interpreter (race-checked) against numpy: exact for
    int8, float32 sums of the 16-bit values otherwise."""
    a, b, ref = inputs(dtype, size, size)
    c = np.zeros((size, size), "int32" if dtype == "int8" else "float32")
    T.interpret(mod.lowered, a, b, c, check_races=True)
    if dtype == "int8":
        np.testing.assert_array_equal(c, ref)
    else:
        np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", sorted(MODS))
def test_mma_gemm_computes_right_in_the_interpreter(dtype):
    check_gemm(MODS[dtype], dtype)
    src = MODS[dtype].get_source("cuda")
    assert f"cvl_mma_ldsm<{mma._KIND[dtype]}, 32, 32, 32, " in src
    assert re.search(r"(float|int32_t) C_warp\[32\];", src)     # 32 x 32 / 32 lanes


def test_int8_accumulation_wraps_as_ptx_does():
    ref = mma._mma_reference(None)
    a = np.full((16, 32), 127, "int8")
    c = np.full((16, 16), 2**31 - 1000, "int32")
    (out,) = ref(a, a[:16], c)
    assert out.dtype == np.int32 and out[0, 0] == np.int32(2**31 - 1000 + 32 * 127 * 127
                                                           - 2**32)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype, mma_op, loads", [
    ("float16", r"HMMA\.16816\.F32\b", ("LDSM.16.M88.4", "LDSM.16.MT88.4")),
    ("bfloat16", r"HMMA\.16816\.F32\.BF16", ("LDSM.16.M88.4", "LDSM.16.MT88.4")),
    ("int8", r"IMMA\.16832\.S8\.S8", ("LDSM.16.M88.4",))])
def test_mma_kernels_run_on_tensor_cores_without_spills(arch, dtype, mma_op, loads):
    src = MODS[dtype].get_source("cuda")
    code = sass(src, arch)[f"mma_{dtype}_kernel0"]
    assert re.search(mma_op, code) and all(x in code for x in loads)
    usage = resource_usage(src, arch)[f"mma_{dtype}_kernel0"]
    assert usage["spill_stores"] == usage["spill_loads"] == usage["stack"] == 0
    assert usage["registers"] <= 128


def test_a_64x64_warp_tile_keeps_its_128_accumulators_in_registers():
    mod = build("bfloat16", m=256, n=256, bm=128, bn=128, warp_m=64, warp_n=64)
    src = mod.get_source("cuda")
    for arch in ("sm_80", "sm_90a"):
        usage = resource_usage(src, arch)["mma_bfloat16_kernel0"]
        assert usage["spill_stores"] == usage["spill_loads"] == usage["stack"] == 0
        assert usage["shared"] <= 48 * 1024
    check_gemm(mod, "bfloat16", 256)


def test_16x16_warp_tiles_fill_and_store_through_their_registered_intrinsics():
    # before: cuda.mma_fill_16x16_* and cuda.mma_store_16x16_* called their ops without
    # the tile size (as wmma's 16 x 16 ops are called), and the op's tiles raised
    # IndexError: no schedule could use a 16 x 16 mma.sync warp tile
    mods = {dt: build(dt, m=64, n=64, bm=32, bn=32, warp_m=16, warp_n=16)
            for dt in ("float16", "int8")}
    for dt, mod in mods.items():
        check_gemm(mod, dt, 64)
        src = mod.get_source("cuda")
        assert "cvl_mma_fill<16, 16, 2>(C_warp + 0)" in src
        assert "cvl_mma_store<16, 16, 2>(C_warp + 0, " in src
    code = sass(combine([m.runtime.program for m in mods.values()]), "sm_80")
    assert re.search(r"HMMA\.16816\.F32\b", code["mma_float16_kernel0"])
    assert re.search(r"IMMA\.16832\.S8\.S8", code["mma_int8_kernel0"])


def _lane_fragments(mat, fragment, trans=False):
    """The registers ``ldmatrix.x4`` gives each lane when lane ``l`` points at the row
    and 16-byte chunk ``lane_rows`` names (8 16-bit elements of ``mat``)."""
    rows = [mat[r, 8 * c: 8 * c + 8] for r, c in (lane_rows(fragment, x) for x in range(32))]
    return ldmatrix_x4(np.array(rows), trans)


@pytest.mark.parametrize("b_layout", ["b", "b_nt"])
def test_ldmatrix_addresses_give_the_ptx_fragments_of_m16n8k16(b_layout):
    # the PTX ISA's m16n8k16 layouts: lane 4g + t holds, in registers 0 to 3, A at
    # (g, 2t..2t+1), (g + 8, 2t..), (g, 2t + 8..), (g + 8, 2t + 8..); B (k x n) at
    # (2t..2t+1, g) and (2t + 8.., g) of each 8-column half (registers 0, 1: half 0)
    a = np.arange(256).reshape(16, 16)
    b = 1000 + np.arange(256).reshape(16, 16)
    fa = _lane_fragments(a, "a")
    fb = (_lane_fragments(b, "b", trans=True) if b_layout == "b"
          else _lane_fragments(b.T.copy(), "b_nt"))
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        cols = [2 * t, 2 * t + 1]
        want_a = [a[g, cols], a[g + 8, cols], a[g, [c + 8 for c in cols]],
                  a[g + 8, [c + 8 for c in cols]]]
        assert np.array_equal(fa[lane], np.array(want_a))
        want_b = [b[cols, 8 * h + g] if r == 0 else b[[c + 8 for c in cols], 8 * h + g]
                  for h in (0, 1) for r in (0, 1)]
        assert np.array_equal(fb[lane], np.array(want_b))


def test_mma_refusals():
    with pytest.raises(ScheduleArgumentError, match=r"inputs must be one of float16, "
                                                    r"bfloat16, int8 with a depth in "
                                                    r"\(32, 64\); found int8 and 16"):
        mma.mma_name(16, 16, 16, "int8")
    with pytest.raises(ScheduleArgumentError, match=r"M and N in \(16, 32, 64\); found "
                                                    r"48 x 16"):
        mma.fill_name(48, 16, "float16")
    with pytest.raises(ScheduleArgumentError, match=r"warp_m=128 must be one of "
                                                    r"\(16, 32, 64\) dividing the block"):
        recipes.gemm_mma(S.Schedule(gemm_func(128, 128, 64, "float16")), warp_m=128)
    with pytest.raises(LoweringError, match=r"cuda\.mma_sync needs sm_80 or newer; the "
                                            r"target is sm_75"):
        build("float16", arch="sm_75")


def test_an_accumulator_read_element_by_element_is_refused():
    sch = S.Schedule(gemm_func(128, 128, 64, "float16"))
    blk = sch.get_block("C")
    sch.cache_write(blk, 0, mma.WARP_SCOPE)
    i, j, _ = sch.get_loops(blk)
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    with pytest.raises(LoweringError, match=r"C_warp\[.*\] touches one element"):
        targets.build(sch, targets.Target("cuda", arch="sm_80"), name="bad_warp")
