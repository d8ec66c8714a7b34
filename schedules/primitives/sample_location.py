"""Sampling where a block is computed: ``sample_compute_location``.

The candidates, each with the integer the trace records as the decision:

- ``-2``: inline the block (only when ``compute_inline`` accepts it), the handle
  :data:`INLINE_MARK`;
- ``-1``: leave it where it is (always), the handle :data:`ROOT_MARK`;
- ``k >= 0``: the ``k``-th loop (outer first) above the block's first consumer, for the
  loops enclosing every consumer where ``compute_at`` accepts the block, minus the ones
  a search would not want (TensorIR's rules): unit loops, spatial loops below a
  reduction loop, and reduction loops below the last spatial one.

Passing the sampled handle to ``compute_at`` (or ``reverse_compute_at``) applies it:
``ROOT_MARK`` changes nothing, ``INLINE_MARK`` inlines the block.  A decision given
for replay that is no longer a candidate falls back to the nearest candidate before
it, so replaying a trace on a changed function stays legal.

Example::

    >>> import cuvil_tir as T
    >>> import schedules as S
    >>> A = T.placeholder((4, 4), name="A")
    >>> B = T.compute((4, 4), lambda i, j: A[i, j] + 1.0, name="B")
    >>> sch = S.Schedule(T.create_prim_func([A, T.compute((4, 4), lambda i, j: B[i, j] * 2.0,
    ...                                                   name="C")]))
    >>> candidates(sch.func, S.BlockRV("B"))[1]
    [-2, -1, 0, 1]
    >>> loop = sch.sample_compute_location("B", decision=0)
    >>> sch.compute_at("B", loop)
    >>> [l.var.name for l in sch.get_loops("B")]
    ['i', 'ax0']
"""

from __future__ import annotations

from cuvil_tir.errors import ScheduleError

from cuvil_tir.analysis import tree
from ..analysis import block_path, const_int, uses_var
from ..block_scope import consumers
from ..errors import ScheduleArgumentError, schedule_error
from ..handles import INLINE_MARK, ROOT_MARK, LoopRV
from .compute_location import compute_at
from .inline import compute_inline
from ..primitive import BLOCK, LOOP, primitive


_MEMO: list = []      # [(func, block name, result)]: the function is immutable


def _loop_kind(loop) -> str:
    """'spatial', 'reduce' or 'opaque' from the bindings of the blocks directly under
    ``loop`` (a loop no binding uses counts as spatial)."""
    kinds = set()
    for br in tree.blocks_under(loop.body):
        for iv, val in zip(br.block.iter_vars, br.iter_values):
            if uses_var(val, loop.loop_var):
                kinds.add(iv.kind)
    if kinds & {"opaque", "scan"} or {"spatial", "reduce"} <= kinds:
        return "opaque"
    return "reduce" if "reduce" in kinds else "spatial"


def _legal(fn, *args) -> bool:
    try:
        fn.raw(*args)
    except ScheduleError:
        return False
    return True


def candidates(func, block) -> tuple:
    """``(handles, decisions)`` of the block's compute locations, in decision order.

    Example::

        >>> import cuvil_tir as T
        >>> from schedules.handles import BlockRV
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> candidates(f, BlockRV("B"))[1]
        [-1]
    """
    for f, name, result in _MEMO:
        if f is func and name == block.name:
            return result
    path = block_path(func, block, "sample_compute_location")
    handles, decisions = [], []
    if _legal(compute_inline, func, block):
        handles.append(INLINE_MARK)
        decisions.append(-2)
    handles.append(ROOT_MARK)
    decisions.append(-1)
    users = [tree.find_block(func, b.block.name) for b in consumers(func, path)]
    if users:
        loops = tree.loops_above(func, users[0])
        # the loops enclosing every consumer (TensorIR: up to their lowest common loop)
        depth = max((k + 1 for k, (p, _) in enumerate(loops)
                     if all(u[:len(p)] == p for u in users)), default=0)
        kinds = [_loop_kind(l) for _, l in loops[:depth]]
        last_spatial = max((k for k, kind in enumerate(kinds) if kind == "spatial"),
                           default=-1)
        seen_reduce = False
        for k, (_, loop) in enumerate(loops[:depth]):
            if const_int(loop.extent) == 1:
                continue
            if kinds[k] == "spatial":
                if seen_reduce:
                    break
            else:
                seen_reduce = True
                if k > last_spatial:
                    break
            rv = LoopRV(loop.loop_var)
            if _legal(compute_at, func, block, rv):
                handles.append(rv)
                decisions.append(k)
    result = (handles, decisions)
    _MEMO[:] = _MEMO[-3:] + [(func, block.name, result)]
    return result


@primitive("sample_compute_location", block=BLOCK, returns=LOOP, sampler=True)
def sample_compute_location(func, rng, block, decision=None):
    """A compute location of ``block``, drawn uniformly from its candidates (see
    :mod:`schedules.primitives.sample_location`): a loop handle, or
    ``ROOT_MARK``/``INLINE_MARK``, to pass to ``compute_at``.  The decision is the
    candidate's number (-2 inline, -1 root, k the k-th loop above the first consumer).

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((8,), name="A")
        >>> B = T.compute((8,), lambda i: A[i] + 1.0, name="B")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute((8,), lambda i: B[i] * 2.0,
        ...                                                   name="C")]), seed=1)
        >>> sch.sample_compute_location("B", decision=-2)
        LoopRV(inline)
        >>> sch.trace.decisions
        {0: -2}
    """
    handles, decisions = candidates(func, block)
    if decision is None:
        k = rng.randrange(len(decisions))
        return handles[k], decisions[k]
    if isinstance(decision, bool) or not isinstance(decision, int) or decision < -2:
        raise schedule_error(ScheduleArgumentError, "sample_compute_location",
                             f"decision {decision!r}: expected -2 (inline), -1 (root) or a "
                             "loop position (an int >= 0)")
    k = max((k for k, d in enumerate(decisions) if d <= decision), default=None)
    if k is None:        # -2 asked, the block can no longer be inlined
        return ROOT_MARK, -1
    return handles[k], decisions[k]
