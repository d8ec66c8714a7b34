"""sample_compute_location: the candidates, uniform draws, replay, and the marks
applied by compute_at."""

import collections

import numpy as np

import cuvil_tir as T
import schedules as S
from schedules.errors import ScheduleArgumentError
from schedules.primitives.sample_location import INLINE_MARK, ROOT_MARK, candidates
from tests.schedules.testing import assert_refused, run, verify_trace_roundtrip


def conv_like():
    """P (inlinable) feeds a reduction R over loops i (spatial), k (reduce), j
    (spatial, after the reduction: not a candidate)."""
    X = T.placeholder((8, 6), name="X")
    P = T.compute((8, 6), lambda i, k: X[i, k] * 2.0, name="P")
    k = T.reduce_axis((0, 6), name="k")
    R = T.compute((8, 3), lambda i, j: T.sum(P[i, k], axis=k), name="R")
    sch = S.Schedule(T.create_prim_func([X, R]))
    i, j, k = sch.get_loops("R")
    sch.reorder(i, k, j)
    return sch.func


def test_candidates_follow_the_search_rules():
    f = conv_like()
    handles, decisions = candidates(f, S.BlockRV("P"))
    assert decisions == [-2, -1, 0, 1]
    assert handles[:2] == [INLINE_MARK, ROOT_MARK]
    assert [h.var.name for h in handles[2:]] == ["i", "k"]
    # a block nothing reads has only "stay where you are"
    assert candidates(f, S.BlockRV("R"))[1] == [-1]


def test_draws_are_uniform_and_replay():
    f = conv_like()
    sch = S.Schedule(f, seed=3)
    counts = collections.Counter()
    for _ in range(400):
        sch.sample_compute_location("P")
        counts[sch.trace[-1].decision] += 1
    assert set(counts) == {-2, -1, 0, 1}
    assert all(60 <= c <= 140 for c in counts.values()), counts


def test_each_decision_applied_by_compute_at_keeps_the_numbers():
    f = conv_like()
    x = np.random.default_rng(0).random((8, 6), dtype="float32")
    want = np.repeat((x * 2).sum(1)[:, None], 3, axis=1)
    for decision in (-2, -1, 0, 1):
        sch = S.Schedule(f)
        loc = sch.sample_compute_location("P", decision=decision)
        sch.compute_at("P", loc)
        np.testing.assert_allclose(run(sch, [x, np.zeros((8, 3), "float32")])[1], want,
                                   rtol=1e-5)
        replayed = verify_trace_roundtrip(sch, f)
        assert replayed.trace[0].decision == decision


def test_a_stale_decision_falls_back_to_the_previous_candidate():
    f = conv_like()
    sch = S.Schedule(f)
    assert sch.sample_compute_location("P", decision=7).var.name == "k"
    assert sch.trace[-1].decision == 1
    sch.compute_inline("P")
    assert sch.sample_compute_location("R", decision=-2) is ROOT_MARK
    assert sch.trace[-1].decision == -1


def test_refuses_a_bad_decision():
    sch = S.Schedule(conv_like())
    assert_refused(sch, lambda: sch.sample_compute_location("P", decision=-5),
                   r"decision -5: expected -2 \(inline\), -1 \(root\) or a loop position",
                   ScheduleArgumentError)
