"""``insert_barriers``: a ``__syncthreads()`` between every write and read of a shared
buffer by different threads.

Conservative by construction: within a kernel, any two accesses of one ``shared``
buffer, at least one a write, may come from different threads, so a barrier
(``T.evaluate(T.call_intrin("int32", "tvm_storage_sync", "shared"))``) separates them:
read-after-write and write-after-read, in program order and across loop iterations (a loop's body is scanned a second time with what its end leaves
pending).  Barriers already in the IR are kept where they are and end a phase; none
is ever removed or moved.  A barrier goes before the outermost statement (loop,
condition) holding the conflicting access, so a loop gets one barrier, not one per
iteration of its innermost body.  Two writes of one address by different threads in
one phase are a race no barrier placement fixes; the interpreter's race checker
reports them.  The mbarriers that mbarrier ops, bulk and tensor copies take are
synchronisation objects, not data: they are no accesses here (the threads using one
wait on its phases; its init needs an explicit barrier before them).  When a kernel
uses dynamic shared memory (annotation
``dyn_shared``) every shared buffer is treated as one, since they alias.

A barrier is placed before the outermost statement that can hold it under uniform
control flow.  When two conflicting accesses both lie inside control flow that
depends on the thread (a condition or loop bound using ``threadIdx``, a value loaded
from memory, or a let of those), no barrier can be placed (not every thread would
reach it): the pass raises :class:`~cuvil_tir.errors.DivergentBarrierError` with the
kernel printed and the offending statement marked.

Example::

    >>> import cuvil_tir as T
    >>> A = T.decl_buffer((32,), "float32", "A")
    >>> S = T.decl_buffer((32,), "float32", "S", scope="shared")
    >>> tx = T.var("tx")
    >>> k = T.For(tx, T.const(0), T.const(32), "thread_binding", T.Allocate(S, T.seq(
    ...     T.BufferStore(S, A[tx], (tx,)), T.BufferStore(A, S[31 - tx], (tx,)))), "threadIdx.x")
    >>> print(T.to_text(insert_barriers(T.PrimFunc([A], k)).body))
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        with T.allocate((32,), "float32", scope="shared") as S:
            S[tx] = A[tx]
            T.evaluate(T.call_intrin("int32", "tvm_storage_sync", "shared"))
            A[tx] = S[31 - tx]
"""

from __future__ import annotations

from ..errors import DivergentBarrierError
from ..expr import BufferLoad, Call, StringImm
from ..function import PrimFunc
from ..printer import to_text
from ..stmt import (Allocate, BufferStore, Evaluate, For, IfThenElse, LetStmt, SeqStmt,
                    seq)
from ..ops.async_copy import asynchronous
from ..ops.gpu import SYNC_OP, is_block_barrier, tiles_of
from ..thread_axes import thread_axis
from ..visitor import Mutator, post_order_visit
from .gpu_threads import is_thread_loop, thread_loops


def barrier() -> Evaluate:
    """The ``__syncthreads()`` statement.

    Example::

        >>> is_barrier(barrier())
        True
    """
    return Evaluate(Call("int32", SYNC_OP, (StringImm("shared"),)))


def is_barrier(s) -> bool:
    """Whether ``s`` is a block-wide barrier.

    Example::

        >>> import cuvil_tir as T
        >>> is_barrier(T.Evaluate(T.const(0)))
        False
    """
    return isinstance(s, Evaluate) and is_block_barrier(s.value)


def _calls(s) -> list:
    out = []
    post_order_visit(s, lambda n: out.append(n) if isinstance(n, Call) else None)
    return out


def _tile_writes(s, updates: bool = False) -> list:
    """Shared buffers written by calls in ``s`` (the tiles of tile ops, such as
    tensor-core steps); ``updates``: only those also read (``readwrite``)."""
    out = []

    def look(n):
        for t in tiles_of(n) if isinstance(n, Call) else ():
            arg = n.args[t.arg]
            want = t.access == "readwrite" if updates else t.writes
            if want and isinstance(arg, BufferLoad) and arg.buffer.scope == "shared":
                out.append(arg.buffer)
    post_order_visit(s, look)
    return out


#: the argument holding the mbarrier of each op that takes one (by asynchronous role)
_BARRIER_ARG = {"mbarrier_init": 0, "mbarrier_arrive": 0, "mbarrier_wait": 0,
                "bulk_copy": 3, "tma_load": 2}


def _barrier_args(s) -> set:
    """The mbarrier elements the ops in ``s`` take: synchronisation objects, not data
    (the phases order their users; an init is followed by an explicit barrier)."""
    out = set()
    for n in _calls(s):
        k = _BARRIER_ARG.get(asynchronous(n))
        if k is not None and len(n.args) > k:
            out.add(id(n.args[k]))
    return out


class _State:
    __slots__ = ("w", "r")

    def __init__(self, w=(), r=()):
        self.w, self.r = set(w), set(r)

    def copy(self):
        return _State(self.w, self.r)

    def union(self, o):
        return _State(self.w | o.w, self.r | o.r)


class _Conflict(Exception):
    def __init__(self, stmt):
        self.stmt = stmt


class _Kernel:
    def __init__(self, func, kernel):
        self.func = func
        self.dyn = dict(kernel.annotations).get("dyn_shared", 0)
        self.dep = {id(lp.loop_var) for lp in thread_loops(kernel)
                    if thread_axis(lp.thread_tag).level == "thread"}

    def key(self, buf):
        return "<dynamic shared memory>" if self.dyn else buf

    def thread_dependent(self, e) -> bool:
        hit = []

        def look(n):
            if isinstance(n, BufferLoad) or (id(n) in self.dep):
                hit.append(1)
        post_order_visit(e, look)
        return bool(hit)

    def accesses(self, s) -> list:
        """``(buffer key, is_write)`` of a leaf statement, reads first."""
        out = []
        # a tile call reads and writes its accumulator itself, in one warp operation
        rmw = {id(n.args[t.arg]) for n in _calls(s) for t in tiles_of(n) if t.writes}
        rmw |= _barrier_args(s)

        def look(n):
            if isinstance(n, BufferLoad) and n.buffer.scope == "shared" and id(n) not in rmw:
                out.append((self.key(n.buffer), False))
        post_order_visit(s, look)
        if isinstance(s, BufferStore) and s.buffer.scope == "shared":
            out.append((self.key(s.buffer), True))
        for buf in _tile_writes(s):
            out.append((self.key(buf), True))
        return out

    # ---- simulation without inserting (divergent regions) ------------------------
    def simulate(self, s, st: _State) -> _State:
        """The state after ``s``; raises ``_Conflict`` at the first access that
        needs a barrier."""
        if is_barrier(s):
            return _State()
        if isinstance(s, SeqStmt):
            for c in s.seq:
                st = self.simulate(c, st)
            return st
        if isinstance(s, IfThenElse):
            self.leaf(s.condition, st)
            a = self.simulate(s.then_case, st.copy())
            b = self.simulate(s.else_case, st.copy()) if s.else_case is not None else st
            return a.union(b)
        if isinstance(s, For):
            self.leaf(s.extent, st)
            once = self.simulate(s.body, st.copy())
            if is_thread_loop(s):
                return once
            return self.simulate(s.body, st.union(once)).union(st)
        if isinstance(s, (LetStmt, Allocate)):
            if isinstance(s, LetStmt):
                self.leaf(s.value, st)
            return self.simulate(s.body, st)
        return self.leaf(s, st)

    def leaf(self, s, st: _State) -> _State:
        # a tile the op reads and writes itself (an accumulator) is read before this
        # statement's writes: it conflicts with writes pending from earlier ones
        for buf in _tile_writes(s, updates=True):
            if self.key(buf) in st.w:
                raise _Conflict(s)
        for key, write in self.accesses(s):
            if (key in st.r) if write else (key in st.w):
                raise _Conflict(s)
            (st.w if write else st.r).add(key)
        return st

    def entry_conflict(self, s, st: _State) -> bool:
        """Whether some access in ``s`` conflicts with what ``st`` has pending."""
        found = [self.key(b) in st.r for b in _tile_writes(s)]
        # a tile an op only writes (a copy's destination element) is no read
        sync = _barrier_args(s) | {id(n.args[t.arg]) for n in _calls(s)
                                   for t in tiles_of(n) if t.access == "write"}

        def look(n):
            if isinstance(n, BufferStore) and n.buffer.scope == "shared":
                found.append(self.key(n.buffer) in st.r)
            elif isinstance(n, BufferLoad) and n.buffer.scope == "shared" and \
                    id(n) not in sync:
                found.append(self.key(n.buffer) in st.w)
        post_order_visit(s, look)
        return any(found)

    # ---- insertion (uniform regions) --------------------------------------------
    def run(self, s, st: _State):
        """``(new s, state after)``, barriers inserted where control flow is uniform."""
        if is_barrier(s):
            return s, _State()
        if isinstance(s, SeqStmt):
            out = []
            for c in s.seq:
                c2, st = self.run(c, st)
                out.append(c2)
            return seq(*out), st
        if self.divergent(s):
            try:
                return s, self.simulate(s, st.copy())
            except _Conflict:
                pass
            try:
                after = self.simulate(s, _State())
            except _Conflict as c:
                raise self.refuse(s, c.stmt) from None
            return seq(barrier(), s), after
        if isinstance(s, (For, IfThenElse, LetStmt, Allocate)) and self.entry_conflict(s, st):
            # the barrier goes before the whole statement, not into its innermost loop
            s2, after = self.run(s, _State())
            return seq(barrier(), s2), after
        if isinstance(s, For):
            # a thread loop's iterations are the threads themselves, not a sequence
            body, once = self.run(s.body, st.copy())
            if is_thread_loop(s):
                return (For(s.loop_var, s.min, s.extent, s.kind, body, s.thread_tag,
                            s.annotations), once)
            body, again = self.run(s.body, st.union(once))
            return (For(s.loop_var, s.min, s.extent, s.kind, body, s.thread_tag,
                        s.annotations), again.union(st))
        if isinstance(s, IfThenElse):
            st = self.leaf_or_sync(s.condition, st)[1]
            a, sa = self.run(s.then_case, st.copy())
            b, sb = (self.run(s.else_case, st.copy()) if s.else_case is not None
                     else (None, st))
            return IfThenElse(s.condition, a, b), sa.union(sb)
        if isinstance(s, LetStmt):
            pre, st = self.leaf_or_sync(s.value, st)
            body, st = self.run(s.body, st)
            return seq(pre, LetStmt(s.var, s.value, body)), st
        if isinstance(s, Allocate):
            body, st = self.run(s.body, st)
            return Allocate(s.buffer, body), st
        pre, st = self.leaf_or_sync(s, st)
        return seq(pre, s), st

    def leaf_or_sync(self, s, st):
        try:
            return None, self.leaf(s, st.copy())
        except _Conflict:
            try:
                return barrier(), self.leaf(s, _State())
            except _Conflict as c:
                raise self.refuse(s, c.stmt) from None

    def divergent(self, s) -> bool:
        if isinstance(s, IfThenElse):
            return self.thread_dependent(s.condition)
        if isinstance(s, For) and not is_thread_loop(s):
            return self.thread_dependent(s.min) or self.thread_dependent(s.extent)
        if isinstance(s, LetStmt) and self.thread_dependent(s.value):
            self.dep.add(id(s.var))
        return False

    def refuse(self, region, stmt):
        where = stmt if not isinstance(stmt, SeqStmt) else region
        try:
            text = to_text(self.func, highlight=where)
        except Exception:      # noqa: BLE001 - an expression cannot be highlighted
            text = to_text(self.func, highlight=region)
        return DivergentBarrierError(
            "a __syncthreads() is needed inside control flow that depends on the thread "
            f"(the marked statement conflicts with a shared-memory access earlier in the "
            f"same branch or loop of {self.func.name}); not every thread would reach it, "
            "which deadlocks or races on a GPU. Move the shared-memory write and read out "
            "of the condition (compute the condition into a local value, or let every "
            "thread take part and mask the value):\n" + text)


class _PerKernel(Mutator):
    def __init__(self, func):
        self.func = func

    def visit_For(self, loop):
        if is_thread_loop(loop):
            return _Kernel(self.func, loop).run(loop, _State())[0]
        return self.generic_visit(loop)


def insert_barriers(func: PrimFunc) -> PrimFunc:
    """``func`` with the barriers its shared buffers need (module docstring).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> insert_barriers(f) is f
        True
    """
    body = _PerKernel(func).visit(func.body)
    return func if body is func.body else func.with_body(body)


__all__ = ["SYNC_OP", "barrier", "insert_barriers", "is_barrier"]
