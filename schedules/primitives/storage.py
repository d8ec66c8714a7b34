"""``set_scope`` and ``storage_align``: where and how an intermediate buffer is stored.

``set_scope(block, i, scope)`` moves the block's ``i``-th write buffer to another
storage scope.  ``storage_align(block, i, axis, factor, offset)`` pads the buffer's
layout so that ``strides[axis] % factor == offset`` (the classic trick against shared
memory bank conflicts); it is recorded on the block (annotation ``buffer_dim_align``,
as in TVM) and applied in lowering, to the buffer's final (compacted) allocation, by
:mod:`cuvil_tir.transform.storage_align`.  Neither changes results.

Before ``storage_align(B, 0, axis=0, factor=8, offset=1)`` on ``B: (4, 16)``::

    with T.block("B"):                     with T.block("B"):
        ...                                    T.block_attr({"buffer_dim_align": ((0, 0, 8, 1),)})

and after lowering ``B`` is allocated with strides ``(17, 1)``.

Example::

    >>> import cuvil_tir as T
    >>> from schedules.handles import BlockRV
    >>> A = T.placeholder((4, 16), name="A")
    >>> B = T.compute((4, 16), lambda i, j: A[i, j] * 2.0, name="B")
    >>> f = T.create_prim_func([A, T.compute((4, 16), lambda i, j: B[i, j], name="C")])
    >>> g, _ = storage_align(f, BlockRV("B"), 0, 0, 8, 1)
    >>> lowered = T.lower(g)["main"]
    >>> [s.value for s in lowered.body.buffer.shape]    # 4 rows of stride 17
    [68]
"""

from __future__ import annotations

from cuvil_tir.expr import IntImm
from cuvil_tir.visitor import Mutator

from cuvil_tir.analysis import tree
from cuvil_tir.transform.storage_align import ALIGN_KEY
from ..analysis import block_path
from ..primitive import BLOCK, SCOPE, primitive
from ..errors import StorageError, fail
from cuvil_tir.analysis.regions import is_param
from .nests import with_fields



class _SwapBuffer(Mutator):
    """Every reference to ``old`` (loads, stores, regions, allocations) becomes ``new``."""

    def __init__(self, old, new):
        self.old, self.new = old, new

    def visit_buffer(self, buf):
        return self.new if buf is self.old else buf


def _write_buffer(func, block, index, prim):
    bpath = block_path(func, block, prim)
    blk = tree.get(func, bpath).block
    if isinstance(index, bool) or not isinstance(index, int) or not \
            0 <= index < len(blk.writes):
        raise fail(StorageError, prim, f"buffer_index {index!r} is out of range: block "
                   f"{blk.name!r} writes {len(blk.writes)} buffer(s) "
                   f"{[w.buffer.name for w in blk.writes]}", func)
    buf = blk.writes[index].buffer
    if is_param(func, buf):
        raise fail(StorageError, prim, f"buffer {buf.name!r} (write {index} of block "
                   f"{blk.name!r}) is a function parameter; its storage is the caller's. "
                   "Stage it through cache_write first and change the cache", func)
    return bpath, blk, buf


def _replace_buffer(func, old, new, block_name=None, annotate=None):
    class _M(_SwapBuffer):
        def visit_Block(self, blk):
            out = self.generic_visit(blk)
            if blk.name == block_name:
                out = with_fields(out, annotations=annotate(dict(out.annotations)))
            return out

    return func.with_body(_M(old, new).visit(func.body))


@primitive("set_scope", block=BLOCK, scope=SCOPE)
def set_scope(func, block, buffer_index: int, scope: str):
    """Change the storage scope of ``block``'s ``buffer_index``-th written buffer.

    Before/after ``set_scope(B, 0, "shared")``::

        B = T.alloc_buffer((8,))          B = T.alloc_buffer((8,), scope="shared")

    Example::

        >>> import cuvil_tir as T
        >>> from schedules.handles import BlockRV
        >>> A = T.placeholder((4,), name="A")
        >>> B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: B[i], name="C")])
        >>> g, _ = set_scope(f, BlockRV("B"), 0, "shared")
        >>> g.body.block.alloc_buffers[0].scope
        'shared'
    """
    prim = "set_scope"
    _, _, buf = _write_buffer(func, block, buffer_index, prim)
    if buf.scope == scope:
        return func, None
    new = buf.with_changes(scope=scope)
    return _replace_buffer(func, buf, new), None


@primitive("storage_align", block=BLOCK)
def storage_align(func, block, buffer_index: int, axis: int, factor: int, offset: int):
    """Pad dimension ``axis`` of a written buffer so its stride is
    ``k * factor + offset`` (avoids shared-memory bank conflicts); a negative ``axis``
    counts from the last dimension (``-2``: the rows of a matrix), as in TVM.

    Recorded as the block annotation ``buffer_dim_align`` and applied in lowering to
    the buffer's final allocation (after compaction to the tile a loop uses).  Before
    ``storage_align(B, 0, 0, 32, 1)`` on a (16, 32) buffer, and after lowering::

        B = T.alloc_buffer((16, 32))      T.allocate((528,)): B[i, j] at i * 33 + j

    Example::

        >>> import cuvil_tir as T
        >>> from schedules.handles import BlockRV
        >>> A = T.placeholder((2, 6), name="A")
        >>> B = T.compute((2, 6), lambda i, j: A[i, j] * 2.0, name="B")
        >>> f = T.create_prim_func([A, T.compute((2, 6), lambda i, j: B[i, j], name="C")])
        >>> g, _ = storage_align(f, BlockRV("B"), 0, 0, 4, 0)
        >>> tree.get(g, tree.find_block(g, "B")).block.annotations
        (('buffer_dim_align', ((0, 0, 4, 0),)),)
    """
    prim = "storage_align"
    _, blk, buf = _write_buffer(func, block, buffer_index, prim)
    for name, v in (("axis", axis), ("factor", factor), ("offset", offset)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise fail(StorageError, prim, f"{name} must be an int, got {v!r}", func)
    if not -buf.ndim <= axis < buf.ndim:
        raise fail(StorageError, prim, f"axis {axis} is out of range for buffer "
                   f"{buf.name!r} of {buf.ndim} dimension(s); expected {-buf.ndim} <= "
                   f"axis < {buf.ndim}", func)
    axis %= buf.ndim                    # a negative axis counts from the last, as TVM's
    if factor <= 0 or not 0 <= offset < factor:
        raise fail(StorageError, prim, f"expected factor > 0 and 0 <= offset < factor, got "
                   f"factor={factor}, offset={offset}", func)
    if not all(isinstance(s, IntImm) for s in buf.shape):
        raise fail(StorageError, prim, f"buffer {buf.name!r} has a symbolic shape "
                   f"{[str(s) for s in buf.shape]}; storage_align needs a constant one",
                   func)
    recorded = dict(blk.annotations).get(ALIGN_KEY, ())
    entries = [e for e in recorded if (e[0], e[1]) != (buffer_index, axis)]
    entries.append((buffer_index, axis, factor, offset))
    entries = tuple(sorted(entries))

    def annotate(ann):
        ann[ALIGN_KEY] = entries
        return ann

    return _replace_buffer(func, buf, buf, blk.name, annotate), None
