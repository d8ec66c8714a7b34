"""Copies that every thread of a block repeats, run once in the serial reference.

A MetaSchedule sketch copies a tile into shared memory with a loop that every thread
runs whole (``meta_schedule.cooperative_fetch`` splits it over the threads only when
TVM completes the sketch).  The sketch's meaning, its thread loops run serially, then
repeats each such copy once per thread and vthread: TVM's 1024 x 1024 x 1024 matmul
sketch (``test_meta_schedule_space_cuda_async``) stores 7e10 elements that way, hours
of the reference run for a copy whose every repetition stores the same values.

:func:`once_per_thread` guards such a block with ``t == first`` for each thread loop
``t`` (``threadIdx``/``vthread``) that neither its bindings, its predicate nor its
body use, where repeating it provably changes nothing: the block is no reduction,
stores one buffer that no other store of the function writes and that it does not
read, and reads only buffers that no store of the function writes.  Every repetition
then stores the very values the first stored, so the serial meaning is unchanged.

Example::

    >>> import cuvil_tir as T
    >>> f = T.parse('''
    ... @T.prim_func
    ... def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    ...     S = T.alloc_buffer((8,), scope="shared")
    ...     for tx in T.thread_binding(8, thread="threadIdx.x"):
    ...         for i in range(8):
    ...             with T.block("S"):
    ...                 v = T.axis.spatial(8, i)
    ...                 S[v] = A[v]
    ...         with T.block("B"):
    ...             v = T.axis.spatial(8, tx)
    ...             B[v] = S[v] * T.float32(2)
    ... ''')
    >>> "T.where(tx == 0)" in T.to_text(once_per_thread(f))
    True
"""

from __future__ import annotations

from cuvil_tir.arith import simplify
from cuvil_tir.expr import IntImm
from cuvil_tir.stmt import BlockRealize, BufferStore
from cuvil_tir.thread_axes import is_thread_axis, thread_axis
from cuvil_tir.visitor import Mutator, post_order_visit, used_vars


def _stored(node) -> dict:
    """``{id(buffer): number of BufferStore nodes writing it}`` in ``node``."""
    count: dict = {}

    def see(n):
        if isinstance(n, BufferStore):
            count[id(n.buffer)] = count.get(id(n.buffer), 0) + 1
    post_order_visit(node, see)
    return count


def _repeatable(realize, stored) -> bool:
    """Whether running ``realize`` again stores only what it stored the first time."""
    blk = realize.block
    if blk.init is not None or len(blk.writes) != 1 or not isinstance(blk.body, BufferStore):
        return False
    out = blk.writes[0].buffer
    if blk.body.buffer is not out or stored.get(id(out)) != 1:
        return False
    reads = {id(r.buffer) for r in blk.reads}
    return id(out) not in reads and not any(b in stored for b in reads)


class _Once(Mutator):
    def __init__(self, stored):
        self.stored = stored
        self.threads = []                       # enclosing (var, first) thread loops

    def visit_For(self, loop):
        tag = loop.thread_tag if loop.kind == "thread_binding" else None
        inner = tag is not None and is_thread_axis(tag) and \
            thread_axis(tag).level in ("thread", "virtual")
        if inner:
            self.threads.append((loop.loop_var, loop.min))
        try:
            return super().generic_visit(loop)
        finally:
            if inner:
                self.threads.pop()

    def visit_BlockRealize(self, realize):
        if not self.threads or not _repeatable(realize, self.stored):
            return super().generic_visit(realize)
        used = {id(v) for v in used_vars(realize)}
        unused = [(v, first) for v, first in self.threads if id(v) not in used]
        if not unused:
            return realize
        guard = realize.predicate
        for v, first in unused:
            cond = v == first
            guard = cond if isinstance(guard, IntImm) and guard.value == 1 else guard & cond
        return BlockRealize(realize.iter_values, simplify(guard), realize.block)


def once_per_thread(func):
    """``func`` with each copy that all threads of a block repeat identically guarded to
    run at the first thread (module docstring); the serial meaning is unchanged.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> once_per_thread(f) is f
        True
    """
    return func.with_body(_Once(_stored(func.body)).visit(func.body))


__all__ = ["once_per_thread"]
