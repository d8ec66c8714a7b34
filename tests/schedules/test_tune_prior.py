"""The search's first picks: the analytic prior, categorical decisions carried to
another task by value, the prior-ranked cold start, and a search reproducible from its
seed (costs from a stand-in executor, no timing)."""

import json
import random

import pytest

from cuvil_tir.target import Machine
from schedules.tune.decisions import nearest_option, run_with_decisions
from schedules.tune.features import NAMES, features
from schedules.tune.prior import _log, analytic_score, best_reuse, shares
from schedules.tune.search import Search
from schedules.tune.space import machine_of
from schedules.tune.transfer import portable

from .test_tune_search import TARGET, _func, space

AVX512 = Machine(512, 32, 32768, 1 << 20, 2)
GOOD = {"vector_lanes": 1.0, "vector_innermost": 1.0, "parallel": _log(4),
        "accumulator_vectors": 12.0, "kernel_in_l1": 1.0, "reduce_in_l2": 1.0}


@pytest.mark.parametrize("worse, why", [
    ({"vector_innermost": 0.0}, "a scalar innermost loop"),
    ({"parallel": _log(3)}, "3 parallel iterations on 2 cores"),
    ({"parallel": 0.0}, "nothing in parallel"),
    ({"accumulator_vectors": 2.0}, "two accumulators: the FMA latency shows"),
    ({"accumulator_vectors": 64.0}, "twice the vector registers: spills"),
    ({"kernel_in_l1": 0.0}, "the micro-kernel beyond L1"),
    ({"reduce_in_l2": 0.0}, "the reduction beyond L2"),
    ({"other_work": _log(0.5)}, "packing half the work again"),
])
def test_the_prior_ranks_each_inefficiency_below_the_efficient_candidate(worse, why):
    assert analytic_score(dict(GOOD, **worse), AVX512) < analytic_score(GOOD, AVX512), why


def test_the_prior_reads_the_target_not_the_host():
    """Cores and registers come from the declared machine: 3 parallel iterations fill
    a 3-core machine's one wave, and 6 accumulators a 16-register machine's quarter."""
    three = Machine(256, 16, 32768, 1 << 20, 3)
    tile = dict(GOOD, parallel=_log(3), accumulator_vectors=6.0)
    assert shares(tile, three)["cores"] == 1.0 and shares(tile, AVX512)["cores"] == 0.75
    assert shares(tile, three)["registers"] == 1.0
    assert shares(tile, AVX512)["registers"] == 0.75


def test_a_tensorized_step_counts_its_lanes():
    """VNNI's 4 int8 products per int32 lane: a share above 1, whatever the tile."""
    step = {"expression_lanes": 4.0, "parallel": _log(2), "accumulator_vectors": 1.0}
    loop = dict(step, expression_lanes=1 / 16, vector_lanes=1.0, vector_innermost=1.0)
    assert analytic_score(step, AVX512) == 2.0 > analytic_score(loop, AVX512)


def test_features_end_with_the_prior_and_are_deterministic():
    sch = run_with_decisions(space, _func(), [[4, 4], [4, 16], 1, 1])
    a, b = features(sch, TARGET), features(sch.func, TARGET)
    assert a == b and len(a) == len(NAMES) and NAMES[-1] == "analytic"
    assert a[-1] == analytic_score(dict(zip(NAMES, a)), machine_of(TARGET))


def test_a_categorical_decision_travels_by_value():
    """Another task's parallel count of 16 (index 3 of its options) becomes this
    task's 12, its nearest option, not this task's index 3 (a count of 6)."""
    assert nearest_option([2, 3, 4, 6, 8, 12, 24], 16) == 5
    assert nearest_option(["1x16", "4x32", "6x16"], "5x16") == 2
    assert nearest_option(["tile", "dot"], "dot") == 1
    assert nearest_option(["tile", "dot"], "other") is None
    trace = {"insts": [{"name": "sample_categorical",
                        "inputs": [[2, 4, 8, 16], [1, 1, 1, 1]], "decision": 3}]}
    record = {"decisions": [[0, 3]], "trace": json.dumps(trace)}
    assert portable(record) == [{"value": 16}]
    f = _func()

    def counts(sch):
        sch.sample_categorical([2, 3, 4, 6, 8, 12, 24], [1] * 7)
    got = run_with_decisions(counts, f, portable(record))
    assert got.trace.decisions == {0: 5}
    unknown = run_with_decisions(counts, f, [{"value": "nothing like it"}], seed=0)
    assert 0 <= unknown.trace.decisions[0] < 7   # no option near it: drawn afresh


def test_with_no_model_the_prior_picks_the_first_batch():
    """No measurement and no relative: the pool is ranked by the analytic prior, so the
    first picks are vectorised (random draws are half the time)."""
    s = Search(_func(), space, TARGET, rng=random.Random(3), epsilon=0.0)
    assert not s.model.trained
    picked = s.propose(2, set())
    for sch, _ in picked:
        f = features(sch, TARGET)
        assert f[NAMES.index("vector_innermost")] == 1.0
        assert f[-1] >= max(s.features_of(k)[-1] for k in s._pool)


def test_a_search_is_reproducible_from_its_seed():
    def run(seed):
        s, seen, keys = Search(_func(), space, TARGET, rng=random.Random(seed)), set(), []
        for n in range(3):
            batch = s.propose(2, seen)
            keys += [k for _, k in batch]
            s.observe([{"cand": k, "trace": sch.trace.as_json(), "seconds": 1e-6 * (n + 1)}
                       for sch, k in batch])
        return keys
    assert run(5) == run(5) and len(set(run(5))) == 6


def _gemm_point(n, *decisions, target="llvm -mcpu=skylake-avx512"):
    """A candidate of the generated space of an fp32 GEMM ``n^3``, its categoricals
    given by their options (``"6x64"``)."""
    from schedules.tune.networks import matmul
    from schedules.tune.rules import space_for
    f = matmul(n, n, n)
    return run_with_decisions(space_for(f, target), f, [
        d if isinstance(d, list) else {"value": d} for d in decisions])


def test_the_prior_ranks_register_tiles_by_their_operand_reuse():
    """Tiles that all hold 24-28 accumulators (equal by the accumulators alone) rank as
    one core of this 2-core Xeon timed them on a 512^3 GEMM: 6 x 4 vectors 168
    GFLOP/s, 14 x 2 155, 6 x 2 148, 28 x 1 133 -- the FMAs per operand load of each
    step; the best tile is the one the machine's registers allow."""
    m = machine_of("llvm -mcpu=skylake-avx512")
    scores = [features(_gemm_point(512, "tile", tile, [1, 86], 2), m)[-1]
              for tile in ("6x64", "14x32", "6x32", "28x16")]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 4, scores
    assert scores[0] == pytest.approx(0.0, abs=0.05)
    assert best_reuse(32) == 2.4 and best_reuse(16) == pytest.approx(12 / 7)


def test_the_cold_start_measures_a_tile_of_high_operand_reuse_first():
    """No measurement and no relative task: the first batch of a 512^3 fp32 GEMM is a
    register tile of at least 2 FMAs per load (24 of the 58 tiles offered)."""
    from schedules.tune.networks import matmul
    from schedules.tune.rules import space_for
    f = matmul(512, 512, 512)
    target = "llvm -mcpu=skylake-avx512"
    s = Search(f, space_for(f, target), target, rng=random.Random(0), epsilon=0.0)
    for sch, _ in s.propose(2, set()):
        tile = next(i.inputs[0][sch.trace.decisions[k]] for k, i in enumerate(sch.trace.insts)
                    if i.name == "sample_categorical" and "x" in str(i.inputs[0][0]))
        rows, cols = (int(x) for x in tile.split("x"))
        assert rows * (cols // 16) / (rows + cols // 16) >= 2.0, tile


def test_the_prior_ranks_blockings_by_the_bytes_fetched_beyond_l2():
    """One core of this 2-core Xeon on a 2048^3 GEMM, 6 x 4-vector tile: 19 blocks of
    18 row tiles under each column panel 0.92x numpy, all 342 row tiles under it 0.85x,
    one row tile per block (B's panels fetched again for every row tile) 0.46x; equal
    to the prior before (the whole reduction fits L2 in each)."""
    from schedules.tune.traffic import beyond_l2
    m = machine_of("llvm -mcpu=skylake-avx512")
    got = {}
    for rows in ([19, 18], [1, 342], [342, 1]):
        f = features(_gemm_point(2048, "tile", "6x64", rows, 2), m)
        got[rows[1]] = (f[NAMES.index("intensity_beyond_l2")], f[-1])
    assert got[18][0] > got[342][0] > got[1][0]
    assert got[18][1] == got[342][1] > got[1][1] + 1.0      # over a halving below
    # a nest that fits L2 fetches each byte once; the dependence is per loop
    a, b = ({"i": 1, "k": 1}, 4), ({"k": 1, "j": 1}, 4)
    assert beyond_l2([a, b], [("i", 8), ("k", 8)], 1 << 20) == 8 * 8 * 4 + 8 * 4
