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
import select
import signal
import sys
import time

from .cases import definitions
from .check import ARCHS, check
from .harvest import collect

#: seconds one case may take (build, nvcc, both runs)
CASE_SECONDS = 900


def _timed(fn, seconds):
    """``fn()`` in a forked process, killed after ``seconds``: a signal cannot stop
    compiled code (a reference built for llvm runs in one C call), a kill of its
    process group (nvcc included) can.  Returns ``fn``'s result, or a ``timeout`` or
    ``crash`` record (a process that died without one)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:                                    # the case, alone
        os.setpgid(0, 0)
        os.close(read)
        try:
            data = json.dumps(fn()).encode()
        except BaseException as err:  # noqa: BLE001 - reported as the case's crash
            data = json.dumps({"bucket": "crash", "reason": repr(err)[:300],
                               "seconds": 0}).encode()
        with os.fdopen(write, "wb") as f:
            f.write(data)
        os._exit(0)
    try:
        os.setpgid(pid, pid)                        # before any kill, whichever runs first
    except OSError:
        pass
    os.close(write)
    chunks, late, deadline = [], False, time.monotonic() + seconds
    with os.fdopen(read, "rb") as f:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([f], [], [], left)[0]:
                late = True
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                break
            chunk = os.read(f.fileno(), 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    if late:
        return {"bucket": "timeout", "reason": f"ran past {seconds:g} s", "seconds": seconds}
    try:
        return json.loads(b"".join(chunks))
    except ValueError:
        return {"bucket": "crash", "reason": f"the case's process died (wait status "
                                             f"{status})", "seconds": 0}


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
    res = _timed(lambda: check(fn, archs=archs, complete=complete), seconds)
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
