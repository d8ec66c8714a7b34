"""fp8 tensor cores (targets/cuda/mma_fp8.py): the GEMM recipe on float8_e4m3fn and
float8_e5m2 inputs through ``mma.sync.m16n8k32``, checked through the interpreter
(decoded values, fp32 accumulation), ``ptxas -v`` and SASS (``QMMA`` on sm_89, the
fp16 tensor cores on sm_90), and the refusals."""

from __future__ import annotations

import re

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir import float8 as F8
from cuvil_tir.errors import LoweringError, ScheduleArgumentError
from targets.cuda.mma_fp8 import mma_name
from targets.cuda.nvcc import resource_usage, sass
from targets.toolkit import cuda_recipes as recipes

from .cuda_helpers import rand


def _func(m, n, k, dtype):
    A = T.placeholder((m, k), dtype, name="A")
    B = T.placeholder((k, n), dtype, name="B")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((m, n), lambda i, j: T.sum(A[i, r].astype("float32")
                                             * B[r, j].astype("float32"), axis=r), name="C")
    return T.create_prim_func([A, B, C])


def _build(dtype, arch="sm_90", bk=32):
    sch = S.Schedule(_func(128, 128, 64, dtype))
    recipes.gemm_tensorcore(sch, bm=64, bn=64, bk=bk, accumulator="shared", vector=4)
    return targets.build(sch, targets.Target("cuda", arch=arch), name=f"f8_{dtype[7:]}")


E4M3 = _build("float8_e4m3fn")
E5M2 = _build("float8_e5m2", bk=64)


@pytest.mark.parametrize("mod, dtype, e5m2", [(E4M3, "float8_e4m3fn", "false"),
                                              (E5M2, "float8_e5m2", "true")])
def test_fp8_gemm_matches_numpy_on_the_decoded_values(mod, dtype, e5m2):
    a = F8.encode(rand((128, 64)), dtype)
    b = F8.encode(rand((64, 128), seed=1), dtype)
    c = np.zeros((128, 128), "float32")
    T.interpret(mod.lowered, a, b, c, check_races=True)
    ref = F8.decode(a, dtype).astype("float64") @ F8.decode(b, dtype).astype("float64")
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4)
    assert f"cvl_mma_fp8<{32 if e5m2 == 'false' else 64}, {e5m2}>((const uint8_t*)" \
           "&A_shared[" in mod.get_source("cuda")


@pytest.mark.parametrize("arch, mma", [("sm_89", r"QMMA\.16832\.F32\.E4M3\.E4M3"),
                                       ("sm_90", r"HMMA\.16816\.F32")])
def test_fp8_steps_run_on_the_tensor_cores(arch, mma):
    src = E4M3.get_source("cuda")
    code = sass(src, arch)["f8_e4m3fn_kernel0"]
    assert re.search(mma, code)
    usage = resource_usage(src, arch)["f8_e4m3fn_kernel0"]
    assert usage["spill_stores"] == usage["spill_loads"] == usage["stack"] == 0
    if arch == "sm_89":
        assert "QMMA.16832.F32.E5M2.E5M2" in sass(E5M2.get_source("cuda"), arch)[
            "f8_e5m2_kernel0"]


def test_fp8_tensor_cores_are_refused_before_sm89():
    with pytest.raises(LoweringError, match=r"cuda\.mma_fp8_sync needs sm_89 or newer; "
                                            r"the target is sm_80"):
        _build("float8_e4m3fn", arch="sm_80")


def test_fp8_needs_the_shared_accumulator_and_its_depths():
    sch = S.Schedule(_func(128, 128, 64, "float8_e5m2"))
    with pytest.raises(ScheduleArgumentError, match=r"float8_e5m2 inputs accumulate in "
                                                    r"shared memory \(accumulator='shared'\)"):
        recipes.gemm_tensorcore(sch, bm=64, bn=64, bk=32)
    with pytest.raises(ScheduleArgumentError, match=r"the depth one of \(32, 64\); found "
                                                    r"float8_e4m3fn and 16"):
        mma_name(16, "float8_e4m3fn")
