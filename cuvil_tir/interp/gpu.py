"""GPU semantics for the reference interpreter: every thread of every block, shared
memory per block, local memory per thread, barriers as phase boundaries, race checks.

A *kernel* (a loop bound to ``blockIdx``/``threadIdx`` reached from the host, see
:mod:`cuvil_tir.transform.gpu_threads`) runs block after block.  Within a block the
threads run *collectively*: a statement that holds no barrier runs for each thread in
turn (thread ``(0,0,0)`` first) with that thread's indices, lets and ``local``
buffers; a statement that holds a barrier is walked once for the whole block — its
loops and conditions must then be the same for every thread (a divergent one is a
``LoweringError``, as on a GPU it would deadlock).  Each barrier ends a *phase*.

With ``check_races=True`` every access of a ``shared`` buffer is logged per phase:
when two different threads touch one address in one phase and at least one writes,
:class:`~cuvil_tir.errors.RaceError` names the buffer, the address, both threads and
both statements.  Global memory is logged over the whole launch (blocks are not
ordered; threads of one block are, by a barrier): two threads storing *different*
values at one address (a per-thread value, or an uninitialised one: NaN) without a
barrier between them, or one thread reading what another wrote, is a race too.  Two
threads storing the same value are not (redundant copies, as TVM's schedules make,
land the same whichever is last).  Threads run in a fixed order, so a race is
reported whether or not it changed the result.

Example::

    >>> import numpy as np, cuvil_tir as T
    >>> A = T.decl_buffer((8,), "float32", "A")
    >>> S = T.decl_buffer((8,), "float32", "S", scope="shared")
    >>> tx = T.var("tx")
    >>> body = T.For(tx, T.const(0), T.const(8), "thread_binding", T.Allocate(S, T.seq(
    ...     T.BufferStore(S, A[tx] * 2.0, (tx,)), T.BufferStore(A, S[7 - tx], (tx,)))),
    ...     "threadIdx.x")
    >>> a = np.arange(8, dtype="float32")
    >>> try:
    ...     T.interpret(T.PrimFunc([A], body), a, check_races=True)
    ... except T.RaceError as err:
    ...     print(err.buffer, err.address, err.threads)
    S 4 ((3, 0, 0), (4, 0, 0))
"""

from __future__ import annotations

import itertools

import numpy as np

from ..errors import LoweringError, RaceError
from ..expr import Call
from ..ops import get_op
from ..ops.async_copy import asynchronous
from ..ops.cluster import ARRIVE_OP, DSMEM_OP, WAIT_OP, cluster_shape, is_cluster_sync
from ..ops.gpu import collective, group_lanes, per_warp, tiles_of, warp_combiner
from ..swizzle import Swizzle
from ..printer import to_text
from ..stmt import Allocate, BufferStore, Evaluate, For, IfThenElse, LetStmt, SeqStmt
from ..transform.gpu_sync import is_barrier
from ..thread_axes import thread_axis
from ..transform.gpu_threads import is_thread_loop, launch_shape, thread_loops
from ..visitor import post_order_visit
from .async_copy import AsyncCopies, compile_async
from .async_mma import run_landing
from .mbarrier import MBARRIER_ROLES, compile_mbarrier
from .tma import compile_tma
from .cluster import Cluster, compile_dsmem_load, ordered
from .gpu_tasks import Tasks
from .exprs import as_index
from .memory import compile_load, compile_shape, compile_store, new_array
from .tile_ops import apply_tiles, tile_origin
from .scalar import binary_op
from .stmts import StmtCompiler


def has_thread_loops(func) -> bool:
    """Whether ``func`` has a loop bound to ``blockIdx``/``threadIdx`` (GPU IR).

    Example::

        >>> import cuvil_tir as T
        >>> has_thread_loops(T.PrimFunc([], T.Evaluate(T.const(0))))
        False
    """
    hit = []
    post_order_visit(func.body, lambda n: hit.append(1) if is_thread_loop(n) else None)
    return bool(hit)


class _Block:
    """The run-time state of the thread block being executed."""

    def __init__(self, check: bool):
        self.check = check
        self.block = (0, 0, 0)       # the current thread's block's (x, y, z)
        self.blocks = [self.block]   # the blocks running together (a cluster's)
        self.per_block = 1           # threads per block
        self.cluster = None          # the running cluster (cuvil_tir.interp.cluster)
        self.threads: list = []      # (x, y, z) per thread
        self.thread = (0, 0, 0)      # the current thread's
        self.ctxs: list = []         # per thread: {("e"|"b", slot): value}
        self.cur = 0
        self.logs: dict = {}
        self.glog: dict = {}         # global memory over the whole launch
        self.phase = 0               # barriers passed by the current block
        self.warp_vals: list = []
        self.copies = AsyncCopies()      # asynchronous copies in flight
        self.active = None               # the threads of the running task (None: all)
        self.tasks = None                # the block's tasks (cuvil_tir.interp.gpu_tasks)

    def start(self, block, dims: tuple, cluster=None):
        """Run the block at ``block`` (x, y, z) with ``dims`` threads; with
        ``cluster`` (:class:`~cuvil_tir.interp.cluster.Cluster`), ``block`` is the list
        of its blocks, run together: threads numbered block after block."""
        blocks = list(block) if cluster is not None else [block]
        per = list(itertools.product(*(range(n) for n in reversed(dims))))
        per = [t[::-1] for t in per]
        self.blocks, self.cluster, self.per_block = blocks, cluster, len(per)
        self.threads = per * len(blocks)
        self.ctxs = [{} for _ in self.threads]
        self.logs = {}
        self.copies.reset()
        self.phase = 0
        self.active = None
        self.set_thread(0)

    def members(self):
        """``(index, context)`` of each thread that runs now (those of the running
        task: :mod:`cuvil_tir.interp.gpu_tasks`)."""
        ts = self.active if self.active is not None else range(len(self.ctxs))
        return [(t, self.ctxs[t]) for t in ts]

    def set_thread(self, t: int):
        self.cur = t
        self.thread = self.threads[t]
        self.block = self.blocks[t // self.per_block]

    def cta(self, t: int | None = None) -> int:
        """The block (its index in the running cluster) of thread ``t`` (the current
        one)."""
        return (self.cur if t is None else t) // self.per_block

    def index(self, axis) -> int:
        """The current thread's index along ``axis`` (a launched ThreadAxis)."""
        return (self.thread if axis.level == "thread" else self.block)[axis.dim]

    def log(self, buf, addr, write: bool, stmt: str, value=None):
        """An access of shared memory in the current phase (see the module doc)."""
        t = self.cur
        if self.cluster is not None:
            # each block of a cluster has its own copy; peers read it through DSMEM
            self.cluster.local_access(self, buf, addr, write, stmt)
        entries = self.logs.setdefault((buf, self.cta()), {})
        e = entries.get(addr)
        if e is None:
            entries[addr] = [t, stmt, None, None, None, None, value] if write else \
                [None, None, t, stmt, None, None, None]
            return
        w, ws, r1, r1s, r2, r2s, wv = e
        if w is not None and w != t and not (write and _same(wv, value)):
            self.race(buf, addr, (w, ws, "writes"), (t, stmt, "writes" if write else "reads"))
        if write:
            for r, rs in ((r1, r1s), (r2, r2s)):
                if r is not None and r != t:
                    self.race(buf, addr, (r, rs, "reads"), (t, stmt, "writes"))
            e[0], e[1], e[6] = t, stmt, value
        elif r1 is None:
            e[2], e[3] = t, stmt
        elif r1 != t and r2 is None:
            e[4], e[5] = t, stmt

    def log_global(self, buf, addr, write: bool, stmt: str, value=None):
        """An access of global memory in this launch: accesses of two threads are
        ordered only within one block, across a barrier."""
        entries = self.glog.setdefault(buf, {})
        cl = self.cluster
        me = (self.block, self.cur, self.phase, cl and cl.serial, cl and cl.phase)
        e = entries.get(addr)
        if e is None:
            entries[addr] = [me, stmt, value, None, None] if write else \
                [None, None, None, me, stmt]
            return
        w, ws, wv, r, rs = e
        if w is not None and self.unordered(w, me) and not (write and _same(wv, value)):
            self.global_race(buf, addr, (w, ws, "writes", wv),
                             (me, stmt, "writes" if write else "reads", value))
        if write:
            if r is not None and self.unordered(r, me):
                self.global_race(buf, addr, (r, rs, "reads", None),
                                 (me, stmt, "writes", value))
            e[0], e[1], e[2] = me, stmt, value
        elif r is None or not self.unordered(r, me):
            e[3], e[4] = me, stmt

    @staticmethod
    def unordered(a, b) -> bool:
        """Two accesses ``(block, thread, phase, cluster, cluster phase)`` of different
        threads: in one phase of one block, in one cluster phase of two blocks of one
        cluster, or in blocks of different clusters (or without clusters)."""
        if (a[0], a[1]) == (b[0], b[1]):
            return False
        if a[0] == b[0]:
            return a[2] == b[2]
        return a[3] is None or a[3] != b[3] or not ordered(a[4], b[4])

    def global_race(self, buf, addr, first, second):
        (k1, s1, how1, v1), (k2, s2, how2, v2) = first, second
        th1, th2 = (k1[0], self.threads[k1[1]]), (k2[0], self.threads[k2[1]])
        what = ""
        if how1 == how2 == "writes":
            what = (f" different values ({v1} and {v2}: a value each thread computes "
                    "for itself, or one nothing initialised)")
        raise RaceError(
            f"data race on global buffer {buf.name} at address {addr}: thread {th1[1]} "
            f"of block {th1[0]} {how1} it in `{s1}` and thread {th2[1]} of block "
            f"{th2[0]} {how2}{' it' if not what else ''}{what} in `{s2}`, with no "
            "__syncthreads() between them (threads of different blocks are never "
            "ordered within a launch, but by a cluster barrier within a cluster). "
            "Store from one thread (a predicate such as threadIdx.x == 0), or give each "
            "thread its own addresses",
            buffer=buf.name, address=addr, threads=(th1, th2), statements=(s1, s2))

    def race(self, buf, addr, first, second):
        (t1, s1, k1), (t2, s2, k2) = first, second
        th1, th2 = self.threads[t1], self.threads[t2]
        blk = self.block
        raise RaceError(
            f"data race on shared buffer {buf.name} at address {addr} in block {blk}: "
            f"thread {th1} {k1} it in `{s1}` and thread {th2} {k2} it in `{s2}`, with no "
            "__syncthreads() between them (the same phase). Insert a barrier between the "
            "two statements (T.lower for a GPU target does: check the IR was lowered by "
            "it) or make each thread use its own addresses",
            buffer=buf.name, address=addr, threads=(th1, th2), statements=(s1, s2))


def _same(a, b) -> bool:
    """Whether two stored values are equal (NaN never is: an uninitialised value)."""
    if a is None or b is None:
        return False
    try:
        return bool(np.all(np.asarray(a) == np.asarray(b)))
    except (TypeError, ValueError):
        return False


def _warp_calls(s) -> list:
    out = []
    post_order_visit(s, lambda n: out.append(n) if warp_combiner(n) is not None else None)
    return out


def _collective(s) -> bool:
    """Whether ``s`` holds a collective op (a barrier, a warp reduction, a tile op: the
    op registry's ``collective``), an mbarrier wait (which may block: a branch holding
    one runs as a task, :mod:`cuvil_tir.interp.gpu_tasks`) or a shared allocation (run
    for the whole block)."""
    hit = []

    def look(n):
        if (isinstance(n, Call) and (collective(n) is not None
                                     or asynchronous(n) == "mbarrier_wait")) or (
                isinstance(n, Allocate) and (n.buffer.scope == "shared"
                                             or per_warp(n.buffer.scope))):
            hit.append(1)
    post_order_visit(s, look)
    return bool(hit)


class GpuStmtCompiler(StmtCompiler):
    """:class:`~cuvil_tir.interp.stmts.StmtCompiler` with GPU kernels run collectively.

    Example::

        >>> from cuvil_tir.interp.exprs import Frame
        >>> GpuStmtCompiler(Frame(), check_races=True).g.check
        True
    """

    def __init__(self, frame, check_races: bool = False):
        super().__init__(frame)
        self.g = _Block(check_races)
        self.in_kernel = False
        self.kernel_writes: set = set()
        self.stmt_text: list = []

    # statements compiled for one thread ----------------------------------------------
    def stmt(self, s):
        if not self.in_kernel and is_thread_loop(s):
            return self._kernel(s)
        return super().stmt(s)

    def _s_For(self, s):
        if not (self.in_kernel and is_thread_loop(s)):
            return super()._s_For(s)
        fext = self.expr(s.extent)
        axis, g = thread_axis(s.thread_tag), self.g
        with self.binding(s.loop_var) as k:
            body = self.stmt(s.body)
        env = self.frame.env

        def bound():
            v = g.index(axis)
            if v < as_index(fext()):
                env[k] = v
                body()
        return bound

    def _s_Evaluate(self, s):
        role = asynchronous(s.value)
        if role is not None:
            run = compile_tma if role == "tma_load" else compile_mbarrier \
                if role in MBARRIER_ROLES else compile_async
            return run(self, s.value, role, self.g.copies, self.g)
        if is_barrier(s):
            return lambda: None       # outside a kernel, or in un-lowered IR
        return super()._s_Evaluate(s)

    def _s_BufferStore(self, s):
        if not self.g.check:
            return compile_store(self, s)
        # races name whole statements, loads included
        self.stmt_text.append(to_text(s))
        try:
            if not self._checked(s.buffer):
                return compile_store(self, s)
            return self._logged(s, compile_store(self, s), True)
        finally:
            self.stmt_text.pop()

    def _BufferLoad(self, e):
        if not (self.g.check and self._checked(e.buffer)):
            return compile_load(self, e)
        return self._logged(e, compile_load(self, e), False)

    def _checked(self, buf) -> bool:
        """Shared memory, and global memory the kernel writes (what is only read
        cannot race), are logged."""
        return buf.scope == "shared" or (buf.scope == "global" and
                                         id(buf) in self.kernel_writes)

    def _logged(self, node, inner, write):
        fs = [self.expr(ix) for ix in node.indices]
        buf, g = node.buffer, self.g
        text = self.stmt_text[-1] if self.stmt_text else to_text(node)
        lanes = max(ix.lanes for ix in node.indices) if node.indices else 1
        log = g.log if buf.scope == "shared" else g.log_global
        slot, bufs, kind = self.buffer(buf, node), self.frame.bufs, \
            "writes" if write else "reads"

        def in_flight(addrs):
            # an asynchronous copy's destination may not be touched before it lands
            arr = bufs[slot]
            for a in addrs:
                flat = a if not isinstance(a, tuple) else int(
                    np.ravel_multi_index(a, arr.shape))
                g.copies.check(arr, flat, g.thread, kind, text, g.threads)

        def addr():
            vals = [f() for f in fs]
            if lanes > 1:
                vals = [v if isinstance(v, tuple) else (v,) * lanes for v in vals]
                return [a[0] if len(a) == 1 else a for a in zip(*vals)]
            return [vals[0] if len(vals) == 1 else tuple(vals)]

        if write:
            def store():
                addrs = addr()
                if g.copies.busy:
                    in_flight(addrs)
                inner()
                arr = bufs[slot]
                for a in addrs:
                    log(buf, a, True, text, arr[a])
            return store

        def load():
            addrs = addr()
            if g.copies.busy:
                in_flight(addrs)
            for a in addrs:
                log(buf, a, False, text)
            return inner()
        return load

    # kernels ---------------------------------------------------------------------------
    def _kernel(self, root):
        dims = {}
        for lp in thread_loops(root):
            dims.setdefault(lp.thread_tag, []).append(self.expr(lp.extent))
        writes = []
        post_order_visit(root, lambda n: writes.append(n.buffer)
                         if isinstance(n, BufferStore) else None)
        self.kernel_writes = {id(b) for b in writes if b.scope == "global"}
        self.in_kernel = True
        try:
            body = self.coll(root)
        finally:
            self.in_kernel = False
            self.kernel_writes = set()
        g, shape = self.g, cluster_shape(root)

        def kernel():
            grid, block = launch_shape({t: max(as_index(f()) for f in fs)
                                        for t, fs in dims.items()})
            g.glog = {}
            if shape is None:
                for bz, by, bx in itertools.product(*(range(n) for n in reversed(grid))):
                    g.start((bx, by, bz), block)
                    body()
            else:
                _run_clusters(g, body, grid, block, shape)
            g.glog = {}
        return kernel

    def coll(self, s):
        """The closure running ``s`` for every thread of the current block."""
        if not _collective(s):
            return self._each_thread(self.stmt(s))
        if is_barrier(s):
            g, cluster = self.g, is_cluster_sync(s)

            def sync():
                g.logs = {}
                g.phase += 1
                g.copies.barrier()
                if cluster and g.cluster is not None:
                    g.cluster.barrier()
            return sync
        for op, step in ((ARRIVE_OP, Cluster.arrive), (WAIT_OP, Cluster.wait)):
            if is_cluster_sync(s, op):
                # a plain launch is a cluster of one block: nothing to order with
                return lambda step=step: step(self.g.cluster) if self.g.cluster else None
        if isinstance(s, SeqStmt):
            fs = [self.coll(c) for c in s.seq]

            def run_seq():
                for f in fs:
                    f()
            return run_seq
        if isinstance(s, For):
            return self._coll_for(s)
        if isinstance(s, IfThenElse):
            return self._coll_if(s)
        if isinstance(s, LetStmt):
            fv = self.expr(s.value)
            with self.binding(s.var) as k:
                body = self.coll(s.body)
            return self._per_thread_slot(("e", k), lambda t: fv(), body)
        if isinstance(s, Allocate):
            return self._coll_alloc(s)
        if _warp_calls(s):
            return self._coll_warp(s)
        if isinstance(s, Evaluate) and tiles_of(s.value):
            return self._coll_tiles(s.value)
        if isinstance(s, Evaluate) and collective(s.value) in ("warp", "warpgroup"):
            return self._coll_group(s.value)
        if isinstance(s, Evaluate) and asynchronous(s.value) == "mbarrier_wait":
            return self._each_thread(self.stmt(s))
        raise LoweringError(f"the GPU interpreter cannot run a barrier inside "
                            f"{type(s).__name__}:\n{to_text(s)}")

    def _Call(self, e):
        if e.op == DSMEM_OP and self.in_kernel:
            return compile_dsmem_load(self, e)
        if warp_combiner(e) is not None:
            g = self.g
            return lambda: g.warp_vals[g.cur]
        return super()._Call(e)

    def _coll_warp(self, s):
        """A statement with one warp shuffle: every thread's operand first, then the
        butterfly of ``__shfl_xor_sync`` within each group of ``width`` lanes."""
        calls = _warp_calls(s)
        if len(calls) != 1:
            raise LoweringError(f"the GPU interpreter runs one warp shuffle per "
                                f"statement, found {len(calls)}:\n{to_text(s)}")
        call = calls[0]
        farg = self.expr(call.args[0])
        width = as_index(self.expr(call.args[1])())
        op = binary_op(warp_combiner(call), call.dtype)
        store = self.stmt(s)
        g, env, bufs = self.g, self.frame.env, self.frame.bufs

        def run():
            vals = []
            for t, ctx in g.members():
                g.set_thread(t)
                for (kind, slot), v in ctx.items():
                    (env if kind == "e" else bufs)[slot] = v
                vals.append(farg())
            if len(vals) % width:
                raise LoweringError(f"a warp shuffle over groups of {width} lanes in a "
                                    f"block of {len(vals)} threads")
            o = width // 2
            while o >= 1:
                vals = [op(vals[i], vals[i ^ o]) for i in range(len(vals))]
                o //= 2
            g.warp_vals = vals
            for t, ctx in g.members():
                g.set_thread(t)
                for (kind, slot), v in ctx.items():
                    (env if kind == "e" else bufs)[slot] = v
                store()
        return run

    def _coll_tiles(self, call):
        """A tile op (``tiles`` in the op registry, e.g. a tensor-core step): once per
        warp of 32 lanes (a warpgroup of 128 for a ``warpgroup`` op), which must agree
        on the tiles; the op's ``reference`` computes the written tiles from all of
        them."""
        tiles = tiles_of(call)
        spec = get_op(call.op)
        lanes = group_lanes(spec.collective)
        args = [call.args[t.arg] for t in tiles]
        slots = [self.buffer(a.buffer, call) for a in args]
        fidx = [[self.expr(ix) for ix in a.indices] for a in args]
        flds = [self.expr(call.args[t.ld_arg]) if t.ld_arg is not None else None
                for t in tiles]
        g, bufs = self.g, self.frame.bufs
        text = to_text(call)
        # a swizzle argument is a constant the lowering appended (cuvil_tir.swizzle)
        swizzles = [Swizzle.unpack(call.args[t.swizzle_arg].value)
                    if t.swizzle_arg is not None else None for t in tiles]

        def where():
            return [tile_origin(bufs[slot].shape, [as_index(f()) for f in fs],
                                None if fld is None else as_index(fld()), t.rows, t.cols)
                    for slot, fs, fld, t in zip(slots, fidx, flds, tiles)]

        def run():
            for w, seen in self._group_values(
                    lanes, where, f"a {spec.collective}-wide tile op needs whole groups "
                    f"of {lanes} threads", lambda w, a, b: f"the lanes of warp {w // 32} "
                    f"pass different tiles to a warp-wide op ({a} vs {b}): all 32 lanes "
                    f"must take part together", text):
                g.set_thread(w)
                if spec.lands is not None:
                    run_landing(g, call, spec, tiles, args, [bufs[k] for k in slots], seen,
                                text, swizzles)
                else:
                    self._tiles_once(spec, tiles, args, slots, seen, text, swizzles)
        return run

    def _coll_group(self, call):
        """A group-wide op on no data (``setmaxnreg``): run by whole groups of lanes
        (a warp, a warpgroup of 128), each passing the same arguments; it computes
        nothing the program sees."""
        spec = get_op(call.op)
        lanes = group_lanes(spec.collective)
        fargs = [self.expr(a) for a in call.args]
        text = to_text(call)

        def run():
            # only the checks run: the op computes nothing the program sees
            list(self._group_values(
                lanes, lambda: [as_index(f()) for f in fargs],
                f"{call.op} runs on whole groups of {lanes} threads together",
                lambda w, a, b: f"the threads of {spec.collective} {w // lanes} pass "
                f"different arguments to {call.op} ({a} vs {b})", text))
        return run

    def _group_values(self, lanes, value, whole, differ, text):
        """Yields ``(first thread, value)`` per group of ``lanes`` threads running a
        group-wide op, ``value()`` evaluated on each lane and required equal on all of
        them (a ``LoweringError`` names the op otherwise: ``whole`` when the running
        threads are not whole groups, ``differ(first, a, b)`` when two lanes
        disagree).  A generator: the caller runs a group's op with that group's last
        lane's buffers bound, before the next group's lanes are bound."""
        g, env, bufs = self.g, self.frame.env, self.frame.bufs
        members = [t for t, _ in g.members()]
        starts = sorted({t - t % lanes for t in members})
        if len(members) != lanes * len(starts):
            raise LoweringError(f"{whole}; {len(members)} threads of the block run it:"
                                f"\n{text}")
        for w in starts:
            seen = None
            for t in range(w, w + lanes):
                g.set_thread(t)
                for (kind, slot), v in g.ctxs[t].items():
                    (env if kind == "e" else bufs)[slot] = v
                got = value()
                if seen is not None and got != seen:
                    raise LoweringError(f"{differ(w, seen, got)}:\n{text}")
                seen = got
            yield w, seen

    def _tiles_once(self, spec, tiles, args, slots, seen, text, swizzles):
        g, bufs = self.g, self.frame.bufs
        arrays = {id(a.buffer): bufs[k] for a, k in zip(args, slots)}

        def log(buf, x, write):
            if g.copies.busy:
                # a tile read or written before the copy bringing it landed and was
                # waited for
                g.copies.check(arrays[id(buf)], x, g.thread, "writes" if write else "reads",
                               text, g.threads)
            if buf.scope == "shared":
                g.log(buf, x, write, text)
        apply_tiles(spec, tiles, args, [bufs[s] for s in slots], seen, text,
                    log if g.check else None, swizzles)

    def _each_thread(self, f):
        g, env, bufs = self.g, self.frame.env, self.frame.bufs

        def each():
            for t, ctx in g.members():
                g.set_thread(t)
                for (kind, slot), v in ctx.items():
                    (env if kind == "e" else bufs)[slot] = v
                f()
        return each

    def _per_thread_slot(self, key, value_of, body):
        """Give each thread its own value of a slot (``value_of(t)`` in its context)."""
        g, env, bufs = self.g, self.frame.env, self.frame.bufs

        def run():
            for t, ctx in g.members():
                g.set_thread(t)
                for (kind, slot), v in ctx.items():
                    (env if kind == "e" else bufs)[slot] = v
                ctx[key] = value_of(t)
            body()
            for ctx in g.ctxs:
                ctx.pop(key, None)
        return run

    def _coll_for(self, s):
        fext, flo = self.expr(s.extent), self.expr(s.min)
        if is_thread_loop(s):
            tag, g = s.thread_tag, self.g
            axis = thread_axis(tag)
            with self.binding(s.loop_var) as k:
                body = self.coll(s.body)

            def check_all(t):
                v = g.index(axis)
                if v >= as_index(fext()):
                    raise LoweringError(f"thread {g.threads[t]} lies outside the loop "
                                        f"bound to {tag} (extent {as_index(fext())}) that "
                                        "holds a barrier: not every thread reaches it")
                return v
            return self._per_thread_slot(("e", k), check_all, body)
        uniform = self._uniform(lambda: (as_index(flo()), as_index(fext())), s)
        with self.binding(s.loop_var) as k:
            body = self.coll(s.body)
        env = self.frame.env

        def loop():
            lo, ext = uniform()
            for v in range(lo, lo + ext):
                env[k] = v
                body()
        return loop

    def _coll_if(self, s):
        """A branch: taken by the whole block, or (holding no block barrier) by two
        groups of threads that run as interleaved tasks (warp specialization)."""
        fc = self.expr(s.condition)
        found = []
        post_order_visit(s, lambda n: found.append(1) if isinstance(n, Evaluate)
                         and is_barrier(n) else None)
        if found:
            cond = self._uniform(lambda: bool(fc()), s)
        ft = self.coll(s.then_case)
        fe = self.coll(s.else_case) if s.else_case is not None else (lambda: None)
        if found:
            return lambda: ft() if cond() else fe()
        g, env, bufs, frame = self.g, self.frame.env, self.frame.bufs, self.frame

        def run():
            sides = ([], [])
            for t, ctx in g.members():
                g.set_thread(t)
                for (kind, slot), v in ctx.items():
                    (env if kind == "e" else bufs)[slot] = v
                sides[0 if fc() else 1].append(t)
            if not sides[1]:
                return ft()
            if not sides[0]:
                return fe()
            if g.tasks is None:
                g.tasks = Tasks(g, frame)
            g.tasks.split([(sides[0], ft), (sides[1], fe)])
        return run

    def _uniform(self, f, s):
        """Evaluate ``f`` in every thread; it must agree (control flow with a barrier)."""
        g, env, bufs = self.g, self.frame.env, self.frame.bufs

        def run():
            first, lead = None, None
            for t, ctx in g.members():
                g.set_thread(t)
                for (kind, slot), v in ctx.items():
                    (env if kind == "e" else bufs)[slot] = v
                v = f()
                if lead is None:
                    first, lead = v, t
                elif v != first:
                    raise LoweringError(
                        f"threads {g.threads[lead]} and {g.threads[t]} take different paths "
                        f"through control flow that holds a barrier ({first} vs {v}); on a "
                        f"GPU not every thread would reach it:\n{to_text(s)}")
            return first
        return run

    def _coll_alloc(self, s):
        buf = s.buffer
        shape = compile_shape(self, buf)
        with self.buffer_binding(buf) as k:
            body = self.coll(s.body)
        if buf.scope == "local":
            return self._per_thread_slot(("b", k), lambda t: new_array(buf, shape()), body)
        if per_warp(buf.scope):
            # the 32 lanes of a warp (128 of a warpgroup; consecutive linear thread
            # ids) share one array
            warps: dict = {}
            lanes = group_lanes(buf.scope)

            def of_warp(t):
                if t % lanes == 0:      # a new run of the block: fresh arrays
                    warps[t // lanes] = new_array(buf, shape())
                return warps[t // lanes]
            return self._per_thread_slot(("b", k), of_warp, body)
        bufs, g, arrays = self.frame.bufs, self.g, {}

        def of_block(t):
            # a cluster's blocks run together, each with its own copy
            if g.cta(t) not in arrays:
                arrays[g.cta(t)] = new_array(buf, shape())
            return arrays[g.cta(t)]
        per_block = self._per_thread_slot(("b", k), of_block, body)

        def alloc():
            if g.cluster is not None:
                arrays.clear()
                return per_block()
            saved = bufs[k]
            bufs[k] = new_array(buf, shape())
            try:
                body()
            finally:
                bufs[k] = saved
        return alloc


def _run_clusters(g, body, grid, block, shape):
    """Every cluster of the grid, its blocks together in rank order."""
    counts = [n // s for n, s in zip(grid, shape)]
    ranks = [(r % shape[0], r // shape[0] % shape[1], r // (shape[0] * shape[1]))
             for r in range(shape[0] * shape[1] * shape[2])]
    for cz, cy, cx in itertools.product(*(range(n) for n in reversed(counts))):
        blocks = [(cx * shape[0] + x, cy * shape[1] + y, cz * shape[2] + z)
                  for x, y, z in ranks]
        cluster = Cluster(shape)
        g.start(blocks, block, cluster)
        body()
        if g.check:
            cluster.finish(g)
    g.cluster = None


__all__ = ["GpuStmtCompiler", "has_thread_loops"]
