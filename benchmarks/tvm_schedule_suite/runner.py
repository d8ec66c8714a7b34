"""Run TVM's schedule tests against the shim and count each case's bucket.

The test files go into a fresh temporary directory with a ``pytest.ini`` of their own
(so the user's configuration does not apply); ``jobs`` pytest processes run disjoint
groups of files, each with the shim first on ``sys.path`` and :mod:`.plugin` loaded.

Example::

    >>> summary = tally([{"file": "a.py", "case": "t1", "bucket": "passed"},
    ...                  {"file": "a.py", "case": "t2", "bucket": "wrong"}], {"a.py": 2})
    >>> summary["total"]["passed"], summary["total"]["cases"]
    (1, 2)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from .outcome import BUCKETS, EXCLUDED
from .source import static_cases

HERE = os.path.dirname(os.path.abspath(__file__))
SHIM = os.path.join(HERE, "shim")
ROOT = os.path.dirname(os.path.dirname(HERE))


def run(files: dict, jobs: int = 2, timeout: float = 900, python: str | None = None,
        keep: str | None = None) -> dict:
    """Run the test ``files`` (``{name: source}``); returns :func:`tally`'s summary plus
    the per-case records (``"cases"``) and the wall time (``"seconds"``)."""
    start = time.time()
    work = keep or tempfile.mkdtemp(prefix="tvm-schedule-suite-")
    tests = os.path.join(work, "tests")
    os.makedirs(tests, exist_ok=True)
    for name, text in files.items():
        with open(os.path.join(tests, name), "w") as f:
            f.write(text)
    with open(os.path.join(work, "pytest.ini"), "w") as f:
        f.write("[pytest]\naddopts = -p no:cacheprovider\n")
    groups = _groups(files, max(1, jobs))
    procs = []
    for k, group in enumerate(groups):
        out = os.path.join(work, f"results{k}.jsonl")
        if os.path.exists(out):
            os.remove(out)
        env = dict(os.environ, TVM_SUITE_RESULTS=out,
                   PYTHONPATH=os.pathsep.join([SHIM, ROOT, os.environ.get("PYTHONPATH", "")]))
        cmd = [python or sys.executable, "-m", "pytest", "-q", "-p",
               "benchmarks.tvm_schedule_suite.plugin", "-c", os.path.join(work, "pytest.ini"),
               "--rootdir", work, "--no-header", "-rN", "--tb=no",
               "--continue-on-collection-errors",
               *(os.path.join(tests, n) for n in group)]
        log = open(os.path.join(work, f"pytest{k}.log"), "w")
        procs.append((subprocess.Popen(cmd, cwd=work, env=env, stdout=log,
                                       stderr=subprocess.STDOUT), out, log, group))
    records = []
    for proc, out, log, group in procs:
        try:
            proc.wait(timeout=max(1.0, timeout - (time.time() - start)))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        if os.path.exists(out):
            with open(out) as f:
                records.extend(json.loads(line) for line in f if line.strip())
    expected = {name: static_cases(text) for name, text in files.items()}
    summary = tally(records, expected)
    summary["cases"] = [r for r in records if "bucket" in r]
    summary["seconds"] = round(time.time() - start, 1)
    summary["workdir"] = work
    return summary


def _groups(files: dict, jobs: int) -> list:
    # longest first onto the lightest group: the groups finish at about the same time
    groups = [[] for _ in range(min(jobs, len(files)))]
    loads = [0] * len(groups)
    for name in sorted(files, key=lambda n: -len(files[n])):
        k = loads.index(min(loads))
        groups[k].append(name)
        loads[k] += len(files[name])
    return groups


def tally(records: list, expected: dict) -> dict:
    """Per-file and total counts of each bucket.

    A file that did not import (or whose process died) counts its statically counted
    cases as ``unsupported_shim`` (reason ``collect_error``); ``cases`` is the number
    of cases per file, ``in_scope`` those not out of scope or skipped by TVM.
    """
    per_file: dict = {}
    errors = {r["file"]: r["collect_error"] for r in records if "collect_error" in r}
    for name in expected:
        per_file[name] = dict.fromkeys(BUCKETS, 0)
    for r in records:
        if "bucket" in r:
            per_file.setdefault(r["file"], dict.fromkeys(BUCKETS, 0))[r["bucket"]] += 1
    notes = {}
    for name, counts in per_file.items():
        seen = sum(counts.values())
        missing = expected.get(name, 0) - seen
        if seen == 0 and missing > 0:
            counts["unsupported_shim"] += missing
            notes[name] = errors.get(name, "no case ran (the pytest process died or "
                                     "timed out)")
    total = dict.fromkeys(BUCKETS, 0)
    for counts in per_file.values():
        for b, n in counts.items():
            total[b] += n
    for counts in list(per_file.values()) + [total]:
        counts["cases"] = sum(counts[b] for b in BUCKETS)
        counts["in_scope"] = counts["cases"] - sum(counts[b] for b in EXCLUDED)
    return {"files": per_file, "total": total, "notes": notes}


def percent(counts: dict, denominator: str = "cases") -> float:
    """Passed cases as a percentage of ``cases`` or ``in_scope``.

    Example::

        >>> percent({"passed": 1, "cases": 4, "in_scope": 2}, "in_scope")
        50.0
    """
    d = counts[denominator]
    return round(100.0 * counts["passed"] / d, 1) if d else 0.0


__all__ = ["run", "tally", "percent"]
