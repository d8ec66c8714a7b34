"""The interpreter's meaning of bulk copies and mbarriers
(:mod:`cuvil_tir.ops.mbarrier`).

A barrier counts the arrivals and the bytes of its open phase; the phase completes
when every expected thread has arrived and every byte promised (``mbarrier_arrive``'s
``tx``) has come in (a ``bulk_copy`` brings its bytes when it starts: the copy's
source is read then).  At completion the phase's copies land: their destinations are
written.  A thread may touch a bulk copy's destination once it has waited on the
phase that landed it (``mbarrier_wait``), or after a block barrier that follows some
thread's wait; before, with ``check_races=True``, the access is a
:class:`~cuvil_tir.errors.RaceError` naming the copy and the access (without the
checker it sees the old contents).  The interpreter runs a block's threads one after
another between block barriers, so a wait whose phase is still open (its arrivals or
bytes would come from a thread that runs later, or never) is reported as a
:class:`~cuvil_tir.errors.LoweringError` saying what the phase still lacks.

Example::

    >>> Barrier(2).pending
    2
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import dtype as D
from ..errors import CuvilError, LoweringError
from ..ops.mbarrier import BULK_ALIGN, bulk_parts, check_barrier
from ..printer import to_text
from .async_copy import copy_source
from .exprs import as_index

#: the asynchronous roles this module runs
MBARRIER_ROLES = ("bulk_copy", "mbarrier_init", "mbarrier_arrive", "mbarrier_wait")


@dataclass
class BulkCopy:
    """One bulk copy: where it writes, what, and which threads may see it."""

    dst: object
    buffer: object
    pos: np.ndarray
    values: np.ndarray
    thread: int
    text: str
    landed: bool = False
    waited: set = field(default_factory=set)
    first_wait: int | None = None     # the clock when a thread first waited for it

    def visible_to(self, thread: tuple) -> bool:
        """Whether ``thread`` may touch the destination (landed, and it waited)."""
        return self.landed and thread in self.waited


@dataclass
class Barrier:
    """An mbarrier: ``count`` arrivals per phase; ``phase`` phases completed."""

    count: int
    pending: int = -1
    tx: int = 0
    phase: int = 0
    copies: list = field(default_factory=list)
    done: list = field(default_factory=list)       # (phase, copies) of the last two

    def __post_init__(self):
        if self.pending < 0:
            self.pending = self.count

    def complete_if_ready(self, state) -> None:
        """Close the open phase when its arrivals and bytes are all in: its copies
        land (``state``: the block's copies); the completion gets the next tick of
        ``state``'s clock."""
        if self.pending or self.tx:
            return
        for cp in self.copies:
            state.land_bulk(cp)
        state.tick += 1
        self.done = (self.done + [(self.phase, self.copies, state.tick)])[-2:]
        self.phase += 1
        self.pending, self.copies = self.count, []


def _element(c, e, call):
    """``(slot, index closures)`` of a buffer element argument."""
    return c.buffer(e.buffer, call), [c.expr(ix) for ix in e.indices]


def _flat(fs, arr) -> int:
    idx = tuple(as_index(f()) for f in fs)
    return idx[0] if len(idx) == 1 else int(np.ravel_multi_index(idx, arr.shape))


def barrier_access(c, bar, call, state, block, text: str):
    """Two closures over the barrier element ``bar`` of ``call`` for the current thread
    of ``block``: ``barrier(write=False)`` logs the access (race checker) and gives the
    barrier's key in ``state.barriers``; ``known(key)`` the :class:`Barrier`, refusing
    one that ``mbarrier_init`` did not set up.

    Example::

        >>> barrier_access.__name__
        'barrier_access'
    """
    kb, fb = _element(c, bar, call)
    bufs = c.frame.bufs

    def barrier(write=False):
        arr = bufs[kb]
        at = _flat(fb, arr)
        if block.check:
            addr = at if arr.ndim == 1 else tuple(int(x) for x in np.unravel_index(at, arr.shape))
            block.log(bar.buffer, addr, write, text)
        return (id(arr), at)

    def known(key):
        b = state.barriers.get(key)
        if b is None:
            raise LoweringError(f"thread {block.thread} uses mbarrier {bar.buffer.name} "
                                f"before mbarrier_init set it up:\n{text}")
        return b
    return barrier, known


def compile_mbarrier(c, call, role: str, state, block):
    """The closure running one bulk-copy or mbarrier op for the current thread of
    ``block``; ``state`` (:class:`~cuvil_tir.interp.async_copy.AsyncCopies`) holds the
    barriers and the copies in flight.

    Example::

        >>> compile_mbarrier.__name__
        'compile_mbarrier'
    """
    text = to_text(call)
    bufs = c.frame.bufs
    try:
        if role == "bulk_copy":
            dst, src, nbytes, bar = bulk_parts(call)
        else:
            bar = call.args[0]
            check_barrier(bar, call.op)
    except CuvilError as err:
        raise LoweringError(f"{err.message}:\n{text}") from None
    barrier, known = barrier_access(c, bar, call, state, block, text)

    if role == "mbarrier_init":
        fcount = c.expr(call.args[1])

        def init():
            n = as_index(fcount())
            if n < 1:
                raise LoweringError(f"mbarrier_init: the arrival count must be >= 1, found "
                                    f"{n}:\n{text}")
            state.barriers[barrier(True)] = Barrier(n)
        return init
    if role == "mbarrier_arrive":
        ftx = c.expr(call.args[1])

        def arrive():
            b = known(barrier())
            b.tx += as_index(ftx())
            b.pending -= 1
            if b.pending < 0:
                raise LoweringError(f"mbarrier {bar.buffer.name}: more arrivals than its "
                                    f"count {b.count} in one phase:\n{text}")
            b.complete_if_ready(state)
        return arrive
    if role == "mbarrier_wait":
        fpar = c.expr(call.args[1])

        def wait():
            b = known(barrier())
            p = as_index(fpar()) & 1
            tasks = block.tasks
            if b.phase % 2 == p and tasks is not None and tasks.current is not None:
                # another group of threads may complete it (warp specialization)
                tasks.block(lambda: b.phase % 2 != p, lambda: (
                    f"`{text}` (phase {b.phase} of mbarrier {bar.buffer.name} lacks "
                    f"{b.pending} of {b.count} arrivals and {b.tx} bytes)"))
            if b.phase % 2 == p:
                raise LoweringError(
                    f"thread {block.thread} waits for phase {b.phase} of mbarrier "
                    f"{bar.buffer.name}, which still lacks {b.pending} of {b.count} "
                    f"arrivals and {b.tx} bytes: no thread that runs before it in this "
                    f"block completes it (a missing arrive or copy, or a producer that "
                    f"runs after its consumers, which the interpreter cannot order):\n"
                    f"{text}")
            last = b.phase - 1 if (b.phase - 1) % 2 == p else b.phase - 2
            for k, copies, tick in b.done:
                if k <= last:
                    for cp in copies:
                        cp.waited.add(block.thread)
                        if cp.first_wait is None:
                            cp.first_wait = state.tick
                    state.synced[block.thread] = max(state.synced.get(block.thread, -1),
                                                     tick)
        return wait
    kd, fd = _element(c, dst, call)
    ks, fsrc = _element(c, src, call)
    count = nbytes * 8 // D.bits(dst.buffer.dtype)

    def bulk():
        d, s = bufs[kd], bufs[ks]
        at_d, at_s = _flat(fd, d), _flat(fsrc, s)
        spos = copy_source(d, s, at_d, at_s, count, BULK_ALIGN,
                           D.bits(dst.buffer.dtype) // 8 or 1, "bulk copy",
                           (dst.buffer.name, src.buffer.name), text)
        b = known(barrier())
        cp = BulkCopy(d, dst.buffer, np.arange(at_d, at_d + count),
                      np.take(s, spos).copy(), block.cur, text)
        for flat in cp.pos.tolist():
            if block.check:
                state.check(d, flat, block.thread, "writes", text, block.threads)
            state.inflight[(id(d), flat)] = cp
        b.copies.append(cp)
        b.tx -= nbytes
        b.complete_if_ready(state)
    return bulk


__all__ = ["Barrier", "BulkCopy", "MBARRIER_ROLES", "barrier_access", "compile_mbarrier"]
