"""Tensor copies from a schedule (targets/cuda/tma_copy.py): a shared-memory copy whose
outermost loop is annotated ``"cuda.tma"`` becomes one ``tma_load`` on an mbarrier
phase.  The ``gemm_wgmma`` recipe with ``tma=True`` (swizzled tiles, fp16, bf16 and
fp8) and a plain staged kernel are checked through the interpreter (race-checked)
against numpy, the tensor maps the host encodes, nvcc for sm_90a (warnings are
errors), ``ptxas -v`` (no spills) and SASS (``UTMALDG`` beside ``HGMMA``); a removed
wait is a race naming the copy and the read; the nests it cannot copy are refused."""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir import dtype as D
from cuvil_tir import float8 as F8
from cuvil_tir.errors import LoweringError
from cuvil_tir.interp.scalar import tile_storage, tile_values
from cuvil_tir.parser import parse
from targets.cuda.nvcc import resource_usage, sass
from targets.cuda.tma_copy import TMA_KEY
from targets.toolkit import cuda_recipes as recipes

from .cuda_helpers import check_early_read_races, rand
from .test_cuda_wgmma import nt_gemm

SM90A = targets.Target("cuda", arch="sm_90a")


@functools.lru_cache(maxsize=None)
def _gemm(dtype, m=128, n=128, k=256, bm=128, bn=64, arch=SM90A):
    sch = S.Schedule(nt_gemm(m, n, k, dtype))
    recipes.gemm_wgmma(sch, bm=bm, bn=bn, tma=True)
    return targets.build(sch, arch, name=f"tc_{dtype}")


def _operands(dtype, m, n, k):
    if F8.is_float8(dtype):
        a, b = (F8.encode(rand(s, seed=i), dtype) for i, s in enumerate(((m, k), (n, k))))
        return a, b, F8.decode(a, dtype).astype(np.float64) @ F8.decode(b, dtype).astype(
            np.float64).T
    a, b = (np.asarray(tile_storage(rand(s, seed=i), dtype)).astype(D.to_numpy(dtype))
            for i, s in enumerate(((m, k), (n, k))))
    return a, b, tile_values(a, dtype).astype(np.float64) @ tile_values(
        b, dtype).astype(np.float64).T


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float8_e4m3fn"])
def test_the_wgmma_gemm_with_tensor_copies_computes_right(dtype):
    mod = _gemm(dtype)
    a, b, ref = _operands(dtype, 128, 128, 256)
    c = np.zeros((128, 128), "float32")
    T.interpret(mod.lowered, a, b, c, check_races=True)
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4)
    # both tiles come through the tensor engine, none through the threads
    src = mod.get_source("cuda")
    assert src.count("cvl_tma_load_2d(&") == 2
    assert not re.search(r"[AB]_shared\[[^;]*\] = ", src)


@pytest.mark.parametrize("dtype, op", [("float16", r"HGMMA\.64x64x16\.F32\b"),
                                       ("bfloat16", r"HGMMA\.64x64x16\.F32\.BF16")])
def test_it_runs_on_the_tensor_engine_and_the_warpgroup_tensor_cores(dtype, op):
    src = _gemm(dtype).get_source("cuda")
    code = sass(src, "sm_90a")[f"tc_{dtype}_kernel0"]
    assert re.search(op, code)
    assert "UTMALDG.2D" in code and "SYNCS.PHASECHK" in code
    # no thread loads A or B from global memory: the tensor engine brings both
    assert not re.search(r"\bLDG\b", code)
    usage = resource_usage(src, "sm_90a")[f"tc_{dtype}_kernel0"]
    assert usage["spill_stores"] == usage["spill_loads"] == usage["stack"] == 0
    assert usage["shared"] <= 2 * 128 * 64 * 2 + 2048


def test_the_tensor_maps_carry_the_box_and_the_128_byte_swizzle():
    rec = _gemm("float16", 256, 128, 128).runtime.record()
    (launch,) = rec.launches
    assert launch.grid == (2, 2, 1) and launch.block == (128, 2, 1)
    (ea, eb) = rec.encodings
    # f16, rank 2, (K, rows), row stride in bytes, box (64, tile rows), 128-byte swizzle
    assert (ea[0], ea[3:6], ea[8]) == (6, ((128, 256), (256,), (64, 128)), 3)
    assert (eb[0], eb[3:6], eb[8]) == (6, ((128, 128), (256,), (64, 64)), 3)


def test_a_removed_wait_is_a_race_naming_the_copy_and_the_read():
    a, b, _ = _operands("float16", 64, 64, 128)
    check_early_read_races(_gemm("float16", 64, 64, 128, bm=64).lowered,
                           (a, b, np.zeros((64, 64), "float32")),
                           '"tma_load", A_shared[0]', '"cuda.wgmma_sync", A_shared[')


STAGED = f'''
def staged(A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    for by in T.thread_binding(2, thread="blockIdx.y"):
        for bx in T.thread_binding(4, thread="blockIdx.x"):
            with T.allocate((64, 32), "float32", scope="shared") as S:
                for ko in T.serial(1):
                    for r in T.serial(64, annotations={{"{TMA_KEY}": 1}}):
                        for c in T.serial(32):
                            {{store}}
                for tx in T.thread_binding(128, thread="threadIdx.x"):
                    for i in T.serial(16):
                        C[by * 64 + i * 4 + tx // 32, bx * 32 + tx % 32] = \\
                            S[i * 4 + tx // 32, tx % 32] * 2.0
'''
PLAIN = "S[r, c] = A[by * 64 + r, bx * 32 + c]"


def test_a_plain_tile_copied_by_the_tensor_engine_computes_right():
    mod = targets.build(parse(STAGED.replace("{store}", PLAIN)), SM90A, name="tc_plain")
    a = rand((128, 128)).astype("float32")
    c = np.zeros((128, 128), "float32")
    T.interpret(mod.lowered, a, c, check_races=True)
    np.testing.assert_array_equal(c, a * 2)
    src = mod.get_source("cuda")
    assert re.search(r"cvl_tma_load_2d\(&S\[0\], &cvl_tmap_A_0, .*bx \* \(uint32_t\)32\), "
                     r".*by \* \(uint32_t\)64\), &S_tma_bar0\[0\]\)", src)
    assert "UTMALDG.2D" in sass(src, "sm_90a")["tc_plain_kernel0"]
    ((dtype, _, _, dims, strides, box, *_rest),) = mod.runtime.record().encodings
    assert (dtype, dims, strides, box) == (7, (128, 128), (512,), (32, 64))


@pytest.mark.parametrize("store, match", [
    ("S[c, r] = A[by * 64 + r, bx * 32 + c]",
     r"it writes S\[c, r\] from A\[by \* 64 \+ r, bx \* 32 \+ c\]: not each element of a "
     r"64 x 32 box once, row-major"),
    ("S[r, c] = A[by * 64 + r * 2, bx * 32 + c]",
     r"not each element of a 64 x 32 box once"),
    ("S[r, c] = A[by * 64 + r, bx * 32 + c] * 2.0",
     r"it stores A\[by \* 64 \+ r, bx \* 32 \+ c\] \* T.float32\(2\) into shared S"),
])
def test_nests_that_are_not_a_box_copy_are_refused(store, match):
    with pytest.raises(LoweringError, match=r"the loop r annotated 'cuda.tma' must copy a box "
                                            r"of a 2-D global tensor into a shared tile.*"
                                            + match):
        targets.build(parse(STAGED.replace("{store}", store)), SM90A, name="tc_bad")


def test_a_copy_inside_a_thread_loop_and_an_old_architecture_are_refused():
    inside = STAGED.replace("                for ko in T.serial(1):",
                            "                for ko in T.thread_binding(1, thread=\"threadIdx.y\"):")
    with pytest.raises(LoweringError, match=r"(?s)it lies inside the loop ko bound to threadIdx.y"
                                            r".*compute_at the copy at a loop outside"):
        targets.build(parse(inside.replace("{store}", PLAIN)), SM90A, name="tc_in")
    with pytest.raises(LoweringError, match=r"tc_80: the loop r annotated 'cuda.tma' asks for a "
                                            r"tensor copy, which needs sm_90 or later; the "
                                            r"target is sm_80"):
        targets.build(parse(STAGED.replace("{store}", PLAIN)), "cuda", name="tc_80")


def test_a_copy_in_a_pipelined_loop_whose_tile_is_read_after_it_is_refused():
    # a pipelined copy is waited for before the loop's statement reading the tile
    # (targets/cuda/tma_ring.py); here the tile is read after the loop
    piped = STAGED.replace("for ko in T.serial(1):", "for ko in T.serial(1, annotations={"
                           "\"software_pipeline_stage\": [0]}):")
    with pytest.raises(LoweringError, match=r"(?s)software-pipelined loop ko: no statement "
                                            r"of the loop reads S, which the copy r writes"):
        targets.build(parse(piped.replace("{store}", PLAIN)), SM90A, name="tc_piped")
