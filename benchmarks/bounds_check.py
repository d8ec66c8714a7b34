"""The cost of run-time bounds checks: checked / unchecked time, same process, interleaved.

Run:  python benchmarks/bounds_check.py [--repeat 15] [--quick] [--c]

Each workload is built three times for the host: with no check at all (the pass's
insertion switched off here, uncached), the default ``Target("llvm")`` (the cheap
checks: once before a loop or once per call), and ``Target("llvm", bounds_check=True)``
(every check); the same for ``c`` with ``--c``.  The results are checked to be
identical, and the three are timed alternately (``--repeat`` rounds of
``mod.benchmark(number=...)``); the figures are the ratios of the medians to the
unchecked one.  "checks" counts the run-time checks left in the lowered code of the
default and the full build (accesses proven in bounds from the loop ranges get none).

Workloads:

* ``ew-static``: ``B = A * 2 + 1`` on 4M floats, static shape, parallel + vectorized;
* ``ew-sym``: the same with a symbolic size ``n``, unscheduled (one serial loop);
* ``ew-2sizes``: ``C[i] = A[i] + B[i]`` with ``A, C: (n,)`` and ``B: (m,)``: the read
  of ``B`` cannot be proven (``m`` is not ``n``), so every iteration keeps a check;
* ``gather``: ``B[i] = A[idx[i]]`` on 4M floats: a data-dependent index, so a check
  stays inside the loop at every iteration (the worst case);
* ``gemm-tuned``: tutorial 04's scheduled 256^3 fp32 GEMM (packing, register tile,
  vectorized, parallel);
* ``gemm-2sizes``: a plain 256^3 GEMM ``C = A @ B`` with ``B: (kb, n)`` declared with
  its own row count ``kb``: the check on ``B`` is affine in the inner loops, so it is
  done once per outer iteration, before them.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import statistics

import numpy as np

import cuvil_tir as T
import schedules as S
import targets
import cuvil_tir.transform.bounds_check as bc
from targets.runtime.checks import check_sites

from run import _tutorial04  # benchmarks/ is on sys.path when run as a script





def ew_static(n=1 << 22):
    A = T.placeholder((n,), name="A")
    B = T.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    sch = S.Schedule(T.create_prim_func([A, B]))
    (i,) = sch.get_loops(sch.get_block("B"))
    io, ii = sch.split(i, [None, 4096])
    iii = sch.split(ii, [None, 8])[-1]
    sch.parallel(io)
    sch.vectorize(iii)
    a = np.random.default_rng(0).standard_normal(n).astype("float32")
    return sch, (a, np.zeros(n, "float32"))


def ew_sym(size=1 << 22):
    n = T.size_var("n")
    A = T.placeholder((n,), name="A")
    B = T.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    a = np.random.default_rng(0).standard_normal(size).astype("float32")
    return T.create_prim_func([A, B]), (a, np.zeros(size, "float32"))


def ew_2sizes(size=1 << 22):
    n, m = T.size_var("n"), T.size_var("m")
    A = T.placeholder((n,), name="A")
    B = T.placeholder((m,), name="B")
    C = T.compute((n,), lambda i: A[i] + B[i], name="C")
    rng = np.random.default_rng(0)
    a = rng.standard_normal(size).astype("float32")
    b = rng.standard_normal(size).astype("float32")
    return T.create_prim_func([A, B, C]), (a, b, np.zeros(size, "float32"))


def gather(size=1 << 22):
    n, m = T.size_var("n"), T.size_var("m")
    A = T.placeholder((n,), name="A")
    idx = T.placeholder((m,), "int32", name="idx")
    B = T.compute((m,), lambda i: A[idx[i]], name="B")
    rng = np.random.default_rng(0)
    a = rng.standard_normal(size).astype("float32")
    ix = rng.integers(0, size, size).astype("int32")
    return T.create_prim_func([A, idx, B]), (a, ix, np.zeros(size, "float32"))


def gemm_tuned(s=256):
    sch = _tutorial04().gemm_schedule(s, s, s)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((s, s)).astype("float32")
    b = rng.standard_normal((s, s)).astype("float32")
    return sch, (a, b, np.zeros((s, s), "float32"))


def gemm_2sizes(s=256):
    m, n, k, kb = (T.size_var(x) for x in ("m", "n", "k", "kb"))
    A = T.placeholder((m, k), name="A")
    B = T.placeholder((kb, n), name="B")
    r = T.reduce_axis((0, k), name="r")
    C = T.compute((m, n), lambda i, j: T.sum(A[i, r] * B[r, j], axis=r), name="C")
    sch = S.Schedule(T.create_prim_func([A, B, C]))
    i, j, kk = sch.get_loops(sch.get_block("C"))
    sch.reorder(i, kk, j)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((s, s)).astype("float32")
    b = rng.standard_normal((s, s)).astype("float32")
    return sch, (a, b, np.zeros((s, s), "float32"))


WORKLOADS = {"ew-static": ew_static, "ew-sym": ew_sym, "ew-2sizes": ew_2sizes,
             "gather": gather, "gemm-tuned": gemm_tuned, "gemm-2sizes": gemm_2sizes}


@contextlib.contextmanager
def no_checks():
    """Builds inside insert no check at all (the baseline), and skip the compile
    cache: their code must never be stored under the default build's key."""
    saved, env = bc.insert_bounds_checks, os.environ.get("CUVIL_CACHE")
    bc.insert_bounds_checks = lambda func, cheap_only=False: func
    os.environ["CUVIL_CACHE"] = "0"
    try:
        yield
    finally:
        bc.insert_bounds_checks = saved
        if env is None:
            os.environ.pop("CUVIL_CACHE", None)
        else:
            os.environ["CUVIL_CACHE"] = env


def compare(name, make, kind, repeat):
    func, args = make()
    with no_checks():
        none = targets.build(func, targets.Target(kind))
    default = targets.build(func, targets.Target(kind))
    full = targets.build(func, targets.Target(kind, bounds_check=True))
    mods = (none, default, full)
    outs = [[a.copy() for a in args] for _ in mods]
    for mod, out in zip(mods, outs):
        mod(*out)
    for other in outs[1:]:
        for x, y in zip(outs[0], other):
            np.testing.assert_array_equal(x, y)
    number = max(1, int(0.05 / max(none.benchmark(*args, repeat=1, number=1).median, 1e-6)))
    times = [[], [], []]
    for _ in range(repeat):
        for mod, ts in zip(mods, times):
            ts.append(mod.benchmark(*args, repeat=1, number=number).median)
    t0, td, tf = (statistics.median(ts) for ts in times)
    nd, nf = len(check_sites(default.lowered)), len(check_sites(full.lowered))
    print(f"{kind:4s} {name:12s} checks {nd:2d}/{nf:2d}   none {t0 * 1e3:8.3f} ms   "
          f"default {td / t0:5.3f}x   bounds_check=True {tf / t0:5.3f}x")
    return td / t0, tf / t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--quick", action="store_true",
                    help="3 rounds, small sizes (CI: does it run)")
    ap.add_argument("--c", action="store_true", help="also the c target")
    ap.add_argument("--only", default="", help="comma-separated workload names")
    args = ap.parse_args(argv)
    names = [w for w in WORKLOADS if not args.only or w in args.only.split(",")]
    repeat = 3 if args.quick else args.repeat
    for kind in ["llvm"] + (["c"] if args.c else []):
        for name in names:
            make = WORKLOADS[name]
            if args.quick:
                make = functools.partial(make, 1 << 16) if "gemm" not in name else \
                    functools.partial(make, 64)
            compare(name, make, kind, repeat)


if __name__ == "__main__":
    main()
