"""``set_axis_separator``: group a buffer's logical axes into physical ones.

A buffer's ``axis_separators`` (see :class:`cuvil_tir.buffer.Buffer`) ask for an
N-d physical array: ``[1]`` on a ``(128, 128)`` buffer makes axis 0 one physical axis
and axis 1 another.  The primitive only records the grouping on the buffer (and so on
the parameter, for an input or output); no access changes.  Every Cuvil memory is
linear, so lowering flattens the groups together and the results never change.
``transform_layout`` sets them too, from ``AXIS_SEPARATOR`` markers in its index map.

Before/after ``set_axis_separator(B, 0, [1])``::

    B = T.alloc_buffer((128, 128))     B = T.alloc_buffer((128, 128), axis_separators=[1])

Example::

    >>> import cuvil_tir as T
    >>> from schedules.handles import BlockRV
    >>> A = T.placeholder((4, 4), name="A")
    >>> B = T.compute((4, 4), lambda i, j: A[i, j] * 2.0, name="B")
    >>> f = T.create_prim_func([A, T.compute((4, 4), lambda i, j: B[i, j], name="C")])
    >>> g, _ = set_axis_separator(f, BlockRV("B"), 0, [1])
    >>> g.body.block.alloc_buffers[0].axis_separators
    (1,)
"""

from __future__ import annotations

from cuvil_tir.buffer import check_axis_separators
from cuvil_tir.errors import ShapeError

from ..errors import StorageError, schedule_error
from ..primitive import BLOCK, INDEX, INT_LIST, STR, primitive
from .buffer_ref import block_buffer, is_allocated, is_param, swap_buffer


@primitive("set_axis_separator", block=BLOCK, buffer_index=INDEX,
           axis_separators=INT_LIST, buffer_index_type=STR)
def set_axis_separator(func, block, buffer_index: int, axis_separators,
                       buffer_index_type: str = "write"):
    """Set the ``axis_separators`` of ``block``'s ``buffer_index``-th write (or, with
    ``buffer_index_type="read"``, read) buffer: each separator ``k`` starts a new
    physical axis at logical axis ``k``.  Results never change (lowering flattens the
    groups together on Cuvil's linear memories).

    Before/after ``set_axis_separator(B, 0, [1])``::

        B = T.alloc_buffer((4, 4))        B = T.alloc_buffer((4, 4), axis_separators=[1])

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((4, 4), name="A")
        >>> B = T.compute((4, 4), lambda i, j: A[i, j] * 2.0, name="B")
        >>> sch = S.Schedule(T.create_prim_func([A, B]))
        >>> sch.set_axis_separator("B", 0, [1], buffer_index_type="read")
        >>> sch.func.params[0].axis_separators
        (1,)
    """
    prim = "set_axis_separator"
    _, blk, buf = block_buffer(func, block, buffer_index, buffer_index_type, prim)
    if not is_param(func, buf) and not is_allocated(func, buf):
        raise schedule_error(StorageError, prim, f"buffer {buf.name!r} is neither a "
                             "parameter nor allocated in the function", func, blk)
    try:
        seps = check_axis_separators(axis_separators, buf.ndim, f"buffer {buf.name!r}")
    except ShapeError as err:
        raise schedule_error(StorageError, prim, str(err).split("] ", 1)[-1], func,
                             blk) from None
    if seps == buf.axis_separators:
        return func, None
    return swap_buffer(func, buf, buf.with_changes(axis_separators=seps)), None


__all__ = ["set_axis_separator"]
