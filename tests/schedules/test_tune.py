"""Autotuning: the records database and the tuner's search, safety and resume."""

import json
import os
import time

import numpy as np

import cuvil_tir as T
import schedules as S
import targets
from schedules.tune import workload_key
from targets.llvm.cpu import missing_host_features


def _func():
    A = T.placeholder((8, 8), name="A")
    return T.create_prim_func([A, T.compute((8, 8), lambda i, j: A[i, j] * 2.0 + 1.0,
                                             name="B")])


def tile_space(sch):
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.split(i, sch.sample_perfect_tile(i, 2, max_innermost_factor=8))


def bad_space(sch):
    """Choice 1 aborts and choice 2 hangs, but only inside the measuring child."""
    choice = sch.sample_categorical([0, 1, 2], [1, 1, 1])
    if os.environ.get("CUVIL_TUNE_CHILD"):
        if choice == 1:
            os.abort()
        if choice == 2:
            time.sleep(60)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.split(i, [2, 4])


def _first(recs):
    return [r for r in recs if not r.get("remeasured")]


def test_finds_best_of_tiny_space_and_resume_measures_nothing(tmp_path):
    f, path = _func(), tmp_path / "tune.jsonl"
    res = S.tune(f, tile_space, trials=4, database=path, timeout_s=30, progress=False,
                 min_repeat_ms=2)
    assert res.trials == 4 and res.failures == {}
    db = S.Database(path)
    recs = db.records(workload_key(f, "llvm"))
    assert len(_first(recs)) == 4 and db.skipped == []
    assert sorted(json.dumps(r["decisions"]) for r in _first(recs)) == sorted(
        json.dumps([[2, d]]) for d in ([1, 8], [2, 4], [4, 2], [8, 1]))
    again = [r for r in recs if r.get("remeasured")]
    assert len(again) == 3  # the best three measured once more before a winner
    best = min(again, key=lambda r: r["seconds"])
    assert res.best_seconds == best["seconds"]
    assert res.best_schedule.trace.decisions == {2: best["decisions"][0][1]}
    assert all(r["host"] and r["cpu"] and r["cpu_features"] is not None for r in recs)
    assert all(r["timing"].startswith("fastest of ") and "median of 5 rounds" in r["timing"]
               for r in recs)
    resumed = S.tune(f, tile_space, trials=4, database=path, progress=False)
    assert resumed.trials == 0 and resumed.best_seconds == best["seconds"]
    assert len(S.Database(path).records(workload_key(f, "llvm"))) == 7
    applied = S.apply_best(path, f, "llvm")
    assert T.structural_equal(applied.func, res.best_schedule.func)
    assert S.apply_best(path, f, "c") is None


def test_crashing_and_hanging_candidates_are_recorded_and_tuning_goes_on(tmp_path):
    f, path = _func(), tmp_path / "tune.jsonl"
    t0 = time.perf_counter()
    res = S.tune(f, bad_space, trials=3, database=path, timeout_s=5, progress=False,
                 min_repeat_ms=2)
    assert time.perf_counter() - t0 < 50
    assert res.trials == 3
    assert res.failures == {"crash": 1, "timeout": 1}
    assert res.best_schedule is not None and res.best_seconds > 0
    recs = _first(S.Database(path).records(workload_key(f, "llvm")))
    assert sorted(str(r["failure"]) for r in recs) == ["None", "crash", "timeout"]
    crash = next(r for r in recs if r["failure"] == "crash")
    assert "SIGABRT" in crash["error"]


def test_garbage_and_truncated_lines_are_skipped(tmp_path):
    f, path = _func(), tmp_path / "tune.jsonl"
    key = workload_key(f, "llvm")
    db = S.Database(path)
    db.append([{"workload": key, "cand": "a", "trace": "", "seconds": 2.0}])
    good = path.read_text()
    tampered = json.loads(good)
    tampered["seconds"] = 0.5  # the checksum no longer matches
    with open(path, "a") as fh:
        fh.write("not json at all\n" + json.dumps(tampered) + "\n" + good[: len(good) // 2])
    db.append([{"workload": key, "cand": "b", "trace": "", "seconds": 1.0}])
    assert [r["seconds"] for r in db.top_k(f, "llvm", k=5)] == [1.0, 2.0]
    fresh = S.Database(path)
    assert len(fresh.skipped) == 3 and len(fresh.records(key)) == 2
    assert fresh.top_k(f, "c", k=5) == []


def test_progress_callable_history_and_an_executor(tmp_path):
    from concurrent.futures import ThreadPoolExecutor
    f, seen = _func(), []
    with ThreadPoolExecutor(2) as ex:
        res = S.tune(f, tile_space, trials=3, executor=ex, timeout_s=30,
                     progress=seen.append, min_repeat_ms=2)
    assert res.trials == 3 and [n for n, _ in res.history] == [1, 2, 3]
    assert all(s is not None and s > 0 for _, s in res.history)
    assert all(isinstance(p, S.TuneProgress) for p in seen)
    assert seen[-1].trials_done == 3 and seen[-1].trials_total == 3
    assert seen[-1].best_seconds == min(s for _, s in res.history)
    assert seen[-1].elapsed_s > 0 and seen[-1].failures == {}


def test_a_target_kind_with_measure_is_asked_instead_of_the_clock():
    import targets
    from schedules.tune.measure import run_candidate
    llvm = targets.get_target_kind("llvm")

    class Cycles(type(llvm)):  # what an accelerator kind does: a simulated cost
        name = "tune-test-cycles"

        def measure(self, module, args, min_repeat_seconds=0.0):
            return 4200.0, "simulated"

    f = _func()
    targets.register_target(Cycles())
    try:
        out = []
        run_candidate({"func": str(f), "trace": S.Schedule(f).trace.as_json(),
                       "decisions": [], "target": "tune-test-cycles"}, out.append)
    finally:
        targets.unregister_target("tune-test-cycles")
    kind, seconds, info = out[-1]
    # a deterministic measure is asked until it repeats itself: twice
    assert (kind, seconds, info["timing"]) == ("ok", 4200.0, "fastest of 2: simulated")
    assert info["build_s"] > 0 and info["check_time_s"] >= 0


def test_an_accelerator_kind_is_registered_and_asked_in_the_child():
    import targets
    from schedules.tune.executor import measure_task
    from schedules.tune.measure import kind_reference
    from targets.toolkit.npu.gemm import gemm, schedule_gemm
    from targets.accel.examples.toy_npu import toy_npu
    targets.register_target(toy_npu, replace=True)
    f = gemm(32)
    out = measure_task({"func": str(f), "trace": schedule_gemm(f, tile=32).trace.as_json(),
                        "decisions": [], "target": "toy-npu", "timeout_s": 120,
                        "kind": kind_reference("toy-npu")})
    assert out["kind"] == "ok"
    assert out["info"]["timing"] == "fastest of 2: simulated cycles at 1000 MHz"
    mod = targets.build(schedule_gemm(f, tile=32), "toy-npu")
    assert out["seconds"] == toy_npu.measure(mod, [np.ones((32, 32), "int8"),
                                                   np.ones((32, 32), "int8"),
                                                   np.zeros((32, 32), "int32")])[0]


def test_the_child_builds_the_scheduled_text_it_is_sent_and_replays_when_it_cannot():
    from schedules.tune.measure import _rebuild, run_candidate
    f = _func()
    sch = S.Schedule(f)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.split(i, [2, 4])
    # a trace that cannot replay: only the scheduled text can give the candidate
    sent = {"func": str(f), "trace": "not a trace", "decisions": [], "target": "llvm",
            "min_repeat_ms": 1, "scheduled": str(sch.func)}
    assert T.structural_equal(_rebuild(f, sent), sch.func)
    out = []
    run_candidate(sent, out.append)
    assert out[-1][0] == "ok"
    # text that does not parse: the trace is replayed instead
    replayed = _rebuild(f, dict(sent, scheduled="garbage", trace=sch.trace.as_json()))
    assert T.structural_equal(replayed.func, sch.func)


def test_the_child_loads_pickled_ir_and_falls_back_to_the_trace():
    """A VNNI candidate sent as pickled IR builds as it is (no parse, no replay: the
    trace sent cannot replay); bytes that do not load fall back to the trace."""
    import pickle
    from schedules.intrinsics.x86_gemm import dot_gemm, gemm_func
    from schedules.tune.measure import _rebuild, run_candidate
    f = gemm_func(8, 32, 16, "uint8", "int8", "int32")
    sch = S.Schedule(f)
    dot_gemm(sch, "C", "llvm -mcpu=znver4")
    sent = {"func": str(f), "func_ir": pickle.dumps(f), "trace": "not a trace",
            "decisions": [], "target": "llvm -mcpu=znver4", "min_repeat_ms": 1,
            "scheduled": pickle.dumps(sch.func)}
    assert T.structural_equal(_rebuild(f, sent), sch.func)
    out = []
    run_candidate(sent, out.append)
    assert out[-1][0] == ("ok" if not missing_host_features(targets.Target("llvm", mcpu="znver4")) else
                          "run"), out[-1]
    replayed = _rebuild(f, dict(sent, scheduled=b"not a pickle",
                                trace=sch.trace.as_json()))
    assert T.structural_equal(replayed.func, sch.func)


def test_a_generated_space_sends_its_scheduled_text_and_a_pickled_space_does_not():
    from concurrent.futures import Future
    from schedules.tune.tuner import _Run

    class Recorder:
        def __init__(self):
            self.payloads = []

        def submit(self, fn, payload):
            self.payloads.append(payload)
            return Future()

    f = _func()
    for space, text in ((tile_space, None), (lambda sch: None, "scheduled")):
        ex = Recorder()
        _Run(f, space, "llvm", None, ex, 10, 2).launch([("k", [], "{}", "scheduled")])
        assert ex.payloads[0]["scheduled"] == text


def test_warming_up_a_target_that_cannot_build_raises_nothing():
    from schedules.tune.measure import warm_up
    assert warm_up("no-such-target-kind") is None  # the candidates report the failure


def test_the_host_clock_finds_the_calls_per_round_once(monkeypatch):
    """Five samples, one calibration: the later samples reuse the first's count."""
    from cuvil_tir.target.kind import TargetKind
    from schedules.tune import measure
    asked = []
    real = measure.time_calls

    def spy(fn, repeat=5, number=None, warmup=1, min_repeat_seconds=2e-3):
        res = real(fn, repeat, number, warmup, min_repeat_seconds)
        asked.append((number, res.number))
        return res
    monkeypatch.setattr(measure, "time_calls", spy)
    seconds, how = measure._time(lambda: sum(range(100)), [], TargetKind(), 5.0)
    assert seconds > 0 and how.startswith("fastest of 5: median of 5 rounds of ")
    assert asked[0][0] is None and all(n == asked[0][1] for n, _ in asked[1:])
    assert len(asked) == measure.SAMPLES
