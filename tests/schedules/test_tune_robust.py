"""Autotuning that nothing breaks: a wrong candidate, the tuner killed with SIGKILL and
resumed, two processes appending to one database, and measurement on a Dask cluster."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import cuvil_tir as T
import schedules as S
from schedules.tune import workload_key

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _func():
    A = T.placeholder((8, 8), name="A")
    return T.create_prim_func([A, T.compute((8, 8), lambda i, j: A[i, j] * 2.0 + 1.0,
                                             name="B")])


def wrong_space(sch):
    """Choice 1 swaps in a miscompiled function, but only inside the measuring child."""
    choice = sch.sample_categorical([0, 1], [1, 1])
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.split(i, [2, 4])
    if choice == 1 and os.environ.get("CUVIL_TUNE_CHILD"):
        A = T.placeholder((8, 8), name="A")  # what a compiler bug could produce: 3x, not 2x
        sch._func = T.create_prim_func([A, T.compute((8, 8), lambda i, j: A[i, j] * 3.0 + 1.0,
                                                     name="B")])


def wide_space(sch):
    i, j = sch.get_loops(sch.get_block("B"))
    sch.split(i, sch.sample_perfect_tile(i, 3, max_innermost_factor=8))
    sch.split(j, sch.sample_perfect_tile(j, 2, max_innermost_factor=8))


def _descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as fh:
                    kids = [int(c) for c in fh.read().split()]
                out += kids
                todo += kids
        except OSError:
            pass
    return out


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _first(recs):
    return [r for r in recs if not r.get("remeasured")]


def test_a_wrong_result_is_recorded_and_never_best(tmp_path):
    f, path = _func(), tmp_path / "tune.jsonl"
    res = S.tune(f, wrong_space, trials=2, database=path, timeout_s=30, progress=False,
                 min_repeat_ms=2)
    recs = S.Database(path).records(workload_key(f, "llvm"))
    by = {r["decisions"][0][1]: r for r in _first(recs)}
    assert by[1]["failure"] == "wrong" and by[1]["seconds"] is None
    assert "differs from the untuned function" in by[1]["error"]
    assert by[0]["failure"] is None and res.failures == {"wrong": 1}
    assert res.best_schedule.trace.decisions[0] == 0
    assert [r["cand"] for r in S.Database(path).top_k(f, "llvm")] == [by[0]["cand"]]


def test_sigkill_mid_run_then_resume_keeps_every_record_and_remeasures_nothing(tmp_path):
    path = tmp_path / "tune.jsonl"
    script = textwrap.dedent(f"""
        import schedules as S
        from tests.schedules.test_tune_robust import _func, wide_space
        S.tune(_func(), wide_space, trials=40, database={str(path)!r}, timeout_s=30,
               progress=False, min_repeat_ms=2)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=env,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if path.exists() and path.read_bytes().count(b"\n") >= 3:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the tuner finished before it could be killed"
        helpers = _descendants(proc.pid)  # its pool worker and warm server
        os.kill(proc.pid, signal.SIGKILL)  # the tuner alone, as a user's kill would
        proc.wait()
        gone = time.monotonic() + 30
        while time.monotonic() < gone and any(_alive(p) for p in helpers):
            time.sleep(0.1)
        assert helpers and not any(_alive(p) for p in helpers), "orphans left running"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # its pool and servers too
        except OSError:
            pass
    before = path.read_bytes()
    f = _func()
    key = workload_key(f, "llvm")
    old = S.Database(path)
    assert old.skipped == [] and len(old.records(key)) >= 3
    old_cands = [r["cand"] for r in old.records(key)]
    res = S.tune(f, wide_space, trials=2, database=path, timeout_s=30, progress=False,
                 min_repeat_ms=2, remeasure=0)
    assert res.trials == 2 and path.read_bytes().startswith(before)
    recs = S.Database(path).records(key)
    assert [r["cand"] for r in recs[:len(old_cands)]] == old_cands
    cands = [r["cand"] for r in recs]
    assert len(cands) == len(set(cands)) == len(old_cands) + 2  # nothing measured twice


def test_two_processes_appending_at_once_lose_nothing(tmp_path):
    path = tmp_path / "db.jsonl"
    script = textwrap.dedent("""
        import sys
        from schedules.tune import Database
        db = Database(sys.argv[1])
        for n in range(150):
            db.append([{"workload": "w", "cand": f"{sys.argv[2]}{n}.{k}", "seconds": 1.0,
                        "pad": "x" * 3000} for k in range(n % 3 + 1)])
    """)
    env = dict(os.environ, PYTHONPATH=ROOT)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(path), tag], env=env)
             for tag in "ab"]
    assert [p.wait(120) for p in procs] == [0, 0]
    db = S.Database(path)
    assert db.skipped == []
    per = sum(n % 3 + 1 for n in range(150))
    cands = [r["cand"] for r in db.records("w")]
    assert len(cands) == len(set(cands)) == 2 * per
    assert all(json.loads(line)["sum"] for line in path.read_text().splitlines())
