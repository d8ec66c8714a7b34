"""Exact bounds of an access over the points of a small loop nest, for the block
region check.

Relaxing an index over its loops one term at a time overshoots where a ``T.where``
cuts the nest through a compound of several loops (a fused loop split again, a
``loop_partition`` part split or fused after the partition):
``(f0 * 3 + f1 // 2) * 2 + f1 % 2`` under ``T.where(f0 * 3 + f1 // 2 < 1)`` stays below
2, which no interval bound sees.  Where the loops an index and a predicate name have
constant ranges and together few points, every point is evaluated instead: the bounds
are then exact over the points where the predicate's conjuncts on those loops hold.

Conjuncts naming anything else (an outer loop, a size) are left out, so the points are
a superset of those that run: the bounds are safe to prove an access *inside* a
region, never to prove it outside.

Example::

    >>> import cuvil_tir as T
    >>> f0, f1 = T.var("f0"), T.var("f1")
    >>> loops = {f0: T.Range(T.const(0), T.const(1)), f1: T.Range(T.const(0), T.const(6))}
    >>> idx = (f0 * 3 + f1 // 2) * 2 + f1 % 2
    >>> point_bounds([T.Range(idx, T.const(1))], f0 * 3 + f1 // 2 < 1, loops)
    [(0, 1)]
"""

from __future__ import annotations

import numpy as np

from .arith.index_eval import eval_np
from .expr import IntImm
from .op import conjuncts
from .visitor import used_vars

#: the most points one bound enumerates (a bigger nest keeps its interval bound)
POINTS = 1 << 14

#: the bounds of a range whose points never run (its predicate never holds)
NEVER = "never"


def _const(e):
    return e.value if isinstance(e, IntImm) else None


def point_bounds(ranges, cond, loops: dict, limit: int = POINTS) -> list:
    """Per ``Range`` of ``ranges``: its inclusive ``(lo, hi)`` as ints over the points
    of ``loops`` (``{Var: Range}``) where the conjuncts of ``cond`` (a condition, or a
    sequence of them all holding) that name only those loops hold; :data:`NEVER` where no point satisfies them; None where the
    range names a variable without a constant range, or the points exceed ``limit``.

    Example::

        >>> import cuvil_tir as T
        >>> j = T.var("j")
        >>> point_bounds([T.Range(j * 2, T.const(2))], j < 3,
        ...              {j: T.Range(T.const(0), T.const(4))})
        [(0, 5)]
    """
    known = {}
    for v, r in loops.items():
        lo, ext = _const(r.min), _const(r.extent)
        if lo is not None and ext is not None and ext > 0:
            known[id(v)] = (lo, ext)
    conds = []
    given = cond if isinstance(cond, (list, tuple)) else () if cond is None else (cond,)
    for c in (c for g in given for c in conjuncts(g)):
        ids = {id(v) for v in used_vars(c)}
        if ids <= set(known):
            conds.append((c, ids))
    return [_bounds(r, conds, known, limit) for r in ranges]


def _bounds(r, conds, known, limit):
    last = r.min + r.extent - 1 if _const(r.extent) != 1 else r.min
    ids = {id(v) for v in used_vars(r.min) + used_vars(last)}
    if not ids <= set(known):
        return None
    # the conjuncts on these loops, and the loops those conjuncts pull in
    grew = True
    while grew:
        grew = False
        for _, cids in conds:
            if cids & ids and not cids <= ids:
                ids |= cids
                grew = True
    mine = [c for c, cids in conds if cids <= ids and (cids & ids or not cids)]
    order = sorted(ids)
    if int(np.prod([known[i][1] for i in order], dtype=np.int64)) > limit:
        return None
    env = {}
    for k, i in enumerate(order):
        lo, ext = known[i]
        shape = [1] * len(order)
        shape[k] = ext
        env[i] = np.arange(lo, lo + ext, dtype=np.int64).reshape(shape)
    full = tuple(known[i][1] for i in order)
    mask = np.ones(full, dtype=bool)
    for c in mine:
        got = eval_np(c, env)
        if got is None:
            continue            # a conjunct we cannot evaluate: left out (a superset)
        mask &= np.broadcast_to(got, full).astype(bool)
    if not mask.any():
        return NEVER
    a, b = eval_np(r.min, env), eval_np(last, env)
    if a is None or b is None:
        return None
    a, b = np.broadcast_to(a, full)[mask], np.broadcast_to(b, full)[mask]
    return int(a.min()), int(b.max())


__all__ = ["point_bounds", "NEVER", "POINTS"]
