"""The interpreter's meaning of asynchronous copies (:mod:`cuvil_tir.ops.async_copy`).

A copy reads its source when it starts and joins its thread's open group;
``async_commit_group`` closes that group; ``async_wait_group(n)`` lands the copies of
every closed group of the thread but the ``n`` newest: only then is the destination
written (and, for the race checker, written by that thread in the current phase, so
another thread reading it needs a barrier after the wait, as on a GPU).  Until it
lands a destination is *in flight*: with ``check_races=True`` any access to it, by
any thread, is a :class:`~cuvil_tir.errors.RaceError` naming the copy and the access;
without it the access sees the old contents, so a schedule that reads too early gives
a wrong result either way.

Example::

    >>> import numpy as np, cuvil_tir as T
    >>> A = T.decl_buffer((4,), "float32", "A")
    >>> S = T.decl_buffer((4,), "float32", "S", scope="shared")
    >>> tx = T.var("tx")
    >>> copy = T.Evaluate(T.Call("int32", "async_copy", (S[0], A[0], T.const(16))))
    >>> commit = T.Evaluate(T.Call("int32", "async_commit_group", ()))
    >>> wait = T.Evaluate(T.Call("int32", "async_wait_group", (T.const(0),)))
    >>> def kernel(*stmts):
    ...     return T.PrimFunc([A], T.For(tx, T.const(0), T.const(1), "thread_binding",
    ...         T.Allocate(S, T.seq(*stmts)), "threadIdx.x"))
    >>> a = np.arange(4, dtype="float32")
    >>> T.interpret(kernel(copy, commit, wait, T.BufferStore(A, S[3] * 2.0, (T.const(0),))), a)
    >>> a.tolist()
    [6.0, 1.0, 2.0, 3.0]
    >>> try:       # the wait removed: the read comes before the copy lands
    ...     T.interpret(kernel(copy, commit, T.BufferStore(A, S[3] * 2.0, (T.const(0),))), a,
    ...                 check_races=True)
    ... except T.RaceError as err:
    ...     print(err.statements[0])
    T.call_intrin("int32", "async_copy", S[0], A[0], 16)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtype as D
from ..errors import CuvilError, LoweringError, RaceError
from ..ops.async_copy import copy_parts
from ..printer import to_text
from .exprs import as_index
from .memory import MarkedArray


@dataclass
class _Copy:
    dst: object          # the destination array
    buffer: object       # its Buffer
    pos: np.ndarray      # flat element positions written
    values: np.ndarray   # what lands there
    thread: int
    text: str


class AsyncCopies:
    """The copies in flight in the thread block being run: per thread its open copies
    and closed groups, and every destination address in flight.

    Example::

        >>> AsyncCopies().inflight
        {}
    """

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        """A new block: nothing in flight (what a block left in flight is discarded
        with its shared memory)."""
        self.open: dict = {}
        self.groups: dict = {}
        self.inflight: dict = {}
        self.barriers: dict = {}      # mbarriers (cuvil_tir.interp.mbarrier)
        self.tick = 0                 # mbarrier phases completed in the block
        self.synced: dict = {}        # thread -> tick of the last phase it waited for
        # tile ops that land at a later wait (cuvil_tir.interp.async_mma)
        self.reading: dict = {}       # (array, flat) -> the issued ops reading it
        self.mma_open: dict = {}      # warpgroup -> its issued, uncommitted ops
        self.mma_groups: dict = {}    # warpgroup -> its committed groups, oldest first

    @property
    def busy(self) -> bool:
        """Whether an access may race with something in flight."""
        return bool(self.inflight or self.reading)

    def check(self, arr, flat: int, thread: tuple, kind: str, text: str, threads) -> None:
        """Raise a ``RaceError`` when ``arr[flat]`` is the destination of a copy in
        flight (``thread`` ``kind`` s it in statement ``text``)."""
        c = self.inflight.get((id(arr), flat))
        if kind == "writes" and self.reading.get((id(arr), flat)):
            c = self.reading[(id(arr), flat)][0]     # an operand a tensor-core op reads
        if c is None or (hasattr(c, "visible_to") and c.visible_to(thread)):
            return
        if hasattr(c, "in_flight"):
            buf = c.buffers[id(arr)]
            raise RaceError(
                f"data race on {buf.scope} buffer {buf.name} at address {flat}: thread "
                f"{thread} {kind} it in `{text}` while {c.in_flight(threads)}: put the "
                "wait for that op's group before this access (and release a stage only "
                "after it)", buffer=buf.name, address=flat,
                threads=(threads[c.group], thread), statements=(c.text, text))
        first = getattr(c, "first_wait", None)
        if kind == "writes" and first is not None and self.synced.get(thread, -1) > first:
            # a landed copy some thread waited for, overwritten by a thread that waited
            # on a phase completed after that (a ring buffer's "empty" barrier)
            return
        raise RaceError(
            f"data race on {c.buffer.scope} buffer {c.buffer.name} at address {flat}: thread "
            f"{thread} {kind} it in `{text}` while the asynchronous copy `{c.text}` of "
            f"thread {threads[c.thread]} is still in flight (no async_wait_group covering "
            "its group, or mbarrier_wait on its phase, ran before this access; or the "
            "threads that read it did not release it through an mbarrier this thread "
            "waited on): wait for the copy, then put a barrier between the wait and the "
            "other threads' use",
            buffer=c.buffer.name, address=flat, threads=(threads[c.thread], thread),
            statements=(c.text, text))

    def land_bulk(self, copy) -> None:
        """Write a bulk copy's destination (its mbarrier phase completed); it stays
        listed until the threads that touch it have waited on that phase."""
        np.put(copy.dst, copy.pos, copy.values)
        if isinstance(copy.dst, MarkedArray):
            np.put(copy.dst.written, copy.pos, True)
        copy.landed = True

    def barrier(self) -> None:
        """A block barrier: a landed bulk copy some thread waited for is visible to
        every thread from now on."""
        for key in [k for k, c in self.inflight.items()
                    if getattr(c, "waited", None)]:
            del self.inflight[key]

    def land(self, thread: int, keep: int, log) -> None:
        """Land the copies of every closed group of ``thread`` but the ``keep`` newest;
        ``log(copy, flat)`` records each landed element for the race checker."""
        groups = self.groups.get(thread, [])
        while len(groups) > keep:
            for c in groups.pop(0):
                np.put(c.dst, c.pos, c.values)
                if isinstance(c.dst, MarkedArray):
                    np.put(c.dst.written, c.pos, True)
                for flat in c.pos.tolist():
                    if self.inflight.get((id(c.dst), flat)) is c:
                        del self.inflight[(id(c.dst), flat)]
                    log(c, flat)


def copy_source(d, s, at_d, at_s, count: int, align: int, elem: int, what: str, names,
                text) -> np.ndarray:
    """The source positions of a copy of ``count`` elements (``elem`` bytes each) from
    ``s[at_s]`` to ``d[at_d]``, checked: in bounds, both ends aligned to ``align``
    bytes, the source initialised (``names``: the destination's and source's).

    Example::

        >>> copy_source(np.zeros(8), np.zeros(8), 0, 4, 4, 16, 4, "copy", ("D", "S"),
        ...             "").tolist()
        [4, 5, 6, 7]
    """
    dn, sn = names
    if at_d < 0 or at_s < 0 or at_d + count > d.size or at_s + count > s.size:
        raise LoweringError(f"{what} of {count} elements from {sn}[{at_s}] to {dn}[{at_d}] "
                            f"is out of bounds:\n{text}")
    if (at_d * elem) % align or (at_s * elem) % align:
        raise LoweringError(f"{what} of {count * elem} bytes from {sn}[{at_s}] to "
                            f"{dn}[{at_d}]: both ends must be aligned to {align} bytes:\n"
                            f"{text}")
    spos = np.arange(at_s, at_s + count)
    if isinstance(s, MarkedArray) and not np.take(s.written, spos).all():
        raise LoweringError(f"{what} reads uninitialised memory of {sn}[{at_s}:"
                            f"{at_s + count}]:\n{text}")
    return spos


def _flat_of(fs, arr) -> int:
    idx = tuple(as_index(f()) for f in fs)
    if len(idx) == 1:
        return idx[0]
    return int(np.ravel_multi_index(idx, arr.shape))


def compile_async(c, call, role: str, state: AsyncCopies, block):
    """The closure running one asynchronous-copy op for the current thread of
    ``block`` (the interpreter's :class:`~cuvil_tir.interp.gpu._Block`).

    Example::

        >>> compile_async.__name__
        'compile_async'
    """
    text = to_text(call)
    bufs = c.frame.bufs
    if role == "commit":
        def commit():
            t = block.cur
            state.groups.setdefault(t, []).append(state.open.pop(t, []))
        return commit
    if role == "wait":
        fn = c.expr(call.args[0])

        def log(copy, flat):
            if block.check and copy.buffer.scope != "global":
                addr = flat if copy.dst.ndim == 1 else tuple(
                    int(x) for x in np.unravel_index(flat, copy.dst.shape))
                block.log(copy.buffer, addr, True, copy.text)

        def wait():
            n = as_index(fn())
            if n < 0:
                raise LoweringError(f"async_wait_group({n}): the count of groups left in "
                                    f"flight must be >= 0:\n{text}")
            state.land(block.cur, n, log)
        return wait
    try:
        dst, src, nbytes = copy_parts(call)
    except CuvilError as err:
        raise LoweringError(f"{err.message}:\n{text}") from None
    kd, ks = c.buffer(dst.buffer, call), c.buffer(src.buffer, call)
    fd = [c.expr(ix) for ix in dst.indices]
    fsrc = [c.expr(ix) for ix in src.indices]
    elem = max(1, D.bits(dst.buffer.dtype) // 8)
    count = nbytes // elem

    def copy():
        d, s = bufs[kd], bufs[ks]
        at_d, at_s = _flat_of(fd, d), _flat_of(fsrc, s)
        spos = copy_source(d, s, at_d, at_s, count, nbytes, elem, "asynchronous copy",
                           (dst.buffer.name, src.buffer.name), text)
        t = block.cur
        if block.check:
            for flat in spos.tolist():
                state.check(s, flat, block.thread, "reads", text, block.threads)
        cp = _Copy(d, dst.buffer, np.arange(at_d, at_d + count), np.take(s, spos).copy(),
                   t, text)
        for flat in cp.pos.tolist():
            if block.check:
                state.check(d, flat, block.thread, "writes", text, block.threads)
            state.inflight[(id(d), flat)] = cp
        state.open.setdefault(t, []).append(cp)
    return copy


__all__ = ["AsyncCopies", "compile_async", "copy_source"]
