"""``hoist_static_allocations``: buffers of static memories allocated once, at the top.

A static memory (an accelerator scratchpad: ``instance="static"`` in the target's
memory table) holds each buffer at an address fixed before the program runs.  The
memory planner has already shrunk each buffer to its tile and the software pipeline
has given multi-buffered tiles their versions; this pass moves every allocation in a
static memory to the top of the function, so one address serves every iteration and
the address planner sees all of them.  Moving an allocation out
of a loop never changes results: a buffer has no initial contents.

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.transform.memory_table import MemorySpec
    >>> L = T.decl_buffer((16,), "int8", "L", scope="npu.inp")
    >>> i = T.var("i")
    >>> body = T.For(i, T.const(0), T.const(4), "serial", T.Allocate(L, T.Evaluate(T.const(0))))
    >>> table = {"npu.inp": MemorySpec("npu.inp", "static")}
    >>> out = hoist_static_allocations(T.PrimFunc([], body), table)
    >>> type(out.body).__name__, out.body.buffer.name
    ('Allocate', 'L')
"""

from __future__ import annotations

from ..stmt import Allocate
from ..visitor import Mutator
from .memory_table import memory_table


def hoist_static_allocations(func, table=None):
    """``func`` with the allocations of static memories at its top, in program order
    (``table``: the memory table, default the ``PassContext`` target's).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> hoist_static_allocations(f, {}) is f
        True
    """
    table = memory_table() if table is None else table
    static = {s for s, spec in (table or {}).items() if spec.static}
    if not static:
        return func
    hoisted = []

    class _Strip(Mutator):
        def visit_Allocate(self, a):
            body = self.visit(a.body)
            if a.buffer.scope not in static:
                return a if body is a.body else Allocate(a.buffer, body)
            if not any(b is a.buffer for b in hoisted):    # a pipeline's prologue
                hoisted.append(a.buffer)                      # repeats allocations
            return body

    body = _Strip().visit(func.body)
    if not hoisted:
        return func
    for buf in reversed(hoisted):
        body = Allocate(buf, body)
    return func.with_body(body)


__all__ = ["hoist_static_allocations"]
