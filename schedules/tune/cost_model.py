"""The cost model: gradient-boosted regression trees on candidate features.

Trained again after measured batches on every correct measurement of the task so far
and on the records of the nearest tasks already tuned (:mod:`.transfer`), a few
thousand rows of :mod:`.features` vectors at most.  Rows come in *groups* (one per
task); the target of a row blends its group's best time over its own (the normalised
throughput of MetaSchedule's model: 1 for the best candidate of a task, near 0 for a
very slow one) with its rank in the group scaled to [0, 1] (:func:`training_target`),
so one slow outlier weighs little and tasks of different sizes teach each other on
one scale.  A row may also carry its difference from its task's mean candidate
(``relative=True``, off by default): "a larger register tile than the task's average"
means the same in a GEMM of 512 and one of 64.  But the mean of a *tuned* task's
records is the mean of the candidates its search chose to measure (mostly good ones),
while a new task's is the mean of its random draws: the differences do not line up.
Trained as the tuner trains (the nearest tasks' records of a ``tune_search.py`` run,
guided ones included) and ranking the random draws of a task it never saw, the 5 fp32
GEMMs' median Spearman correlation was 0.46 with the differences and 0.58 without
(with the conv2d and the int8 GEMM: 0.46 and 0.55; trained on random candidates only,
as ``tune_search.py`` measures the model: 0.56 and 0.57).  On 8 tasks under 0.1 ms of
an earlier suite, trained on random candidates, they had raised the transferred ranking
from 0.00 to 0.43.  Trees of depth 5 with at least 3 rows a leaf (4 and 2 before): on
64 random candidates of each of the 8 workloads of ``tune_search.py`` timed twice (the
mean of the two readings as the label; one reading under a load of 10 ranks the other
at only 0.3-0.7), 0.58 -> 0.59 transferred and 0.59 -> 0.65 within (by one reading:
0.43 -> 0.46 and 0.38 -> 0.50).
Trees, not a linear model: the best tile size is usually in the middle of its range
(too small wastes loop overhead, too big spills registers or caches), a U shape that a
linear model on the features cannot represent.  Splits are found on histograms of
features binned once per fit (LightGBM's method), a fifth of a second for 400 rows.
Plain numpy; XGBoost (what MetaSchedule uses) would be a heavy dependency and does not
rank better on the few hundred rows a tuning run has.

Example::

    >>> m = CostModel()
    >>> rows = [[float(t)] for t in range(1, 9)]
    >>> m.fit(rows, [abs(t - 4) + 1.0 for t in range(1, 9)])   # best in the middle
    >>> p = m.predict([[1.0], [4.0], [8.0]])   # higher: faster
    >>> bool(p[1] > p[0] and p[1] > p[2]), m.trained
    (True, True)
"""

from __future__ import annotations

import math

import numpy as np

#: rows needed before the model is trusted to rank (fewer: the search picks at random)
MIN_ROWS = 4


#: a feature's values fall in at most this many bins (quantiles) when trees split
BINS = 32


def _edges(x, bins: int = BINS) -> list:
    """Per feature, the thresholds a split may take: midpoints between its distinct
    values, or between quantiles when it has more than ``bins`` values."""
    out = []
    for col in x.T:
        u = np.unique(col)
        if len(u) > bins:
            u = np.unique(np.quantile(col, np.linspace(0.0, 1.0, bins + 1)))
        out.append((u[:-1] + u[1:]) / 2.0)
    return out


def _binned(x, edges) -> np.ndarray:
    """Each value's bin: how many of its feature's thresholds lie below it."""
    return np.stack([np.searchsorted(e, x[:, f]) for f, e in enumerate(edges)], axis=1)


def _grow(xb, edges, r, idx, depth, min_leaf):
    """A regression tree over rows ``idx`` fitting residuals ``r``, as nested tuples
    (feature, threshold, left, right) or a leaf value.  Splits are found on histograms
    of the binned features (one ``bincount`` for every feature at once, as LightGBM
    does), so a fit costs milliseconds per tree, not a sort per node."""
    value = float(r[idx].mean())
    if depth == 0 or len(idx) < 2 * min_leaf:
        return value
    nfeat, width = xb.shape[1], BINS + 1
    flat = (xb[idx] + np.arange(nfeat) * width).ravel()
    sums = np.bincount(flat, np.repeat(r[idx], nfeat), nfeat * width).reshape(nfeat, width)
    counts = np.bincount(flat, None, nfeat * width).reshape(nfeat, width)
    left, k = np.cumsum(sums, 1)[:, :-1], np.cumsum(counts, 1)[:, :-1]
    total, n = sums.sum(), len(idx)
    ok = (k >= min_leaf) & (n - k >= min_leaf)
    if not ok.any():
        return value
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = np.where(ok, left ** 2 / k + (total - left) ** 2 / (n - k), -np.inf)
    f, b = np.unravel_index(int(np.argmax(gain)), gain.shape)
    if gain[f, b] <= total ** 2 / n + 1e-12:
        return value   # no split reduces the error
    mask = xb[idx, f] <= b
    return (int(f), float(edges[f][b]), _grow(xb, edges, r, idx[mask], depth - 1, min_leaf),
            _grow(xb, edges, r, idx[~mask], depth - 1, min_leaf))


def _eval(tree, x):
    if not isinstance(tree, tuple):
        return np.full(len(x), tree)
    f, t, left, right = tree
    out = np.empty(len(x))
    mask = x[:, f] <= t
    out[mask] = _eval(left, x[mask])
    out[~mask] = _eval(right, x[~mask])
    return out


def _relative(x, center) -> np.ndarray:
    """Rows with their difference from their task's ``center`` appended: what sets a
    candidate apart from the others of its task, which transfers between tasks of
    different sizes where the absolute counts do not."""
    return np.hstack([x, x - center])


class CostModel:
    """Gradient-boosted trees: ``rounds`` trees of ``depth``, shrunk by ``rate``, on the
    features and (``relative``) their difference from their task's mean candidate (off
    by default: the module doc says why).

    Example::

        >>> CostModel().trained
        False
    """

    def __init__(self, rounds: int = 60, depth: int = 5, rate: float = 0.2,
                 min_leaf: int = 3, relative: bool = False):
        self.rounds, self.depth, self.rate, self.min_leaf = rounds, depth, rate, min_leaf
        self.relative = relative
        self.trained = False
        self._trees: list = []
        self._base = 0.0

    def fit(self, rows, seconds, groups=None, centers=None) -> None:
        """Fit to feature ``rows`` and measured ``seconds`` (positive), rows grouped by
        task (``groups``: a label per row; None: one task).  ``centers`` maps a group
        to its task's mean feature vector (default: the mean of its rows; a search
        gives the mean of its random draws, which its measured rows are not).

        Example::

            >>> m = CostModel(); m.fit([[0.0]], [1.0]); m.trained
            False
        """
        x = np.asarray(rows, dtype=float)
        y = np.asarray(seconds, dtype=float)
        if len(y) < MIN_ROWS:
            self.trained = False
            return
        if self.relative:
            labels = [0] * len(y) if groups is None else list(groups)
            given = centers or {}
            mean = {g: given.get(g) for g in dict.fromkeys(labels)}
            for g, c in mean.items():
                if c is None:
                    mean[g] = x[[lb == g for lb in labels]].mean(axis=0)
            x = _relative(x, np.array([mean[g] for g in labels]))
        target = training_target(y, groups)
        edges = _edges(x)
        xb = _binned(x, edges)
        self._base = float(target.mean())
        pred = np.full(len(y), self._base)
        self._trees = []
        every = np.arange(len(y))
        for _ in range(self.rounds):
            tree = _grow(xb, edges, target - pred, every, self.depth, self.min_leaf)
            self._trees.append(tree)
            pred += self.rate * _eval(tree, x)
        self.trained = True

    def predict(self, rows, center=None) -> np.ndarray:
        """Predicted normalised throughput of each row (higher is faster); zeros
        untrained.  ``center``: the task's mean feature vector (default: the rows').

        Example::

            >>> CostModel().predict([[1.0], [2.0]]).tolist()
            [0.0, 0.0]
        """
        x = np.asarray(rows, dtype=float)
        if not self.trained or not len(x):
            return np.zeros(len(x))
        if self.relative:
            x = _relative(x, x.mean(axis=0) if center is None else np.asarray(center))
        out = np.full(len(x), self._base)
        for tree in self._trees:
            out += self.rate * _eval(tree, x)
        return out


def rank_within(seconds, groups=None) -> np.ndarray:
    """Each time's rank in its group scaled to [0, 1] (1: the fastest).

    Example::

        >>> rank_within([2.0, 1.0, 4.0], ["a", "a", "a"]).tolist()
        [0.5, 1.0, 0.0]
    """
    y = np.asarray(seconds, dtype=float)
    labels = np.array([0] * len(y) if groups is None else list(groups), dtype=object)
    out = np.empty(len(y))
    for g in dict.fromkeys(labels.tolist()):
        idx = np.flatnonzero(labels == g)
        order = np.argsort(np.argsort(-y[idx], kind="stable"), kind="stable")
        out[idx] = order / max(1, len(idx) - 1)
    return out


def training_target(seconds, groups=None) -> np.ndarray:
    """What the trees fit: the mean of the normalised throughput (which separates the
    fast candidates) and the rank within the group (which orders the slow ones too,
    and is what a ranking is judged by); this blend ranked held-out candidates of 8
    tasks at a median Spearman 0.73 against 0.66 for throughput alone.

    Example::

        >>> training_target([1.0, 2.0]).tolist()
        [1.0, 0.25]
    """
    return 0.5 * normalized_throughput(seconds, groups) + 0.5 * rank_within(seconds, groups)


def normalized_throughput(seconds, groups=None) -> np.ndarray:
    """Each time's group best over itself (1: the fastest of its group).

    Example::

        >>> normalized_throughput([2.0, 1.0, 4.0, 8.0], ["a", "a", "b", "b"]).tolist()
        [0.5, 1.0, 1.0, 0.5]
    """
    y = np.asarray(seconds, dtype=float)
    labels = [0] * len(y) if groups is None else list(groups)
    best: dict = {}
    for g, t in zip(labels, y):
        best[g] = min(best.get(g, t), t)
    return np.array([best[g] / t for g, t in zip(labels, y)])


def rank_correlation(a, b) -> float:
    """Spearman's rank correlation of two sequences (how well a model ranks).

    Example::

        >>> rank_correlation([1, 2, 3], [10, 20, 30]), rank_correlation([1, 2, 3], [3, 2, 1])
        (1.0, -1.0)
    """
    ra = np.argsort(np.argsort(np.asarray(a, dtype=float)))
    rb = np.argsort(np.argsort(np.asarray(b, dtype=float)))
    if len(ra) < 2:
        return 0.0
    c = np.corrcoef(ra, rb)[0, 1]
    return 0.0 if math.isnan(c) else float(c)
