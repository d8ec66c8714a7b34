"""``drop_dead_stores``: the stores into ``local`` and ``shared`` buffers whose values
nothing observable ever reads, and those buffers' allocations, removed.

A function may compute into a kernel-private buffer that is never read: TVM's lowered
cross-thread reductions leave their result in a ``local`` buffer that a test then
drops, and a removed consumer leaves its producer behind.  Such a store costs time,
and nvcc rejects the kernel ("variable was set but never used").  Liveness is a mark
and sweep over buffers: a buffer allocated in the function (``Allocate``, scope
``local`` or ``shared``) is live when something other than a store into a dead
buffer reads it (a store into a parameter or a live buffer, a condition, a loop
bound, a ``let`` value, a call); the stores into the others, whose values call
nothing but pure ops and warp reductions, are removed with their allocations (a
store whose value has another call keeps its buffer).  Runs on flattened,
block-free IR, before ``simplify`` (which drops the empty ifs and loops left).

Example::

    >>> import cuvil_tir as T
    >>> f = T.parse('''
    ... def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    ...     with T.allocate((4,), "float32", scope="local") as t:
    ...         for i in range(4):
    ...             t[i] = A[i] * T.float32(2)
    ...         for j in range(4):
    ...             B[j] = A[j]
    ... ''')
    >>> print(drop_dead_stores(f).body)
    for i in T.serial(4):
        pass
    for j in T.serial(4):
        B[j] = A[j]
"""

from __future__ import annotations

from ..buffer import Buffer
from ..expr import Call
from ..function import PrimFunc
from ..node import Node
from ..ops import get_op, has_op
from ..ops.gpu import warp_combiner
from ..stmt import Allocate, BufferStore, SeqStmt, Stmt
from ..visitor import Mutator, post_order_visit

SCOPES = ("local", "shared")


def _pure(expr) -> bool:
    bad = []

    def look(n):
        if isinstance(n, Call) and not (warp_combiner(n) is not None or (
                isinstance(n.op, str) and has_op(n.op) and get_op(n.op).effect == "pure")):
            bad.append(n)
    post_order_visit(expr, look)
    return not bad


def _buffers(node) -> set:
    found = set()

    def look(n):
        if isinstance(n, Buffer):
            found.add(id(n))
        elif isinstance(getattr(n, "buffer", None), Buffer):
            found.add(id(n.buffer))
    post_order_visit(node, look)
    return found


class _Liveness:
    def __init__(self, func):
        self.candidates: dict = {}
        post_order_visit(func.body, lambda n: self.candidates.setdefault(id(n.buffer), n.buffer)
                         if isinstance(n, Allocate) and n.buffer.scope in SCOPES else None)
        self.live: set = set()
        self.deps: dict = {}
        self.walk(func.body)
        todo = list(self.live)
        while todo:
            for dep in self.deps.get(todo.pop(), ()):
                if dep not in self.live:
                    self.live.add(dep)
                    todo.append(dep)

    def walk(self, s):
        if isinstance(s, BufferStore) and id(s.buffer) in self.candidates:
            reads = _buffers(s.value) | set().union(*(_buffers(i) for i in s.indices))
            if _pure(s.value):
                self.deps.setdefault(id(s.buffer), set()).update(reads)
            else:
                self.live.update(reads | {id(s.buffer)})
        elif isinstance(s, Allocate):
            self.walk(s.body)
        elif isinstance(s, Stmt):
            for name in s.__dataclass_fields__:
                child = getattr(s, name)
                for c in (child if isinstance(child, tuple) else (child,)):
                    if isinstance(c, Stmt):
                        self.walk(c)
                    elif isinstance(c, Node):
                        self.live.update(_buffers(c))

    @property
    def dead(self) -> set:
        return set(self.candidates) - self.live


class _Drop(Mutator):
    def __init__(self, dead: set):
        self.dead = dead

    def visit_BufferStore(self, s):
        return SeqStmt(()) if id(s.buffer) in self.dead else s

    def visit_Allocate(self, s):
        body = self.visit(s.body)
        if id(s.buffer) in self.dead:
            return body
        return s if body is s.body else Allocate(s.buffer, body)


def drop_dead_stores(func: PrimFunc) -> PrimFunc:
    """``func`` without the stores nothing reads (module docstring)."""
    dead = _Liveness(func).dead
    if not dead:
        return func
    return func.with_body(_Drop(dead).visit(func.body))


__all__ = ["drop_dead_stores"]
