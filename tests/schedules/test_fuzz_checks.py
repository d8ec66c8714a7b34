"""The fuzzer's own checks report what they should (tests/schedules/fuzz)."""

import time

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from tests.schedules.fuzz import check as fuzz_check
from tests.schedules.fuzz.runner import run


def _pair():
    A = T.placeholder((4,), name="A")
    f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] + 1.0, name="B")])
    g = T.create_prim_func([A, T.compute((4,), lambda i: A[i] + 2.0, name="B")])
    return f, g


def test_a_schedule_computing_something_else_is_reported():
    f, g = _pair()
    arrays = [np.arange(4, dtype="float32"), np.zeros(4, "float32")]
    kind, why = fuzz_check.check(f, S.Schedule(g), arrays)
    assert kind == "interpreter differs"
    assert why.startswith("argument 1 differs at 4 of 4 elements")
    assert fuzz_check.check(f, S.Schedule(f), arrays, ("llvm", {})) is None


def test_an_exception_that_is_not_a_coded_error_is_a_crash(monkeypatch):
    def broken(rng):
        raise TypeError("boom")
    monkeypatch.setattr(fuzz_check, "random_program", broken)
    res = fuzz_check.run_case(3, build=False)
    assert res.failure[0] == "crash" and res.failure[1].startswith("TypeError: boom")
    assert "case 3: crash: TypeError: boom" in fuzz_check.reproducer(res)


def test_a_case_that_does_not_end_is_reported_with_its_seed(monkeypatch):
    # a copy loop of 2**31 iterations (fuzz case 3688537001) stalled a whole run,
    # naming no case
    def endless(rng):
        while True:
            time.sleep(0.01)
    monkeypatch.setattr(fuzz_check, "random_program", endless)
    res = fuzz_check.run_case(4, build=False, limit=0.2)
    assert res.failure == ("too slow", "the case ran past 0.2 s (its programs are tiny: "
                                       "a loop runs far past its buffers?)")
    assert "case 4: too slow" in fuzz_check.reproducer(res)


def test_failures_are_counted_and_reported(monkeypatch):
    f, g = _pair()

    def fake(seed, build=True):
        res = fuzz_check.Result(seed, "fake", [("split", "ok", None)], func=f,
                                sch=S.Schedule(g))
        res.failure = ("interpreter differs", "argument 1 differs")
        return res
    monkeypatch.setattr("tests.schedules.fuzz.runner.run_case", fake)
    st = run(seed=5, cases=2)
    assert st.cases == 2 and st.accepted == 2 and len(st.failures) == 2
    text = st.report()
    assert "2 failure(s)" in text and "interpreter differs" in text
    assert "replay: python -m benchmarks.fuzz --replay" in text


def test_each_case_is_named_before_it_runs(monkeypatch):
    # fuzz case 116348315 aborted the process inside LLVM: nothing after the abort
    # printed, so the run named no case
    ran = []

    def dies_on_second(seed, build=True):
        ran.append(seed)
        if len(ran) == 2:
            raise SystemExit("aborted")
        return fuzz_check.Result(seed, "fake", [])
    monkeypatch.setattr("tests.schedules.fuzz.runner.run_case", dies_on_second)
    named = []
    with pytest.raises(SystemExit):
        run(seed=5, cases=3, before_case=named.append)
    assert named == ran and len(named) == 2


def test_a_step_refused_for_breaking_the_region_contract_is_a_failure(monkeypatch):
    # the schedule's region check refuses such a step (before, its text did not parse
    # back): the fuzzer reports the primitive's defect instead of counting a refusal
    import schedules.primitives.cache as cache_module
    from tests.schedules.fuzz import steps as fuzz_steps

    def nested_blockize_then_cache(sch, rng):
        _, k = sch.get_loops("Y")
        sch.blockize(sch.split(k, [None, 3])[1])
        (k1,) = sch.get_loops("Y")
        sch.blockize(sch.split(k1, [None, 2])[1])
        sch.cache_read("Y", 1, "local")

    X = T.placeholder((8, 4), name="X")
    k = T.reduce_axis((1, 4), name="k")
    f = T.create_prim_func([X, T.compute((8,), lambda i: T.sum(X[i, 3 - k + 1], axis=k),
                                         name="Y")])
    monkeypatch.setattr(cache_module, "within_enclosing", lambda *a, **kw: None)
    monkeypatch.setattr(fuzz_steps, "STEPS", (("cache_in_blockized",
                                               nested_blockize_then_cache, 1),))
    monkeypatch.setattr(fuzz_check, "random_program",
                        lambda rng: type("P", (), {"what": "reversed sum", "func": f})())
    res = fuzz_check.run_case(5, build=False, steps=1)
    assert res.failure[0] == "region contract broken"
    assert res.failure[1].startswith("cache_in_blockized: [CVL-E103] cache_read: the "
                                     "result breaks the region contract: block 'Y_o'")
