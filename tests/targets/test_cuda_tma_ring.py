"""Tensor copies in a software-pipelined loop (targets/cuda/tma_ring.py): the
``gemm_wgmma`` recipe with ``tma=True`` and ``stages`` > 1 puts TVM's
``software_pipeline_stage`` on its K loop; the copies become a ring of shared stages,
one mbarrier each, the waits for a stage's phase placed before the statement reading
it.  Checked through the interpreter (race-checked) against numpy, in the lowered IR
(the ring's barriers and the parity of each wait), by nvcc for sm_90a (warnings are
errors), ``ptxas -v`` (no spills) and SASS (``UTMALDG`` beside ``HGMMA`` and the
mbarrier waits); a removed wait is a race naming the copy and the read; the loops it
cannot make a ring are refused."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir.errors import LoweringError
from cuvil_tir.parser import parse
from cuvil_tir.visitor import post_order_visit
from targets.cuda.tma_copy import TMA_KEY
from targets.toolkit import cuda_recipes as recipes

from .cuda_helpers import check_early_read_races, check_tma_wgmma_sass, rand
from .test_cuda_wgmma import nt_gemm

SM90A = targets.Target("cuda", arch="sm_90a")


@functools.lru_cache(maxsize=None)
def _ring(stages, m=64, n=64, k=512, bm=64, bn=64, asyncs=False):
    sch = S.Schedule(nt_gemm(m, n, k, "float16"))
    recipes.gemm_wgmma(sch, bm=bm, bn=bn, tma=True, stages=stages)
    if asyncs:
        ko = sch.get_loops(sch.get_block("C_update_o"))[2]
        sch.annotate(ko, "software_pipeline_async_stages", [0])
    return targets.build(sch, SM90A, name=f"ring{stages}_{m}{'a' if asyncs else ''}")


def _operands(m, n, k):
    a = rand((m, k), seed=1).astype("float16")
    b = rand((n, k), seed=2).astype("float16")
    return a, b, a.astype(np.float64) @ b.astype(np.float64).T


def _calls(func, op):
    out = []
    post_order_visit(func.body, lambda e: out.append(e) if getattr(e, "op", None) == op
                     else None)
    return out


@pytest.mark.parametrize("stages, asyncs", [(2, False), (3, False), (3, True)])
def test_the_ring_of_tensor_copies_computes_right_without_races(stages, asyncs):
    mod = _ring(stages, asyncs=asyncs)
    a, b, ref = _operands(64, 64, 512)
    c = np.zeros((64, 64), "float32")
    T.interpret(mod.lowered, a, b, c, check_races=True)
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4)
    kernel = mod.lowered.functions[-1]
    # each copy has a ring of `stages` barriers, each initialised once per block
    inits = _calls(kernel, "mbarrier_init")
    assert len(inits) == 2 * stages
    assert {i.args[0].buffer.shape[0].value for i in inits} == {stages}
    # the copies of later slices are issued ahead (prologue), the waits use the parity
    # of the slice's phase on its stage's barrier
    loads = _calls(kernel, "tma_load")
    assert len(loads) == 2 * stages
    waits = {T.printer.to_text(w.args[1]) for w in _calls(kernel, "mbarrier_wait")}
    assert waits == {f"k_0 // {stages} % 2"}


def test_the_ring_gemm_compiles_to_tensor_copies_hgmma_and_phase_waits():
    mod = _ring(3, 512, 512, 512, 128, 128)
    check_tma_wgmma_sass(mod.get_source("cuda"), "ring3_512_kernel0",
                         r"HGMMA\.64x128x16\.F32\b")
    # three stages of two 128 x 64 fp16 slices: dynamic shared memory past 48 KiB
    dyn = []
    post_order_visit(mod.lowered.functions[-1].body, lambda n: dyn.append(
        dict(n.annotations)["dyn_shared"]) if "dyn_shared" in dict(
            getattr(n, "annotations", ())) else None)
    assert 3 * 2 * 128 * 64 * 2 <= dyn[0] < 3 * 2 * 128 * 64 * 2 + 1024


def test_a_removed_wait_is_a_race_naming_the_copy_and_the_read():
    a, b, _ = _operands(64, 64, 512)
    check_early_read_races(_ring(2).lowered, (a, b, np.zeros((64, 64), "float32")),
                           '"tma_load", A_shared[0]', '"cuda.wgmma_sync", A_shared[')


PIPED = f'''
def piped(A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    for by in T.thread_binding(2, thread="blockIdx.y"):
        for bx in T.thread_binding(4, thread="blockIdx.x"):
            for ko in T.serial(2, annotations={{{{ANN}}}}):
                with T.allocate((64, 32), "float32", scope="shared") as S:
                    for r in T.serial(64, annotations={{"{TMA_KEY}": 1}}):
                        for c in T.serial(32):
                            S[r, c] = A[by * 64 + r, ko * 32 + c]
                    {{USE}}
'''
USE = '''for tx in T.thread_binding(128, thread="threadIdx.x"):
                        for i in T.serial(16):
                            C[by * 64 + i * 4 + tx // 32, ko * 32 + tx % 32] = \\
                                S[i * 4 + tx // 32, tx % 32] * 2.0'''


def _piped(ann, use=USE):
    return parse(PIPED.replace("{ANN}", ann).replace("{USE}", use))


@pytest.mark.parametrize("ann", ['"software_pipeline_stage": [0, 1]',
                                 '"software_pipeline_stage": [0, 1], '
                                 '"software_pipeline_order": [1, 0]'])
def test_a_plain_tile_ring_computes_right(ann):
    mod = targets.build(_piped(ann), SM90A, name="ring_plain")
    a = rand((128, 128)).astype("float32")
    c = np.zeros((128, 128), "float32")
    T.interpret(mod.lowered, a, c, check_races=True)
    np.testing.assert_array_equal(c[:, :64], a[:, :64] * 2)


@pytest.mark.parametrize("ann, use, match", [
    ('"software_pipeline_stage": [0, 0]', "T.evaluate(0)",
     r"no statement of the loop reads S, which the copy r writes.*read the tile in the loop"),
    ('"software_pipeline_stage": [0, 1], "software_pipeline_async_stages": [1]', USE,
     r"software_pipeline_async_stages=\[1\] names a stage holding statements that are not "
     r"tensor copies.*drop software_pipeline_async_stages"),
])
def test_loops_that_cannot_be_a_ring_are_refused(ann, use, match):
    with pytest.raises(LoweringError, match=r"(?s)the tensor copies of the software-pipelined "
                                            r"loop ko: " + match):
        targets.build(_piped(ann, use), SM90A, name="ring_bad")


def test_a_copy_below_the_top_of_a_pipelined_statement_is_refused():
    deep = PIPED.replace("                    for r in T.serial(64, annotations",
                         "                    for o in T.serial(1):\n"
                         "                     for r in T.serial(64, annotations")
    deep = deep.replace("                        for c in T.serial(32):\n"
                        "                            S[r, c]",
                        "                      for c in T.serial(32):\n"
                        "                        S[r, c]")
    func = parse(deep.replace("{ANN}", '"software_pipeline_stage": [0, 1]')
                 .replace("{USE}", USE))
    with pytest.raises(LoweringError, match=r"(?s)statement 0 holds a copy annotated "
                                            r"'cuda.tma' below its top.*compute_at the copy "
                                            r"at the pipelined loop"):
        targets.build(func, SM90A, name="ring_deep")
