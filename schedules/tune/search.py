"""The search: evolution over trace decisions, ranked by an online cost model.

The population is the best correct candidates measured so far.  For every batch the
search breeds a pool of new candidates from it (a mutation redraws one or two sampling
decisions: a tile's perfect factorisation, a categorical choice such as a compute
location, an unroll or packing switch; a crossover takes each decision from one of two
parents whose traces have the same sampling instructions) plus fresh draws from the space,
replays each trace with its new decisions, prunes what cannot be good on the machine,
and scores the rest with the :class:`.cost_model.CostModel` on :mod:`.features` of the
lowered IR.  The batch takes the best-scored ones, except an ``epsilon`` share drawn at
random from the pool, so the model keeps seeing candidates it would not have picked.  A
trace that fails to replay is counted and skipped.

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
import random

from cuvil_tir.errors import CuvilError

from ..schedule import Schedule
from ..trace import Trace
from .cost_model import CostModel
from .features import features
from .space import run_with_decisions, prune

#: the share of each batch picked at random from the pool instead of by the model
EPSILON = 0.25
#: the share of the pool drawn fresh from the space (the rest is bred)
FRESH = 0.25
#: how many of the best measured candidates breed
POPULATION = 8
#: records of a resumed database replayed to train the model before the first batch
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
    their measurements; ``machine`` (a :class:`.space.Machine`) enables pruning;
    ``guided=False`` draws every candidate fresh from the space (random search).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
        >>> Search(f, lambda sch: None, "llvm").propose(1, seen=set())  # one candidate
        [...]
    """

    def __init__(self, func, space, target, machine=None, rng=None, model=None,
                 epsilon: float = EPSILON, pool_factor: int = 8, guided: bool = True):
        self.func, self.space, self.target, self.machine = func, space, target, machine
        self.rng = rng or random.Random(0)
        self.model = model or CostModel()
        self.epsilon, self.pool_factor, self.guided = epsilon, pool_factor, guided
        self.replay_failures = 0
        self.pruned = 0
        self._rows: dict = {}  # candidate key -> features
        self._measured: list = []  # (seconds, key, trace json)

    # -- learning ----------------------------------------------------------------------
    def observe(self, records) -> None:
        """Take measured records (dicts with ``cand``, ``trace``, ``seconds``) into the
        population and refit the model on every correct one with known features.

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
        if not self.guided:
            return
        for r in sorted(fresh, key=lambda r: r["seconds"])[:RESUMED_ROWS]:
            if r["cand"] not in self._rows:  # from a resumed database: replay to learn
                try:
                    self._features(r["cand"], Trace.from_json(r["trace"]).apply(self.func))
                except CuvilError:
                    self._rows[r["cand"]] = None
        keys = [(s, k) for s, k, _ in self._measured if self._rows.get(k) is not None]
        if keys:
            self.model.fit([self._rows[k] for _, k in keys], [s for s, _ in keys])

    def population(self) -> list:
        """The traces (JSON) of the best measured candidates, fastest first."""
        return [t for _, _, t in sorted(self._measured)[:POPULATION]]

    # -- proposing ---------------------------------------------------------------------
    def _fresh(self):
        sch = Schedule(self.func, seed=self.rng.randrange(2 ** 31))
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
                                  seed=self.rng.randrange(2 ** 31))

    def _one(self, parents):
        """A new schedule, or None when its trace failed to replay (counted)."""
        try:
            if not self.guided or not parents or self.rng.random() < FRESH:
                return self._fresh()
            return self._bred(parents)
        except CuvilError:
            self.replay_failures += 1
            return None

    def _features(self, key, sch):
        if key not in self._rows:
            try:
                self._rows[key] = features(sch.func, self.target)
            except CuvilError:
                self._rows[key] = None  # it will fail to build too; the measurement says
        return self._rows[key]

    def propose(self, n: int, seen: set, busy=None) -> list:
        """Up to ``n`` new ``(schedule, key)`` pairs whose keys are not in ``seen``
        (they are added to it); fewer when the space seems exhausted.  ``busy``, when
        given, says whether the measurements in flight are still running: once the
        pool holds twice ``n`` (the model still picks half), breeding stops when they
        are done, so the workers never wait on the parent (lowering a candidate for
        its features can take longer than measuring one on a small machine).

        Example::

            >>> import cuvil_tir as T
            >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
            >>> seen = set(); _ = Search(f, lambda sch: None, "llvm").propose(1, seen)
            >>> Search(f, lambda sch: None, "llvm").propose(1, seen)
            []
        """
        parents = self.population()
        want = n if not self.guided or not self.model.trained else \
            max(n * self.pool_factor, 8)
        floor = want if busy is None else min(want, 2 * n)
        pool, attempts = [], 0
        while len(pool) < want and attempts < 20 + 10 * want:
            if len(pool) >= floor and not busy():
                break  # the workers are free: measure what the pool has
            attempts += 1
            sch = self._one(parents)
            if sch is None:
                continue
            key = decisions_key(decisions_of(sch.trace))
            if key in seen:
                continue
            seen.add(key)
            if self.machine is not None and prune(sch.func, self.machine) is not None:
                self.pruned += 1  # cannot be good or legal here: never built
                continue
            pool.append((sch, key))
        if not pool:
            return []
        if self.guided:
            for sch, key in pool:
                self._features(key, sch)
        if not (self.guided and self.model.trained) or len(pool) <= n:
            picked = pool[:n]
        else:
            scores = self._scores([key for _, key in pool])
            rest = sorted(range(len(pool)), key=scores.__getitem__)
            picked = []
            for _ in range(n):
                j = self.rng.randrange(len(rest)) if self.rng.random() < self.epsilon else 0
                picked.append(pool[rest.pop(j)])
        chosen = {key for _, key in picked}
        for _, key in pool:
            if key not in chosen:
                seen.discard(key)  # bred but not measured: it may come up again
        return picked

    def _scores(self, keys) -> list:
        known = [k for k in keys if self._rows.get(k) is not None]
        pred = dict(zip(known, self.model.predict([self._rows[k] for k in known]).tolist())
                    ) if known else {}
        return [pred.get(k, float("inf")) for k in keys]
