"""The interpreter's meaning of tile ops that land later (``OpDef.lands``): a
tensor-core step issued without waiting (Hopper's ``wgmma.mma_async``), the op that
closes a group of them and the op that waits for groups.

An ``"issue"`` op computes nothing when a warpgroup issues it: it joins the group's
open list, its operand tiles are *being read* and its written tiles (the
accumulators) are *in flight*.  A ``"commit"`` op closes the open list into a group;
a ``"wait"`` op (its argument 1: the groups that may stay in flight) computes the ops
of every older group, in issue order, on the operands as they are then, and releases
their tiles.  So, with ``check_races=True``:

* writing an operand before the wait that covers its op (a stage handed back to the
  producer too early, whose next tensor copy overwrites it) is a
  :class:`~cuvil_tir.errors.RaceError` naming the op and the write;
* touching the accumulators before that wait (an epilogue that does not wait) is one
  too; a later issue op of the same warpgroup on the same accumulators is not (the
  tensor cores chain them in order);

without the checker the accumulators keep their old values until the wait and a
too-early overwrite changes what the op computes, so a wrong schedule gives a wrong
result either way, as it may on a GPU.

Example::

    >>> Pending("op", 0, None).landed
    False
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import LoweringError
from ..expr import IntImm
from .tile_ops import apply_tiles, tile_positions

#: the roles of ``OpDef.lands``
ISSUE, COMMIT, WAIT = "issue", "commit", "wait"


@dataclass
class Pending:
    """One issued op: its statement, its warpgroup (the block index of its first
    thread), the closure computing it, the ``(array, flat)`` keys it reads and
    writes."""

    text: str
    group: int
    compute: object
    reads: list = field(default_factory=list)
    writes: list = field(default_factory=list)
    buffers: dict = field(default_factory=dict)      # id(array) -> its Buffer
    landed: bool = False

    def in_flight(self, threads) -> str:
        """How a race message names it."""
        return (f"the asynchronous tensor-core op `{self.text}` of warpgroup thread "
                f"{threads[self.group]} is still in flight (no wait covering its group "
                "ran before this access)")


def wait_count(call, text: str) -> int:
    """The groups a wait op leaves in flight: its argument 1, a constant >= 0.

    Example::

        >>> import cuvil_tir as T
        >>> wait_count(T.Call("int32", "w", (T.const(0), T.const(1))), "")
        1
    """
    n = call.args[1] if len(call.args) > 1 else None
    if not isinstance(n, IntImm) or n.value < 0:
        raise LoweringError(f"{call.op}: the count of groups left in flight (argument 1) "
                            f"must be a constant >= 0, found {n}:\n{text}")
    return n.value


def _issue(g, state, spec, tiles, args, arrays, seen, text, swizzles) -> None:
    key = g.cur
    p = Pending(text, key, lambda: apply_tiles(spec, tiles, args, arrays, seen, text,
                                               None, swizzles))
    for (flat, ld), arr, t, a, sw in zip(seen, arrays, tiles, args, swizzles):
        p.buffers[id(arr)] = a.buffer
        pos = tile_positions(arr.reshape(-1), flat, ld, t, a.buffer.name, text, sw)
        for x in pos.ravel().tolist():
            k = (id(arr), x)
            if g.check:
                mine = state.inflight.get(k)
                # the tensor cores chain a warpgroup's steps on its accumulators
                if not (isinstance(mine, Pending) and mine.group == key):
                    state.check(arr, x, g.thread, "writes" if t.writes else "reads", text,
                                g.threads)
                if a.buffer.scope == "shared":
                    g.log(a.buffer, x, t.writes, text)
            if t.writes:
                state.inflight[k] = p
                p.writes.append(k)
            if t.access != "write":
                state.reading.setdefault(k, []).append(p)
                p.reads.append(k)
    state.mma_open.setdefault(key, []).append(p)


def _land(state, key: int, keep: int) -> None:
    groups = state.mma_groups.get(key, [])
    while len(groups) > keep:
        for p in groups.pop(0):
            p.compute()
            p.landed = True
            for k in p.writes:
                if state.inflight.get(k) is p:
                    del state.inflight[k]
            for k in p.reads:
                left = [q for q in state.reading.get(k, ()) if q is not p]
                if left:
                    state.reading[k] = left
                else:
                    state.reading.pop(k, None)


def run_landing(g, call, spec, tiles, args, arrays, seen, text, swizzles) -> None:
    """Run the ``lands`` op ``call`` for the warpgroup whose first thread is ``g.cur``
    (``g``: the interpreter's block; ``arrays``/``seen``: its tiles' arrays and
    origins, as :func:`~cuvil_tir.interp.tile_ops.apply_tiles` takes them).

    Example::

        >>> run_landing.__name__
        'run_landing'
    """
    state = g.copies
    if spec.lands == ISSUE:
        _issue(g, state, spec, tiles, args, arrays, seen, text, swizzles)
    elif spec.lands == COMMIT:
        state.mma_groups.setdefault(g.cur, []).append(state.mma_open.pop(g.cur, []))
    else:
        _land(state, g.cur, wait_count(call, text))


__all__ = ["COMMIT", "ISSUE", "Pending", "WAIT", "run_landing", "wait_count"]
