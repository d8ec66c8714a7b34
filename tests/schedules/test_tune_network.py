"""Whole networks: the shipped task lists, the gradient task scheduler, one report,
``cuvil tune`` over a task list resumed after SIGKILL with nothing measured twice, and a
new task whose cost model starts from the nearest tuned records."""

import io
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import Executor, Future

import numpy as np
import pytest

import schedules as S
import targets
from cuvil_tir.errors import ArgumentError
from schedules.tune.command import TuneCommandError, tune_tasks
from schedules.tune.networks import BUILTIN, load_tasks, task_list_json
from schedules.tune.scheduler import TaskScheduler, estimate_gradient
from schedules.tune.transfer import describe, nearest_rows
from tests.schedules.test_tune_robust import ROOT, _alive, _descendants

HASWELL = "llvm -mcpu=haswell"

NET = {"name": "tiny", "tasks": [
    {"name": "big", "op": "matmul", "weight": 10, "args": {"m": 16, "n": 16, "k": 16}},
    {"name": "small", "op": "softmax", "weight": 1, "args": {"rows": 4, "cols": 16}}]}


class Timed(Executor):
    """Instant 'measurements': a task's time falls with each candidate it is given."""

    _max_workers = 2

    def __init__(self):
        self.count: dict = {}

    def submit(self, fn, payload):
        n = self.count[payload["func"]] = self.count.get(payload["func"], 0) + 1
        fut = Future()
        fut.set_result({"kind": "ok", "seconds": 1e-3 / n, "error": None, "info": {}})
        return fut


def test_the_shipped_task_lists_build_and_agree_with_numpy_on_a_small_case():
    assert set(BUILTIN) == {"resnet18", "bert-base", "bert-base-int8"}
    bert = load_tasks("bert-base-int8")
    assert {t.op for t in bert} == {"matmul", "batch_matmul", "softmax", "layernorm"}
    assert [str(t.func.params[0].dtype) for t in bert if t.op == "matmul"] == ["int8"] * 4
    assert json.loads(task_list_json("bert-base"))["tasks"][0]["args"] == {
        "m": 128, "n": 2304, "k": 768}
    resnet = load_tasks("resnet18")
    assert [int(x) for x in resnet[0].func.params[-1].shape] == [64, 112, 112]
    # the ops compute what they say (softmax and layernorm, which no test elsewhere has)
    small = load_tasks({"tasks": [
        {"name": "s", "op": "softmax", "weight": 1, "args": {"rows": 3, "cols": 8}},
        {"name": "l", "op": "layernorm", "weight": 1, "args": {"rows": 3, "cols": 8}}]})
    x = np.random.default_rng(0).standard_normal((3, 8)).astype("float32")
    y = np.zeros_like(x)
    targets.build(small[0].func, "llvm")(x, y)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5)
    g, b = np.ones(8, "float32"), np.zeros(8, "float32")
    targets.build(small[1].func, "llvm")(x, g, b, y)
    want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, want, rtol=1e-3, atol=1e-4)


def test_a_bad_task_list_is_refused():
    with pytest.raises(ArgumentError, match="unknown op 'fft'; expected one of matmul"):
        load_tasks({"tasks": [{"name": "x", "op": "fft", "args": {}}]})
    with pytest.raises(ArgumentError, match="expected one of resnet18, bert-base"):
        load_tasks("no-such-net.json")


def test_the_gradient_rule_prefers_the_heavy_task_that_still_improves():
    falling = [(8, 2e-3), (16, 1e-3)]
    flat = [(8, 1e-3), (16, 1e-3)]
    assert estimate_gradient(1, falling, 8) < estimate_gradient(1, flat, 8) < 0
    assert estimate_gradient(10, flat, 8) < estimate_gradient(1, flat, 8)


def test_the_scheduler_warms_up_every_task_then_favours_the_heavy_one(tmp_path):
    ts = TaskScheduler(NET, HASWELL, tmp_path / "n.jsonl", Timed(), round_trials=2)
    ts.run(12)
    curves = ts.curves()
    assert sum(len(c) for c in curves) == 12 and all(curves)
    assert len(curves[0]) > len(curves[1])  # weight 10 against 1
    report = ts.report()
    assert report.splitlines()[1].startswith("big") and "network estimate:" in report


def test_tune_tasks_refuses_a_used_database_without_resume(tmp_path):
    db = tmp_path / "n.jsonl"
    tune_tasks(NET, HASWELL, trials=2, db=db, executor=Timed(), round_trials=1,
               out=io.StringIO())
    with pytest.raises(TuneCommandError, match="pass --resume"):
        tune_tasks(NET, HASWELL, trials=4, db=db, executor=Timed(), out=io.StringIO())


def test_a_new_shape_starts_from_the_nearest_tuned_records(tmp_path):
    db = S.Database(tmp_path / "t.jsonl")
    for n in (16, 32):   # two GEMMs tuned before (instant measurements)
        S.tune(load_tasks({"tasks": [{"name": "g", "op": "matmul", "args": {
            "m": n, "n": n, "k": n}}]})[0].func, None, target=HASWELL, trials=6,
            database=db, executor=Timed(), progress=False, remeasure=0)
    g24 = load_tasks({"tasks": [{"name": "g", "op": "matmul", "args": {
        "m": 24, "n": 24, "k": 24}}]})[0].func
    rows, secs, groups = nearest_rows(db.records(), describe(g24), "none")
    assert len(rows) == 12 and len(set(groups)) == 2
    s = S.tune(g24, None, target=HASWELL, trials=1, database=db, executor=Timed(),
               progress=False, remeasure=0)
    assert s.trials == 1   # its first candidate was already chosen by a trained model


def test_cuvil_tune_over_a_task_list_resumes_after_sigkill(tmp_path):
    net, db = tmp_path / "net.json", tmp_path / "net.jsonl"
    net.write_text(json.dumps(NET))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    cmd = [sys.executable, "-m", "targets.toolkit", "tune", str(net), "--db", str(db),
           "--trials", "30", "--timeout", "60", "--target", HASWELL]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if db.exists() and db.read_bytes().count(b"\n") >= 3:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run finished before it could be killed"
        helpers = _descendants(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        gone = time.monotonic() + 30
        while time.monotonic() < gone and any(_alive(p) for p in helpers):
            time.sleep(0.1)
        assert not any(_alive(p) for p in helpers), "orphans left running"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
    before = S.Database(db).records()
    assert len(before) >= 3
    out = subprocess.run(cmd[:-4] + ["--trials", str(len(before) + 2), "--resume",
                                     "--timeout", "60", "--target", HASWELL],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"{len(before)} of {len(before) + 2} trials already" in out.stdout
    after = [r for r in S.Database(db).records() if not r.get("remeasured")]
    keys = [(r["workload"], r["cand"]) for r in after]
    assert len(keys) == len(set(keys)) == len(before) + 2   # nothing measured twice
    assert "network estimate:" in out.stdout and "big" in out.stdout
