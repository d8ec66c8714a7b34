"""Warp specialization from a schedule (targets/cuda/warp_specialize.py): the
``gemm_wgmma`` recipe with ``tma=True``, ``stages`` > 1 and ``warp_specialize=True``
annotates its pipelined K loop ``"cuda.warp_specialize"``; one more warpgroup issues
the tensor copies into the ring while the others run ``wgmma``, "full" and "empty"
mbarriers between them.  Checked through the interpreter (the two sides run as
interleaved tasks, race-checked) against numpy; a removed "full" wait is a race
naming the copy and the read, removed "empty" arrivals a reported deadlock; a 4096^3
fp16 GEMM compiles for sm_90a (warnings are errors) into HGMMA, UTMALDG and the
mbarrier instructions without spills; what cannot be split is refused."""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir.errors import LoweringError, ScheduleArgumentError
from cuvil_tir.parser import parse
from targets.cuda.nvcc import resource_usage
from targets.cuda.warp_specialize import WS_KEY
from targets.toolkit import cuda_recipes as recipes

from .cuda_helpers import check_early_read_races, check_tma_wgmma_sass, rand, without_ops
from .test_cuda_wgmma import nt_gemm

SM90A = targets.Target("cuda", arch="sm_90a")


@functools.lru_cache(maxsize=None)
def _ws(m, n, k, bm=128, bn=64, stages=3):
    sch = S.Schedule(nt_gemm(m, n, k, "float16"))
    recipes.gemm_wgmma(sch, bm=bm, bn=bn, tma=True, stages=stages, warp_specialize=True)
    return targets.build(sch, SM90A, name=f"ws_{m}_{n}_{k}")


def _operands(m, n, k):
    a = rand((m, k), seed=3).astype("float16")
    b = rand((n, k), seed=4).astype("float16")
    return a, b, a.astype(np.float64) @ b.astype(np.float64).T


@pytest.mark.parametrize("stages", [2, 3])
def test_the_warp_specialized_gemm_computes_right_without_races(stages):
    mod = _ws(256, 64, 256, stages=stages)
    a, b, ref = _operands(256, 64, 256)
    c = np.zeros((256, 64), "float32")
    T.interpret(mod.lowered, a, b, c, check_races=True)
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4)
    # two consumer warpgroups (bm = 128) and the producer's
    (launch,) = mod.runtime.record().launches
    assert launch.grid == (1, 2, 1) and launch.block == (128, 3, 1)
    text = T.printer.to_text(mod.lowered.functions[-1])
    # the producer waits until a stage is empty, the consumers until it is full, then
    # release it: one arrival per consumer thread
    assert re.search(rf"mbarrier_wait\", A_shared_empty1\[k_0_p % {stages}\], "
                     rf"\(k_0_p // {stages}( % 2)? \+ 1\) % 2\)", text)
    assert re.search(rf"mbarrier_wait\", A_shared_full0\[k_0 % {stages}\], "
                     rf"k_0 // {stages}( % 2)?\)", text)
    assert '"mbarrier_init", A_shared_empty1[0], 256)' in text
    # one group of wgmma steps in flight: a stage is released once the next step's
    # wait found the steps reading it done, the last group waited for after the loop
    consumer = text.split("if y_tma == 2")[1].split("else:")[1]
    assert re.search(r'"cuda.wgmma_async", A_shared\[.*\n.*"cuda.wgmma_commit".*\n.*'
                     r'"cuda.wgmma_wait", C_warpgroup\[.*\], 1, 64, 64\)\)\n\s*if 0 < k_0:\n'
                     rf'.*"mbarrier_arrive", A_shared_empty1\[(\(k_0 \+ {stages - 1}\) % '
                     rf'{stages}|k_0 - 1)\], 0\)', consumer)
    assert re.search(r'"cuda.wgmma_wait", C_warpgroup\[.*\], 0, 64, 64\)', consumer)
    assert "cuda.wgmma_sync" not in text
    assert "tvm_storage_sync" not in text.split("if y_tma == 2")[1]


def test_a_removed_full_wait_is_a_race_naming_the_copy_and_the_read():
    a, b, _ = _operands(128, 64, 256)
    check_early_read_races(_ws(128, 64, 256, stages=2).lowered,
                           (a, b, np.zeros((128, 64), "float32")), '"tma_load", A_shared[',
                           '"cuda.wgmma_async", A_shared[', "_full")


def test_removed_empty_arrivals_are_a_reported_deadlock():
    lowered = without_ops(_ws(128, 64, 256, stages=2).lowered, "mbarrier_arrive", "_empty")
    a, b, _ = _operands(128, 64, 256)
    with pytest.raises(LoweringError, match=r"(?s)deadlock in block \(0, 0, 0\).*threads "
                                            r"\(0, 2, 0\)\.\.\(0, 2, 0\) wait at `T.call_intrin"
                                            r"\(\"int32\", \"mbarrier_wait\", A_shared_empty1.*"
                                            r"lacks 256 of 256 arrivals"):
        T.interpret(lowered, a, b, np.zeros((128, 64), "float32"), check_races=True)


def test_a_4096_gemm_compiles_to_hgmma_and_tensor_copies_without_spills():
    mod = _ws(4096, 4096, 4096, bn=128, stages=4)
    src = mod.get_source("cuda")
    code = check_tma_wgmma_sass(src, "ws_4096_4096_4096_kernel0", r"HGMMA\.64x128x16\.F32\b")
    # one group in flight in the loop, none after it
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in code and "WARPGROUP.DEPBAR.LE gsb0, 0x0" in code
    # no block barrier between the producer and the consumers
    assert "__syncthreads" not in src.split("if (y_tma == 2)")[1]
    (launch,) = mod.runtime.record().launches
    assert launch.grid == (32, 32, 1) and launch.block == (128, 3, 1)
    # four stages of a 128 x 64 slice of A and of B
    assert 4 * 2 * 128 * 64 * 2 <= launch.shared <= 4 * 2 * 128 * 64 * 2 + 2048


KERNEL = '''
def ws(A: T.Buffer((128, 128), "float32"), C: T.Buffer((64, 128), "float32")):
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for ko in T.serial(4, annotations={{ANN}}):
            with T.allocate((64, 32), "float32", scope="shared") as S:
                for r in T.serial(64, annotations={"cuda.tma": 1}):
                    for c in T.serial(32):
                        S[r, c] = A[r, ko * 32 + c]
                for tx in T.thread_binding({THREADS}, thread="threadIdx.x"):
                    for i in T.serial(16):
                        C[i * 4 + tx // 32, ko * 32 + tx % 32] = S[i * 4 + tx // 32, tx % 32]
'''


def _kernel(ann, threads=128):
    return parse(KERNEL.replace("{ANN}", ann).replace("{THREADS}", str(threads)))


def test_a_plain_loop_is_split_between_a_producer_and_a_consumer():
    mod = targets.build(_kernel(f'"software_pipeline_stage": [0, 1], "{WS_KEY}": 1'), SM90A,
                        name="ws_plain")
    a = rand((128, 128)).astype("float32")
    c = np.zeros((64, 128), "float32")
    T.interpret(mod.lowered, a, c, check_races=True)
    np.testing.assert_array_equal(c, a[:64])
    (launch,) = mod.runtime.record().launches
    assert launch.block == (128, 2, 1)


@pytest.mark.parametrize("ann, threads, match", [
    (f'"{WS_KEY}": 1', 128, r"it has no software_pipeline_stage, which gives the ring's depth"),
    (f'"software_pipeline_stage": [0, 1], "{WS_KEY}": 1', 64,
     r"the block's threadIdx.x runs over 64 threads, not one warpgroup of 128"),
])
def test_loops_that_cannot_be_split_are_refused(ann, threads, match):
    with pytest.raises(LoweringError, match=r"(?s)the loop ko annotated 'cuda.warp_specialize': "
                                            + match):
        targets.build(_kernel(ann, threads), SM90A, name="ws_bad")


def test_a_loop_without_tensor_copies_is_refused():
    plain = KERNEL.replace(', annotations={"cuda.tma": 1}', "")
    func = parse(plain.replace("{ANN}", f'"software_pipeline_stage": [0, 1], "{WS_KEY}": 1')
                 .replace("{THREADS}", "128"))
    with pytest.raises(LoweringError, match=r"none of its statements is a copy annotated "
                                            r"'cuda.tma'"):
        targets.build(func, SM90A, name="ws_nocopy")


def test_the_recipe_refuses_warp_specialization_without_a_ring():
    sch = S.Schedule(nt_gemm(128, 64, 256, "float16"))
    with pytest.raises(ScheduleArgumentError, match=r"warp_specialize .* needs tma=True and "
                                                    r"stages >= 2, found tma=True, stages=1"):
        recipes.gemm_wgmma(sch, bm=128, bn=64, tma=True, warp_specialize=True)


@functools.lru_cache(maxsize=None)
def _ws_registers(m, n, k, bn, registers):
    sch = S.Schedule(nt_gemm(m, n, k, "float16"))
    recipes.gemm_wgmma(sch, bm=128, bn=bn, tma=True, stages=3, warp_specialize=registers)
    return targets.build(sch, SM90A, name=f"wsr_{m}_{n}")


def test_registers_move_from_the_producer_to_the_consumers():
    mod = _ws_registers(4096, 4096, 4096, 256, (40, 232))
    src = mod.get_source("cuda")
    code = check_tma_wgmma_sass(src, "wsr_4096_4096_kernel0", r"HGMMA\.64x256x16\.F32\b")
    # the producer gives its registers back (40 = 0x28), the consumers take them
    # (232 = 0xe8); both return to the 168 (0xa8) the 384 threads start with
    for op in ("DEALLOC.CTAPOOL 0x28", "TRY_ALLOC.CTAPOOL UP0, 0xe8",
               "DEALLOC.CTAPOOL 0xa8", "TRY_ALLOC.CTAPOOL UP0, 0xa8"):
        assert f"USETMAXREG.{op}" in code
    assert resource_usage(src, "sm_90a")["wsr_4096_4096_kernel0"]["registers"] == 168


def test_register_reallocation_leaves_the_results_alone():
    mod = _ws_registers(128, 64, 192, 64, (40, 232))
    a, b, ref = _operands(128, 64, 192)
    c = np.zeros((128, 64), "float32")
    T.interpret(mod.lowered, a, b, c, check_races=True)
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4)
    text = T.printer.to_text(mod.lowered.functions[-1])
    assert text.count('"cuda.setmaxnreg"') == 4


@pytest.mark.parametrize("registers, match", [
    ((40, 240), r"128 x \(40 \+ 2 x 240\) = 66560 within the 65536 registers"),
    ((48, 160), r"starts with 168 registers a thread; the producer's 48 must be at most "
                r"that, the consumers' 160 at least that"),
    ((40, 230), r"two multiples of 8 in 24..256, found \(40, 230\)"),
])
def test_register_counts_that_do_not_fit_are_refused(registers, match):
    sch = S.Schedule(nt_gemm(128, 64, 192, "float16"))
    recipes.gemm_wgmma(sch, bm=128, bn=64, tma=True, stages=2, warp_specialize=registers)
    with pytest.raises(LoweringError, match=r"(?s)annotated 'cuda.warp_specialize': "
                                            r"setmaxnreg: .*" + match + r".*e\.g\. \[40, 232\]"):
        targets.build(sch, SM90A, name="wsr_bad")


def test_setmaxnreg_run_by_part_of_a_warpgroup_is_refused_by_the_interpreter():
    def kernel(threads):
        return parse(f'''
def regs(C: T.Buffer((128,), "float32")):
    for tx in T.thread_binding(128, thread="threadIdx.x"):
        if tx < {threads}:
            T.evaluate(T.call_intrin("int32", "cuda.setmaxnreg", 232, 1))
        C[tx] = T.float32(1)
''')
    c = np.zeros(128, "float32")
    T.interpret(T.lower(kernel(128), SM90A), c)
    np.testing.assert_array_equal(c, 1)
    with pytest.raises(LoweringError, match=r"cuda.setmaxnreg runs on whole groups of 128 "
                                            r"threads together; 64 threads of the block run it"):
        T.interpret(T.lower(kernel(64), SM90A), c)
