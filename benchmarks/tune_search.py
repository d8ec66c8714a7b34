"""Model-guided evolutionary search versus random search over several workloads: trials
to reach 95% of the best-known time, and how well the cost model ranks held-out
candidates (a benchmark, not a test).

Every search draws from the space generated for the target (``space=None``).  All
searches measure through one cache of measurements (a candidate measured once keeps its
time for every search that proposes it), so they compete on the same numbers and
timing noise cannot favour one.

1. Random search, ``--seeds`` seeds of ``--trials`` trials on every workload: these are
   also the records a tuned database holds when a new task arrives.
2. Guided search, the same seeds and trials, each run with a database holding the
   random records of the *other* workloads only (leave-one-out: the task starts from
   the nearest tuned tasks, never from its own measurements).

The best-known time of a workload is the fastest any run found; a run reaches 95% of it
at the first trial whose time is within ``best / 0.95``; a run that never does counts
as ``trials + 1`` (said beside the medians).  Then the cost model, trained on the other
workloads' records plus a random half of this workload's distinct measured candidates,
ranks the other half: Spearman's rank correlation with the measured times (and the
same with no row of this workload: pure transfer).

    python benchmarks/tune_search.py [--trials 32] [--seeds 3] [--only gemm128 conv28]
    python benchmarks/tune_search.py --quick          # 2 workloads, 1 seed, 8 trials (CI)

Numbers measured while other processes share the machine are noisy: a run under load
compares the searches with each other (same cache), not with other machines.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from concurrent.futures import Executor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..")]

import cuvil_tir as T  # noqa: E402
import schedules as S  # noqa: E402
from schedules.tune.cost_model import CostModel, rank_correlation  # noqa: E402
from schedules.tune.database import workload_key  # noqa: E402
from schedules.tune.executor import local_executor, slots  # noqa: E402
from schedules.tune.networks import matmul  # noqa: E402


class CachedExecutor(Executor):
    """Measures each distinct candidate of each function once through ``inner``;
    repeats share the result."""

    def __init__(self, inner):
        self.inner, self.cache = inner, {}
        self._max_workers = slots(inner)

    def submit(self, fn, payload):
        key = (payload["func"], payload["trace"])
        if key not in self.cache:
            self.cache[key] = self.inner.submit(fn, payload)
        return self.cache[key]


def conv2d(c, k, h, w):
    """A 3x3, stride 1, pad 1 convolution (CHW), as tutorial 06 defines it."""
    X = T.placeholder((c, h, w), name="X")
    W = T.placeholder((k, c, 3, 3), name="W")
    P = T.compute((c, h + 2, w + 2), lambda ci, y, x: T.if_then_else(
        T.all(y >= 1, y <= h, x >= 1, x <= w), X[ci, y - 1, x - 1], 0.0), name="P")
    rc = T.reduce_axis((0, c), name="rc")
    ry = T.reduce_axis((0, 3), name="ry")
    rx = T.reduce_axis((0, 3), name="rx")
    Y = T.compute((k, h, w), lambda ko, y, x: T.sum(
        P[rc, y + ry, x + rx] * W[ko, rc, ry, rx], axis=[rc, ry, rx]), name="Y")
    return T.create_prim_func([X, W, Y])


WORKLOADS = {
    "gemm128": lambda: matmul(128, 128, 128),
    "gemm256": lambda: matmul(256, 256, 256),
    "skinny16": lambda: matmul(16, 768, 768),
    "bert_qkv": lambda: matmul(128, 768, 768),
    "dense4": lambda: matmul(4, 1000, 512),
    "conv28": lambda: conv2d(32, 32, 28, 28),
    "conv14": lambda: conv2d(64, 64, 14, 14),
    "int8_128": lambda: matmul(128, 128, 128, "int8", "int32"),
}
QUICK = ("gemm128", "conv28")


def reach(history, best, trials) -> int:
    """The first trial within 95% of ``best`` (``trials + 1`` when none)."""
    return next((n for n, s in history if s and s <= best / 0.95), trials + 1)


def run_search(func, guided, seed, trials, db, ex, min_repeat_ms):
    res = S.tune(func, None, target=TARGET, trials=trials, database=db, executor=ex,
                 seed=seed, progress=False, guided=guided, remeasure=0,
                 min_repeat_ms=min_repeat_ms)
    return res


def main(argv=None):
    global TARGET
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--only", nargs="*", default=None, help=" ".join(WORKLOADS))
    ap.add_argument("--quick", action="store_true", help="2 workloads, 1 seed, 8 trials")
    ap.add_argument("--workers", type=int, default=2,
                    help="measurement slots (builds run in parallel; timing is "
                    "serialised by a per-host lock)")
    ap.add_argument("--min-repeat-ms", type=float, default=20.0)
    ap.add_argument("--save", default=None, help="a JSON file for the histories")
    ap.add_argument("--random-db", default=None,
                    help="the random.jsonl of an earlier run: its random searches are "
                    "reused (their measurements too) and only the guided ones run")
    args = ap.parse_args(argv)
    if args.quick:
        args.trials, args.seeds, args.only = 8, 1, args.only or list(QUICK)
    TARGET = args.target
    names = args.only or list(WORKLOADS)
    funcs = {n: WORKLOADS[n]() for n in names}
    folder = tempfile.mkdtemp(prefix="cuvil-tune-search-")
    t0 = time.perf_counter()
    print(f"{len(names)} workloads x {args.seeds} seeds x {args.trials} trials, target "
          f"{TARGET}, load {os.getloadavg()[0]:.1f}; databases in {folder} (--random-db "
          f"{os.path.join(folder, 'random.jsonl')} reuses the random searches)", flush=True)
    runs: dict = {}
    with local_executor(args.workers) as pool:
        ex = CachedExecutor(pool)
        random_db = os.path.join(folder, "random.jsonl")
        if args.random_db:
            records = reuse(args.random_db, funcs, runs, ex, args)
            S.Database(random_db).append(records)
        for name, f in funcs.items():                       # 1. random search
            for seed in range(args.seeds):
                if (name, "random", seed) in runs:
                    continue
                t1 = time.perf_counter()
                res = run_search(f, False, seed, args.trials, random_db, ex,
                                 args.min_repeat_ms)
                runs[(name, "random", seed)] = res.history
                _note(name, "random", seed, res, t1)
        records = S.Database(random_db).records()
        for name, f in funcs.items():                       # 2. guided, leave-one-out
            mine = workload_key(f, TARGET)
            others = [r for r in records if r.get("workload") != mine]
            for seed in range(args.seeds):
                db = S.Database(os.path.join(folder, f"guided-{name}-{seed}.jsonl"))
                db.append(others)
                t1 = time.perf_counter()
                res = run_search(f, True, seed, args.trials, db, ex, args.min_repeat_ms)
                runs[(name, "guided", seed)] = res.history
                _note(name, "guided", seed, res, t1)
        if args.save:
            with open(args.save, "w") as fh:
                json.dump([[*k, h] for k, h in runs.items()], fh)
        summary(funcs, runs, args)
        model_quality(funcs, ex.cache, records)
    print(f"{time.perf_counter() - t0:.0f} s in all, load {os.getloadavg()[0]:.1f}")
    return 0


def reuse(path, funcs, runs, ex, args) -> list:
    """The records of an earlier run's random searches: their histories (``trials``
    records per seed, in order), their measurements in the cache, and their features
    computed again when :mod:`schedules.tune.features` changed since."""
    from concurrent.futures import Future

    from schedules.tune.features import features
    from schedules.tune.transfer import FEATURES_VERSION
    records = S.Database(path).records()
    out = []
    for name, f in funcs.items():
        mine = [r for r in records if r.get("workload") == workload_key(f, TARGET)
                and not r.get("remeasured")]
        for seed in range(args.seeds):
            part = mine[seed * args.trials:(seed + 1) * args.trials]
            if len(part) == args.trials:
                runs[(name, "random", seed)] = [(n, r.get("seconds"))
                                                for n, r in enumerate(part, 1)]
        for r in mine:
            fut = Future()
            fut.set_result({"kind": r.get("failure") or "ok", "seconds": r.get("seconds"),
                            "error": r.get("error"), "info": {}})
            ex.cache[(str(f), r["trace"])] = fut
            if r.get("seconds") is not None and r.get("feat_v") != FEATURES_VERSION:
                r = dict(r, feat=features(S.Trace.from_json(r["trace"]).apply(f), TARGET),
                         feat_v=FEATURES_VERSION)
            out.append(r)
    print(f"reused {len(out)} records of {path}", flush=True)
    return out


def _note(name, how, seed, res, t1):
    best = min((s for _, s in res.history if s), default=float("nan"))
    print(f"  {name:9s} {how:6s} seed {seed}: {time.perf_counter() - t1:5.0f} s, best "
          f"{best * 1e3:.4f} ms, failures {res.failures or '-'}", flush=True)


def summary(funcs, runs, args):
    print(f"\ntrials to 95% of the best-known time (not reached: {args.trials + 1})")
    per = {"guided": [], "random": []}
    for name in funcs:
        best = min(s for (n, _, _), h in runs.items() if n == name for _, s in h if s)
        row = []
        for how in ("guided", "random"):
            got = [reach(runs[(name, how, seed)], best, args.trials)
                   for seed in range(args.seeds)]
            per[how] += got
            row.append(f"{how} {got}")
        print(f"  {name:9s} best {best * 1e3:8.4f} ms   " + "   ".join(row))
    mg, mr = statistics.median(per["guided"]), statistics.median(per["random"])
    print(f"median over {len(per['guided'])} runs: guided {mg}, random {mr}; random / "
          f"guided = {mr / mg:.1f}x (goal >= 3x)")


def model_quality(funcs, cache, random_records):
    """Spearman's rank correlation of the cost model on held-out candidates."""
    by_workload: dict = {}
    feats = {(r["workload"], r["cand"]): r.get("feat") for r in random_records}
    for (ftext, trace), fut in cache.items():
        out = fut.result()
        if out["kind"] != "ok":
            continue
        func = next(f for f in funcs.values() if str(f) == ftext)
        w = workload_key(func, TARGET)
        from schedules.tune.features import features
        sch = S.Trace.from_json(trace).apply(func)
        key = json.dumps([[k, d] for k, d in sorted(sch.trace.decisions.items())],
                         separators=(",", ":"))
        feat = feats.get((w, key)) or features(sch, TARGET)
        by_workload.setdefault(w, []).append((feat, out["seconds"]))
    rng = random.Random(0)
    within, transfer = [], []
    for w, rows in by_workload.items():
        if len(rows) < 16:
            continue
        rng.shuffle(rows)
        half = len(rows) // 2
        other = [(f, s, g) for g, rs in by_workload.items() if g != w for f, s in rs]
        test = rows[half:]
        for own, out in ((rows[:half], within), ([], transfer)):
            train = other + [(f, s, "this") for f, s in own]
            m = CostModel()
            m.fit([f for f, _, _ in train], [s for _, s, _ in train],
                  [g for _, _, g in train])
            out.append(rank_correlation(-m.predict([f for f, _ in test]),
                                        [s for _, s in test]))
    if within:
        print(f"cost model, held-out Spearman per workload (other workloads + half of "
              f"this one): {[round(x, 2) for x in within]}, median "
              f"{statistics.median(within):.2f} (goal >= 0.6)")
        print(f"  transfer only (no row of the workload): "
              f"{[round(x, 2) for x in transfer]}, median {statistics.median(transfer):.2f}")
    else:
        print("cost model: no workload has the 16 distinct measured candidates a held-out "
              "rank correlation needs (give more --trials)")


TARGET = "llvm"

if __name__ == "__main__":
    sys.exit(main())
