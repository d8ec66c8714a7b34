"""``tune``: search a user's space of schedules, measuring each candidate safely.

``space(sch)`` is a schedule function that samples its decisions with
``sch.sample_perfect_tile`` / ``sch.sample_categorical``.  Each trial either draws a
fresh candidate (running ``space`` on a new seeded Schedule) or mutates one decision
of one of the best traces so far and replays it (``Trace.with_decisions(...).apply``);
a replay that fails is counted as ``"replay"`` and skipped.  Candidates are measured
one at a time in child processes (:mod:`.measure`).  With a ``database``, every
measurement is appended to it and candidates already recorded are never measured
again (resume).

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((8,), name="A")
    >>> f = T.create_prim_func([A, T.compute((8,), lambda i: A[i] + 1.0, name="B")])
    >>> def space(sch):
    ...     i, = sch.get_loops(sch.get_block("B"))
    ...     sch.split(i, sch.sample_perfect_tile(i, 2))
    >>> res = tune(f, space, trials=1, progress=False)
    >>> res.trials, res.best_seconds > 0
    (1, True)
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field

from ..errors import ScheduleError
from ..sampling import perfect_tiles
from ..schedule import Schedule
from ..trace import Trace
from .database import Database, workload_key
from .measure import measure
from .progress import TuneProgress, renderer
from .space import generated_space, machine_of, prune

#: the share of trials drawn fresh from the space once some candidate has been measured
EPSILON = 0.3


@dataclass
class TuneResult:
    """What :func:`tune` found: the best schedule (or None), its median seconds, the
    number of candidates measured in this run, failures by kind, candidates pruned
    before building, and ``history``: ``(trial number, seconds or None on failure)`` in
    measurement order.

    Example::

        >>> TuneResult().failures
        {}
    """

    best_schedule: object = None
    best_seconds: float = float("inf")
    trials: int = 0
    failures: dict = field(default_factory=dict)
    pruned: int = 0
    history: list = field(default_factory=list)


def decisions_key(decisions) -> str:
    """The candidate key of a list of ``[instruction index, decision]`` pairs.

    Example::

        >>> decisions_key([[2, [4, 2]], [4, 1]])
        '[[2,[4,2]],[4,1]]'
    """
    return json.dumps(decisions, separators=(",", ":"))


def _decisions(trace) -> list:
    return [[k, d] for k, d in sorted(trace.decisions.items())]


def _mutate(trace, rng):
    """``trace`` with one sampling decision redrawn (perfect tile or categorical)."""
    decs = trace.decisions
    if not decs:
        return None
    k = rng.choice(sorted(decs))
    inst = trace[k]
    if inst.name == "sample_perfect_tile":
        extent = 1
        for d in decs[k]:
            extent *= d
        n = inst.inputs[1]
        options = perfect_tiles(extent, n, inst.attrs.get("max_innermost_factor", 16))
        new = rng.choice(options)
    elif inst.name == "sample_categorical":
        probs = inst.inputs[1]
        new = rng.choice([i for i, p in enumerate(probs) if p > 0])
    else:
        return None
    return trace.with_decisions({k: new})


def _candidate(func, space, rng, good):
    """A new (schedule, failure message) from the space or by mutating a good trace."""
    if good and rng.random() >= EPSILON:
        base = Trace.from_json(rng.choice(good[:3])["trace"])
        mutated = _mutate(base, rng)
        if mutated is not None:
            try:
                return mutated.apply(func), None
            except ScheduleError as e:
                return None, str(e)
    sch = Schedule(func, seed=rng.randrange(2 ** 31))
    try:
        space(sch)
    except ScheduleError as e:
        return None, str(e)
    return sch, None


def tune(func, space=None, target="llvm", trials=16, database=None, executor=None,
         timeout_s=10, seed=0, progress=True):
    """Tune ``func`` over ``space`` for ``trials`` measured candidates (see the module
    doc); ``database`` is a path or a :class:`Database` (None: keep records in memory);
    ``executor`` a ``concurrent.futures.Executor`` the measurements are submitted to
    (None: measured here, one at a time); ``progress`` True, False or a callable taking
    a :class:`TuneProgress` after every batch.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
        >>> tune(f, lambda sch: None, trials=0, progress=False).best_schedule is None
        True
    """
    t_start = time.perf_counter()
    show = renderer(progress)
    db = Database(database) if isinstance(database, (str, os.PathLike)) else database
    workload = workload_key(func, target)
    machine = machine_of(target)
    if space is None:  # generated from the function's blocks by rules, for this machine
        space = generated_space(func, machine)
    pruned = 0
    records = db.records(workload) if db is not None else []
    seen = {r.get("cand") for r in records}
    rng = random.Random(seed)
    failures: Counter = Counter()
    history: list = []
    func_text = str(func)
    batch_size = max(1, getattr(executor, "_max_workers", 1) or 1)
    measured = 0
    misses = 0
    while measured < trials and misses < 50 + 20 * trials:
        good = sorted((r for r in records if r.get("seconds") is not None),
                      key=lambda r: r["seconds"])
        batch = []
        while len(batch) < min(batch_size, trials - measured) and misses < 50 + 20 * trials:
            sch, err = _candidate(func, space, rng, good)
            if sch is None:
                failures["replay"] += 1
                misses += 1
                continue
            decisions = _decisions(sch.trace)
            key = decisions_key(decisions)
            if key in seen:
                misses += 1  # already measured (this run or a resumed one)
                continue
            seen.add(key)
            if prune(sch.func, machine) is not None:
                pruned += 1  # cannot be good or legal on this machine: never built
                misses += 1
                continue
            batch.append((key, decisions, sch.trace.as_json()))
        if not batch:
            break
        args = [(func_text, trace_json, decisions, target, space, timeout_s)
                for _, decisions, trace_json in batch]
        if executor is None:
            outcomes = [measure(*a) for a in args]
        else:
            outcomes = [fut.result() for fut in [executor.submit(measure, *a) for a in args]]
        new = []
        for (key, decisions, trace_json), (kind, value) in zip(batch, outcomes):
            measured += 1
            rec = {"workload": workload, "cand": key, "decisions": decisions,
                   "trace": trace_json, "seconds": value if kind == "ok" else None,
                   "failure": None if kind == "ok" else kind,
                   "error": None if kind == "ok" else str(value)[:2000]}
            if kind != "ok":
                failures[kind] += 1
            history.append((measured, rec["seconds"]))
            new.append(rec)
        records.extend(new)
        if db is not None:
            db.append(new)  # one fsync per batch
        if show is not None:
            show(TuneProgress(measured, trials, _best_seconds(records), dict(failures),
                              time.perf_counter() - t_start, pruned))
    res = _result(func, records, measured, failures)
    res.pruned = pruned
    res.history = history
    return res


def _best_seconds(records):
    return min((r["seconds"] for r in records if r.get("seconds") is not None),
               default=None)


def _result(func, records, measured, failures):
    res = TuneResult(trials=measured, failures=dict(failures))
    good = sorted((r for r in records if r.get("seconds") is not None),
                  key=lambda r: r["seconds"])
    for r in good:
        try:
            res.best_schedule = Trace.from_json(r["trace"]).apply(func)
        except ScheduleError:
            continue
        res.best_seconds = r["seconds"]
        break
    return res


def apply_best(database, func, target="llvm"):
    """The best recorded schedule of ``func`` on ``target`` replayed, or None.

    Example::

        >>> import os, tempfile, cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
        >>> apply_best(os.path.join(tempfile.mkdtemp(), "none.jsonl"), f) is None
        True
    """
    db = Database(database) if isinstance(database, (str, os.PathLike)) else database
    for r in db.top_k(func, target, k=5):
        try:
            return Trace.from_json(r["trace"]).apply(func)
        except ScheduleError:
            continue
    return None
