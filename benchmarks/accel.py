"""Toy NPU GEMM on the built-in simulator: single versus double buffering.

For int8 GEMM 256^3 and 512^3: simulated cycles, GEMM-unit utilisation, bank-conflict
stalls, DMA bytes against the minimum the data sizes require (A and B read once, C
written once), compile time and simulator wall time (median of repeats).

Run: ``PYTHONPATH=. python benchmarks/accel.py [--sizes 256 512] [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import targets
from targets.accel.examples.gemm import gemm, schedule_gemm
from targets.accel.examples.toy_npu import toy_npu


def measure(n: int, double: bool, repeat: int) -> dict:
    t0 = time.perf_counter()
    mod = targets.build(schedule_gemm(gemm(n), double=double), "toy-npu",
                        name=f"gemm{n}_{'db' if double else 'sb'}")
    compile_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (n, n)).astype("int8")
    b = rng.integers(-128, 128, (n, n)).astype("int8")
    c = np.zeros((n, n), "int32")
    walls = []
    for _ in range(repeat):
        t = time.perf_counter()
        mod(a, b, c)
        walls.append(time.perf_counter() - t)
    assert np.array_equal(c, a.astype("int32") @ b.astype("int32"))
    s = mod.stats
    return {"n": n, "buffering": "double" if double else "single", "cycles": s["cycles"],
            "gemm_util": s["utilisation"]["gemm"], "stalls": s["bank_conflict_stalls"],
            "dma_in": s["dma_bytes_in"], "dma_out": s["dma_bytes_out"],
            "min_in": 2 * n * n, "min_out": 4 * n * n, "compile_s": compile_s,
            "sim_s": statistics.median(walls)}


def main(argv=None) -> list:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[256, 512])
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    targets.register_target(toy_npu, replace=True)
    rows = [measure(n, d, args.repeat) for n in args.sizes for d in (False, True)]
    print(f"{'size':>5} {'buffer':>7} {'cycles':>9} {'gemm%':>6} {'stalls':>6} "
          f"{'dma in/min':>16} {'dma out/min':>16} {'compile s':>9} {'sim s':>7}")
    for r in rows:
        print(f"{r['n']:>5} {r['buffering']:>7} {r['cycles']:>9} {100 * r['gemm_util']:>6.1f} "
              f"{r['stalls']:>6} {r['dma_in']:>8}/{r['min_in']:<7} "
              f"{r['dma_out']:>8}/{r['min_out']:<7} {r['compile_s']:>9.2f} {r['sim_s']:>7.3f}")
    return rows


if __name__ == "__main__":
    main()
