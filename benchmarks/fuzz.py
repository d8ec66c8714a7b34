"""Run the random-schedule differential fuzzer for a while and print what it found.

Random small programs get random schedule steps; every accepted schedule is compared
with the unscheduled function through the interpreter and the llvm build (see
``tests/schedules/fuzz``).  Prints the cases run, the steps accepted, the refusals by
error class and code, and each failure with a reproducer.  Exits 1 when something
failed.

Run::

    python -m benchmarks.fuzz --minutes 30            # a fresh seed, printed
    python -m benchmarks.fuzz --cases 200 --seed 7    # the same 200 cases every time
    python -m benchmarks.fuzz --replay 1674216077     # one case again, in detail

Run as a script, builds skip the compile cache (each case is new).  Each case's number
goes to stderr before it runs, so a case that aborts the process (a crash inside LLVM)
is named by the last number printed.

Example::

    >>> main(["--cases", "2", "--seed", "1", "--no-build", "--quiet"])
    0
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys


def _parser():
    p = argparse.ArgumentParser(prog="python -m benchmarks.fuzz",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=None, help="run this long")
    p.add_argument("--cases", type=int, default=None, help="run this many cases")
    p.add_argument("--seed", type=int, default=None, help="the run's seed (default: fresh)")
    p.add_argument("--replay", type=int, default=None, metavar="CASE",
                   help="run one case (the number a failure prints) and show it")
    p.add_argument("--no-build", action="store_true", help="interpreter checks only")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def _replay(case: int, build: bool) -> int:
    from tests.schedules.fuzz.check import reproducer, run_case
    res = run_case(case, build=build)
    for name, outcome, err in res.steps:
        print(f"step {name}: {outcome}" + (f" ({str(err).splitlines()[0]})" if err else ""))
    if res.failure is None:
        print(f"case {case}: no failure ({res.what}, {res.accepted} steps accepted)")
        return 0
    print(reproducer(res))
    if res.sch is not None:
        print("  scheduled function:")
        print("\n".join("    " + ln for ln in str(res.sch.func).splitlines()))
    return 1


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.replay is not None:
        return _replay(args.replay, not args.no_build)
    from tests.schedules.fuzz.runner import run
    seed = args.seed if args.seed is not None else secrets.randbits(32)
    cases = args.cases if args.cases is not None or args.minutes is not None else 50
    seconds = args.minutes * 60 if args.minutes is not None else None
    last = [0.0]

    def progress(res, st):
        if args.quiet:
            return
        if res.failure is not None:
            print(f"  case {res.seed}: {res.failure[0]}: {res.failure[1][:150]}",
                  flush=True)
        if st.seconds - last[0] >= 60:
            last[0] = st.seconds
            print(f"[{st.seconds / 60:.1f} min] {st.cases} cases, {st.accepted} steps "
                  f"accepted, {len(st.failures)} failure(s)", flush=True)

    if not args.quiet:
        print(f"fuzzing with seed {seed} (rerun: --seed {seed})", flush=True)
    def naming(case):
        # a case that aborts the process (an LLVM assertion) prints nothing after it,
        # so its number goes to stderr first; "\r" keeps a terminal to one line
        print(f"\rcase {case} ", end="", file=sys.stderr, flush=True)

    st = run(seed, cases=cases, seconds=seconds, build=not args.no_build,
             on_case=progress, before_case=None if args.quiet else naming)
    if not args.quiet:
        print(file=sys.stderr)
    if not args.quiet:
        print(st.report())
    return 1 if st.failures else 0


if __name__ == "__main__":
    os.environ.setdefault("CUVIL_CACHE", "0")     # every case is new: nothing to reuse
    sys.exit(main())
