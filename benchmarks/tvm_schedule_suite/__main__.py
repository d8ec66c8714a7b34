"""``python -m benchmarks.tvm_schedule_suite --tvm PATH [--ref v0.23.0]``.

Runs Apache TVM's schedule-primitive tests (``tests/python/tir-schedule``, read from
the user's TVM checkout or git directory) against Cuvil through the shim, and prints
per file and in total how many cases pass and why the others do not.
"""

from __future__ import annotations

import argparse
import json
import sys

from .report import case_list, render
from .runner import run
from .source import SourceError, read_tests


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tvm_schedule_suite",
                                 description=__doc__.splitlines()[2])
    ap.add_argument("--tvm", required=True, help="TVM source checkout or git directory")
    ap.add_argument("--ref", default=None, help="commit or tag to read the tests from "
                    "(default: the work tree; v0.23.0 for a git directory without one)")
    ap.add_argument("--only", nargs="*", help="run only files whose names contain these")
    ap.add_argument("--jobs", type=int, default=2, help="pytest processes (default 2)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds for the whole run")
    ap.add_argument("--json", help="write the summary and every case's bucket here")
    ap.add_argument("--list", help="print every case of this bucket (e.g. wrong, refused)")
    ap.add_argument("--keep", help="run in this directory and keep it (logs, results)")
    args = ap.parse_args(argv)
    try:
        files = read_tests(args.tvm, args.ref, args.only)
    except SourceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    summary = run(files, jobs=args.jobs, timeout=args.timeout, keep=args.keep)
    print(render(summary))
    if args.list:
        print("\n".join(case_list(summary, args.list)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
