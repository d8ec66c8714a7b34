"""benchmarks/tune_search.py: one measurement per distinct candidate, and a bar set by
the median of re-measurements, not one lucky reading (a stand-in executor: no timing)."""

import json
from concurrent.futures import Executor, Future

from benchmarks import tune_search as B
from schedules.tune.cost_model import rank_correlation
from schedules.tune.database import workload_key
from schedules.tune.tuner import Session
from tests.schedules.test_tune_search import TARGET, _func, space


class Readings(Executor):
    """Each candidate reads 1 us times its decisions' tile, the first reading of the
    first candidate a lucky 0.1 of it; re-measurements read 1.0x, 1.2x, ..."""

    _max_workers = 2

    def __init__(self):
        self.calls: dict = {}

    def submit(self, fn, payload):
        key = str(payload["decisions"])
        n = self.calls[key] = self.calls.get(key, 0) + 1
        base = 1e-6 * payload["decisions"][0][1][1]
        lucky = n == 1 and not self.calls.get("lucky")
        self.calls["lucky"] = True
        fut = Future()
        fut.set_result({"kind": "ok", "seconds": base * (0.1 if lucky else 1 + 0.2 * (n - 2)),
                        "error": None, "info": {}})
        return fut


def _random_run(trials, recorded=None):
    """A random session of ``trials`` through a cache over stand-in readings:
    ``(readings, cache, func, session, its records marked as random draws)``."""
    inner = Readings()
    ex = B.CachedExecutor(inner, recorded)
    f = _func()
    s = Session(f, space, TARGET, None, ex, seed=0, guided=False, min_repeat_ms=1)
    s.run(trials)
    return inner, ex, f, s, [dict(r, drawn="random") for r in s.run_state.records]


def test_each_candidate_is_measured_once_and_the_best_settles_on_a_median():
    inner, ex, f, s, records = _random_run(6)
    again = Session(f, space, TARGET, None, ex, seed=0, guided=False, min_repeat_ms=1)
    again.run(6)      # the same draws: every one shared, none measured again
    assert all(n == 1 for k, n in inner.calls.items() if k != "lucky")
    lucky = min(records, key=lambda r: r["seconds"])
    settled = B.settle(ex, {"w": s}, {"w": workload_key(f, TARGET)}, records, 2, 2)
    base = lucky["seconds"] / 0.1
    assert settled[lucky["cand"]] == base   # the median of 0.1x, 1.0x, 1.2x
    top = sorted(records, key=lambda r: r["seconds"])
    assert settled[top[2]["cand"]] == top[2]["seconds"]  # not re-measured: its reading
    assert inner.calls[str(lucky["decisions"])] == 3 and not ex.fresh


def test_a_run_reaches_the_bar_at_its_first_candidate_within_95_percent():
    assert B.reach([(1, 2.0), (2, None), (3, 1.04), (4, 1.0)], 1.0, 8) == 3
    assert B.reach([(1, 2.0)], 1.0, 8) == 9


def test_recorded_measurements_are_reused_not_measured_again():
    _, first, _, s, _ = _random_run(4)
    recorded = json.loads(json.dumps(first.recorded()))   # what --cache writes and reads
    # the same first 4 draws come from the record, 2 more are measured
    inner, _, _, s2, _ = _random_run(6, recorded)
    assert sum(n for k, n in inner.calls.items() if k != "lucky") == 2
    assert [r["seconds"] for r in s2.run_state.records[:4]] == \
        [r["seconds"] for r in s.run_state.records]


def test_repeatability_ranks_a_second_reading_against_the_first():
    _, ex, f, s, records = _random_run(10)
    got = B.repeatability(ex, {"w": s}, {"w": workload_key(f, TARGET)}, records, 8)
    # each second reading is the candidate's base time; the first was the base too,
    # except the lucky first candidate's (a tenth of it)
    picked = [r for r in s.run_state.records if r.get("remeasured")]
    assert len(picked) == 8 and not ex.fresh
    first = {r["cand"]: r["seconds"] for r in records}
    want = rank_correlation([first[r["cand"]] for r in picked],
                            [r["seconds"] for r in picked])
    assert got == {"w": want}
    assert B.repeatability(ex, {"w": s}, {"w": workload_key(f, TARGET)}, records, 0) == {}
