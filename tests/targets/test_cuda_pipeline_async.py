"""Asynchronous pipeline stages from a schedule (TVM's ``software_pipeline_async_stages``,
cuvil_tir/transform/pipeline_async.py): the copies of the async stage become
``cp.async`` with one group committed per step and a wait before the statements that
read them.  The ``gemm_mma`` recipe with ``cp_async=True`` and a small TVMScript
kernel are checked through the interpreter (race-checked) against numpy, nvcc for
sm_80 and sm_90a (warnings are errors), ``ptxas -v`` (no spills) and SASS (``LDGSTS``
and its ``DEPBAR``); a removed wait is a race naming the copy and the read; the
annotations that cannot hold are refused."""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir.errors import LoweringError
from cuvil_tir.parser import parse
from cuvil_tir.stmt import Evaluate
from cuvil_tir.visitor import Mutator
from schedules.errors import ScheduleArgumentError
from targets.cuda.nvcc import resource_usage, sass

from .cuda_helpers import ARCHS, rand
from .test_cuda_mma import build, gemm_func, inputs

TILES = {"bm": 64, "bn": 64, "bk": 32, "warp_m": 32, "warp_n": 32, "swizzle": True}


@functools.lru_cache(maxsize=None)
def _mma(dtype, stages, cp_async=True, k=128):
    return build(dtype, k=k, stages=stages, cp_async=cp_async, **TILES)


@pytest.mark.parametrize("dtype, stages", [("float16", 2), ("bfloat16", 3)])
def test_the_cp_async_pipelined_gemm_computes_right(dtype, stages):
    mod = _mma(dtype, stages)
    a, b, ref = inputs(dtype, 128, 128, 128)
    c = np.zeros((128, 128), "float32")
    T.interpret(mod.lowered, a, b, c, check_races=True)
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4)
    src = mod.get_source("cuda")
    # one group per K slice; the slice read leaves the stages - 1 after it in flight
    assert src.count("cvl_cp_async_commit();") == stages
    assert f"cvl_cp_async_wait<{stages - 1}>();" in src
    assert "cvl_cp_async<16>(&A_shared[" in src and "cvl_cp_async<16>(&B_shared[" in src


@pytest.mark.parametrize("arch", ARCHS)
def test_it_compiles_to_ldgsts_without_spills_or_extra_barriers(arch):
    mod = _mma("float16", 3)
    src = mod.get_source("cuda")
    code = sass(src, arch)["mma_float16_kernel0"]
    assert "LDGSTS" in code and re.search(r"\bDEPBAR\b", code) and "HMMA" in code
    usage = resource_usage(src, arch)["mma_float16_kernel0"]
    assert usage["spill_stores"] == usage["spill_loads"] == usage["stack"] == 0
    # the copies' destinations are no reads: no barrier inside the copy loops (as
    # many barriers as the synchronous pipeline has)
    sync = _mma("float16", 3, cp_async=False).get_source("cuda")
    assert src.count("__syncthreads()") == sync.count("__syncthreads()") == 3


class _DropWaits(Mutator):
    def visit_Evaluate(self, s):
        if getattr(s.value, "op", None) == "async_wait_group":
            return Evaluate(T.const(0))
        return s


def test_a_removed_wait_is_a_race_naming_the_copy_and_the_read():
    lowered = _mma("float16", 2).lowered
    lowered = lowered.map_functions(lambda f: f.with_body(_DropWaits().visit(f.body)))
    a, b, _ = inputs("float16", 128, 128, 128)
    with pytest.raises(T.RaceError, match="still in flight") as err:
        T.interpret(lowered, a, b, np.zeros((128, 128), "float32"), check_races=True)
    copy, read = err.value.statements
    assert '"async_copy", A_shared[' in copy and "A_shared[" in read


def test_cp_async_needs_a_pipeline():
    import schedules as S
    from targets.toolkit import cuda_recipes as recipes
    with pytest.raises(ScheduleArgumentError, match=r"gemm_mma: cp_async .* needs stages >= "
                                                    r"2, found stages=1"):
        recipes.gemm_mma(S.Schedule(gemm_func(128, 128, 64, "float16")), cp_async=True)


def _summed(dtype="float32", vector=4, stages="[0, 1]", asyncs="[0]"):
    lanes = (f"for v in T.vectorized({vector}):\n                            "
             f"S[tx * {vector} + v] = A[bx, ko * {32 * vector} + tx * {vector} + v]"
             if vector > 1 else "S[tx] = A[bx, ko * 32 + tx]")
    return f'''
def summed(A: T.Buffer((4, {128 * vector}), "{dtype}"), C: T.Buffer((4, 32), "float32")):
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            with T.allocate((1,), "float32", scope="local") as acc:
                acc[0] = T.float32(0)
                for ko in T.serial(4, annotations={{"software_pipeline_stage": {stages},
                                                   "software_pipeline_async_stages": {asyncs}}}):
                    with T.allocate(({32 * vector},), "{dtype}", scope="shared") as S:
                        {lanes}
                        for j in T.serial({vector}):
                            acc[0] = acc[0] + T.Cast("float32", S[j * 32 + tx])
                C[bx, tx] = acc[0]
'''


@pytest.mark.parametrize("dtype, vector, spelled", [
    ("float32", 4, "cvl_cp_async<16>"), ("float32", 1, "cvl_cp_async<4>"),
    ("float16", 4, "cvl_cp_async<8>"),
    # two bytes per thread: the thread copies it (TVM's rule); the group ops stay
    ("float16", 1, None)])
def test_each_copy_becomes_as_wide_a_cp_async_as_its_lanes_make(dtype, vector, spelled):
    mod = targets.build(parse(_summed(dtype, vector)), "cuda", name=f"sum_{dtype}_{vector}")
    a = rand((4, 128 * vector)).astype(dtype)
    c = np.zeros((4, 32), "float32")
    T.interpret(mod.lowered, a, c, check_races=True)
    want = a.astype("float32").reshape(4, 4, vector, 32).sum(axis=(1, 2))
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)
    src = mod.get_source("cuda")
    assert "cvl_cp_async_wait<1>();" in src
    assert (spelled in src) if spelled else "cvl_cp_async<" not in src


@pytest.mark.parametrize("stages, asyncs, match", [
    ("[0, 1]", "[3]", r"must name one stage of "
                      r"software_pipeline_stage \(a list of one int\), found \(3,\)"),
    ("[0, 1]", "[0, 1]", r"must name one stage .* found \(0, 1\)"),
    ("[0, 1]", "[1]", r"names stage 1, whose statements write nothing a later statement "
                      r"reads"),
])
def test_async_stages_that_cannot_hold_are_refused(stages, asyncs, match):
    with pytest.raises(LoweringError, match=r"software pipeline on loop ko: "
                                            r"software_pipeline_async_stages " + match):
        targets.build(parse(_summed(stages=stages, asyncs=asyncs)), "cuda", name="bad")
