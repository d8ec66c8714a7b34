"""One TVM test file, in its own process: collect its GPU functions and check each.

``python -m benchmarks.tvm_gpu_suite.child FILE RESULTS [--seconds S] [--archs ...]``
(the runner starts it with the shim first on ``sys.path``) appends one JSON line per
case to ``RESULTS``: ``{"file", "case", "role", "bucket", "reason", "seconds"}``.
A case is one function a definition produced (a definition run with several
parameters gives several), named ``scope/name[params]``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys

from .cases import definitions
from .check import ARCHS, check
from .harvest import collect

#: seconds one case may take (build, nvcc, both runs)
CASE_SECONDS = 900


class _CaseTimeout(Exception):
    pass


def _timed(fn, seconds):
    def on_alarm(signum, frame):
        raise _CaseTimeout(f"ran past {seconds} s")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(int(seconds))
    try:
        return fn()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def run_file(path: str, out: str, seconds: float = CASE_SECONDS, archs=ARCHS) -> None:
    """Check every GPU function of the test file ``path``; append the records to
    ``out``."""
    name = os.path.basename(path)
    with open(path) as f:
        defs = definitions(f.read())
    records = collect(path, [d for d in defs if d.role != "output"])
    complete = name.startswith("test_meta_schedule")

    def write(rec):
        with open(out, "a") as f:
            f.write(json.dumps(dict(rec, file=name)) + "\n")

    for d in defs:
        if d.role == "output":
            write({"case": d.key, "role": d.role, "bucket": "output", "reason": "",
                   "seconds": 0})
            continue
        got = records.get(d.line)
        if not got:
            write({"case": d.key, "role": d.role, "bucket": "not_reached",
                   "reason": "the definition never ran (its test or factory failed "
                             "before it)", "seconds": 0})
            continue
        if any(label for label, _ in got):
            # a factory called at import and again with its literal arguments: the
            # labelled calls are the same functions, named
            got = [(label, fn) for label, fn in got if label]
        for label, fn in got:
            case = d.key + (f"[{label}]" if label else "")
            if len(got) > 1 and not label:
                case += f"@{d.line}"
            write(dict(_one(fn, d.role, seconds, archs, complete), case=case, role=d.role))


def _one(fn, role, seconds, archs, complete) -> dict:
    if type(fn).__name__ != "PrimFunc":
        reason = str(getattr(fn, "error", fn)).splitlines()[0][:300]
        return {"bucket": "parse", "reason": reason, "seconds": 0}
    try:
        res = _timed(lambda: check(fn, archs=archs, complete=complete), seconds)
    except _CaseTimeout as err:
        return {"bucket": "timeout", "reason": str(err), "seconds": seconds}
    if role == "error" and res["bucket"] == "build":
        res = dict(res, bucket="refused_as_tvm")
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("results")
    ap.add_argument("--seconds", type=float, default=CASE_SECONDS)
    ap.add_argument("--archs", nargs="*", default=list(ARCHS))
    args = ap.parse_args(argv)
    run_file(args.file, args.results, args.seconds, tuple(args.archs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
