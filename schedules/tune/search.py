"""The search: evolution over trace decisions, the cost model choosing what to measure
(MetaSchedule's evolutionary search with epsilon-greedy picking, sized for a tuner whose
schedule replay costs a tenth of a second rather than microseconds).

The search keeps a *pool* of unmeasured candidates with their :mod:`.features` (read
from the scheduled IR in a millisecond).  The first batch the model picks is the best
of :data:`INITIAL_POOL` fresh draws from the space and the nearest tasks' best
candidates (seeds, :mod:`.transfer`), all ranked alike.  For every batch it grows the pool:
mostly fresh draws (:data:`FRESH`), and children bred from the fastest *measured*
candidates: a mutation redraws one or two sampling decisions (a tile's perfect
factorisation, a categorical choice such as a register tile or a compute location); a
crossover takes each decision from one of two parents whose traces have the same
sampling instructions.  The space runs again with the child's decisions,
:func:`.space.prune` refuses what cannot be good on the machine, and the rest join the
pool.  The pool grows by at least twice the batch and goes on growing while the
measurements in flight run, so the workers never wait for the search.  The
:class:`.cost_model.CostModel` (trained on every measurement of the task and on the
nearest tasks already in the database, :mod:`.transfer`) scores the whole pool; the
batch is its best, except an ``epsilon`` share drawn at random, so the model keeps
seeing candidates it would not have picked.  Without a model (nothing measured and no
task like it in the database) the analytic prior (:mod:`.prior`: lanes, cores,
register tile and caches against what the target declares) ranks the pool instead.

Why fresh draws, and parents that were measured (MetaSchedule evolves a population
against the model, children of the best *predicted* too): a model fitted to a few
hundred noisy readings ranks unbiased draws of the space well (Spearman 0.6-0.7 on
held-out random candidates), but a population evolved towards its best predictions
gathers where it errs.  On ``benchmarks/tune_search.py`` (8 workloads x 3 seeds, 32
trials) a pool 70% bred, from predicted parents too, reached 95% of the best-known time
in a median of 17 trials; ranking 64 fixed random draws by the same model reached it
at the 4th place (random order: 16th).  See ``docs/autotuning.md`` for this pool's
figures.
A trace that fails to replay is counted and skipped.

Example::

    >>> import random, cuvil_tir as T
    >>> A = T.placeholder((16,), name="A")
    >>> f = T.create_prim_func([A, T.compute((16,), lambda i: A[i] + 1.0, name="B")])
    >>> def space(sch):
    ...     i, = sch.get_loops(sch.get_block("B"))
    ...     sch.split(i, sch.sample_perfect_tile(i, 2))
    >>> s = Search(f, space, "llvm", rng=random.Random(0))
    >>> len(s.propose(2, seen=set()))
    2
"""

from __future__ import annotations

import json
import math
import random

import numpy as np

from cuvil_tir.errors import CuvilError

from ..schedule import Schedule
from ..step_memo import StepMemo
from ..trace import Trace
from .cost_model import CostModel
from .features import features
from .decisions import run_with_decisions
from .space import machine_of, prune
from .transfer import FEATURES_VERSION

#: the share of each batch picked at random from the pool instead of by the model
EPSILON = 0.05
#: the share of new pool members drawn fresh from the space (the rest is bred)
FRESH = 0.75
#: how many of the best measured candidates breed
POPULATION = 8
#: whether the best predicted (unmeasured) candidates of the pool breed too
BREED_PREDICTED = False
#: unmeasured candidates kept in the pool (the best predicted)
POOL = 256
#: the pool a model starts choosing from (fresh draws, before anything is bred)
INITIAL_POOL = 128
#: whether the first batch measures the nearest tasks' best (seeds) before the model
#: ranks them with the pool.  Off: on the fp32 GEMMs of ``benchmarks/tune_search.py``
#: the first two seeds, measured blindly, were 1.2-1.8x the best-known time and took
#: half of the first 4 trials; ranked with the first pool, a seed is measured only
#: where the model predicts it best (with no model the seeds still go first)
SEEDS_FIRST = False
#: records of a resumed database without features replayed to learn from
RESUMED_ROWS = 64


def decisions_of(trace) -> list:
    """``[[instruction index, decision], ...]`` of a trace's sampling instructions.

    Example::

        >>> decisions_of(Trace())
        []
    """
    return [[k, d] for k, d in sorted(trace.decisions.items())]


def decisions_key(decisions) -> str:
    """The candidate key of a list of ``[instruction index, decision]`` pairs.

    Example::

        >>> decisions_key([[2, [4, 2]], [4, 1]])
        '[[2,[4,2]],[4,1]]'
    """
    return json.dumps(decisions, separators=(",", ":"))


def mutate(trace, rng):
    """``trace`` with one (sometimes two) sampling decisions redrawn by their samplers'
    ``mutate`` (:meth:`Trace.mutate`), or None when nothing could change.

    Example::

        >>> from schedules.trace import Instruction
        >>> t = Trace([Instruction("sample_categorical", [[1, 2], [1, 1]], {}, [0], 0)])
        >>> mutate(t, random.Random(0)).decisions
        {0: 1}
    """
    for _ in range(8):  # a redraw may land on the same decision: draw again
        new = trace.mutate(rng)
        if new is not None and len(new.decisions) > 1 and rng.random() < 0.3:
            new = new.mutate(rng)
        if new is None:
            return None
        if new.decisions != trace.decisions:
            return new
    return None


def _same_call(x, y) -> bool:
    """Whether two sampling instructions draw from the same options (handles aside)."""
    first = x.name != "sample_perfect_tile"  # a tile's first input is its loop handle
    return x.name == y.name and x.attrs == y.attrs and \
        x.inputs[0 if first else 1:] == y.inputs[0 if first else 1:]


def crossover(a, b, rng):
    """``a`` with each decision taken from ``a`` or from ``b`` at random, matched by
    position (the n-th sampling call of each), or None when their sampling calls differ.

    Example::

        >>> from schedules.trace import Instruction
        >>> t = lambda d: Trace([Instruction("sample_categorical", [[1, 2], [1, 1]], {}, [0], d)])
        >>> crossover(t(0), t(1), random.Random(1)).decisions in ({0: 0}, {0: 1})
        True
    """
    da, db = a.decisions, b.decisions
    ka, kb = sorted(da), sorted(db)
    if len(ka) != len(kb) or not all(_same_call(a[i], b[j]) for i, j in zip(ka, kb)):
        return None
    return a.with_decisions({i: (db[j] if rng.random() < 0.5 else da[i])
                             for i, j in zip(ka, kb)})


class Search:
    """Proposes batches of unmeasured candidates (see the module doc) and learns from
    their measurements; ``machine`` (a :class:`~cuvil_tir.target.Machine`, default the
    target's) sizes the features and the pruning; ``prior`` is ``(rows, seconds,
    groups)`` of other tasks (:func:`.transfer.nearest_rows`) the model starts from;
    ``seeds`` are other tasks' best decisions (:func:`.transfer.nearest_decisions`):
    they join the first pool, where the model ranks them with the fresh draws (with
    no model, or :data:`SEEDS_FIRST`, the first batch measures them blindly);
    ``guided=False`` draws every candidate fresh from the space (random search);
    ``pruner(func)`` says why a scheduled candidate cannot be good (None: keep it;
    default: :func:`.space.prune` on the machine).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
        >>> Search(f, lambda sch: None, "llvm").propose(1, seen=set())  # one candidate
        [...]
    """

    def __init__(self, func, space, target, machine=None, rng=None, model=None,
                 epsilon: float = EPSILON, guided: bool = True, prior=None, pruner=None,
                 seeds=()):
        self.func, self.space, self.target = func, space, target
        self.machine = machine if machine is not None else machine_of(target)
        self.pruner = pruner if pruner is not None else \
            (lambda fn, m=self.machine: prune(fn, m))
        self.rng = rng or random.Random(0)
        self.model = model or CostModel()
        self.epsilon, self.guided = epsilon, guided
        self.prior = prior if prior is not None and prior[0] else ([], [], [])
        self.replay_failures = 0
        self.replay_error = None   # the first replay failure's message
        self.pruned = 0
        self._feat: dict = {}      # candidate key -> feature vector (None: none)
        self._pool: dict = {}      # candidate key -> unmeasured Schedule
        self._measured: list = []  # (seconds, key, trace json)
        self._fitted = -1          # rows the model was last fitted on
        self._drawn: list = []     # features of fresh draws: the task's centre
        self._seeds = [list(d) for d in seeds] if guided else []  # measured first
        self._blind = False        # whether a batch of seeds went without the model
        #: candidate key -> where it came from: "fresh" (a draw of the space), "bred"
        #: (a child of measured candidates) or "seed" (another task's best)
        self.origin: dict = {}
        self.memo = StepMemo()     # steps the candidates share (a child's prefix)
        if guided and self.prior[0]:
            self._fit()

    # -- learning ----------------------------------------------------------------------
    def features_of(self, key):
        """The feature vector of a candidate this search proposed or learnt (or None).

        Example::

            >>> import cuvil_tir as T
            >>> Search(T.create_prim_func([T.placeholder((2,), name="A")]), None,
            ...        "llvm").features_of("[]") is None
            True
        """
        return self._feat.get(key)

    def observe(self, records) -> None:
        """Take measured records (dicts with ``cand``, ``trace``, ``seconds``, maybe
        ``feat``) into the population and refit the model.

        Example::

            >>> import cuvil_tir as T
            >>> s = Search(T.create_prim_func([T.placeholder((2,), name="A")]), None, "llvm")
            >>> s.observe([{"cand": "[]", "trace": Trace().as_json(), "seconds": 1e-6}])
            >>> len(s.population())
            1
        """
        fresh = [r for r in records if r.get("seconds") is not None
                 and not r.get("remeasured")]
        self._measured += [(r["seconds"], r["cand"], r["trace"]) for r in fresh]
        for r in fresh:
            self._pool.pop(r["cand"], None)
            if r.get("feat") and r.get("feat_v") == FEATURES_VERSION:
                self._feat.setdefault(r["cand"], list(r["feat"]))
        if not self.guided:
            return
        missing = [r for r in sorted(fresh, key=lambda r: r["seconds"])
                   if r["cand"] not in self._feat][:RESUMED_ROWS]
        for r in missing:  # from an older database: replay to learn
            try:
                self._feat[r["cand"]] = features(Trace.from_json(r["trace"]).apply(
                    self.func), self.machine)
            except CuvilError:
                self._feat[r["cand"]] = None
        self._fit()

    def _fit(self) -> None:
        own = [(self._feat[k], s) for s, k, _ in self._measured
               if self._feat.get(k) is not None]
        rows, secs, groups = self.prior
        if len(own) + len(rows) == self._fitted:
            return
        self._fitted = len(own) + len(rows)
        self.model.fit(list(rows) + [f for f, _ in own], list(secs) + [s for _, s in own],
                       list(groups) + ["this task"] * len(own), {"this task": self._center()})

    def _center(self):
        """The task's mean candidate: the mean features of its fresh draws (an unbiased
        sample of the space, as the other tasks' centres are), or None before any."""
        return np.mean(self._drawn, axis=0) if self._drawn else None

    def population(self) -> list:
        """The traces (JSON) of the best measured candidates, fastest first."""
        return [t for _, _, t in sorted(self._measured)[:POPULATION]]

    # -- proposing ---------------------------------------------------------------------
    def _fresh(self):
        sch = Schedule(self.func, seed=self.rng.randrange(2 ** 31), memo=self.memo)
        self.space(sch)
        return sch

    def _bred(self, parents):
        a = Trace.from_json(self.rng.choice(parents))
        child = None
        if len(parents) > 1 and self.rng.random() < 0.3:
            child = crossover(a, Trace.from_json(self.rng.choice(parents)), self.rng)
            if child is not None and child.decisions == a.decisions:
                child = mutate(child, self.rng)
        if child is None:
            child = mutate(a, self.rng)
        if child is None:
            return None
        # the space runs again with the new decisions (not the old trace replayed), so
        # a decision that steers the space's own code (a compute location, packing or
        # not) changes the candidate as it would on a fresh draw
        return run_with_decisions(self.space, self.func, [d for _, d in decisions_of(child)],
                                  seed=self.rng.randrange(2 ** 31), memo=self.memo)

    def _one(self, parents):
        """``(schedule, whether a fresh draw)``; the schedule is None when its trace
        failed to replay (counted)."""
        fresh = not parents or self.rng.random() < FRESH
        try:
            return (self._fresh() if fresh else self._bred(parents)), fresh
        except Exception as e:  # noqa: BLE001 - a user's space may raise anything
            self._failed(e)
            return None, fresh

    def _failed(self, e) -> None:
        self.replay_failures += 1
        if self.replay_error is None:
            self.replay_error = f"{type(e).__name__}: {e}"[:300]

    def _add(self, sch, seen, origin="bred") -> str | None:
        """Key ``sch`` and compute its features; None when it is known or pruned.
        ``origin``: "fresh" (a draw of the space), "bred" or "seed" (:attr:`origin`)."""
        key = decisions_key(decisions_of(sch.trace))
        if key in seen or key in self._pool:
            return None
        if self.pruner(sch.func) is not None:
            seen.add(key)
            self.pruned += 1  # cannot be good or legal here: never built
            return None
        try:
            self._feat[key] = features(sch.func, self.machine)
        except CuvilError:
            self._feat[key] = None  # it will fail to build too; the measurement says
        if origin == "fresh" and self._feat[key] is not None:   # the task's centre
            self._drawn.append(self._feat[key])
        self.origin[key] = origin
        return key

    def propose(self, n: int, seen: set, busy=None) -> list:
        """Up to ``n`` new ``(schedule, key)`` pairs whose keys are not in ``seen``
        (they are added to it); fewer when the space seems exhausted.  ``busy``, when
        given, says whether the measurements in flight are still running: the pool
        goes on growing (up to :data:`POOL`) while they are.

        Example::

            >>> import cuvil_tir as T
            >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
            >>> seen = set(); _ = Search(f, lambda sch: None, "llvm").propose(1, seen)
            >>> Search(f, lambda sch: None, "llvm").propose(1, seen)
            []
        """
        if n <= 0:
            return []
        if not (self.guided and self.model.trained) or (SEEDS_FIRST and not self._blind):
            picked = self._seeded(n, seen)   # the nearest tasks' best go first
            if picked:
                self._blind = True
                return picked
        if not self.guided:
            return self._random(n, seen)
        self._pool_seeds(seen)   # the other seeds compete in the pool
        parents = self.population()
        if BREED_PREDICTED:
            scores = self._scores(list(self._pool))
            best_pool = sorted(scores, key=scores.get, reverse=True)[:POPULATION]
            parents += [self._pool[k].trace.as_json() for k in best_pool]
        least = max(2 * n, 8) + max(0, INITIAL_POOL - len(self._pool))
        most = least + 6 * n
        added = attempts = 0
        while added < most and attempts < 4 * most:
            if added >= least and (busy is None or not busy()):
                break  # the workers are free (or wait for nothing): measure now
            attempts += 1
            sch, fresh = self._one(parents)
            key = None if sch is None else self._add(sch, seen,
                                                     "fresh" if fresh else "bred")
            if key is not None:
                self._pool[key] = sch
                added += 1
        if not self._pool:
            return []
        scores = self._scores(list(self._pool))
        order = sorted(self._pool, key=scores.get, reverse=True)
        picked = []
        for _ in range(min(n, len(order))):
            j = self.rng.randrange(len(order)) if self.rng.random() < self.epsilon else 0
            key = order.pop(j)
            picked.append((self._pool.pop(key), key))
            seen.add(key)
        for key in order[POOL:]:  # the least promising leave the pool
            del self._pool[key]
        return picked

    def _seeded(self, n, seen) -> list:
        """Up to ``n`` of the seeds (other tasks' best decisions, run through this
        task's space), in their order; those that fail, are pruned or known are
        skipped."""
        def draw():
            return run_with_decisions(self.space, self.func, self._seeds.pop(0),
                                      seed=self.rng.randrange(2 ** 31), memo=self.memo)
        return self._draws(draw, n, seen, len(self._seeds), "seed")

    def _pool_seeds(self, seen) -> None:
        """The seeds not measured yet join the pool, where the model ranks them with
        the rest: a seed measured blindly costs a trial it may not earn."""
        while self._seeds:
            for sch, key in self._seeded(1, seen):
                seen.discard(key)
                self._pool[key] = sch

    def _random(self, n, seen) -> list:
        """``n`` fresh draws (random search)."""
        return self._draws(self._fresh, n, seen, 20 + 10 * n, "fresh")

    def _draws(self, draw, n, seen, attempts, origin) -> list:
        """Up to ``n`` new candidates from at most ``attempts`` calls of ``draw``; a
        draw that raises is counted as a failure, one pruned or known is skipped."""
        picked = []
        for _ in range(attempts):
            if len(picked) == n:
                break
            try:
                sch = draw()
            except Exception as e:  # noqa: BLE001 - a user's space may raise anything
                self._failed(e)
                continue
            key = self._add(sch, seen, origin)
            if key is not None:
                seen.add(key)
                picked.append((sch, key))
        return picked

    def _scores(self, keys) -> dict:
        """Predicted normalised throughput per key (higher: faster), or before the
        model is trained the analytic prior (:mod:`.prior`, the features' last); the
        least of all for a candidate without features."""
        known = [k for k in keys if self._feat.get(k) is not None]
        if not known:
            return {k: -math.inf for k in keys}
        rows = [self._feat[k] for k in known]
        got = self.model.predict(rows, self._center()).tolist() if self.model.trained \
            else [r[-1] for r in rows]
        pred = dict(zip(known, got))
        return {k: pred.get(k, -math.inf) for k in keys}
