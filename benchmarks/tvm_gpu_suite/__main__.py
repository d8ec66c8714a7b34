"""``python -m benchmarks.tvm_gpu_suite --tvm PATH [--ref v0.23.0]``.

Runs the scheduled GPU functions of Apache TVM's tests of software pipelining,
cross-thread reduction, thread sync and MetaSchedule's CUDA sketches and multi-level
tiling (read from the user's TVM checkout or git directory) through Cuvil: parse,
build for CUDA, nvcc for sm_80 and sm_90a with no warning, and the numbers of the
GPU-semantics interpreter against the function's meaning.  Prints the pass rate, a
bucket per case and the wrong ones by name (any makes the exit status 1).
``--quick`` (CI) checks the thread-sync file only, for sm_80; ``--tvm`` defaults to
``$CUVIL_TVM``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..tvm_schedule_suite.source import SourceError, read_files
from .cases import SUITE_FILES
from .report import render
from .runner import run

#: the file of a quick run
QUICK = "thread_sync"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tvm_gpu_suite",
                                 description=__doc__.splitlines()[2])
    ap.add_argument("--tvm", default=os.environ.get("CUVIL_TVM"),
                    help="TVM source checkout or git directory (default: $CUVIL_TVM)")
    ap.add_argument("--ref", default=None, help="commit or tag to read the tests from "
                    "(default: the work tree; v0.23.0 for a git directory without one)")
    ap.add_argument("--only", nargs="*", help="run only files whose names contain these")
    ap.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    ap.add_argument("--seconds", type=float, default=900, help="time limit per case")
    ap.add_argument("--archs", nargs="*", default=["sm_80", "sm_90a"])
    ap.add_argument("--json", help="write the summary and every case's bucket here")
    ap.add_argument("--keep", help="run in this directory and keep it (logs, results)")
    ap.add_argument("--quick", action="store_true",
                    help=f"only {QUICK} and sm_80 (a CI smoke run, about a minute)")
    args = ap.parse_args(argv)
    if args.tvm is None:
        ap.error("pass --tvm PATH or set CUVIL_TVM to a TVM source checkout")
    if args.quick:
        args.only, args.archs = [QUICK], ["sm_80"]
    paths = [p for p in SUITE_FILES if not args.only or any(o in p for o in args.only)]
    try:
        files = read_files(args.tvm, paths, args.ref)
    except SourceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    summary = run(files, jobs=args.jobs, seconds=args.seconds, archs=args.archs,
                  keep=args.keep)
    print(render(summary))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    # a wrong number is a defect of Cuvil, never a gap: the run fails
    return 1 if summary["total"]["wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())
