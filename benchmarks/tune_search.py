"""Model-guided evolutionary search versus random search over several workloads: trials
to reach 95% of the best-known time, and how well the cost model ranks held-out
candidates (a benchmark, not a test).

Every search draws from the space generated for the target (``space=None``) and
measures through one cache keyed by the candidate's decisions: a distinct candidate is
measured once in the whole invocation, and every search that proposes it gets that
same time, so timing noise (other processes on the machine) cannot favour either
strategy.

1. A *pool*: ``--pool`` random candidates of every workload (seeds of their own),
   measured first: the tuned database a new task finds holds the pools of the *other*
   workloads (a guided search never sees its own workload's records).
2. Random and guided searches, ``--seeds`` seeds of ``--trials`` trials on every
   workload, run *interleaved*: for each workload and seed both sessions advance
   ``--step`` trials at a time in turn (the one to start alternates by seed), so both
   meet the same load.  Workloads run one after another, and once a workload's
   searches end their records join the database the next workloads' guided searches
   start from (online and across tasks, as a user tunes one shape after another: the
   first workload finds only the pools, the last every other workload tuned).
3. *Settling*: the ``--settle-top`` fastest distinct candidates of every workload are
   measured ``--settle-rounds`` more times, round after round over all workloads, and
   their time is the median of their readings (every other candidate keeps its one
   reading, which was slower than theirs).

The best-known time of a workload is the fastest settled time of everything measured
for it in this invocation (pool and both searches): a median, not one lucky reading in
a quiet moment.  A run reaches 95% of it at the first trial whose candidate's settled
time is within ``best / 0.95``; a run that never does counts as ``trials + 1`` (so the
ratio of the medians is a lower bound when random search mostly misses, and the output
says so).  Beside it: how many runs of each strategy reached the bar within 4, 8, 16 ...
trials; random search's median from its hit rate (the share of all random draws of the
workload, pool included, within the bar; draws independent: a mixture of geometric
distributions, not censored); and where the guided trials came from (fresh draws of the
space, children bred from measured candidates, other tasks' best).  Then the cost model
ranks held-out candidates: every *randomly drawn* candidate of a workload (pool and
random searches: an unbiased sample of the space) is ranked by a model trained on the
random candidates of the other workloads of its family, as the tuner transfers
(``transfer``: a workload it never saw; none for a workload alone in its family), and
by one trained on those plus a random half of this workload's (``within``: tested on
the other half); Spearman's rank correlation with the measured times.

    python benchmarks/tune_search.py [--trials 32] [--seeds 3] [--pool 32] [--only gemm256 conv28]
    python benchmarks/tune_search.py --quick    # 2 workloads, 1 seed, 8 trials (CI)

Numbers measured while other processes share the machine are noisy; the shared cache
makes the comparison of the two searches fair, not the times comparable across runs.
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
from concurrent.futures import Executor, Future, wait

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..")]

import cuvil_tir as T  # noqa: E402
import schedules as S  # noqa: E402
from schedules.tune.cost_model import CostModel, rank_correlation  # noqa: E402
from schedules.tune.database import workload_key  # noqa: E402
from schedules.tune.executor import local_executor, slots  # noqa: E402
from schedules.tune.networks import matmul  # noqa: E402
from schedules.tune.tuner import Session  # noqa: E402

#: the pool's seeds start here (the searches use 0 .. seeds - 1)
POOL_SEED = 1000


class CachedExecutor(Executor):
    """Measures each distinct candidate (function and decisions) once through
    ``inner``; every later submission of it shares that measurement, except while
    ``fresh`` is set (the settling re-measurements).  Each measurement runs to its end
    before ``submit`` returns, so nothing of this benchmark runs beside a timing: on a
    2-core machine the guided search's breeding (the space run again for every child)
    beside a parallel kernel's timing made the guided search's candidates time up to
    twice slower than random search's, whose proposals cost a few draws."""

    def __init__(self, inner, recorded=None):
        self.inner, self.cache = inner, {}
        self.fresh = False
        self._max_workers = slots(inner)
        for key, out in (recorded or {}).items():
            self.cache[tuple(json.loads(key))] = _resolved(out)

    def recorded(self) -> dict:
        """Every measurement made or loaded (key: the candidate as JSON text), for
        ``--cache``."""
        return {json.dumps(list(k)): f.result() for k, f in self.cache.items()
                if f.done() and f.exception() is None}

    def submit(self, fn, payload):
        if self.fresh:
            return _done(self.inner.submit(fn, payload))
        key = (payload["func"], json.dumps(payload["decisions"], separators=(",", ":")))
        if key not in self.cache:
            self.cache[key] = _done(self.inner.submit(fn, payload))
        return self.cache[key]


def _done(future):
    wait([future])
    return future


def _resolved(out) -> Future:
    future: Future = Future()
    future.set_result(out)
    return future


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
    "gemm256": lambda: matmul(256, 256, 256),
    "gemm512": lambda: matmul(512, 512, 512),
    "skinny64": lambda: matmul(64, 768, 768),
    "bert_qkv": lambda: matmul(128, 768, 768),
    "dense64": lambda: matmul(64, 1000, 512),
    "conv28": lambda: conv2d(64, 64, 28, 28),
    "conv14": lambda: conv2d(128, 128, 14, 14),
    "int8_256": lambda: matmul(256, 256, 256, "int8", "int32"),
}
QUICK = ("gemm256", "skinny64")
HOW = ("guided", "random")


def reach(history, best, trials) -> int:
    """The first trial within 95% of ``best`` (``trials + 1`` when none)."""
    return next((n for n, s in history if s and s <= best / 0.95), trials + 1)


def main(argv=None):
    global TARGET
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--pool", type=int, default=32,
                    help="random candidates measured first per workload (the database)")
    ap.add_argument("--step", type=int, default=4,
                    help="trials each search runs before the other takes its turn")
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--only", nargs="*", default=None, help=" ".join(WORKLOADS))
    ap.add_argument("--quick", action="store_true",
                    help="2 workloads, pool 6, 1 seed, 8 trials")
    ap.add_argument("--workers", type=int, default=2,
                    help="measurement slots: a search's batch (measured one "
                    "candidate after another here, see CachedExecutor)")
    ap.add_argument("--min-repeat-ms", type=float, default=20.0)
    ap.add_argument("--settle-top", type=int, default=8,
                    help="the fastest candidates of each workload measured again")
    ap.add_argument("--settle-rounds", type=int, default=2,
                    help="how many more times (their time: the median reading)")
    ap.add_argument("--save", default=None,
                    help="a JSON file for the histories and every measured record")
    ap.add_argument("--repeat-check", type=int, default=16,
                    help="random candidates of each workload timed once more, to say "
                    "how well the measurement ranks itself (0: none)")
    ap.add_argument("--cache", default=None,
                    help="a JSON file of measurements: those recorded there are reused "
                    "(not timed again), and every measurement is written back at the end")
    args = ap.parse_args(argv)
    if args.quick:
        args.trials, args.seeds, args.pool, args.settle_top = 8, 1, 6, 3
        args.only = args.only or list(QUICK)
    TARGET = args.target
    names = args.only or list(WORKLOADS)
    funcs = {n: WORKLOADS[n]() for n in names}
    keys = {n: workload_key(f, TARGET) for n, f in funcs.items()}
    folder = tempfile.mkdtemp(prefix="cuvil-tune-search-")
    t0 = time.perf_counter()
    print(f"{len(names)} workloads: pool {args.pool}, then guided and random interleaved "
          f"({args.step} trials a turn), {args.seeds} seeds x {args.trials} trials; target "
          f"{TARGET}, load {os.getloadavg()[0]:.1f}; databases in {folder}", flush=True)
    runs, spent, records, measurers = {}, {h: 0.0 for h in HOW}, [], {}
    origins: dict = {}   # (workload, strategy, seed) -> each trial's origin
    recorded = {}
    if args.cache and os.path.exists(args.cache):
        with open(args.cache) as fh:
            recorded = json.load(fh)
    with local_executor(args.workers) as pool:
        ex = CachedExecutor(pool, recorded)
        pool_db = S.Database(os.path.join(folder, "pool.jsonl"))
        for name, f in funcs.items():                       # 1. the pool
            t1 = time.perf_counter()
            s = measurers[name] = Session(f, None, TARGET, pool_db, ex, seed=POOL_SEED,
                                          guided=False, min_repeat_ms=args.min_repeat_ms)
            s.run(args.pool)
            print(f"  {name:9s} pool of {s.measured}: {time.perf_counter() - t1:4.0f} s, "
                  f"best {_ms(s.best_seconds())}", flush=True)
        known = pool_db.records()
        records += [dict(r, drawn="pool") for r in known]
        save_cache(args.cache, ex)
        for name, f in funcs.items():                       # 2. the searches
            others = [r for r in known if r.get("workload") != keys[name]]
            for seed in range(args.seeds):
                db = S.Database(os.path.join(folder, f"guided-{name}-{seed}.jsonl"))
                db.append(others)
                sessions = {
                    "guided": Session(f, None, TARGET, db, ex, seed=seed,
                                      min_repeat_ms=args.min_repeat_ms),
                    "random": Session(f, None, TARGET, None, ex, seed=seed, guided=False,
                                      min_repeat_ms=args.min_repeat_ms)}
                order = HOW if seed % 2 == 0 else HOW[::-1]
                while any(sessions[h].measured < args.trials for h in order):
                    for h in order:
                        t1 = time.perf_counter()
                        sessions[h].run(min(args.step, args.trials - sessions[h].measured))
                        spent[h] += time.perf_counter() - t1
                for h in HOW:
                    mine = [r for r in sessions[h].run_state.records
                            if r.get("workload") == keys[name] and not r.get("remeasured")]
                    runs[(name, h, seed)] = [r["cand"] if r.get("seconds") else None
                                             for r in mine]
                    origins[(name, h, seed)] = [sessions[h].search.origin.get(r["cand"])
                                                for r in mine]
                    records += [dict(r, drawn=h) for r in mine]
                    # what the next workloads' guided runs find in their database:
                    # this workload tuned (online, across tasks; never its own records)
                    known += mine
                best = {h: min((r["seconds"] for r in records if r["drawn"] == h and
                                r["workload"] == keys[name] and r.get("seconds")),
                               default=None) for h in HOW}
                print(f"  {name:9s} seed {seed}: best guided {_ms(best['guided'])}, "
                      f"random {_ms(best['random'])}", flush=True)
            save_cache(args.cache, ex)   # a run stopped later keeps what it measured
        t1 = time.perf_counter()                            # 3. the bar, settled
        settled = settle(ex, measurers, keys, records, args.settle_top, args.settle_rounds)
        print(f"settling: the best {args.settle_top} candidates of each workload measured "
              f"{args.settle_rounds} more times, interleaved: "
              f"{time.perf_counter() - t1:.0f} s", flush=True)
        repeat = repeatability(ex, measurers, keys, records, args.repeat_check)
    save_cache(args.cache, ex)
    if args.save:
        with open(args.save, "w") as fh:
            json.dump({"runs": [[*k, h] for k, h in runs.items()], "records": records,
                       "origins": [[*k, o] for k, o in origins.items()],
                       "settled": [[w, c, t] for (w, c), t in settled.items()]}, fh)
    n_trials = max(1, len(funcs) * args.seeds * args.trials)
    print(f"search time per trial (measuring shared): guided {spent['guided'] / n_trials:.2f}"
          f" s, random {spent['random'] / n_trials:.2f} s")
    summary(funcs, keys, runs, records, settled, args, origins)
    model_quality(keys, records, repeat)
    print(f"{time.perf_counter() - t0:.0f} s in all, load {os.getloadavg()[0]:.1f}")
    return 0


def save_cache(path, ex) -> None:
    """Write every measurement so far to ``path`` (``--cache``; None: nothing), through
    a temporary file so a run killed while writing leaves the last whole copy."""
    if path:
        with open(path + ".tmp", "w") as fh:
            json.dump(ex.recorded(), fh)
        os.replace(path + ".tmp", path)


def _ms(seconds) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.4f} ms"


def settle(ex, measurers, keys, records, top, rounds) -> dict:
    """``(workload, candidate)`` -> its settled time: the ``top`` fastest distinct
    candidates of every workload (by their first reading) are measured ``rounds`` more
    times, round after round over all workloads (so a quiet or a busy minute falls on
    all of them), and their time is the median of their readings; every other
    candidate keeps its one reading.  The bar is then not one lucky reading.  Keyed by
    workload too: a candidate's key is its decisions, which two workloads of one space
    (gemm256 and int8_256, skinny64 and dense64) share for different schedules."""
    first: dict = {}
    for r in records:
        if r.get("seconds"):
            first.setdefault(r["workload"], {}).setdefault(r["cand"], r)
    picked = {n: sorted(first.get(w, {}).values(), key=lambda r: r["seconds"])[:top]
              for n, w in keys.items()}
    readings = {(r["workload"], r["cand"]): [r["seconds"]] for rs in picked.values()
                for r in rs}
    ex.fresh = True
    try:
        for _ in range(rounds):
            for name, rs in picked.items():
                got = measurers[name].run_state.submit(
                    [(r["cand"], r["decisions"], r["trace"], None) for r in rs],
                    remeasured=True)
                for r in got:
                    if r.get("seconds"):
                        readings[(r["workload"], r["cand"])].append(r["seconds"])
    finally:
        ex.fresh = False
    out = {(w, c): r["seconds"] for w, rs in first.items() for c, r in rs.items()}
    out.update({c: statistics.median(v) for c, v in readings.items()})
    return out


def summary(funcs, keys, runs, records, settled, args, origins=None) -> dict:
    """The table: trials to 95% of the best-known (settled) time, per workload and
    seed; then the medians, their ratio and its censoring, how many runs reached the
    bar within a few budgets, and random search's median from its hit rate (uncensored).
    Returns the medians and the ratios."""
    print(f"\ntrials to 95% of the best-known time (the best settled time of everything "
          f"measured for the workload; not reached: {args.trials + 1})")
    per = {h: [] for h in HOW}
    rates, firsts = {}, []
    for name in funcs:
        best = min(settled[(keys[name], r["cand"])] for r in records
                   if r.get("workload") == keys[name] and r.get("seconds"))
        rates[name] = hit_rate(records, settled, keys[name], best)
        row = []
        for h in HOW:
            got = [reach([(n, settled.get((keys[name], c))) for n, c in enumerate(
                runs[(name, h, seed)], 1) if c is not None], best, args.trials)
                for seed in range(args.seeds)]
            per[h] += got
            row.append(f"{h} {got}")
            if h == "guided" and origins:
                firsts += [origins[(name, h, seed)][n - 1] for seed, n in enumerate(got)
                           if n <= len(origins[(name, h, seed)])]
        hits, draws = rates[name]
        print(f"  {name:9s} best {best * 1e3:8.4f} ms   " + "   ".join(row) +
              f"   random draws within: {hits}/{draws}")
    mg, mr = statistics.median(per["guided"]), statistics.median(per["random"])
    runs_n = len(per["guided"])
    reached = {h: sum(x <= args.trials for x in per[h]) for h in HOW}
    censored = mr > args.trials
    print(f"median over {runs_n} runs: guided {mg:g}, random {mr:g}; random / guided "
          f"{'>= ' if censored else '= '}{mr / mg:.1f}x (goal >= 3x); reached the bar in "
          f"{reached['guided']} and {reached['random']} of {runs_n} runs" + (
              f" (random's median is a run that never reached it, counted as "
              f"{args.trials + 1}: the ratio is a lower bound)" if censored else ""))
    budgets = [b for b in (4, 8, 16, 32, 64) if b < args.trials] + [args.trials]
    print(f"reached within {' / '.join(map(str, budgets))} trials: " + "; ".join(
        f"{h} " + " / ".join(str(sum(x <= b for x in per[h])) for b in budgets)
        for h in HOW) + f" of {runs_n} runs")
    if origins:
        every = [o for (_, h, _), os_ in origins.items() if h == "guided" for o in os_]
        print("guided trials by origin (fresh draw / bred child / another task's best): "
              f"{_tally(every)}; the trials that first reached the bar: {_tally(firsts)}")
    expected = geometric_median([rates[n] for n in funcs for _ in range(args.seeds)])
    print(f"random search from its hit rate (every random draw of the run, pool included; "
          f"draws independent): a median of {expected:g} trials to the bar, "
          f"{expected / mg:.1f}x the guided median (uncensored estimate)")
    return {"guided": mg, "random": mr, "ratio": mr / mg, "censored": censored,
            "random_from_rate": expected}


def _tally(origins) -> str:
    return " / ".join(str(sum(o == k for o in origins)) for k in ("fresh", "bred", "seed"))


def hit_rate(records, settled, workload, best) -> tuple:
    """``(hits, draws)``: how many distinct randomly drawn candidates of ``workload``
    (pool and random searches; a failed one is a draw that missed) are within 95% of
    ``best`` by their settled time."""
    drawn = {r["cand"] for r in records if r["workload"] == workload and
             r["drawn"] in ("pool", "random") and not r.get("remeasured")}
    hits = sum(1 for c in drawn if settled.get((workload, c)) is not None and
               settled[(workload, c)] <= best / 0.95)
    return hits, len(drawn)


def geometric_median(rates, most: int = 100000) -> float:
    """The median trials to a first hit of a random search over runs with the given
    ``(hits, draws)`` rates, each draw independent (the median of the mixture of
    geometric distributions; ``inf`` when not within ``most``).

    Example::

        >>> geometric_median([(1, 2)]), geometric_median([(0, 5), (1, 1)])
        (1, 1)
    """
    ps = [h / d if d else 0.0 for h, d in rates]
    for t in range(1, most + 1):
        if sum(1.0 - (1.0 - p) ** t for p in ps) / len(ps) >= 0.5:
            return t
    return float("inf")


def repeatability(ex, measurers, keys, records, n, seed=0) -> dict:
    """Workload name -> Spearman's rank correlation between two readings of ``n``
    randomly drawn candidates (their first, and one more taken now): how well the
    measurement ranks itself, which bounds how well a model can rank one reading (a
    model that knew the true times would reach about the square root of it)."""
    rng = random.Random(seed)
    out: dict = {}
    ex.fresh = True
    try:
        for name, w in keys.items():
            first = {r["cand"]: r for r in records if r["workload"] == w and
                     r["drawn"] in ("pool", "random") and r.get("seconds") and
                     not r.get("remeasured")}
            if n <= 0 or len(first) < max(n, 8):
                continue
            picked = rng.sample(sorted(first), n)
            got = measurers[name].run_state.submit(
                [(c, first[c]["decisions"], first[c]["trace"], None) for c in picked],
                remeasured=True)
            pairs = [(first[r["cand"]]["seconds"], r["seconds"]) for r in got
                     if r.get("seconds")]
            if len(pairs) >= 8:
                out[name] = rank_correlation(*zip(*pairs))
    finally:
        ex.fresh = False
    return out


def model_quality(keys, records, repeat=None, seed=0):
    """Spearman's rank correlation of the cost model on held-out random candidates
    (``repeat``: :func:`repeatability`'s, printed beside it)."""
    rows, family = {}, {}
    for r in records:
        if r["drawn"] in ("pool", "random") and r.get("seconds") and r.get("feat") \
                and not r.get("remeasured"):
            rows.setdefault(r["workload"], {})[r["cand"]] = (r["feat"], r["seconds"])
            family[r["workload"]] = r["task"]["family"]
    rng = random.Random(seed)
    within, transfer = [], []
    for name, w in keys.items():
        mine = list(rows.get(w, {}).values())
        if len(mine) < 16:
            continue
        # as the tuner learns (:func:`schedules.tune.transfer.nearest_rows`): from the
        # workload's own family only
        other = [(f, s, g) for g, rs in rows.items() if g != w and family[g] == family[w]
                 for f, s in rs.values()]
        rng.shuffle(mine)
        half = len(mine) // 2
        for own, test, out in (([], mine, transfer), (mine[:half], mine[half:], within)):
            if not own and not other:
                continue   # no relative: the tuner starts this one with no model
            train = other + [(f, s, "this") for f, s in own]
            m = CostModel()
            m.fit([f for f, _, _ in train], [s for _, s, _ in train],
                  [g for _, _, g in train])
            out.append((name, rank_correlation(-m.predict([f for f, _ in test]),
                                               [s for _, s in test])))
    if not within:
        print("cost model: no workload has the 16 distinct random candidates a held-out "
              "rank correlation needs (give a larger --pool or more --trials)")
        return
    for label, got in (("transfer (a workload the model never saw; its family's others)",
                        transfer), ("within (plus half of the workload's own)", within)):
        print(f"cost model Spearman, {label}: " + (
            f"median {statistics.median(x for _, x in got):.2f} (goal >= 0.6): " +
            ", ".join(f"{n} {x:.2f}" for n, x in got) if got else
            "none (no workload here has another of its family)"))
    if repeat:
        print(f"measurement repeatability (random candidates timed twice), Spearman: "
              f"median {statistics.median(repeat.values()):.2f}: " +
              ", ".join(f"{n} {x:.2f}" for n, x in repeat.items()) +
              " (a model that knew the true times would rank one reading at about the "
              "square root of this)")


TARGET = "llvm"

if __name__ == "__main__":
    sys.exit(main())
