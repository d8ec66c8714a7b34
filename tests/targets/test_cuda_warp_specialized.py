"""Producer/consumer warps synchronised only by mbarriers (warp specialization): one
producer thread fills a two-stage ring of shared tiles with tensor copies (``tma_load``)
guarded by "full" and "empty" mbarriers, four consumer warps sum the tiles.  The
interpreter runs the two groups as interleaved tasks that block at their waits
(cuvil_tir/interp/gpu_tasks.py): the kernel computes right and race-free; a removed
"full" wait, a removed "empty" wait and a deadlock are each reported, naming the
statements; nvcc compiles it for sm_90a into UTMALDG and the SYNCS barrier
instructions."""

from __future__ import annotations

import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir.errors import LoweringError
from cuvil_tir.parser import parse
from targets.cuda.nvcc import resource_usage, sass

from .cuda_helpers import rand

EMPTY_WAIT = 'T.evaluate(T.call_intrin("int32", "mbarrier_wait", EMPTY[k % 2], (k // 2 + 1) % 2))'
FULL_WAIT = 'T.evaluate(T.call_intrin("int32", "mbarrier_wait", FULL[k % 2], k // 2 % 2))'
SYNC = 'T.evaluate(T.call_intrin("int32", "tvm_storage_sync", "shared"))'


def _kernel(empty_wait: str = EMPTY_WAIT, full_wait: str = FULL_WAIT, consumers: int = 128,
            producer_sync: str = "") -> str:
    """C[r, c] = sum over the four 64-row slices of A; threads 128.. produce."""
    return f'''
def ws(A: T.Buffer((256, 64), "float16"), C: T.Buffer((64, 64), "float32")):
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(160, thread="threadIdx.x"):
            with T.allocate((2, 64, 64), "float16", scope="shared") as S:
                with T.allocate((2,), "uint64", scope="shared") as FULL:
                    with T.allocate((2,), "uint64", scope="shared") as EMPTY:
                        with T.allocate((32,), "float32", scope="local") as acc:
                            if tx == 0:
                                for s in T.serial(2):
                                    T.evaluate(T.call_intrin("int32", "mbarrier_init",
                                                             FULL[s], 1))
                                    T.evaluate(T.call_intrin("int32", "mbarrier_init",
                                                             EMPTY[s], {consumers}))
                            {SYNC}
                            if tx >= 128:
                                {producer_sync}
                                if tx == 128:
                                    for k in T.serial(4):
                                        {empty_wait}
                                        T.evaluate(T.call_intrin("int32", "mbarrier_arrive",
                                                                 FULL[k % 2], 8192))
                                        T.evaluate(T.call_intrin("int32", "tma_load",
                                                                 S[k % 2, 0, 0], A[k * 64, 0],
                                                                 FULL[k % 2], 64, 64))
                            else:
                                for j in T.serial(32):
                                    acc[j] = T.float32(0)
                                for k in T.serial(4):
                                    {full_wait}
                                    for j in T.serial(32):
                                        acc[j] = acc[j] + T.Cast(
                                            "float32", S[k % 2, j * 2 + tx // 64, tx % 64])
                                    T.evaluate(T.call_intrin("int32", "mbarrier_arrive",
                                                             EMPTY[k % 2], 0))
                                for j in T.serial(32):
                                    C[j * 2 + tx // 64, tx % 64] = acc[j]
'''


def _build(src: str, name: str):
    return targets.build(parse(src), targets.Target("cuda", arch="sm_90a"), name=name)


WS = _build(_kernel(), "ws")


def _run(mod):
    a = rand((256, 64)).astype("float16")
    c = np.zeros((64, 64), "float32")
    T.interpret(mod.lowered, a, c, check_races=True)
    return a, c


def test_producer_and_consumer_warps_run_as_tasks_and_compute_right():
    a, c = _run(WS)
    np.testing.assert_allclose(c, a.astype("float32").reshape(4, 64, 64).sum(0),
                               rtol=1e-6, atol=1e-6)


def test_a_removed_full_wait_is_a_race_naming_the_copy_and_the_read():
    with pytest.raises(T.RaceError, match="still in flight") as err:
        _run(_build(_kernel(full_wait=""), "ws_no_full"))
    copy, read = err.value.statements
    assert '"tma_load", S[k % 2 * 4096]' in copy and "acc[j" in read and "S[" in read


def test_a_removed_empty_wait_is_a_race_between_two_copies_of_one_stage():
    # the producer overwrites stage 0 before the consumers released it
    with pytest.raises(T.RaceError, match="still in flight") as err:
        _run(_build(_kernel(empty_wait=""), "ws_no_empty"))
    first, second = err.value.statements
    assert '"tma_load", S[k % 2 * 4096]' in first and first == second
    assert err.value.threads == ((128, 0, 0), (128, 0, 0))


def test_a_deadlock_is_reported_naming_every_waiting_statement():
    # the "empty" barriers expect one arrival more than the consumers make
    with pytest.raises(LoweringError, match=r"deadlock in block \(0, 0, 0\)") as err:
        _run(_build(_kernel(consumers=129), "ws_deadlock"))
    msg = str(err.value)
    assert "threads (128, 0, 0)..(128, 0, 0) wait at `T.call_intrin(\"int32\", " \
           "\"mbarrier_wait\", EMPTY[k % 2]" in msg
    assert "(phase 0 of mbarrier EMPTY lacks 1 of 129 arrivals and 0 bytes)" in msg
    assert "threads (0, 0, 0)..(127, 0, 0) wait at `T.call_intrin(\"int32\", " \
           "\"mbarrier_wait\", FULL[k % 2], k // 2)` (phase 1 of mbarrier FULL lacks 1 " \
           "of 1 arrivals" in msg


def test_a_block_barrier_inside_one_group_is_refused():
    with pytest.raises(LoweringError, match=r"threads \(0, 0, 0\) and \(128, 0, 0\) take "
                                            r"different paths through control flow that "
                                            r"holds a barrier"):
        _run(_build(_kernel(producer_sync=SYNC), "ws_sync"))


def test_the_warp_specialized_kernel_compiles_to_the_tensor_engine():
    src = WS.get_source("cuda")
    assert "if (128 <= tx) {" in src and "cvl_mbar_wait(&EMPTY[k % 2]" in src
    code = sass(src, "sm_90a")["ws_kernel0"]
    assert "UTMALDG.2D" in code and "SYNCS.PHASECHK" in code and "SYNCS.ARRIVE" in code
    assert resource_usage(src, "sm_90a")["ws_kernel0"]["spill_stores"] == 0
