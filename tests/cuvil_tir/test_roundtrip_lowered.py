"""Any IR Cuvil prints, Cuvil reads back: te workloads, their lowered forms for the
generic and the llvm pipelines, and a scheduled, vectorised, unrolled, parallel matmul."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets  # noqa: F401 - registers the llvm pipeline
from tests import workloads as W


@pytest.mark.parametrize("name", sorted(W.ALL))
@pytest.mark.parametrize("target", [None, "llvm"])
def test_lowered_workload_round_trips(name, target):
    work = W.ALL[name]()
    low = T.lower(work.func, target)
    back = T.parse(str(low))
    assert T.structural_equal(back, low)
    assert str(back) == str(low)
    arrays = work.make_inputs(np.random.default_rng(0))
    T.interpret(back, *arrays)
    work.check(arrays)


def _scheduled_matmul():
    work = W.matmul(16, 32, 8)
    sch = S.Schedule(work.func)
    blk = sch.get_block("C")
    i, j, k = sch.get_loops(blk)
    io, jo, ii, ji = sch.tile(i, j, 4, 16)
    cc = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(cc, jo)
    sch.decompose_reduction(blk, k)
    sch.vectorize(ji)
    sch.unroll(ii)
    sch.parallel(io)
    return work, sch


def test_scheduled_and_lowered_matmul_round_trips_and_runs():
    work, sch = _scheduled_matmul()
    for f in (sch.func, T.lower(sch.func, "llvm")):
        back = T.parse(str(f))
        assert T.structural_equal(back, f)
        arrays = work.make_inputs(np.random.default_rng(1))
        T.interpret(back, *arrays)
        work.check(arrays)
