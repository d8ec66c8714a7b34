"""The step memo: schedules of one search give back the steps they share (a child
candidate replays only what follows its first new decision), with the same results,
traces and refusals as without it."""

import random

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import schedules.primitives.cache as cache_module
from schedules.errors import RegionContractError
from schedules.step_memo import StepMemo
from schedules.tune.decisions import run_with_decisions
from schedules.tune.search import Search
from tests.schedules.testing import assert_refused, run
from tests.schedules.test_fuzz_found_cache_regions import _nested_blockize, _reversed_sum


def _matmul(n=32):
    A = T.placeholder((n, n), name="A")
    B = T.placeholder((n, n), name="B")
    k = T.reduce_axis((0, n), name="k")
    return T.create_prim_func([A, B, T.compute((n, n), lambda i, j: T.sum(
        A[i, k] * B[k, j], axis=k), name="C")])


def _space(sch):
    i, j, k = sch.get_loops("C")
    io, ii = sch.split(i, sch.sample_perfect_tile(i, 2))
    jo, ji = sch.split(j, sch.sample_perfect_tile(j, 2))
    sch.reorder(io, jo, k, ii, ji)
    sch.cache_read("C", 0, "global")
    sch.transform_layout("A_global", 0, lambda a, b: (b, a), buffer_index_type="write")
    sch.vectorize(ji)


def test_a_shared_prefix_is_given_back_and_only_the_rest_runs_again():
    f = _matmul()
    memo = StepMemo()
    a = run_with_decisions(_space, f, [[4, 8], [2, 16]], memo=memo)
    first = memo.misses
    assert memo.hits == 0 and first == len(memo)
    # the same first tile, another second: the steps up to the second split are given back
    b = run_with_decisions(_space, f, [[4, 8], [4, 8]], memo=memo)
    plain = run_with_decisions(_space, f, [[4, 8], [4, 8]])
    assert memo.hits == 2      # get_loops and the first split
    assert T.structural_equal(b.func, plain.func)
    assert b.trace.as_json() == plain.trace.as_json()
    # the whole of a candidate again: every step given back, the very same function
    c = run_with_decisions(_space, f, [[4, 8], [2, 16]], memo=memo)
    assert c.func is a.func and c.trace.as_json() == a.trace.as_json()
    x = np.random.default_rng(0).standard_normal((32, 32)).astype("float32")
    y = np.random.default_rng(1).standard_normal((32, 32)).astype("float32")
    got = run(c, [x, y, np.zeros((32, 32), "float32")])[2]
    np.testing.assert_allclose(got, x @ y, rtol=1e-5, atol=1e-5)


def test_handles_given_back_are_fresh_objects():
    """remove_rv retires one handle object; a step given back gives new ones, as the
    primitive would."""
    f = _matmul()
    memo = StepMemo()
    a = S.Schedule(f, memo=memo)
    (i, _, _) = a.get_loops("C")
    a.remove_rv(i)
    b = S.Schedule(f, memo=memo)
    (i2, _, _) = b.get_loops("C")
    assert memo.hits == 1 and i2 is not i and i2 == i
    io, ii = b.split(i2, [4, 8])
    assert b.get(ii).extent.value == 8


def test_a_refused_step_is_not_remembered_and_is_refused_again():
    f = _matmul()
    memo = StepMemo()
    for _ in range(2):
        sch = S.Schedule(f, memo=memo)
        (i, _, _) = sch.get_loops("C")
        assert_refused(sch, lambda sch=sch, i=i: sch.split(i, [3, 8]), "split")
    assert memo.hits == 1 and len(memo) == 1   # get_loops only


def test_a_step_breaking_the_region_contract_is_refused_through_a_memo(monkeypatch):
    """As without a memo (test_fuzz_found_cache_regions): the broken step is refused
    with the check's finding, each time, and never remembered."""
    monkeypatch.setattr(cache_module, "within_enclosing", lambda *a, **k: None)
    memo = StepMemo()
    for _ in range(2):
        sch = S.Schedule(_reversed_sum(), memo=memo)
        _nested_blockize(sch)
        assert_refused(sch, lambda sch=sch: sch.cache_read("Y", 1, "local"),
                       r"cache_read: the result breaks the region contract: block 'Y_o' "
                       r"reads X\[v_i_o, 2 - v_k_i_o \* 2:", RegionContractError)
    assert not any(entry[0].__name__ == "cache_read" for entry in memo._steps.values())


def test_the_memo_keeps_at_most_its_capacity_least_recently_used_first():
    f = _matmul()
    memo = StepMemo(capacity=3)
    for factors in ([2, 16], [4, 8], [8, 4]):
        sch = S.Schedule(f, memo=memo)
        (i, _, _) = sch.get_loops("C")
        sch.split(i, factors)
    # get_loops (used three times, so kept) and the two latest splits
    assert len(memo) == 3 and memo.hits == 2
    sch = S.Schedule(f, memo=memo)
    (i, _, _) = sch.get_loops("C")
    sch.split(i, [2, 16])       # the first split left: taken again
    assert memo.hits == 3 and memo.misses == 5


def test_not_in_debug_mode_nor_for_arguments_it_cannot_key():
    f = _matmul()
    memo = StepMemo()
    sch = S.Schedule(f, debug=True, memo=memo)
    sch.get_loops("C")
    assert memo.hits == memo.misses == 0 and len(memo) == 0
    sch = S.Schedule(f, memo=memo)
    (i, _, _) = sch.get_loops("C")
    sch.split(i, [T.const(4), None])       # an expression: not keyed
    assert len(memo) == 1


def test_a_search_with_its_memo_proposes_what_it_proposes_without():
    f = _matmul(64)

    def proposed(with_memo):
        s = Search(f, _space, "llvm", rng=random.Random(3), guided=False)
        if not with_memo:
            s.memo = None
        seen: set = set()
        out = [s.propose(2, seen) for _ in range(4)]
        return [(k, sch.trace.as_json(), sch.func) for batch in out for sch, k in batch], s

    plain, _ = proposed(False)
    memo, s = proposed(True)
    assert s.memo.hits > 0
    assert [(k, t) for k, t, _ in plain] == [(k, t) for k, t, _ in memo]
    assert all(T.structural_equal(a, b) for (_, _, a), (_, _, b) in zip(plain, memo))


@pytest.mark.parametrize("capacity", [0, 1])
def test_a_tiny_memo_is_still_right(capacity):
    f = _matmul()
    memo = StepMemo(capacity=capacity)
    a = run_with_decisions(_space, f, [[4, 8], [2, 16]], memo=memo)
    b = run_with_decisions(_space, f, [[4, 8], [2, 16]], memo=memo)
    assert len(memo) <= capacity
    assert T.structural_equal(a.func, b.func)
