"""benchmarks/tune_search.py: one measurement per distinct candidate, and a bar set by
the median of re-measurements, not one lucky reading (a stand-in executor: no timing)."""

import json
from concurrent.futures import Executor, Future
from types import SimpleNamespace

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
    w = workload_key(f, TARGET)
    settled = B.settle(ex, {"w": s}, {"w": w}, records, 2, 2)
    base = lucky["seconds"] / 0.1
    assert settled[(w, lucky["cand"])] == base   # the median of 0.1x, 1.0x, 1.2x
    top = sorted(records, key=lambda r: r["seconds"])
    assert settled[(w, top[2]["cand"])] == top[2]["seconds"]  # not re-measured: its reading
    assert inner.calls[str(lucky["decisions"])] == 3 and not ex.fresh


def test_two_workloads_sharing_a_candidate_key_keep_their_own_times(capsys):
    """A candidate's key is its decisions, and two workloads of one space share keys
    (gemm256 and int8_256 shared 104 of 216): each workload's bar, hits and runs read
    that workload's own time of the candidate, never the other's."""
    from argparse import Namespace
    records = [{"workload": "w1", "cand": "c", "seconds": 1.0, "drawn": "random"},
               {"workload": "w1", "cand": "d", "seconds": 2.0, "drawn": "guided"},
               {"workload": "w2", "cand": "c", "seconds": 9.0, "drawn": "random"},
               {"workload": "w2", "cand": "d", "seconds": 3.0, "drawn": "guided"}]
    settled = B.settle(SimpleNamespace(fresh=False), {}, {}, records, 0, 0)
    assert settled == {("w1", "c"): 1.0, ("w1", "d"): 2.0, ("w2", "c"): 9.0,
                       ("w2", "d"): 3.0}
    runs = {(n, h, 0): [c] for n in "ab" for h, c in (("guided", "d"), ("random", "c"))}
    got = B.summary({"a": None, "b": None}, {"a": "w1", "b": "w2"}, runs, records,
                    settled, Namespace(trials=1, seeds=1))
    out = capsys.readouterr().out
    assert "a         best 1000.0000 ms" in out   # w1: its c's 1.0 s, not w2's 9.0
    assert "b         best 3000.0000 ms" in out   # w2: its d's 3.0 s
    # w1: guided's d missed (2), random's c hit (1); w2: guided's d hit, random's c missed
    assert got["guided"] == got["random"] == 1.5
    assert "random draws within: 1/1" in out and "random draws within: 0/1" in out


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


def test_the_summary_says_when_random_search_never_reached_the_bar(capsys):
    """Random search's median is then a run counted as trials + 1: the ratio printed is
    a lower bound, said so, beside an uncensored one from random's hit rate."""
    from argparse import Namespace
    secs = {"g1": 2.0, "g2": 1.0, "r1": 3.0, "r2": 2.5, "p1": 1.02, "p2": 4.0}
    drawn = {"g": "guided", "r": "random", "p": "pool"}
    records = [{"workload": "w", "cand": c, "seconds": s, "drawn": drawn[c[0]]}
               for c, s in secs.items()]
    runs = {("a", "guided", 0): ["g1", "g2"], ("a", "random", 0): ["r1", None]}
    origins = {("a", "guided", 0): ["fresh", "bred"], ("a", "random", 0): ["fresh"] * 2}
    got = B.summary({"a": None}, {"a": "w"}, runs, records,
                    {("w", c): t for c, t in secs.items()},
                    Namespace(trials=2, seeds=1), origins)
    out = capsys.readouterr().out
    assert got["guided"] == 2 and got["random"] == 3 and got["censored"]
    assert "random / guided >= 1.5x" in out and "the ratio is a lower bound" in out
    assert "random draws within: 1/4" in out        # p1 (1.02 <= 1.0 / 0.95)
    assert got["random_from_rate"] == 3              # 1 - 0.75^3 >= 0.5 > 1 - 0.75^2
    assert "first reached the bar: 0 / 1 / 0" in out


def test_random_search_median_from_hit_rates():
    assert B.geometric_median([(1, 2)]) == 1
    assert B.geometric_median([(1, 10)]) == 7            # 1 - 0.9^7 = 0.52
    assert B.geometric_median([(0, 5), (1, 1)]) == 1     # half the runs hit at once
    assert B.geometric_median([(0, 5)]) == float("inf")
