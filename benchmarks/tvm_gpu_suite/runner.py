"""Run the GPU test files, one process per file, and count each case's bucket.

The files go into a fresh temporary directory; ``jobs`` processes
(:mod:`.child`) run at a time, each with the shim of
:mod:`benchmarks.tvm_schedule_suite` first on ``sys.path``.

Example::

    >>> s = tally([{"file": "a.py", "case": "f", "role": "input", "bucket": "passed"},
    ...            {"file": "a.py", "case": "g", "role": "input", "bucket": "wrong"},
    ...            {"file": "a.py", "case": "h", "role": "output", "bucket": "output"}])
    >>> s["total"]["cases"], s["total"]["passed"], s["total"]["pass_rate"]
    (2, 1, 50.0)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SHIM = os.path.join(os.path.dirname(HERE), "tvm_schedule_suite", "shim")
ROOT = os.path.dirname(os.path.dirname(HERE))

#: every bucket, in report order, with what it means
BUCKETS = {
    "passed": "parses, builds, compiles (sm_80, sm_90a, no warning) and computes right",
    "refused_as_tvm": "a function TVM's test expects refused, refused with a coded error; "
                      "or one whose stores fill one shared buffer with more than sm_90's "
                      "shared memory per block (MetaSchedule's VerifyGPUCode refuses it)",
    "too_big": "refused: needs more shared memory than any GPU has (sm_90: 227 KB) as "
               "Cuvil sizes its tiles (MetaSchedule's VerifyGPUCode refuses such a "
               "candidate; not counted as passing: the sizes are Cuvil's bounding boxes)",
    "invalid": "the function as written accesses outside its buffers: its serial "
               "meaning fails the bounds check (TVM does not check); refused by the "
               "build, or built with nothing to compare with",
    "wrong": "WRONG: builds and runs, different numbers from the function's meaning",
    "race": "a race found by the interpreter's GPU semantics",
    "parse": "TVMScript Cuvil does not read",
    "build": "refused by Cuvil's lowering (a coded error)",
    "compile": "nvcc rejects or warns about the generated CUDA C",
    "interp": "the GPU-semantics run failed (a coded error)",
    "reference": "the serial reference run failed",
    "crash": "a plain Python error inside Cuvil",
    "timeout": "ran past the time limit",
    "not_reached": "the definition never ran (its test or factory failed before it)",
}
#: buckets that count as passing
PASSING = ("passed", "refused_as_tvm", "invalid")


def run(files: dict, jobs: int = 2, seconds: float = 900, archs=("sm_80", "sm_90a"),
        python: str | None = None, keep: str | None = None) -> dict:
    """Run the test ``files`` (``{name: source}``); returns :func:`tally`'s summary with
    the per-case records (``"cases"``) and the wall time.  The work directory (test
    files, logs, per-file results) is removed unless ``keep`` names it."""
    start = time.time()
    work = keep or tempfile.mkdtemp(prefix="tvm-gpu-suite-")
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [SHIM, ROOT, os.environ.get("PYTHONPATH", "")]))
    pending = sorted(files, key=lambda n: -len(files[n]))
    running, outs = [], []
    while pending or running:
        while pending and len(running) < max(1, jobs):
            name = pending.pop(0)
            path = os.path.join(work, name)
            with open(path, "w") as f:
                f.write(files[name])
            out = os.path.join(work, name + ".jsonl")
            if os.path.exists(out):
                os.remove(out)
            log = open(os.path.join(work, name + ".log"), "w")
            cmd = [python or sys.executable, "-m", "benchmarks.tvm_gpu_suite.child", path,
                   out, "--seconds", str(seconds), "--archs", *archs]
            running.append((subprocess.Popen(cmd, cwd=work, env=env, stdout=log,
                                             stderr=subprocess.STDOUT), log))
            outs.append(out)
        for proc, log in list(running):
            if proc.poll() is not None:
                log.close()
                running.remove((proc, log))
        time.sleep(0.2)
    records = []
    for out in outs:
        if os.path.exists(out):
            with open(out) as f:
                records.extend(json.loads(line) for line in f if line.strip())
    summary = tally(records)
    summary["seconds"] = round(time.time() - start, 1)
    summary["workdir"] = keep
    if keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return summary


def tally(records: list) -> dict:
    """Per-file and total counts of each bucket; ``cases`` counts the functions checked
    (TVM's pass outputs are counted apart, as ``outputs``)."""
    files: dict = {}
    for r in records:
        c = files.setdefault(r["file"], dict.fromkeys(BUCKETS, 0) | {"outputs": 0})
        if r["bucket"] == "output":
            c["outputs"] += 1
        else:
            c[r["bucket"]] = c.get(r["bucket"], 0) + 1
    total = dict.fromkeys(BUCKETS, 0) | {"outputs": 0}
    for c in files.values():
        for k, n in c.items():
            total[k] = total.get(k, 0) + n
    for c in list(files.values()) + [total]:
        c["cases"] = sum(c.get(b, 0) for b in BUCKETS)
        good = sum(c.get(b, 0) for b in PASSING)
        c["passed_all"] = good
        c["pass_rate"] = round(100.0 * good / c["cases"], 1) if c["cases"] else 0.0
    return {"files": files, "total": total,
            "cases": [r for r in records if r["bucket"] != "output"]}


__all__ = ["run", "tally", "BUCKETS", "PASSING"]
