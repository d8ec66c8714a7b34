"""``unsafe_set_dtype``: store an intermediate buffer in another dtype.

Every store to the buffer casts the value to the new dtype and every load casts back
to the dtype the reader used, so the function stays well typed; the values change by
the conversion (``float32`` to ``float16`` rounds), which is why the primitive is
*unsafe*: the user accepts that precision.  A parameter's dtype is the caller's and is
refused.

Before/after ``unsafe_set_dtype(B, 0, "float16")``::

    B = T.alloc_buffer((4,))                  B = T.alloc_buffer((4,), "float16")
    B[i] = A[i] * 2.0                         B[i] = T.Cast("float16", A[i] * 2.0)
    C[i] = B[i] + 1.0                         C[i] = T.Cast("float32", B[i]) + 1.0

Example::

    >>> import cuvil_tir as T
    >>> from schedules.handles import BlockRV
    >>> A = T.placeholder((4,), name="A")
    >>> B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
    >>> f = T.create_prim_func([A, T.compute((4,), lambda i: B[i] + 1.0, name="C")])
    >>> g, _ = unsafe_set_dtype(f, BlockRV("B"), 0, "float16")
    >>> g.body.block.alloc_buffers[0].dtype
    'float16'
"""

from __future__ import annotations

from cuvil_tir import dtype as D
from cuvil_tir.errors import DTypeError
from cuvil_tir.expr import BufferLoad, Cast
from cuvil_tir.stmt import BufferStore
from cuvil_tir.visitor import Mutator

from ..errors import StorageError, schedule_error
from ..primitive import BLOCK, INDEX, STR, primitive
from .buffer_ref import block_buffer, is_allocated, is_param, passed_to_calls, swap_buffer


class Retype(Mutator):
    """Loads of ``old`` read ``new`` and cast back; stores cast to ``new``'s dtype."""

    def __init__(self, old, new):
        self.old, self.new = old, new

    def visit_buffer(self, buf):
        return self.new if buf is self.old else buf

    def visit_BufferLoad(self, ld):
        out = Mutator.generic_visit(self, ld)
        if ld.buffer is not self.old:
            return out
        return Cast(ld.dtype, BufferLoad(self.new, out.indices))

    def visit_BufferStore(self, st):
        if st.buffer is not self.old:
            return Mutator.generic_visit(self, st)
        # rebuilt here, not by generic_visit: a store of the old dtype's value to the new
        # buffer is ill-typed, even for a moment
        value, indices = self.visit(st.value), self.visit(st.indices)
        lanes = D.lanes(value.dtype)
        return BufferStore(self.new, Cast(D.with_lanes(self.new.dtype, lanes), value),
                           indices)


def checked_dtype(dtype, prim: str, examples: str, func, blk) -> str:
    """``dtype`` canonical, or the ``StorageError`` of ``prim`` naming ``examples``."""
    try:
        return D.canonical(dtype)
    except DTypeError:
        raise schedule_error(StorageError, prim, f"dtype {dtype!r} is not a dtype; expected "
                             f"a name such as {examples}", func, blk) from None


@primitive("unsafe_set_dtype", block=BLOCK, buffer_index=INDEX, dtype=STR)
def unsafe_set_dtype(func, block, buffer_index: int, dtype: str):
    """Store ``block``'s ``buffer_index``-th written buffer (allocated in the function,
    not a parameter) in ``dtype``: stores cast to ``dtype``, loads cast back to the
    old dtype.  Values change by the conversion (the caller accepts it: *unsafe*).

    Before/after ``unsafe_set_dtype(B, 0, "float16")``::

        B[i] = A[i] * 2.0                 B[i] = T.Cast("float16", A[i] * 2.0)
        C[i] = B[i] + 1.0                 C[i] = T.Cast("float32", B[i]) + 1.0

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((4,), name="A")
        >>> B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute((4,), lambda i: B[i],
        ...                                                   name="C")]))
        >>> sch.unsafe_set_dtype("B", 0, "float16")
        >>> from cuvil_tir.analysis import tree
        >>> str(tree.get(sch.func, tree.find_block(sch.func, "B")).block.body)
        'B[v_i] = T.Cast("float16", A[v_i] * T.float32(2))'
    """
    prim = "unsafe_set_dtype"
    _, blk, buf = block_buffer(func, block, buffer_index, "write", prim)
    if is_param(func, buf):
        raise schedule_error(StorageError, prim, f"buffer {buf.name!r} (write "
                             f"{buffer_index} of block {blk.name!r}) is a function "
                             "parameter; its dtype is the caller's. Stage it through "
                             "cache_write first and change the cache's dtype", func, blk)
    if not is_allocated(func, buf):
        raise schedule_error(StorageError, prim, f"buffer {buf.name!r} is not allocated "
                             "in the function", func, blk)
    calls = passed_to_calls(func, buf)
    if calls:
        raise schedule_error(StorageError, prim, f"buffer {buf.name!r} is passed to "
                             f"{sorted(set(calls))}, which read(s) its memory as "
                             f"{buf.dtype}; change the dtype of a buffer the calls do not "
                             "take", func, blk)
    dt = checked_dtype(dtype, prim, "'float16' or 'int8'", func, blk)
    if D.lanes(dt) != 1 or D.lanes(buf.dtype) != 1:
        raise schedule_error(StorageError, prim, f"buffer {buf.name!r} of dtype "
                             f"{buf.dtype} to {dt}: only scalar element dtypes change",
                             func, blk)
    if dt == buf.dtype:
        return func, None
    new = buf.with_changes(dtype=dt)
    return swap_buffer(func, buf, new, Retype(buf, new).visit(func.body)), None


__all__ = ["unsafe_set_dtype"]
