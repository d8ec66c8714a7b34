"""Storage alignment in lowering: the ``buffer_dim_align`` annotation becomes strides.

``storage_align(block, i, axis, factor, offset)`` (a schedule primitive) only records
``(i, axis, factor, offset)`` in the block annotation ``buffer_dim_align``, as TensorIR
does.  The strides are chosen here, once the buffer has its final shape: allocation
planning (``plan_buffer_allocation``, the memory planner of every target) shrinks a
buffer to the tile a loop uses, and the alignment applies to that tile.  It is done in two steps, both called by existing passes so that every
pipeline applies it:

* :func:`record_storage_align` (called by ``lower_blocks``, which removes the blocks and
  their annotations) keeps the entries in the function attribute ``buffer_dim_align``
  as ``(buffer name, ndim, axis, factor, offset)``;
* :func:`apply_storage_align` (called by ``flatten_buffers``, after every compaction)
  gives each such allocated buffer the strides of :func:`aligned_strides` and drops the
  attribute.

Padding a stride never changes results: every access of the buffer is rewritten
through the same strided buffer.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((4, 16), name="A")
    >>> B = T.compute((4, 16), lambda i, j: A[i, j] * 2.0, name="B")
    >>> f = T.create_prim_func([A, T.compute((4, 16), lambda i, j: B[i, j], name="C")])
    >>> from cuvil_tir.transform.lower_blocks import lower_blocks
    >>> g = lower_blocks(_annotate(f, "B", ((0, 0, 8, 1),)))
    >>> g.attr(ALIGN_KEY)
    (('B', 2, 0, 8, 1),)
    >>> [s.value for s in apply_storage_align(g).body.buffer.strides]
    [17, 1]
"""

from __future__ import annotations
import dataclasses

from ..expr import IntImm, const
from ..function import PrimFunc
from ..stmt import Allocate
from ..visitor import Mutator

ALIGN_KEY = "buffer_dim_align"


def aligned_strides(shape, aligns: dict) -> tuple:
    """Row-major strides of ``shape`` (ints) with ``strides[axis] % factor == offset``
    for each ``axis: (factor, offset)`` of ``aligns`` (TensorIR's rule, innermost
    first: each aligned stride is the smallest one at least the packed stride).

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


class _Collect(Mutator):
    def __init__(self):
        self.entries: list = []

    def visit_Block(self, blk):
        for entry in dict(blk.annotations).get(ALIGN_KEY, ()):
            index, axis, factor, offset = (int(x) for x in entry)
            if 0 <= index < len(blk.writes):
                buf = blk.writes[index].buffer
                self.entries.append((buf.name, buf.ndim, axis, factor, offset))
        return self.generic_visit(blk)


def record_storage_align(func: PrimFunc) -> PrimFunc:
    """``func`` with the blocks' ``buffer_dim_align`` entries kept in its attribute of
    that name (by buffer name), so they outlive the blocks.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="X")])
        >>> record_storage_align(f) is f
        True
    """
    col = _Collect()
    col.visit(func.body)
    if not col.entries:
        return func
    entries = tuple(sorted(set(col.entries) | set(func.attr(ALIGN_KEY, ()))))
    return func.with_attr(ALIGN_KEY, entries)


class _Apply(Mutator):
    def __init__(self, aligns: dict):
        self.aligns = aligns          # name -> [(ndim, axis, factor, offset)]
        self.map: dict = {}

    def visit_buffer(self, buf):
        return self.map.get(buf, buf)

    def _strided(self, buf):
        entries = self.aligns.get(buf.name)
        if not entries or buf.strides or not all(isinstance(s, IntImm) for s in buf.shape):
            return buf
        aligns = {}
        for ndim, axis, factor, offset in entries:
            # a pass that added leading dimensions (double buffering) shifts the axes
            axis += buf.ndim - ndim
            if 0 <= axis < buf.ndim:
                aligns[axis] = (factor, offset)
        if not aligns:
            return buf
        strides = aligned_strides([s.value for s in buf.shape], aligns)
        dt = buf.shape[0].dtype
        return buf.with_changes(strides=tuple(const(s, dt) for s in strides))

    def visit_Allocate(self, a):
        new = self._strided(a.buffer)
        if new is not a.buffer:
            self.map[a.buffer] = new
        body = self.visit(a.body)
        if new is a.buffer and body is a.body:
            return a
        return Allocate(new, body)

    def visit_Block(self, blk):
        for buf in blk.alloc_buffers:
            new = self._strided(buf)
            if new is not buf:
                self.map[buf] = new
        out = self.generic_visit(blk)
        allocs = tuple(self.map.get(b, b) for b in out.alloc_buffers)
        if allocs == out.alloc_buffers:
            return out
        return dataclasses.replace(out, alloc_buffers=allocs)


def apply_storage_align(func: PrimFunc) -> PrimFunc:
    """``func`` whose buffers named in its ``buffer_dim_align`` attribute are allocated
    with aligned strides (see the module docstring); the attribute is dropped.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="X")])
        >>> apply_storage_align(f) is f
        True
    """
    entries = func.attr(ALIGN_KEY)
    if not entries:
        return func
    aligns: dict = {}
    for name, ndim, axis, factor, offset in entries:
        aligns.setdefault(name, []).append((ndim, axis, factor, offset))
    body = _Apply(aligns).visit(func.body)
    attrs = tuple((k, v) for k, v in func.attrs if k != ALIGN_KEY)
    return PrimFunc(func.params, body, attrs)


def _annotate(func, block_name: str, entries) -> PrimFunc:
    """``func`` with ``entries`` as block ``block_name``'s alignment (doctests)."""

    class _M(Mutator):
        def visit_Block(self, blk):
            out = self.generic_visit(blk)
            if blk.name != block_name:
                return out
            ann = dict(out.annotations)
            ann[ALIGN_KEY] = entries
            return dataclasses.replace(out, annotations=ann)

    return func.with_body(_M().visit(func.body))


__all__ = ["ALIGN_KEY", "aligned_strides", "record_storage_align", "apply_storage_align"]
