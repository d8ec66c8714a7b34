"""``set_scope`` and ``storage_align``: where and how an intermediate buffer is stored.

``set_scope(block, i, scope)`` moves the block's ``i``-th write buffer to another
storage scope.  ``storage_align(block, i, axis, factor, offset)`` pads the buffer's
layout so that ``strides[axis] % factor == offset`` (the classic trick against shared
memory bank conflicts); it is recorded both on the buffer (its ``strides``) and on the
block (annotation ``buffer_dim_align``, as in TVM).  Neither changes results.

Before ``storage_align(B, 0, axis=0, factor=8, offset=1)`` on ``B: (4, 16)``::

    B = T.alloc_buffer((4, 16))            # strides (16, 1)

after::

    B = T.alloc_buffer((4, 16), strides=(17, 1))

Example::

    >>> import cuvil_tir as T
    >>> from schedules.handles import BlockRV
    >>> A = T.placeholder((4, 16), name="A")
    >>> B = T.compute((4, 16), lambda i, j: A[i, j] * 2.0, name="B")
    >>> f = T.create_prim_func([A, T.compute((4, 16), lambda i, j: B[i, j], name="C")])
    >>> g, _ = storage_align(f, BlockRV("B"), 0, 0, 8, 1)
    >>> [s.value for s in g.body.block.alloc_buffers[0].strides]
    [17, 1]
"""

from __future__ import annotations

from cuvil_tir.buffer import Buffer
from cuvil_tir.expr import IntImm, const
from cuvil_tir.visitor import Mutator

from cuvil_tir.analysis import tree
from ..analysis import block_path
from ..primitive import BLOCK, primitive
from ..errors import StorageError, fail
from cuvil_tir.analysis.regions import is_param
from .compute_location import with_fields

ALIGN_KEY = "buffer_dim_align"


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


@primitive("set_scope", block=BLOCK)
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
    if not isinstance(scope, str) or not scope:
        raise fail(StorageError, prim, f"scope must be a storage scope name such as "
                   f"'global', 'local' or 'shared', got {scope!r}", func)
    _, _, buf = _write_buffer(func, block, buffer_index, prim)
    if buf.scope == scope:
        return func, None
    new = Buffer(buf.shape, buf.dtype, buf.name, buf.strides, scope, buf.align)
    return _replace_buffer(func, buf, new), None


def aligned_strides(shape, aligns: dict) -> tuple:
    """Row-major strides of ``shape`` (ints) with ``strides[axis] % factor == offset``
    for each ``axis: (factor, offset)`` of ``aligns`` (TVM's rule, innermost first).

    Example::

        >>> aligned_strides((4, 16), {0: (8, 1)})
        (17, 1)
    """
    out = []
    stride = 1
    for axis in reversed(range(len(shape))):
        if axis in aligns:
            factor, offset = aligns[axis]
            stride += (factor + offset - stride % factor) % factor
        out.append(stride)
        stride *= shape[axis]
    return tuple(reversed(out))


@primitive("storage_align", block=BLOCK)
def storage_align(func, block, buffer_index: int, axis: int, factor: int, offset: int):
    """Pad dimension ``axis`` of a written buffer so its stride is
    ``k * factor + offset`` (avoids shared-memory bank conflicts).

    Before/after ``storage_align(B, 0, 0, 32, 1)`` on a (16, 32) buffer::

        B = T.alloc_buffer((16, 32))      B = T.alloc_buffer((16, 32), strides=(33, 1))

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
    if not 0 <= axis < buf.ndim:
        raise fail(StorageError, prim, f"axis {axis} is out of range for buffer "
                   f"{buf.name!r} of {buf.ndim} dimension(s); expected 0 <= axis < "
                   f"{buf.ndim}", func)
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
    aligns = {e[1]: (e[2], e[3]) for e in entries if e[0] == buffer_index}
    strides = aligned_strides([s.value for s in buf.shape], aligns)
    new = Buffer(buf.shape, buf.dtype, buf.name,
                 tuple(const(s, buf.shape[0].dtype) for s in strides), buf.scope, buf.align)

    def annotate(ann):
        ann[ALIGN_KEY] = entries
        return ann

    return _replace_buffer(func, buf, new, blk.name, annotate), None
