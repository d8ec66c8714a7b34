"""Thread-block clusters in the GPU interpreter (:mod:`cuvil_tir.ops.cluster`).

The blocks of one cluster run together, as one group of threads numbered block after
block (:mod:`cuvil_tir.interp.gpu`): a statement holding a barrier is walked once
for all of them, so ``cluster_sync()`` is reached by every thread of every block
before any goes on.  Each block has its own copy of every ``shared`` buffer;
``dsmem_load(S[i], rank)`` reads the copy of the block of that rank.

The cluster counts *phases*: even between barriers, odd between a
``cluster_arrive()`` and its ``cluster_wait()`` (a ``cluster_sync()`` passes two at
once).  An access in phase ``p`` is ordered with an access of another block in phase
``q`` when ``q >= p + p % 2 + 2``: the first came before an arrive whose wait the
second came after (:func:`ordered`).  With ``check_races=True`` a :class:`Cluster`
keeps the shared addresses each block wrote and the addresses other blocks read
through DSMEM that later accesses may still race with.  A DSMEM read of an address
its owner wrote unordered with it, or a write by the owner of an address a peer read
unordered, is a :class:`~cuvil_tir.errors.RaceError` naming both statements; so is
a peer's read no wait ordered when the blocks end (the owner may have exited and its
shared memory been given to another block).

Example::

    >>> c = Cluster((2, 1, 1))
    >>> c.barrier(); c.phase, c.peer_reads
    (2, {})
"""

from __future__ import annotations

from ..errors import LoweringError, RaceError
from ..ops import Unsupported, register_spelling
from ..ops.cluster import DSMEM_OP, dsmem_parts
from ..printer import to_text
from .exprs import as_index
from .memory import compile_load


def ordered(p: int, q: int) -> bool:
    """Whether an access in cluster phase ``p`` is ordered before one of another block
    in phase ``q`` (module doc).

    Example::

        >>> ordered(0, 2), ordered(1, 2), ordered(1, 4)
        (True, False, True)
    """
    return q >= p + p % 2 + 2


class Cluster:
    """The DSMEM accesses of the running cluster since its last barrier (module doc).

    Example::

        >>> Cluster((4, 1, 1)).size
        4
    """

    #: clusters made so far (each one's serial number tells it apart in the logs)
    made = 0

    def __init__(self, shape: tuple):
        Cluster.made += 1
        self.serial = Cluster.made
        self.phase = 0                # cluster barriers passed
        self.shape = shape
        self.size = shape[0] * shape[1] * shape[2]
        # (buffer, block, address) -> (thread, statement, phase)
        self.writes: dict = {}
        # (buffer, owner, address) -> (thread, statement, phase)
        self.peer_reads: dict = {}

    def barrier(self) -> None:
        """A ``cluster_sync()``: what came before is ordered with what comes after."""
        self.arrive("cluster_sync")
        self.wait()

    def arrive(self, what: str = "cluster_arrive") -> None:
        """A ``cluster_arrive()`` (every thread of the cluster, together)."""
        if self.phase % 2:
            raise LoweringError(f"{what} after a cluster_arrive() with no cluster_wait() "
                                "between them: a thread arrives once per phase of the "
                                "cluster barrier; add the cluster_wait()")
        self.phase += 1

    def wait(self) -> None:
        """A ``cluster_wait()``: forget what every later access is ordered with."""
        if not self.phase % 2:
            raise LoweringError("cluster_wait() with no cluster_arrive() before it: it "
                                "would wait for an arrival that never comes; add "
                                "cluster_arrive() (or use cluster_sync())")
        self.phase += 1
        for log in (self.writes, self.peer_reads):
            for key in [k for k, e in log.items() if ordered(e[2], self.phase)]:
                del log[key]

    def local_access(self, g, buf, addr, write: bool, stmt: str) -> None:
        """A thread's access of its own block's copy of ``buf``."""
        if not write:
            return
        key = (buf, g.cta(), addr)
        seen = self.peer_reads.get(key)
        if seen is not None and not ordered(seen[2], self.phase):
            self._race(g, buf, addr, key[1], (seen[0], seen[1], "reads it through DSMEM"),
                       (g.cur, stmt, "writes it"))
        self.writes[key] = (g.cur, stmt, self.phase)

    def remote_read(self, g, buf, owner: int, addr, stmt: str) -> None:
        """Thread ``g.cur`` reads ``addr`` of block ``owner``'s copy of ``buf``."""
        key = (buf, owner, addr)
        seen = self.writes.get(key)
        if seen is not None and not ordered(seen[2], self.phase):
            self._race(g, buf, addr, owner, (seen[0], seen[1], "writes it"),
                       (g.cur, stmt, "reads it through DSMEM"))
        self.peer_reads[key] = (g.cur, stmt, self.phase)

    def finish(self, g) -> None:
        """The blocks end: a peer's read not followed by a cluster barrier may find
        its owner gone."""
        for (buf, owner, addr), (t, stmt, _) in self.peer_reads.items():
            raise RaceError(
                f"block {g.blocks[g.cta(t)]} reads shared buffer {buf.name} at address "
                f"{addr} of block {g.blocks[owner]} of its cluster through DSMEM in "
                f"`{stmt}`, and no cluster_sync() follows before the kernel ends: block "
                f"{g.blocks[owner]} may exit first and its shared memory be reused. Put "
                "T.evaluate(T.call_intrin(\"int32\", \"cluster_sync\")) after the last "
                "dsmem_load (or a cluster_arrive() after it and a cluster_wait() before "
                "the end)", buffer=buf.name, address=addr,
                threads=((g.blocks[g.cta(t)], g.threads[t]),), statements=(stmt,))

    @staticmethod
    def _race(g, buf, addr, owner, first, second):
        (t1, s1, k1), (t2, s2, k2) = first, second
        th1 = (g.blocks[g.cta(t1)], g.threads[t1])
        th2 = (g.blocks[g.cta(t2)], g.threads[t2])
        raise RaceError(
            f"data race on shared buffer {buf.name} at address {addr} of block "
            f"{g.blocks[owner]}: thread {th1[1]} of block {th1[0]} {k1} in `{s1}` and "
            f"thread {th2[1]} of block {th2[0]} {k2} in `{s2}`, with no cluster_sync() "
            "between them (a block barrier orders one block only; a cluster_arrive() "
            "orders what comes before it with what comes after the next "
            "cluster_wait()). Insert "
            "T.evaluate(T.call_intrin(\"int32\", \"cluster_sync\")) between the two "
            "statements", buffer=buf.name, address=addr, threads=(th1, th2),
            statements=(s1, s2))


def compile_dsmem_load(c, call):
    """The closure of ``dsmem_load(S[i], rank)`` for the GPU statement compiler ``c``
    (:class:`~cuvil_tir.interp.gpu.GpuStmtCompiler`): the element of block
    ``rank``'s copy of ``S``.

    Example::

        >>> compile_dsmem_load.__name__
        'compile_dsmem_load'
    """
    elem, rank = dsmem_parts(call)
    buf = elem.buffer
    inner = compile_load(c, elem)
    frank = c.expr(rank)
    fidx = [c.expr(ix) for ix in elem.indices]
    k, g, bufs = c.buffer(buf, call), c.g, c.frame.bufs
    text = c.stmt_text[-1] if c.stmt_text else to_text(call)

    def load():
        r = as_index(frank())
        size = g.cluster.size if g.cluster is not None else 1
        if not 0 <= r < size:
            raise LoweringError(f"dsmem_load reads block rank {r} of a cluster of {size} "
                                f"block(s) in `{text}`; a rank lies in 0..{size - 1}")
        me = g.cta()
        if r == me:
            if g.check:
                idx = [as_index(f()) for f in fidx]
                g.log(buf, idx[0] if len(idx) == 1 else tuple(idx), False, text)
            return inner()
        saved = bufs[k]
        bufs[k] = g.ctxs[r * g.per_block][("b", k)]
        try:
            value = inner()
        finally:
            bufs[k] = saved
        if g.check:
            idx = [as_index(f()) for f in fidx]
            g.cluster.remote_read(g, buf, r, idx[0] if len(idx) == 1 else tuple(idx), text)
        return value
    return load


# outside a kernel there is no cluster to read from (inside, the GPU statement compiler
# runs it: compile_dsmem_load)
register_spelling("interp", DSMEM_OP, Unsupported(
    "dsmem_load reads the shared memory of another block of a thread-block cluster; the "
    "interpreter runs it only inside a kernel (under loops bound to blockIdx and "
    "threadIdx)", LoweringError))

__all__ = ["Cluster", "compile_dsmem_load"]
