"""Bulk copies completing on mbarrier phases (``bulk_copy``, ``mbarrier_*``:
Hopper's ``cp.async.bulk`` and ``mbarrier``): exact semantics in the interpreter (a
copy lands when its phase completes; a thread sees it after waiting on that phase),
a removed wait caught as a race naming the copy and the read, a wait no thread can
satisfy reported, and CUDA C that nvcc compiles for sm_90a into the TMA unit's
``UBLKCP`` and the ``SYNCS`` barrier instructions."""

from __future__ import annotations

import re

import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir.errors import CodegenError, LoweringError
from cuvil_tir.parser import parse
from targets.cuda.nvcc import resource_usage, sass

from .cuda_helpers import rand

WAIT = 'T.evaluate(T.call_intrin("int32", "mbarrier_wait", M[0], ko % 2))'
ARRIVE = 'T.evaluate(T.call_intrin("int32", "mbarrier_arrive", M[0], 512))'


def _kernel(wait: str = WAIT, arrive: str = ARRIVE, init: int = 1) -> str:
    """Four 128-float slices of a row, each brought by one bulk copy of thread 0 into
    one of two shared buffers; the phase of the slice's barrier alternates parity."""
    return f'''
def bulk(A: T.Buffer((4, 512), "float32"), C: T.Buffer((4, 32), "float32")):
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            with T.allocate((2, 128), "float32", scope="shared") as S:
                with T.allocate((1,), "uint64", scope="shared") as M:
                    with T.allocate((1,), "float32", scope="local") as acc:
                        acc[0] = T.float32(0)
                        if tx == 0:
                            T.evaluate(T.call_intrin("int32", "mbarrier_init", M[0], {init}))
                        for ko in T.serial(4):
                            if tx == 0:
                                {arrive}
                                T.evaluate(T.call_intrin("int32", "bulk_copy", S[ko % 2, 0],
                                                         A[bx, ko * 128], 512, M[0]))
                            {wait}
                            for j in T.serial(4):
                                acc[0] = acc[0] + S[ko % 2, j * 32 + tx]
                        C[bx, tx] = acc[0]
'''


def _build(src: str, name: str, arch: str = "sm_90a"):
    return targets.build(parse(src), targets.Target("cuda", arch=arch), name=name)


BULK = _build(_kernel(), "bulk")


def _run(mod, check=True):
    a, c = rand((4, 512)), np.zeros((4, 32), "float32")
    T.interpret(mod.lowered, a, c, check_races=check)
    return a, c


def test_bulk_copies_on_mbarrier_phases_compute_right_and_race_free():
    a, c = _run(BULK)
    np.testing.assert_allclose(c, a.reshape(4, 4, 4, 32).sum(axis=(1, 2)), rtol=1e-5,
                               atol=1e-5)


def test_a_removed_mbarrier_wait_is_a_race_naming_the_copy_and_the_read():
    mod = _build(_kernel(wait=""), "no_wait")
    with pytest.raises(T.RaceError, match="still in flight") as err:
        _run(mod)
    copy, read = err.value.statements
    assert '"bulk_copy", S[ko % 2 * 128], A[bx * 512 + ko * 128], 512, M[0]' in copy
    assert "acc[0] = acc[0] + S[" in read and err.value.buffer == "S"


def test_a_wait_whose_phase_never_completes_is_reported():
    # the barrier expects two arrivals per phase; only thread 0 arrives
    mod = _build(_kernel(init=2), "two_arrivals")
    with pytest.raises(LoweringError, match=r"waits for phase 0 of mbarrier M, which still "
                                            r"lacks 1 of 2 arrivals and 0 bytes"):
        _run(mod)


def test_an_mbarrier_used_before_its_init_is_refused():
    src = _kernel().replace('T.evaluate(T.call_intrin("int32", "mbarrier_init", M[0], 1))',
                            "acc[0] = T.float32(0)")
    with pytest.raises(LoweringError, match=r"uses mbarrier M before mbarrier_init"):
        _run(_build(src, "no_init"))


def test_bulk_copies_compile_to_the_tma_unit_and_need_hopper():
    src = BULK.get_source("cuda")
    assert "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" in src
    code = sass(src, "sm_90a")["bulk_kernel0"]
    assert "UBLKCP.S.G" in code
    assert re.search(r"SYNCS\.ARRIVE\.TRANS64", code) and "SYNCS.PHASECHK" in code
    usage = resource_usage(src, "sm_90a")["bulk_kernel0"]
    assert usage["spill_stores"] == 0 and usage["shared"] >= 2 * 128 * 4 + 8
    with pytest.raises(LoweringError, match=r"mbarrier_init needs sm_90 \(Hopper.s bulk .* the "
                                            r"target is sm_80"):
        _build(_kernel(), "old", arch="sm_80")


def test_a_bulk_copy_of_a_size_the_engine_cannot_move_is_refused():
    src = _kernel().replace("A[bx, ko * 128], 512, M[0]", "A[bx, ko * 128], 500, M[0]")
    with pytest.raises(CodegenError, match=r"bulk_copy: the bytes must be a positive "
                                           r"constant multiple of 16, found 500"):
        _build(src, "odd")
