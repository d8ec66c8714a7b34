"""What nvcc makes of the kernels: ``ptxas -v`` figures (no register spills in the
GEMM kernels, shared memory within the architecture's limit) and the machine code
(``cuobjdump -sass``) of the tensor-core kernels (``HMMA``), for sm_80 and sm_90;
the bf16 tensor-core GEMM checked numerically through the interpreter."""

from __future__ import annotations

import re

import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir.interp.scalar import tile_storage, tile_values
from targets.cuda import shared_capacity
from targets.cuda.nvcc import resource_usage, sass
from targets.toolkit import cuda_recipes as recipes

from .cuda_helpers import ARCHS, rand, sch_for


def _tensorcore(dtype, m=32, n=32, k=64, name="tc"):
    A = T.placeholder((m, k), dtype, name="A")
    B = T.placeholder((k, n), dtype, name="B")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((m, n), lambda i, j: T.sum(A[i, r].astype("float32")
                                             * B[r, j].astype("float32"), axis=r), name="C")
    sch = sch_for(T.create_prim_func([A, B, C]))
    recipes.gemm_tensorcore(sch, bm=32, bn=32, bk=32)
    return targets.build(sch, targets.Target("cuda"), name=name)


def _sgemm(n=256):
    A = T.placeholder((n, n), name="A")
    B = T.placeholder((n, n), name="B")
    r = T.reduce_axis((0, n), name="k")
    C = T.compute((n, n), lambda i, j: T.sum(A[i, r] * B[r, j], axis=r), name="C")
    sch = sch_for(T.create_prim_func([A, B, C]))
    recipes.gemm(sch, bm=128, bn=128, bk=8, tm=8, tn=8, vector=4, double_buffer=True)
    return targets.build(sch, targets.Target("cuda"), name="sgemm_big")


BF16 = _tensorcore("bfloat16", name="tc_bf16")
FP16 = _tensorcore("float16", name="tc_f16")
SGEMM = _sgemm()


def _bf16(x):
    return tile_storage(x.astype("float32"), "bfloat16")


def test_bf16_tensor_core_gemm_matches_numpy():
    src = BF16.get_source("cuda")
    assert "cvl_wmma_mma<32, __nv_bfloat16>(&A_shared[" in src
    a, b = _bf16(rand((32, 64))), _bf16(rand((64, 32), seed=1))
    c = np.zeros((32, 32), "float32")
    T.interpret(BF16.lowered, a, b, c, check_races=True)
    ref = tile_values(a, "bfloat16") @ tile_values(b, "bfloat16")
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("arch", ARCHS)
def test_tensor_core_kernels_run_hmma_on_the_tensor_cores(arch):
    for mod, kind in ((FP16, "F16"), (BF16, "BF16")):
        code = sass(mod.get_source("cuda"), arch)[f"{mod.entry_name}_kernel0"]
        hmma = re.findall(r"\bHMMA\.\w+\.F32(\.\w+)?", code)
        assert hmma, f"no HMMA in the {kind} kernel for {arch}"
        if kind == "BF16":
            assert "HMMA.16816.F32.BF16" in code
        usage = resource_usage(mod.get_source("cuda"), arch)[f"{mod.entry_name}_kernel0"]
        assert usage["spill_stores"] == usage["spill_loads"] == 0


@pytest.mark.parametrize("arch", ARCHS)
def test_sgemm_keeps_its_8x8_accumulators_in_registers(arch):
    src = SGEMM.get_source("cuda")
    usage = resource_usage(src, arch)["sgemm_big_kernel0"]
    assert usage["spill_stores"] == usage["spill_loads"] == 0 and usage["stack"] == 0
    assert 64 < usage["registers"] <= 255        # 64 accumulators, in registers
    assert 0 < usage["shared"] <= shared_capacity(arch)
    code = sass(src, arch)["sgemm_big_kernel0"]
    assert "LDL" not in code and "STL" not in code     # nothing in local memory
    assert len(re.findall(r"\bFFMA\b", code)) >= 8 * 8 * 8     # the unrolled 8-deep slice


def _gemm_with_epilogue(dtype, out_dtype):
    m = n = 64
    k = 64
    A = T.placeholder((m, k), dtype, name="A")
    B = T.placeholder((k, n), dtype, name="B")
    bias = T.placeholder((n,), "float32", name="bias")
    r = T.reduce_axis((0, k), name="k")
    cast = (lambda x: x) if dtype == "float32" else (lambda x: x.astype("float32"))
    C = T.compute((m, n), lambda i, j: T.sum(cast(A[i, r]) * cast(B[r, j]), axis=r), name="C")
    D = T.compute((m, n), lambda i, j: T.max(C[i, j] + bias[j], T.float32(0)).astype(out_dtype),
                  name="D")
    return T.create_prim_func([A, B, bias, D])


@pytest.mark.parametrize("dtype, out_dtype", [("float32", "float32"), ("float16", "float16")])
def test_bias_relu_and_cast_are_fused_into_the_gemm(dtype, out_dtype):
    sch = sch_for(_gemm_with_epilogue(dtype, out_dtype))
    if dtype == "float32":
        recipes.gemm(sch, bm=32, bn=32, bk=8, tm=4, tn=4, vector=4, double_buffer=True,
                     epilogue="D")
    else:
        recipes.gemm_tensorcore(sch, bm=32, bn=32, bk=32, epilogue="D")
    mod = targets.build(sch, "cuda", name=f"epilogue_{dtype}")
    # C never reaches device memory: one kernel, and no temporary
    assert mod.runtime.launch_plan()[0][0] == f"epilogue_{dtype}_kernel0"
    assert not mod.runtime.record().allocs and len(mod.runtime.launch_plan()) == 1
    a = rand((64, 64)).astype(dtype)
    b = rand((64, 64), seed=1).astype(dtype)
    bias = rand((64,), seed=2)
    d = np.zeros((64, 64), out_dtype)
    T.interpret(mod.lowered, a, b, bias, d, check_races=True)
    ref = np.maximum(a.astype("float32") @ b.astype("float32") + bias, 0).astype(out_dtype)
    np.testing.assert_allclose(d.astype("float32"), ref.astype("float32"), rtol=2e-3,
                               atol=2e-3)
    for arch in ARCHS:
        usage = resource_usage(mod.get_source("cuda"), arch)
        assert all(u["spill_stores"] == 0 for u in usage.values())


def test_split_k_adds_partial_products_from_a_second_kernel():
    m, n, k = 64, 64, 256
    A = T.placeholder((m, k), name="A")
    B = T.placeholder((k, n), name="B")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((m, n), lambda i, j: T.sum(A[i, r] * B[r, j], axis=r), name="C")
    sch = sch_for(T.create_prim_func([A, B, C]))
    recipes.gemm_split_k(sch, 4, bm=32, bn=32, bk=8, tm=4, tn=4, vector=4, double_buffer=True)
    mod = targets.build(sch, "cuda", name="split_k")
    assert mod.runtime.launch_plan() == [("split_k_kernel0", (2, 2, 4), (8, 8, 1), 0),
                                         ("split_k_kernel1", (16, 1, 1), (256, 1, 1), 0)]
    assert [size for _, size in mod.runtime.record().allocs] == [4 * 64 * 64 * 4]
    a, b = rand((m, k)), rand((k, n), seed=1)
    c = np.zeros((m, n), "float32")
    T.interpret(mod.lowered, a, b, c, check_races=True)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    for arch in ARCHS:
        assert all(u["spill_stores"] == 0
                   for u in resource_usage(mod.get_source("cuda"), arch).values())
