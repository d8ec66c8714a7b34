"""A small twin of an unscheduled function, for debug mode's interpreter check.

:func:`shrink` divides the large constant extents of a function (its buffers' dimensions
and the loop extents, block domains and region extents equal to one of them) by the
smallest power of two that brings it under a number of block instances.  Index
expressions are left alone: the twin is another valid program of the same structure
when its indices follow its extents (TE's ``B[i, j] = A[i, j] ...``), and any program
at all when they do not, which is all debug mode needs -- the same primitive is applied
to the twin and its results before and after are compared.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((256, 256), name="A")
    >>> f = T.create_prim_func([A, T.compute((256, 256), lambda i, j: A[i, j] * 2.0,
    ...                                      name="B")])
    >>> small, _ = shrink(f, 5000)
    >>> [int(d) for d in small.params[0].shape]
    [64, 64]
"""

from __future__ import annotations

from cuvil_tir.buffer import Buffer
from cuvil_tir.expr import IntImm
from cuvil_tir.stmt import Allocate, Block, For, IterVar, Range
from cuvil_tir.visitor import Mutator, post_order_visit

from .analysis import total_iterations

#: extents at or below this stay as they are
SMALL = 4
#: the largest divisor tried
MAX_DIVISOR = 1 << 12


def _buffers(func) -> list:
    found = [p for p in func.params if isinstance(p, Buffer)]

    def look(n):
        if isinstance(n, Block):
            found.extend(n.alloc_buffers)
        elif isinstance(n, Allocate):
            found.append(n.buffer)

    post_order_visit(func.body, look)
    return found


class _Shrink(Mutator):
    def __init__(self, sizes: dict, bmap: dict):
        self.sizes, self.bmap = sizes, bmap

    def _ext(self, e):
        if isinstance(e, IntImm) and e.value in self.sizes:
            return IntImm(self.sizes[e.value], e.dtype)
        return e

    def visit_buffer(self, buf):
        return self.bmap.get(buf, buf)

    def visit_For(self, loop):
        new = self.generic_visit(loop)
        ext = self._ext(new.extent)
        if ext is new.extent:
            return new
        return For(new.loop_var, new.min, ext, new.kind, new.body, new.thread_tag,
                   new.annotations)

    def visit_Range(self, r):
        ext = self._ext(r.extent)
        return r if ext is r.extent else Range(r.min, ext)

    def visit_IterVar(self, iv):
        dom = self.visit_Range(iv.dom)
        return iv if dom is iv.dom else IterVar(iv.var, dom, iv.kind)


def _rewrite(func, sizes: dict):
    bmap = {}
    for buf in _buffers(func):
        shape = tuple(IntImm(sizes[d.value], d.dtype)
                      if isinstance(d, IntImm) and d.value in sizes else d
                      for d in buf.shape)
        if any(a is not b for a, b in zip(shape, buf.shape)):
            bmap[buf] = buf.with_changes(shape=shape)
    return _Shrink(sizes, bmap).visit(func)


def shrink(func, max_instances: int):
    """``(twin, "")`` running at most ``max_instances`` block instances, or ``(None,
    why)``: the shapes are not constant, or no power-of-two division of the large
    extents fits.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((3,), name="A")])
        >>> shrink(f, 10)[0] is f
        True
    """
    count = total_iterations(func.body)
    if count is None:
        return None, "some loop extent is not constant"
    if count <= max_instances:
        return func, ""
    dims = sorted({d.value for b in _buffers(func) for d in b.shape
                   if isinstance(d, IntImm) and d.value > SMALL})
    divisor = 2
    while divisor <= MAX_DIVISOR and dims:
        sizes = {v: max(SMALL, v // divisor) if v % divisor == 0 else
                 max(SMALL, -(-v // divisor)) for v in dims}
        small = _rewrite(func, sizes)
        count = total_iterations(small.body)
        if count is not None and count <= max_instances:
            return small, ""
        divisor *= 2
    return None, (f"the function runs {total_iterations(func.body)} block instances, more "
                  f"than {max_instances}, and dividing its extents {dims} does not bring "
                  "it under that")


__all__ = ["shrink"]
