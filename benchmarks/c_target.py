"""The ``c`` target beside ``llvm`` on the same schedules: time per call and build time.

Run:  python benchmarks/c_target.py [--repeat 7] [--quick]

``--quick`` (what CI runs): small sizes, one round.

Kernels: the elementwise ``exp(x) * y + z`` on 4M floats, a 512^3 GEMM (split 4x16 tile,
``k`` outside the tile, ``parallel`` outer loop: OpenMP in C, the native pool in llvm)
and a row softmax (1024 x 1024).  Both targets use their defaults (llvm: ``mcpu=native``,
``contract``; c: ``cc -O3`` with OpenMP).  Each figure is the median of ``--repeat``
runs, the two targets alternating so they see the same machine load; results are checked
against numpy first.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

import cuvil_tir as T
import schedules as S
import targets

try:
    from benchmarks import bench_env
except ImportError:          # run as a script: benchmarks/ is on sys.path
    import bench_env


def elementwise(n=1 << 22):
    X, Y, Z = (T.placeholder((n,), name=c) for c in "XYZ")
    O = T.compute((n,), lambda i: T.exp(X[i]) * Y[i] + Z[i], name="O")
    rng = np.random.default_rng(0)
    x, y, z = (rng.standard_normal(n).astype("float32") for _ in range(3))
    return S.Schedule(T.create_prim_func([X, Y, Z, O])), [x, y, z, np.zeros(n, "float32")], \
        lambda: np.exp(x) * y + z


def gemm(n=512):
    A, B = T.placeholder((n, n), name="A"), T.placeholder((n, n), name="B")
    k = T.reduce_axis((0, n), name="k")
    C = T.compute((n, n), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = S.Schedule(T.create_prim_func([A, B, C]))
    i, j, kk = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, [None, 16])
    sch.reorder(io, jo, kk, ii, ji)
    sch.parallel(io)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, n, n)).astype("float32")
    return sch, [a, b, np.zeros((n, n), "float32")], lambda: a @ b


def softmax(m=1024, n=1024):
    A = T.placeholder((m, n), name="A")
    k = T.reduce_axis((0, n), name="k")
    M = T.compute((m,), lambda i: T.max(A[i, k], axis=k), name="M")
    E = T.compute((m, n), lambda i, j: T.exp(A[i, j] - M[i]), name="E")
    k2 = T.reduce_axis((0, n), name="k2")
    Ssum = T.compute((m,), lambda i: T.sum(E[i, k2], axis=k2), name="S")
    O = T.compute((m, n), lambda i, j: E[i, j] / Ssum[i], name="O")
    a = np.random.default_rng(2).standard_normal((m, n)).astype("float32")

    def ref():
        e = np.exp(a - a.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return S.Schedule(T.create_prim_func([A, O])), [a, np.zeros((m, n), "float32")], ref


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="small sizes, one round (CI)")
    args = ap.parse_args(argv)
    rc = bench_env.rerun_without_blas_overrides(__file__, argv)
    if rc is not None:
        return rc
    repeat = 1 if args.quick else args.repeat
    print(f"{'kernel':<12} {'llvm ms':>9} {'c ms':>9} {'c/llvm':>7} {'build llvm s':>13} "
          f"{'build c s':>10}")
    sizes = {"elementwise": (1 << 16,), "gemm": (128,), "softmax": (128, 128)} \
        if args.quick else {"elementwise": (), "gemm": (), "softmax": ()}
    for name, make in (("elementwise", elementwise), ("gemm", gemm), ("softmax", softmax)):
        sch, arrays, ref = make(*sizes[name])
        mods, builds = {}, {}
        for t in ("llvm", "c"):
            t0 = time.perf_counter()
            mods[t] = targets.build(sch, t)
            builds[t] = time.perf_counter() - t0
            out = [a.copy() for a in arrays]
            mods[t](*out)
            np.testing.assert_allclose(out[-1], ref(), rtol=1e-3, atol=1e-3)
        times = {"llvm": [], "c": []}
        for _ in range(repeat):
            for t in ("llvm", "c"):
                times[t].append(mods[t].benchmark(*arrays, repeat=1, number=3).median)
        ml, mc = (statistics.median(times[t]) * 1e3 for t in ("llvm", "c"))
        print(f"{name:<12} {ml:9.2f} {mc:9.2f} {mc / ml:7.2f} {builds['llvm']:13.2f} "
              f"{builds['c']:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
