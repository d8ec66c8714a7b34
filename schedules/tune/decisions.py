"""Running a space with given decisions: the candidate a trace's decisions (mutated,
crossed over, or another task's) make when the space itself runs again, so a rule that
depends on a sampled value follows the new decision.  A decision that no longer fits
(another extent: an earlier decision changed it, or it was made for another task) is
replaced by the nearest one that does (:func:`_nearest_tile`), else by a fresh draw;
a categorical decision given as ``{"value": option}`` (another task's, whose options
may differ) takes the option nearest that value (:func:`nearest_option`).

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((8,), name="A")
    >>> f = T.create_prim_func([A, T.compute((8,), lambda i: A[i] + 1.0, name="B")])
    >>> def space(sch):
    ...     i, = sch.get_loops(sch.get_block("B"))
    ...     sch.split(i, sch.sample_perfect_tile(i, 2))
    >>> run_with_decisions(space, f, [[4, 4]]).trace.decisions  # made for 16: nearest
    {2: [2, 4]}
"""

from __future__ import annotations

import math

from cuvil_tir.analysis import tree
from cuvil_tir.errors import CuvilError

from ..errors import ScheduleArgumentError
from ..sampling import perfect_tiles
from ..schedule import Schedule


def run_with_decisions(space, func, decisions, seed=None, memo=None):
    """The Schedule that ``space`` makes of ``func`` when its sampling calls take
    ``decisions`` (a list in call order, or ``{instruction index: decision}`` as in
    ``trace.decisions``).  Unlike replaying a recorded trace with new decisions, the
    space itself runs again, so a rule that depends on a sampled value (a layout
    sized by a tile, a branch) follows the new decision.  ``memo``: a
    :class:`~schedules.step_memo.StepMemo` the steps go through (a search's).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((8,), name="A")
        >>> f = T.create_prim_func([A, T.compute((8,), lambda i: A[i] + 1.0, name="B")])
        >>> def space(sch):
        ...     i, = sch.get_loops(sch.get_block("B"))
        ...     sch.split(i, sch.sample_perfect_tile(i, 2))
        >>> run_with_decisions(space, f, [[2, 4]]).trace.decisions
        {2: [2, 4]}
    """
    queue = [d for _, d in sorted(decisions.items())] if isinstance(decisions, dict) \
        else list(decisions)

    class _Forced(Schedule):
        def sample_perfect_tile(self, loop, n, max_innermost_factor=16, decision=None):
            want = _next(queue, decision, list)
            sample = super().sample_perfect_tile
            try:
                return sample(loop, n, max_innermost_factor, decision=want)
            except ScheduleArgumentError:
                pass
            near = _nearest_tile(self, loop, n, max_innermost_factor, want)
            return _fitting(sample, loop, n, max_innermost_factor, decision=near)

        def sample_categorical(self, candidates, probs, decision=None):
            want = queue.pop(0) if queue else decision
            if isinstance(want, dict):   # a value (another task's): its nearest option
                want = nearest_option(candidates, want.get("value"))
            return _fitting(super().sample_categorical, candidates, probs,
                            decision=want if isinstance(want, int) and
                            not isinstance(want, bool) else None)

    sch = _Forced(func, seed=seed, memo=memo)
    space(sch)
    return sch


def _magnitudes(value):
    """The positive numbers a categorical option is made of (``8``: [8]; a tile label
    ``"4x32"``: [4, 32]), or None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return [float(value)]
    if isinstance(value, str):
        try:
            parts = [float(x) for x in value.split("x")]
        except ValueError:
            return None
        return parts if all(x > 0 for x in parts) else None
    return None


def nearest_option(candidates, value):
    """The index of ``value`` among a categorical's ``candidates``, else of the option
    nearest it (numbers and tile labels such as ``"4x32"``: on a log scale), else None.
    A decision of another task is carried by its value: the same index names another
    option where the options differ (a parallel count of 16 is index 3 of ``[2, 4, 8,
    16]`` but does not exist in ``[2, 3, 4, 6, 8, 12, 24]``, where 12 is nearest).

    Example::

        >>> nearest_option([2, 3, 4, 6, 8, 12, 24], 16), nearest_option(["a", "b"], "b")
        (5, 1)
        >>> nearest_option(["1x16", "4x32"], "5x32"), nearest_option(["a"], "z") is None
        (1, True)
    """
    for k, c in enumerate(candidates):
        if c == value:
            return k
    want = _magnitudes(value)
    if want is None:
        return None
    best, gap = None, math.inf
    for k, c in enumerate(candidates):
        got = _magnitudes(c)
        if got is not None and len(got) == len(want):
            d = sum(abs(math.log2(a) - math.log2(b)) for a, b in zip(got, want))
            if d < gap:
                best, gap = k, d
    return best


def _fitting(sample, *args, decision):
    """``sample(*args, decision=decision)``, or a fresh draw when the decision does not
    fit: an earlier decision changed what this one chooses from (a register tile sets
    the extent that the next tiling divides)."""
    try:
        return sample(*args, decision=decision)
    except ScheduleArgumentError:
        return sample(*args, decision=None)


def _nearest_tile(sch, loop, n, max_innermost_factor, want):
    """The tiling of ``loop``'s extent nearest ``want`` (a decision made for another
    extent: another task's, or one an earlier decision changed), or None: the inner
    factors kept as close as they can be (log scale), the outermost taking the rest.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((48,), name="A")
        >>> sch = Schedule(T.create_prim_func([A, T.compute((48,), lambda i: A[i],
        ...                                                 name="B")]))
        >>> _nearest_tile(sch, sch.get_loops("B")[0], 3, 16, [8, 4, 16])
        [1, 3, 16]
    """
    if not isinstance(want, list) or len(want) != n or \
            not all(isinstance(d, int) and d > 0 for d in want):
        return None
    try:
        node = tree.get(sch.func, tree.find_loop(sch.func, loop.var))
    except CuvilError:
        return None
    extent = getattr(node.extent, "value", None)
    if not isinstance(extent, int) or extent > 1 << 16:
        return None
    tiles = perfect_tiles(extent, n, max_innermost_factor)
    if not tiles:
        return None

    def gap(t):
        # the innermost factors weigh most: they set the vector and register tiles
        return sum(abs(math.log2(a) - math.log2(b)) * (k + 1)
                   for k, (a, b) in enumerate(zip(t[1:], want[1:])))
    return min(tiles, key=gap)


def _next(queue, given, kind):
    """The next forced decision; past the end of the list, or when it is not of this
    sampler's ``kind`` (an earlier decision took the space down another branch, with
    other samplers), the space draws its own."""
    d = queue.pop(0) if queue else given
    return d if isinstance(d, kind) and not isinstance(d, bool) else None


__all__ = ["nearest_option", "run_with_decisions"]
