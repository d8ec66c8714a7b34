"""Hopper's warpgroup tensor cores (targets/cuda/wgmma.py): the ``gemm_wgmma`` recipe
on float16 and bfloat16 (C = A @ B.T), checked through the interpreter (warpgroups
of 128 threads, race-checked), nvcc for sm_90a (warnings are errors), ``ptxas -v``
(no spills) and SASS (``HGMMA``); the refusals."""

from __future__ import annotations

import re

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir import dtype as D
from cuvil_tir import float8 as F8
from cuvil_tir.errors import LoweringError, ScheduleArgumentError
from cuvil_tir.interp.scalar import tile_storage, tile_values
from targets.cuda.nvcc import resource_usage, sass
from targets.cuda.wgmma import wgmma_name
from targets.toolkit import cuda_recipes as recipes

from .cuda_helpers import rand


def nt_gemm(m, n, k, dtype):
    """``C[i, j] = sum_k A[i, k] * B[j, k]`` in float32 (B's rows hold K)."""
    A = T.placeholder((m, k), dtype, name="A")
    B = T.placeholder((n, k), dtype, name="B")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((m, n), lambda i, j: T.sum(A[i, r].astype("float32")
                                             * B[j, r].astype("float32"), axis=r), name="C")
    return T.create_prim_func([A, B, C])


def build(dtype, arch="sm_90a", bm=128, bn=128, size=256):
    sch = S.Schedule(nt_gemm(size, size, 128, dtype))
    recipes.gemm_wgmma(sch, bm=bm, bn=bn)
    return targets.build(sch, targets.Target("cuda", arch=arch), name=f"wg_{dtype}_{bn}")


MODS = {dt: build(dt) for dt in ("float16", "bfloat16")}


@pytest.mark.parametrize("dtype", sorted(MODS))
def test_wgmma_gemm_computes_right_in_the_interpreter(dtype):
    a, b = (np.asarray(tile_storage(rand(s, seed=i), dtype)).astype(D.to_numpy(dtype))
            for i, s in enumerate(((256, 128), (256, 128))))
    c = np.zeros((256, 256), "float32")
    T.interpret(MODS[dtype].lowered, a, b, c, check_races=True)
    ref = tile_values(a, dtype).astype(np.float64) @ tile_values(b, dtype).astype(np.float64).T
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4)
    src = MODS[dtype].get_source("cuda")
    assert "__shared__ __align__(1024)" in src and "float C_warpgroup[64];" in src


@pytest.mark.parametrize("dtype, op", [("float16", r"HGMMA\.64x128x16\.F32\b"),
                                       ("bfloat16", r"HGMMA\.64x128x16\.F32\.BF16")])
def test_wgmma_runs_on_the_warpgroup_tensor_cores_without_spills(dtype, op):
    src = MODS[dtype].get_source("cuda")
    code = sass(src, "sm_90a")[f"wg_{dtype}_128_kernel0"]
    assert re.search(op, code) and "WARPGROUP.ARRIVE" in code
    usage = resource_usage(src, "sm_90a")[f"wg_{dtype}_128_kernel0"]
    assert usage["spill_stores"] == usage["spill_loads"] == usage["stack"] == 0
    assert usage["shared"] == 2 * 128 * 64 * 2


def test_a_64x64_tile_uses_the_n64_step():
    src = build("float16", bm=64, bn=64, size=128).get_source("cuda")
    assert "HGMMA.64x64x16.F32" in sass(src, "sm_90a")["wg_float16_64_kernel0"]


def test_wgmma_refusals():
    with pytest.raises(LoweringError, match=r"cuda\.wgmma_sync needs sm_90a .* the target "
                                            r"is sm_90"):
        build("float16", arch="sm_90")
    with pytest.raises(ScheduleArgumentError, match=r"bm must be a multiple of 64 and bn one "
                                                    r"of \(64, 128, 256\); found 128 and 96"):
        recipes.gemm_wgmma(S.Schedule(nt_gemm(256, 256, 128, "float16")), bn=96)
    with pytest.raises(ScheduleArgumentError, match=r"found 64 and float32"):
        wgmma_name(64, "float32")


@pytest.mark.parametrize("dtype, tag", [("float8_e4m3fn", "E4M3"), ("float8_e5m2", "E5M2")])
def test_fp8_wgmma_runs_128_deep_on_the_fp8_tensor_cores(dtype, tag):
    mod = build(dtype, bm=64, size=128)
    a = F8.encode(rand((128, 128)), dtype)
    b = F8.encode(rand((128, 128), seed=1), dtype)
    c = np.zeros((128, 128), "float32")
    T.interpret(mod.lowered, a, b, c, check_races=True)
    ref = F8.decode(a, dtype).astype(np.float64) @ F8.decode(b, dtype).astype(np.float64).T
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4)
    src = mod.get_source("cuda")
    code = sass(src, "sm_90a")[f"wg_{dtype}_128_kernel0"]
    assert f"QGMMA.64x128x32.F32.{tag}.{tag}" in code
    usage = resource_usage(src, "sm_90a")[f"wg_{dtype}_128_kernel0"]
    assert usage["spill_stores"] == usage["spill_loads"] == 0
