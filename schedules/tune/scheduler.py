"""Tuning a whole network: a task list (:mod:`.networks`) tuned with one budget, the
time given round by round to the task whose weighted latency is expected to fall most
(Ansor's gradient task scheduler), resumable after ``kill -9``, one report.

The objective is the network's latency, ``sum(weight_i * best_i)``.  After a warm-up
round of every task, each round goes to the task with the most negative estimated
gradient ``weight_i * (ALPHA * backward_i + (1 - ALPHA) * forward_i)``: ``backward``
the change of its best time over its last round per trial, ``forward`` the optimistic
``-best_i / trials_i`` (a best time that keeps falling like ``1/t``).  A task whose
space is exhausted, or that fails outright (its message kept for the report), takes no
more rounds.  Each task keeps one :class:`.tuner.Session` (search, model, pool) for the
whole run; all share the executor and the database, so later tasks start their cost
model from the records of earlier ones (:mod:`.transfer`).

Every measurement is in the database as soon as its batch ends, so a run killed at any
point is resumed by running the same command again: each task's trials and best-so-far
curve are read back from the records and nothing is measured twice.

Example::

    >>> estimate_gradient(2.0, [(8, 1e-3), (16, 5e-4)], 8)   # weight 2, halved last round
    -7.5e-05
"""

from __future__ import annotations

import time

from .database import Database, workload_key
from .errors import TuneError
from .networks import load_tasks
from .report import format_seconds
from .tuner import Session

#: the weight of the backward (observed) part of a task's gradient (Ansor's alpha)
ALPHA = 0.2


def estimate_gradient(weight, curve, round_trials) -> float:
    """The estimated change of ``weight * best`` per trial for one more round, from the
    task's ``curve`` of ``(trials, best so far)`` (module doc); ``-inf`` before its
    first measurement.

    Example::

        >>> estimate_gradient(1.0, [], 8)
        -inf
    """
    if not curve or curve[-1][1] is None:
        return float("-inf")
    t, best = curve[-1]
    before = next((b for n, b in reversed(curve) if n <= t - round_trials and b), best)
    backward = (best - before) / max(1, round_trials)
    forward = -best / max(1, t)
    return round(weight * (ALPHA * backward + (1 - ALPHA) * forward), 12)


def _curve(records) -> list:
    """``(trial, best so far)`` of a task's records in file order."""
    out, best = [], None
    for n, r in enumerate([r for r in records if not r.get("remeasured")], 1):
        s = r.get("seconds")
        if s is not None and (best is None or s < best):
            best = s
        out.append((n, best))
    return out


class TaskScheduler:
    """Tunes ``tasks`` (a task list or its name, :func:`.networks.load_tasks`) on
    ``target`` into ``database`` through ``executor`` (module doc); ``round_trials``
    candidates per round.

    Example::

        >>> import os, tempfile
        >>> ts = TaskScheduler({"tasks": [{"name": "s", "op": "softmax", "weight": 1,
        ...                    "args": {"rows": 4, "cols": 16}}]}, "llvm",
        ...                    os.path.join(tempfile.mkdtemp(), "n.jsonl"), None)
        >>> ts.trials(), ts.latency()
        (0, None)
    """

    def __init__(self, tasks, target, database, executor, round_trials: int = 8,
                 seed: int = 0, timeout_s: float = 10.0, min_repeat_ms: float = 50.0):
        self.tasks = load_tasks(tasks) if not isinstance(tasks, list) else tasks
        self.target, self.executor, self.seed = target, executor, seed
        self.db = Database(database) if not isinstance(database, Database) else database
        self.round_trials, self.timeout_s = round_trials, timeout_s
        self.min_repeat_ms = min_repeat_ms
        self.keys = [workload_key(t.func, target) for t in self.tasks]
        self.sessions: dict = {}
        self.done: dict = {}     # task index -> why it takes no more rounds
        self.rounds = 0

    def curves(self) -> list:
        """Per task, ``(trial, best so far)`` read from the database."""
        self.db.reload()
        return [_curve(self.db.records(k)) for k in self.keys]

    def trials(self) -> int:
        """Measured candidates of all tasks in the database."""
        return sum(len(c) for c in self.curves())

    def latency(self, curves=None):
        """The network's estimated latency, ``sum(weight * best)``; None while a task
        has no measurement."""
        curves = self.curves() if curves is None else curves
        bests = [c[-1][1] if c else None for c in curves]
        if any(b is None for b in bests):
            return None
        return sum(t.weight * b for t, b in zip(self.tasks, bests))

    def _pick(self, curves):
        live = [i for i in range(len(self.tasks)) if i not in self.done]
        if not live:
            return None
        fresh = [i for i in live if not curves[i]]
        if fresh:
            return fresh[0]   # the warm-up: every task once, in list order
        return min(live, key=lambda i: estimate_gradient(
            self.tasks[i].weight, curves[i], self.round_trials))

    def _session(self, i):
        if i not in self.sessions:
            self.sessions[i] = Session(self.tasks[i].func, None, self.target, self.db,
                                       self.executor, timeout_s=self.timeout_s,
                                       min_repeat_ms=self.min_repeat_ms,
                                       seed=self.seed + i)
        return self.sessions[i]

    def run(self, total_trials: int, max_seconds=None, out=None) -> None:
        """Give rounds until the database holds ``total_trials`` measurements of the
        tasks, or ``max_seconds`` pass, or every task is done; prints a line per round
        to ``out`` when given."""
        t0 = time.perf_counter()
        while True:
            curves = self.curves()
            have = sum(len(c) for c in curves)
            left = None if max_seconds is None else max_seconds - (time.perf_counter() - t0)
            if have >= total_trials or (left is not None and left <= 0):
                return
            i = self._pick(curves)
            if i is None:
                return
            n = min(self.round_trials, total_trials - have)
            try:
                got = self._session(i).run(n, max_seconds=left)
            except TuneError as e:
                self.done[i] = str(e).splitlines()[0][:300]
                got = 0
            if got == 0 and i not in self.done:
                self.done[i] = "its space is exhausted"
            self.rounds += 1
            if out is not None:
                lat = self.latency()
                print(f"round {self.rounds}: {self.tasks[i].name} +{got} trials; "
                      f"{have + got}/{total_trials} in all; network estimate "
                      f"{format_seconds(lat)}; {time.perf_counter() - t0:.0f} s",
                      file=out, flush=True)

    def report(self) -> str:
        """One table: each task's weight, trials, best time and share of the network's
        estimated latency, then the total (and why a task stopped early)."""
        curves = self.curves()
        rows = []
        for t, c in zip(self.tasks, curves):
            best = c[-1][1] if c else None
            rows.append((t, len(c), best, None if best is None else t.weight * best))
        total = sum(w for _, _, _, w in rows if w is not None)
        lines = [f"{'task':18s} {'op':12s} {'weight':>6s} {'trials':>6s} {'best':>10s} "
                 f"{'x weight':>10s} {'share':>6s}"]
        for t, n, best, w in rows:
            share = f"{w / total:6.1%}" if w and total else "     -"
            lines.append(f"{t.name[:18]:18s} {t.op:12s} {t.weight:>6g} {n:>6d} "
                         f"{format_seconds(best):>10s} {format_seconds(w):>10s} {share}")
        lat = self.latency(curves)
        lines.append(f"network estimate: {format_seconds(lat)} (sum of weight x best) "
                     f"over {sum(n for _, n, _, _ in rows)} trials")
        for i, why in sorted(self.done.items()):
            lines.append(f"  {self.tasks[i].name}: stopped: {why}")
        return "\n".join(lines)


__all__ = ["ALPHA", "TaskScheduler", "estimate_gradient"]
