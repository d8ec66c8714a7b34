"""The buffer a layout primitive changes: a block's read or write buffer by index, and
the function with that buffer swapped for a new one everywhere.

``transform_layout``, ``set_axis_separator`` and ``unsafe_set_dtype`` name a buffer as
TVM's primitives do, by the block that accesses it and its index among the block's
reads or writes.  The buffer may be a parameter (then the parameter list changes too:
the caller passes the new buffer) or allocated in the function.

Example::

    >>> import cuvil_tir as T
    >>> from schedules.handles import BlockRV
    >>> A = T.placeholder((4,), name="A")
    >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] + 1.0, name="B")])
    >>> _, blk, buf = block_buffer(f, BlockRV("B"), 0, "read", "example")
    >>> buf.name, is_param(f, buf)
    ('A', True)
    >>> g = swap_buffer(f, buf, buf.with_changes(axis_separators=()))
    >>> g.params[0] is buf
    False
"""

from __future__ import annotations

from cuvil_tir.analysis import tree
from cuvil_tir.analysis.regions import is_param
from cuvil_tir.stmt import Allocate, Block, BufferRegion
from cuvil_tir.visitor import Mutator, Visitor
from cuvil_tir.expr import StringImm

from ..analysis import block_path
from ..errors import ScheduleArgumentError, schedule_error


def block_buffer(func, block, buffer_index, buffer_index_type: str, prim: str):
    """``(block_path, block, buffer)``: ``block``'s ``buffer_index``-th read or write
    buffer (``buffer_index_type`` is ``"read"`` or ``"write"``); a bad kind or an index
    out of range is a ``ScheduleArgumentError`` listing the block's buffers."""
    bpath = block_path(func, block, prim)
    blk = tree.get(func, bpath).block
    if buffer_index_type not in ("read", "write"):
        raise schedule_error(ScheduleArgumentError, prim,
                             f"buffer_index_type must be 'read' or 'write', found "
                             f"{buffer_index_type!r}")
    regions = blk.writes if buffer_index_type == "write" else blk.reads
    if isinstance(buffer_index, bool) or not isinstance(buffer_index, int) or \
            not 0 <= buffer_index < len(regions):
        raise schedule_error(ScheduleArgumentError, prim,
                             f"block {blk.name!r} has {len(regions)} {buffer_index_type} "
                             f"buffer(s) {[r.buffer.name for r in regions]}; "
                             f"buffer_index {buffer_index!r} is out of range")
    return bpath, blk, regions[buffer_index].buffer


def is_allocated(func, buf) -> bool:
    """Whether a block's ``alloc_buffers`` or an ``Allocate`` of ``func`` holds ``buf``.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((2,), name="A")
        >>> f = T.create_prim_func([A, T.compute((2,), lambda i: A[i], name="B")])
        >>> is_allocated(f, f.params[0])
        False
    """
    for _, s in tree.walk(func):
        if isinstance(s, Block) and any(b is buf for b in s.alloc_buffers):
            return True
        if isinstance(s, Allocate) and s.buffer is buf:
            return True
    return False


def passed_to_calls(func, buf) -> list:
    """The names of the calls (``T.call_extern`` ...) that receive ``buf`` or a region
    of it as an argument: they read its memory as laid out now, whatever the IR says.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((2,), name="A")
        >>> passed_to_calls(T.create_prim_func([A, T.compute((2,), lambda i: A[i],
        ...                                                  name="B")]), A)
        []
    """
    found = []

    class _V(Visitor):
        def visit_Call(self, c):
            if any(a is buf or isinstance(a, BufferRegion) and a.buffer is buf
                   for a in c.args):
                name = c.args[0].value if c.args and isinstance(c.args[0], StringImm) \
                    else c.op
                found.append(name)
            self.generic_visit(c)
    _V().visit(func.body)
    return found


class _Swap(Mutator):
    def __init__(self, old, new):
        self.old, self.new = old, new

    def visit_buffer(self, buf):
        return self.new if buf is self.old else buf


def swap_buffer(func, old, new, body=None):
    """``func`` with every reference to ``old`` (parameter list, allocations, regions,
    loads, stores) replaced by ``new``; ``body``, when given, is the already rewritten
    body (whose parameter still has to be swapped)."""
    body = _Swap(old, new).visit(func.body) if body is None else body
    if is_param(func, old):
        return type(func)(tuple(new if p is old else p for p in func.params), body,
                          func.attrs)
    return func.with_body(body)


__all__ = ["block_buffer", "is_allocated", "is_param", "passed_to_calls", "swap_buffer"]
