"""How much shared memory a GPU function needs as written, at least: counted, not
estimated.

A MetaSchedule sketch may stage more data in shared memory than any GPU holds (its
tile sizes are sampled; TVM's ``VerifyGPUCode`` postprocessor rejects such a
candidate before building it).  Cuvil refuses it too, sizing shared tiles by its own
bounding boxes; to tell "TVM refuses it as well" from "Cuvil's boxes are too loose",
this module counts the distinct elements that one thread block's stores write into
each shared buffer while that buffer is live: the stores' loops inside the kernel
are enumerated (``blockIdx`` loops and the loops that also enclose a read of the
buffer held at their first iteration; thread and virtual-thread loops enumerated,
their iterations share the block's buffer), the block predicates and enclosing
conditions applied, the distinct indices counted with numpy.  TVM's compacted
allocation holds at least every element written while the buffer is live, so when
one buffer alone needs more bytes than the largest GPU offers (sm_90: 227 KB), TVM
refuses the function too.  Stores that are not plain (an index the evaluator does
not know, a loop extent that depends on an enumerated loop) give no bound.

Example::

    >>> import cuvil_tir as T
    >>> f = T.parse('''
    ... @T.prim_func
    ... def f(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64,), "float32")):
    ...     S = T.alloc_buffer((64, 64), scope="shared")
    ...     for bx in T.thread_binding(2, thread="blockIdx.x"):
    ...         for tx in T.thread_binding(32, thread="threadIdx.x"):
    ...             for i in range(64):
    ...                 with T.block("S"):
    ...                     v0 = T.axis.spatial(64, i)
    ...                     v1 = T.axis.spatial(64, bx * 32 + tx)
    ...                     S[v0, v1] = A[v0, v1]
    ...             with T.block("B"):
    ...                 v = T.axis.spatial(64, bx * 32 + tx)
    ...                 B[v] = S[0, v]
    ... ''')
    >>> shared_lower_bound(f)
    8192
"""

from __future__ import annotations

import numpy as np

from cuvil_tir import dtype as D
from cuvil_tir.expr import (EQ, GE, GT, LE, LT, NE, Add, And, BufferLoad, Cast, FloorDiv,
                            FloorMod, IntImm, Max, Min, Mul, Not, Or, Select, Sub, Var)
from cuvil_tir.stmt import Block, BlockRealize, BufferStore, For, IfThenElse
from cuvil_tir.visitor import post_order_visit

#: iterations evaluated at once
CHUNK = 1 << 20
SHARED = ("shared", "shared.dyn")

_NP = {Add: np.add, Sub: np.subtract, Mul: np.multiply, FloorDiv: np.floor_divide,
       FloorMod: np.mod, Min: np.minimum, Max: np.maximum, EQ: np.equal, NE: np.not_equal,
       LT: np.less, LE: np.less_equal, GT: np.greater, GE: np.greater_equal,
       And: np.logical_and, Or: np.logical_or}


class _Unknown(Exception):
    pass


def _eval(e, env):
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Var):
        if id(e) not in env:
            raise _Unknown(e.name)
        return env[id(e)]
    fn = _NP.get(type(e))
    if fn is not None:
        return fn(_eval(e.a, env), _eval(e.b, env))
    if isinstance(e, Not):
        return np.logical_not(_eval(e.a, env))
    if isinstance(e, Select):
        return np.where(_eval(e.condition, env), _eval(e.true_value, env),
                        _eval(e.false_value, env))
    if isinstance(e, Cast) and not D.is_float(e.dtype):
        return _eval(e.value, env)
    raise _Unknown(type(e).__name__)


class _Store:
    def __init__(self, store, loops, conds, binds):
        self.store, self.loops, self.conds, self.binds = store, loops, conds, binds


def _walk(func):
    """``(shared buffers, their stores, the loop ids enclosing a read of each)``."""
    buffers, stores, reads = {}, {}, {}

    def read(node, loops):
        def look(n):
            if isinstance(n, BufferLoad) and id(n.buffer) in buffers:
                reads.setdefault(id(n.buffer), set()).update(id(lp) for lp in loops)
        post_order_visit(node, look)

    def visit(s, loops, conds, binds):
        if isinstance(s, For):
            visit(s.body, loops + (s,), conds, binds)
        elif isinstance(s, IfThenElse):
            read(s.condition, loops)
            visit(s.then_case, loops, conds + (s.condition,), binds)
            if s.else_case is not None:
                visit(s.else_case, loops, conds + (Not(s.condition),), binds)
        elif isinstance(s, BlockRealize):
            blk = s.block
            for b in blk.alloc_buffers:
                if b.scope in SHARED:
                    buffers[id(b)] = b
            for r in blk.reads:
                if id(r.buffer) in buffers:
                    reads.setdefault(id(r.buffer), set()).update(id(lp) for lp in loops)
            inner = binds + tuple((iv.var, v) for iv, v in zip(blk.iter_vars, s.iter_values))
            visit(blk.body, loops, conds + (s.predicate,), inner)
        elif isinstance(s, Block):
            visit(s.body, loops, conds, binds)
        elif isinstance(s, BufferStore):
            read(s, loops)
            if id(s.buffer) in buffers:
                stores.setdefault(id(s.buffer), []).append(_Store(s, loops, conds, binds))
        elif hasattr(s, "seq"):
            for c in s.seq:
                visit(c, loops, conds, binds)
        elif hasattr(s, "body"):
            read(s, loops)
            visit(s.body, loops, conds, binds)
        else:
            read(s, loops)
    visit(func.body, (), (), ())
    return buffers, stores, reads


def _enumerated(loop, fixed_by_read) -> bool:
    tag = loop.thread_tag or ""
    if tag.startswith("blockIdx"):
        return False
    return tag.startswith(("threadIdx", "vthread")) or id(loop) not in fixed_by_read


def _distinct(st, buf, fixed_by_read, stop: int) -> int | None:
    """Distinct elements of ``buf`` that store ``st`` writes in one thread block (at
    most a little over ``stop``), or None when they cannot be counted."""
    env, loops = {}, []
    for lp in st.loops:
        if _enumerated(lp, fixed_by_read):
            loops.append(lp)
            continue
        try:
            env[id(lp.loop_var)] = int(_eval(lp.min, env))
        except _Unknown:
            return None
    try:
        shape = [int(_eval(d, {})) for d in buf.shape]
        ranges = [(int(_eval(lp.min, env)), int(_eval(lp.extent, env))) for lp in loops]
    except _Unknown:
        return None
    total = int(np.prod([e for _, e in ranges], dtype=np.int64)) if ranges else 1
    seen = np.zeros(0, dtype=np.int64)
    for start in range(0, total, CHUNK):
        flat = np.arange(start, min(total, start + CHUNK), dtype=np.int64)
        local = dict(env)
        for lp, (lo, ext) in zip(reversed(loops), reversed(ranges)):
            local[id(lp.loop_var)] = lo + flat % ext
            flat = flat // ext
        try:
            for var, value in st.binds:
                local[id(var)] = _eval(value, local)
            mask = np.ones(min(total, start + CHUNK) - start, dtype=bool)
            for c in st.conds:
                mask &= np.broadcast_to(np.asarray(_eval(c, local)).astype(bool), mask.shape)
            idx = [np.broadcast_to(_eval(i, local), mask.shape)[mask]
                   for i in st.store.indices]
        except _Unknown:
            return None
        if any(np.any((i < 0) | (i >= n)) for i, n in zip(idx, shape)):
            return None
        seen = np.unique(np.concatenate([seen, np.ravel_multi_index(idx, shape)]))
        if len(seen) > stop:
            break
    return len(seen)


def shared_lower_bound(func, limit: int | None = None) -> int | None:
    """Bytes of the largest shared buffer of ``func`` as its stores fill it in one
    thread block (module docstring), or None when no store could be counted;
    counting stops once a buffer exceeds ``limit`` bytes."""
    buffers, stores, reads = _walk(func)
    best = None
    for key, buf in buffers.items():
        size = D.bits(buf.dtype) // 8
        stop = (limit // size + 1) if limit else 1 << 62
        for st in stores.get(key, ()):
            n = _distinct(st, buf, reads.get(key, set()), stop)
            if n is not None:
                best = max(best or 0, n * size)
    return best


__all__ = ["shared_lower_bound"]
