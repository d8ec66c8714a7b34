"""Model-guided evolutionary search versus random search on a GEMM space: trials to
reach 90% of the best (a benchmark, not a test).

Both searches draw from the space generated for the target (``space=None``) and measure
through one shared cache of measurements (a candidate measured once keeps its time for
both searches, so they compete on the same numbers and timing noise cannot favour
one).  The best is the fastest candidate either search found; a search reaches 90% of
it at the first trial whose time is within ``best / 0.9``.

It also reports how well the cost model ranks: trained on half of the distinct
measured candidates (features of their lowered IR), Spearman's rank correlation of its
predictions with the measured times of the other half.

    python benchmarks/tune_search.py [--n 256] [--trials 48] [--seeds 3] [--quick]

``--quick`` (what CI runs): a 64^3 GEMM, 6 trials, one seed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import Executor

import cuvil_tir as T
import schedules as S
from schedules.tune.cost_model import CostModel, rank_correlation
from schedules.tune.executor import local_executor, slots
from schedules.tune.features import features


class CachedExecutor(Executor):
    """Measures each distinct candidate once through ``inner``; repeats share the
    result."""

    def __init__(self, inner):
        self.inner, self.cache = inner, {}
        self._max_workers = slots(inner)

    def submit(self, fn, payload):
        key = payload["trace"]
        if key not in self.cache:
            self.cache[key] = self.inner.submit(fn, payload)
        return self.cache[key]


def gemm(n):
    A = T.placeholder((n, n), name="A")
    B = T.placeholder((n, n), name="B")
    k = T.reduce_axis((0, n), name="k")
    C = T.compute((n, n), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
    return T.create_prim_func([A, B, C])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--trials", type=int, default=48)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--save", default=None,
                    help="a JSON file the histories are written to after every search")
    ap.add_argument("--quick", action="store_true", help="64^3, 6 trials, 1 seed (CI)")
    args = ap.parse_args(argv)
    if args.quick:
        args.n, args.trials, args.seeds = 64, 6, 1
    f = gemm(args.n)
    runs = {}
    t0 = time.perf_counter()
    with local_executor() as pool:
        ex = CachedExecutor(pool)
        for seed in range(args.seeds):
            for guided in (True, False):
                t1 = time.perf_counter()
                res = S.tune(f, None, target=args.target, trials=args.trials, executor=ex,
                             seed=seed, progress=False, guided=guided, remeasure=0)
                runs[(seed, guided)] = res.history
                if args.save:  # a long comparison cut short still leaves its searches
                    with open(args.save, "w") as fh:
                        json.dump([[s, g, h] for (s, g), h in runs.items()], fh)
                print(f"seed {seed} {'guided' if guided else 'random'}: "
                      f"{time.perf_counter() - t1:.0f} s, best "
                      f"{min((s for _, s in res.history if s), default=float('nan')) * 1e3:.3f}"
                      f" ms, failures {res.failures}, pruned {res.pruned}", flush=True)
    best = min(s for h in runs.values() for _, s in h if s)
    print(f"\nGEMM {args.n}^3 on {args.target}: best {best * 1e3:.3f} ms over "
          f"{len(ex.cache)} distinct candidates, {time.perf_counter() - t0:.0f} s in all")
    for guided in (True, False):
        reach = [next((n for n, s in runs[(seed, guided)] if s and s <= best / 0.9), None)
                 for seed in range(args.seeds)]
        got = [r for r in reach if r is not None]
        print(f"{'guided' if guided else 'random'}: trials to 90% of best per seed {reach}; "
              f"reached in {len(got)}/{args.seeds}, median "
              f"{statistics.median(got) if got else '-'}")
    model_quality(f, args.target, ex.cache)
    return 0


def model_quality(func, target, cache):
    """Spearman's rank correlation of the cost model on held-out measured candidates."""
    rows, secs = [], []
    for trace, fut in cache.items():
        out = fut.result()
        if out["kind"] == "ok":
            rows.append(features(S.Trace.from_json(trace).apply(func), target))
            secs.append(out["seconds"])
    half = len(rows) // 2
    if half < 8:
        return
    m = CostModel()
    m.fit(rows[:half], secs[:half])
    rho = rank_correlation(m.predict(rows[half:]), secs[half:])
    print(f"cost model: trained on {half}, Spearman rank correlation on the other "
          f"{len(rows) - half}: {rho:.2f}")


if __name__ == "__main__":
    sys.exit(main())
