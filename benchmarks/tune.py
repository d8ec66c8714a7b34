"""Tuning from the generated space, with no hand schedule: how close does it get?

    python benchmarks/tune.py                   # the full run (each workload <= 500
                                                #  trials and <= 20 minutes)
    python benchmarks/tune.py --quick           # small sizes, 24 trials each (minutes)
    python benchmarks/tune.py --only gemm1024 conv --trials 200 --minutes 10
    python benchmarks/tune.py --db DIR          # keep the databases; run again to resume

Workloads (unscheduled definitions; ``S.tune(func, space=None, ...)`` generates the
space for this machine's CPU):

* fp32 GEMM 1024^3 and 2048^3 — goal: at least 0.9x numpy's time ratio; also set
  against tutorial 04's hand schedule on the same machine;
* the 3x3 conv2d of ``benchmarks/run.py`` (64 -> 64 channels, 56x56, pad 1) — goal: at
  least 2x numpy's im2col + matmul;
* an int8 GEMM 1024^3 accumulating in int32, reported in operations per second beside
  numpy's fp32 GEMM (numpy has no fast int8 matmul to compare with).

For each: the trials measured, the tuning time, trials-to-90%-of-best (the first trial
whose best-so-far speed is within 90% of the final best) and the best-so-far curve.
The tuned kernel is checked against numpy, then timed interleaved with numpy in this
process (median of ``--repeat``), after a pause that lets OpenBLAS's spinning threads
settle (see benchmarks/README.md).  Numbers on a loaded machine are noisy: compare the
ratios within one run.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, ".."), HERE]

import cuvil_tir as T  # noqa: E402
import schedules as S  # noqa: E402
import targets  # noqa: E402
from schedules.tune.command import history_of  # noqa: E402
from schedules.tune.database import workload_key  # noqa: E402
from schedules.tune.measure import timing_lock  # noqa: E402
from schedules.tune.report import (curve_text, format_seconds, progress_printer,  # noqa: E402
                                   trials_to_fraction)


def gemm(n, dtype="float32", acc="float32"):
    A = T.placeholder((n, n), dtype, name="A")
    B = T.placeholder((n, n), dtype, name="B")
    k = T.reduce_axis((0, n), name="k")
    if acc == dtype:
        C = T.compute((n, n), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
    else:
        C = T.compute((n, n), lambda i, j: T.sum(
            A[i, k].astype(acc) * B[k, j].astype(acc), axis=k), name="C")
    return T.create_prim_func([A, B, C])


def _tutorial(filename):
    path = os.path.join(HERE, "..", "tutorials", filename)
    spec = importlib.util.spec_from_file_location(filename[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


T06 = _tutorial("06_autotune.py")          # the conv2d definition and numpy's im2col
conv2d, numpy_conv = T06.conv2d, T06.numpy_conv


def interleaved(fns, repeat, settle):
    """Median seconds of each of ``fns``, called in turn ``repeat`` times."""
    times = [[] for _ in fns]
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            time.sleep(settle)
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return [float(np.median(t)) for t in times]


def _load() -> str:
    """The 1-minute load average (the machine may be shared: say so beside a figure)."""
    return f"{os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "?"


def tune_budget(func, target, db, trials, minutes, timeout_s, guided=True):
    """Tune until ``trials`` records exist or ``minutes`` have passed, in one run (the
    search keeps its population and model throughout; the last half minute is left for
    the batch in flight and the re-measurement of the best).  Running it again on the
    same database resumes: nothing is measured twice."""
    workload = workload_key(func, target)
    t0 = time.perf_counter()
    have = len(history_of(S.Database(db).records(workload)))
    pruned = 0
    if trials > have:
        res = S.tune(func, None, target=target, trials=trials - have, database=db,
                     timeout_s=timeout_s, seed=have, progress=progress_printer(),
                     guided=guided, max_seconds=max(1.0, minutes * 60 - 30))
        pruned = res.pruned
    records = S.Database(db).records(workload)
    return history_of(records), time.perf_counter() - t0, pruned


def run_one(name, func, args, reference, target, opts, extra=None):
    db = os.path.join(opts.db, f"{name}.jsonl")
    print(f"== {name}: tuning (<= {opts.trials} trials, <= {opts.minutes} min), db {db}, "
          f"load {_load()}", flush=True)
    history, seconds, pruned = tune_budget(func, target, db, opts.trials, opts.minutes,
                                           opts.timeout, guided=not opts.random)
    sch = S.apply_best(db, func, target)
    if sch is None:
        print(f"   no candidate succeeded in {len(history)} trials")
        return None
    mod = targets.build(sch, target)
    out = np.zeros_like(args[-1])
    mod(*args[:-1], out)
    want = reference()
    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3 * np.sqrt(args[0].shape[-1]))
    fns = [lambda: mod(*args[:-1], out), reference] + [fn for _, fn in (extra or [])]
    with timing_lock():  # another tuner on this host times its candidates meanwhile
        times = interleaved(fns, opts.repeat, opts.settle)
    row = {"name": name, "trials": len(history), "tune_s": seconds, "pruned": pruned,
           "to90": trials_to_fraction(history, 0.9), "ours": times[0], "numpy": times[1],
           "extra": {label: t for (label, _), t in zip(extra or [], times[2:])}}
    print(curve_text(history, width=50, height=8))
    print(f"   {row['trials']} trials in {seconds / 60:.1f} min ({pruned} pruned), 90% of "
          f"best at trial {row['to90']}; tuned {format_seconds(times[0])}, numpy "
          f"{format_seconds(times[1])} (numpy/ours {times[1] / times[0]:.2f}x); load "
          f"{_load()}", flush=True)
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes, 24 trials each")
    p.add_argument("--trials", type=int, default=None, help="per workload (default 500)")
    p.add_argument("--minutes", type=float, default=20.0, help="per workload")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds one candidate may take (build + check + timing)")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--settle", type=float, default=0.15)
    p.add_argument("--random", action="store_true",
                   help="random search instead of the model-guided evolution")
    p.add_argument("--db", default=None, help="directory of the databases (kept)")
    p.add_argument("--threads", type=int, default=None,
                   help="threads for ours and numpy's BLAS alike (default: both as they are)")
    p.add_argument("--only", nargs="*", default=None,
                   help="some of: gemm1024 gemm2048 conv int8 (quick: gemm256 gemm512 "
                   "conv int8)")
    opts = p.parse_args(argv)
    from run import bench_env                      # benchmarks/run.py, next to this file
    rc = bench_env.rerun_without_blas_overrides(__file__, argv)
    if rc is not None:
        return rc
    opts.trials = opts.trials or (24 if opts.quick else 500)
    opts.db = opts.db or tempfile.mkdtemp(prefix="cuvil-bench-tune-")
    os.makedirs(opts.db, exist_ok=True)
    target = targets.Target("llvm")
    if opts.threads:
        from run import _blas_thread_setter        # benchmarks/run.py, next to this file
        from targets.llvm import threadpool
        threadpool.set_num_threads(opts.threads)
        setter = _blas_thread_setter()
        if setter is not None:
            setter(opts.threads)
    from targets.llvm import cpu_info
    info = cpu_info(target)
    print(f"== {info.name}: {info.vector_bits}-bit vectors, {info.vector_registers} "
          f"vector registers, {info.cores} cores; numpy {np.__version__}")
    rng = np.random.default_rng(0)
    sizes = (256, 512) if opts.quick else (1024, 2048)
    cshape = (16, 16, 28, 28) if opts.quick else (64, 64, 56, 56)
    rows, t04 = [], _tutorial("04_fast_matmul_cpu.py")
    for n in sizes:
        name = f"gemm{n}"
        if opts.only and name not in opts.only:
            continue
        a = rng.standard_normal((n, n)).astype("float32")
        b = rng.standard_normal((n, n)).astype("float32")
        hand = targets.build(t04.gemm_schedule(n, n, n), target)
        c = np.zeros((n, n), "float32")
        rows.append(run_one(name, gemm(n), [a, b, c.copy()], lambda a=a, b=b: a @ b, target,
                            opts, extra=[("tutorial 04", lambda h=hand, a=a, b=b, c=c:
                                          h(a, b, c))]))
    if not opts.only or "conv" in opts.only:
        c_in, k_out, h, w = cshape
        x = rng.standard_normal((c_in, h, w)).astype("float32")
        wt = rng.standard_normal((k_out, c_in, 3, 3)).astype("float32")
        rows.append(run_one("conv", conv2d(c_in, k_out, h, w),
                            [x, wt, np.zeros((k_out, h, w), "float32")],
                            lambda: numpy_conv(x, wt), target, opts))
    if not opts.only or "int8" in opts.only:
        n = sizes[0]
        a8 = rng.integers(-128, 128, (n, n)).astype("int8")
        b8 = rng.integers(-128, 128, (n, n)).astype("int8")
        a32, b32 = a8.astype("int32"), b8.astype("int32")
        af = rng.standard_normal((n, n)).astype("float32")
        bf = rng.standard_normal((n, n)).astype("float32")
        rows.append(run_one("int8", gemm(n, "int8", "int32"), [a8, b8,
                            np.zeros((n, n), "int32")], lambda: a32 @ b32, target, opts,
                            extra=[("numpy fp32", lambda: af @ bf)]))
    report([r for r in rows if r is not None], sizes)


def report(rows, sizes):
    goals = {f"gemm{sizes[0]}": 0.9, f"gemm{sizes[1]}": 0.9, "conv": 2.0}
    print("\n== summary (numpy time / tuned time; above 1: the tuned kernel is faster)")
    for r in rows:
        ratio = r["numpy"] / r["ours"]
        if r["name"] == "int8":
            n = sizes[0]
            ops = 2.0 * n ** 3
            fp32 = r["extra"]["numpy fp32"]
            print(f"   int8 GEMM {n}^3 (int32 acc): {ops / r['ours'] / 1e9:.1f} Gop/s tuned; "
                  f"numpy fp32 GEMM {ops / fp32 / 1e9:.1f} GFLOP/s; numpy int32 matmul "
                  f"{ops / r['numpy'] / 1e9:.1f} Gop/s; {r['trials']} trials, 90% at "
                  f"{r['to90']}")
            continue
        goal = goals.get(r["name"])
        met = "" if goal is None else (f"  goal {goal}x: " +
                                       ("met" if ratio >= goal else f"missed by "
                                        f"{(goal - ratio) / goal:.0%}"))
        hand = r["extra"].get("tutorial 04")
        vs_hand = "" if hand is None else f"; tuned/tutorial-04 speed {hand / r['ours']:.2f}x"
        print(f"   {r['name']}: {ratio:.2f}x numpy{met}{vs_hand}; {r['trials']} trials in "
              f"{r['tune_s'] / 60:.1f} min, 90% of best at trial {r['to90']}")


if __name__ == "__main__":
    sys.exit(main())
