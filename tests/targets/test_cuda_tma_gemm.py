"""The Hopper GEMM of targets/toolkit/cuda_tma_gemm.py: tensor copies into a ring of
shared stages, a producer warpgroup and consumer warpgroups synchronised by mbarriers,
overlapped wgmma, register accumulators and the fused epilogue.  Checked through the
interpreter (the warpgroups as tasks, race-checked) against numpy on float16 and
bfloat16, the tensor maps the host encodes, nvcc for sm_90a (warnings are errors),
``ptxas -v`` (no spills) and SASS (HGMMA, UTMALDG, the wgmma wait); a producer
that does not wait for its stage to be released is a race."""

from __future__ import annotations

import re

import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir import dtype as D
from cuvil_tir.errors import CodegenError, ScheduleArgumentError
from cuvil_tir.interp.scalar import tile_storage, tile_values
from cuvil_tir.stmt import Evaluate
from cuvil_tir.visitor import Mutator, substitute
from targets.cuda.nvcc import resource_usage, sass
from targets.toolkit import cuda_recipes as recipes
from targets.cuda.wgmma_async import WAIT_OP
from targets.toolkit.cuda_tma_gemm import gemm_tma_wgmma

from .cuda_helpers import rand

SM90A = targets.Target("cuda", arch="sm_90a")


def _inputs(m, n, k, dtype):
    a, b = (np.asarray(tile_storage(rand(s, seed=i), dtype)).astype(D.to_numpy(dtype))
            for i, s in enumerate(((m, k), (n, k))))
    ref = tile_values(a, dtype).astype(np.float64) @ tile_values(b, dtype).astype(np.float64).T
    return a, b, ref


@pytest.mark.parametrize("dtype, bm, bn, stages", [("float16", 128, 128, 3),
                                                    ("bfloat16", 64, 64, 2)])
def test_the_pipelined_gemm_computes_right_in_the_interpreter(dtype, bm, bn, stages):
    # four K slices through a ring of fewer stages: every stage is refilled
    m, n, k = 128, 128, 256
    mod = targets.build(gemm_tma_wgmma(m, n, k, dtype, bm, bn, stages), SM90A,
                        name=f"tg_{dtype}")
    a, b, ref = _inputs(m, n, k, dtype)
    c = np.zeros((m, n), "float32")
    T.interpret(mod.lowered, a, b, c, check_races=True)
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4)


def test_the_epilogue_adds_the_bias_applies_relu_and_casts_in_registers():
    m, n, k = 64, 128, 128
    f = gemm_tma_wgmma(m, n, k, "float16", 64, 128, 2, bias=True, activation="relu",
                       out_dtype="float16")
    mod = targets.build(f, SM90A, name="tg_epi")
    a, b, ref = _inputs(m, n, k, "float16")
    bias = rand((n,), seed=7).astype("float16")
    c = np.zeros((m, n), "float16")
    T.interpret(mod.lowered, a, b, bias, c, check_races=True)
    want = np.maximum(ref + bias.astype(np.float64), 0).astype("float16")
    np.testing.assert_allclose(c.astype("float32"), want.astype("float32"), rtol=2e-3,
                               atol=2e-3)
    src = mod.get_source("cuda")
    assert "cvl_wgmma_epilogue<128, 1, half>(acc, &C[" in src and ", &bias[" in src


def test_recipes_name_it_and_the_tensor_maps_are_encoded_per_operand():
    assert recipes.gemm_tma_wgmma is gemm_tma_wgmma
    mod = targets.build(gemm_tma_wgmma(256, 512, 256, bn=256), SM90A, name="tg_maps")
    rec = mod.runtime.record()
    (launch,) = rec.launches
    assert launch.grid == (2, 2, 1) and launch.block == (128, 3, 1)
    (ea, eb) = rec.encodings
    # f16, rank 2, (K, rows), row stride in bytes, box (64, tile rows), 128-byte swizzle
    assert (ea[0], ea[3:6], ea[8]) == (6, ((256, 256), (512,), (64, 128)), 3)
    assert (eb[0], eb[3:6], eb[8]) == (6, ((256, 512), (512,), (64, 256)), 3)
    info = mod.runtime.program.kernels["tg_maps_kernel0"]
    # three stages of 128x64 and 256x64 halves, the barriers, the 1024-byte alignment
    assert launch.shared == info.dyn_shared >= 3 * (128 + 256) * 64 * 2 + 1024


def test_it_runs_on_the_tensor_engine_and_warpgroup_tensor_cores_without_spills():
    mod = targets.build(gemm_tma_wgmma(256, 256, 256, "bfloat16"), SM90A, name="tg_sass")
    src = mod.get_source("cuda")
    code = sass(src, "sm_90a")["tg_sass_kernel0"]
    assert re.search(r"HGMMA\.64x128x16\.F32\.BF16", code)
    assert "UTMALDG.2D" in code and "SYNCS.PHASECHK" in code
    # wgmma.wait_group 1 keeps a group in flight while the next is issued
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in code
    usage = resource_usage(src, "sm_90a")["tg_sass_kernel0"]
    assert usage["spill_stores"] == usage["spill_loads"] == 0
    assert usage["registers"] <= 168        # three warpgroups of 128 threads fit


class _DropEmptyWaits(Mutator):
    def visit_Evaluate(self, s):
        v = s.value
        if getattr(v, "op", None) == "mbarrier_wait" and v.args[0].buffer.name == "EMPTY":
            return Evaluate(T.const(0))
        return s


def test_a_producer_that_does_not_wait_for_released_stages_is_a_race():
    f = gemm_tma_wgmma(64, 64, 256, "float16", 64, 64, 2)
    f = f.with_body(_DropEmptyWaits().visit(f.body))
    mod = targets.build(f, SM90A, name="tg_race")
    a, b, _ = _inputs(64, 64, 256, "float16")
    with pytest.raises(T.RaceError, match="still in flight") as err:
        T.interpret(mod.lowered, a, b, np.zeros((64, 64), "float32"), check_races=True)
    assert all('"tma_load", A_s[' in s for s in err.value.statements)


class _DropWgmmaWaits(Mutator):
    """Remove the ``wgmma_wait`` calls that leave ``keep`` groups in flight."""

    def __init__(self, keep):
        super().__init__()
        self.keep = keep

    def visit_Evaluate(self, s):
        v = s.value
        if getattr(v, "op", None) == WAIT_OP and v.args[1].value == self.keep:
            return Evaluate(T.const(0))
        return s


def _without_wgmma_waits(keep, **kwargs):
    f = gemm_tma_wgmma(64, 64, 256, "float16", 64, 64, 2, **kwargs)
    return targets.build(f.with_body(_DropWgmmaWaits(keep).visit(f.body)), SM90A,
                         name=f"tg_nowait{keep}")


def test_a_stage_released_before_its_wgmma_wait_is_a_race():
    # without wgmma_wait(1) the consumers hand the previous stage back while its
    # steps are still in flight: the producer's next tensor copy overwrites it
    mod = _without_wgmma_waits(1)
    a, b, _ = _inputs(64, 64, 256, "float16")
    with pytest.raises(T.RaceError, match=r"A_s at address \d+: thread \(0, 1, 0\) writes "
                       r"it in .* while the asynchronous tensor-core op .* is still in "
                       r"flight") as err:
        T.interpret(mod.lowered, a, b, np.zeros((64, 64), "float32"), check_races=True)
    first, second = err.value.statements
    assert '"cuda.wgmma_async", A_s' in first and '"tma_load", A_s' in second
    assert err.value.threads == ((0, 0, 0), (0, 1, 0))


def test_accumulators_read_before_the_last_wgmma_wait_are_a_race_or_wrong():
    mod = _without_wgmma_waits(0)
    a, b, ref = _inputs(64, 64, 256, "float16")
    with pytest.raises(T.RaceError, match="still in flight") as err:
        T.interpret(mod.lowered, a, b, np.zeros((64, 64), "float32"), check_races=True)
    assert "cuda.wgmma_async" in err.value.statements[0]
    assert "cuda.wgmma_epilogue_none" in err.value.statements[1]
    # unchecked, the epilogue stores the accumulators as the last wait left them
    c = np.zeros((64, 64), "float32")
    T.interpret(mod.lowered, a, b, c)
    assert not np.allclose(c, ref, rtol=1e-3, atol=1e-2)


def test_the_wgmma_wait_count_must_be_a_constant():
    from cuvil_tir.interp.async_mma import wait_count
    from cuvil_tir.errors import LoweringError
    with pytest.raises(LoweringError, match=r"cuda.wgmma_wait: the count of groups left in "
                                            r"flight \(argument 1\) must be a constant >= 0, "
                                            r"found n"):
        wait_count(T.Call("int32", WAIT_OP, (T.const(0), T.var("n"), T.const(64))), "")


@pytest.mark.parametrize("kwargs, match", [
    ({"dtype": "float32"}, r"the inputs are float16 or bfloat16, found float32"),
    ({"bm": 96}, r"bm must be 64, 128, 192 or 256, bn one of \(64, 128, 256\) and stages "
                 r"at least 2; found bm=96"),
    ({"stages": 1}, r"found bm=128, bn=128, stages=1"),
    ({"m": 100}, r"M, N and K must be multiples of bm, bn and 64; found 100x256x256"),
    ({"bm": 256, "bn": 256, "stages": 8}, r"8 stages of 256x64 and 256x64 tiles need "
                                          r"524288 bytes of shared memory"),
    ({"activation": "gelu"}, r"the activation one of \('none', 'relu'\); found float32 "
                             r"and 'gelu'"),
])
def test_shapes_it_cannot_run_are_refused(kwargs, match):
    args = {"m": 256, "n": 256, "k": 256, **kwargs}
    with pytest.raises(ScheduleArgumentError, match=match):
        gemm_tma_wgmma(**args)


def test_a_bias_of_another_dtype_than_the_output_is_refused():
    f = gemm_tma_wgmma(64, 64, 64, "float16", 64, 64, 2, bias=True, out_dtype="float16")
    old = f.params[2]
    new = T.decl_buffer(old.shape, "float32", "bias")
    f = T.PrimFunc([f.params[0], f.params[1], new, f.params[3]],
                   substitute(f.body, {}, {old: new}), f.attrs)
    with pytest.raises(CodegenError, match=r"writes float32, float16, bfloat16 with a bias of "
                                           r"the same dtype; found C of float16 and bias "
                                           r"of float32"):
        targets.build(f, SM90A, name="tg_bias")
