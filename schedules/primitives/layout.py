"""``transform_layout``: re-index an intermediate buffer through an index map.

``index_map`` is a Python lambda over the buffer's indices returning the new indices,
e.g. ``lambda i, j: (i // 16, j, i % 16)``.  The buffer's new shape is the bounding
box of the map's image; every load, store and region of the buffer in the function is
rewritten.  Only buffers allocated inside the function may change layout: a parameter's
layout is fixed by the caller (``cache_read``/``cache_write`` it first).

Example::

    >>> import cuvil_tir as T
    >>> from schedules.handles import BlockRV
    >>> A = T.placeholder((32,), name="A")
    >>> B = T.compute((32,), lambda i: A[i] * 2.0, name="B")
    >>> C = T.compute((32,), lambda i: B[i] + 1.0, name="C")
    >>> f = T.create_prim_func([A, C])
    >>> g, _ = transform_layout(f, BlockRV("B"), 0, lambda i: (i // 8, i % 8))
    >>> [int(s) for s in g.body.block.alloc_buffers[0].shape]
    [4, 8]
"""

from __future__ import annotations

import inspect

import numpy as np

from cuvil_tir import arith
from cuvil_tir.buffer import Buffer
from cuvil_tir.errors import ScheduleError
from cuvil_tir.expr import (Add, FloorDiv, FloorMod, IntImm, Max, Min, Mul, Sub, Var,
                            as_expr, const)
from cuvil_tir.stmt import Allocate, Block, BufferRegion, Range
from cuvil_tir.visitor import Mutator, substitute

from cuvil_tir.analysis import tree
from ..errors import ScheduleArgumentError, schedule_error
from ..primitive import BLOCK, INDEX, INDEX_MAP, STR, primitive
from .reduction import resolve_block

#: maps over at most this many points are checked exhaustively (exact shape, one-to-one)
ENUMERATE_LIMIT = 1 << 22


class LayoutError(ScheduleError):
    """A buffer's layout cannot be transformed (a parameter, or a bad index map).

    Example::

        >>> LayoutError("transform_layout: A is a parameter").code
        'CVL-E103'
    """


_NP = {Add: np.add, Sub: np.subtract, Mul: np.multiply, FloorDiv: np.floor_divide,
       FloorMod: np.mod, Min: np.minimum, Max: np.maximum}


def _eval_np(e, env):
    """Evaluate an integer index expression on numpy arrays; None if unsupported."""
    if isinstance(e, IntImm):
        return np.int64(e.value)
    if isinstance(e, Var):
        return env.get(id(e))
    fn = _NP.get(type(e))
    if fn is None:
        return None
    a, b = _eval_np(e.a, env), _eval_np(e.b, env)
    if a is None or b is None:
        return None
    if fn in (np.floor_divide, np.mod) and np.any(b == 0):
        return None
    return fn(a, b)


def _apply_map(index_map, ndim: int, buf_name: str):
    try:
        sig = inspect.signature(index_map)
        names = [p.name for p in sig.parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = [f"i{d}" for d in range(ndim)]
    if len(names) != ndim:
        raise schedule_error(LayoutError, "transform_layout",
                             f"index_map takes {len(names)} index(es) but buffer "
                             f"{buf_name!r} has {ndim} dimension(s); write a lambda with "
                             f"one parameter per dimension")
    params = [Var(n, "int32") for n in names]
    out = index_map(*params)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    try:
        exprs = [as_expr(x, "int32") for x in outs]
    except Exception as err:
        raise schedule_error(LayoutError, "transform_layout",
                             f"index_map must return integer index expressions, returned "
                             f"{out!r} ({err})") from None
    for x in exprs:
        if x.dtype not in ("int32", "int64"):
            raise schedule_error(LayoutError, "transform_layout",
                                 f"index_map returned {x} of dtype {x.dtype}; indices are "
                                 "int32/int64")
    return params, exprs


def _new_shape(buf, params, exprs):
    shape = [s.value if isinstance(s, IntImm) else None for s in buf.shape]
    size = int(np.prod(shape)) if None not in shape else None
    if size is not None and size <= ENUMERATE_LIMIT:
        grids = np.meshgrid(*[np.arange(n, dtype=np.int64) for n in shape], indexing="ij")
        env = {id(p): g.ravel() for p, g in zip(params, grids)}
        vals = [_eval_np(x, env) for x in exprs]
        if all(v is not None for v in vals):
            vals = [np.broadcast_to(v, (size,)) for v in vals]
            new = []
            for x, v in zip(exprs, vals):
                if size and v.min() < 0:
                    raise schedule_error(LayoutError, "transform_layout",
                                         f"index_map gives the negative index {v.min()} "
                                         f"(from {x}) for buffer {buf.name!r}")
                new.append(const(int(v.max()) + 1 if size else 0, "int32"))
            if size:
                points = np.stack(vals, axis=1)
                uniq = np.unique(points, axis=0)
                if len(uniq) != size:
                    raise schedule_error(LayoutError, "transform_layout",
                                         f"index_map is not one-to-one on buffer "
                                         f"{buf.name!r} of shape {shape}: {size} elements "
                                         f"map to {len(uniq)} positions")
            return tuple(new)
    ranges = {p: Range(const(0, s.dtype), s) for p, s in zip(params, buf.shape)}
    new = []
    for x in exprs:
        lo, hi = arith.bound_of(x, ranges)
        if isinstance(lo, IntImm) and lo.value < 0:
            raise schedule_error(LayoutError, "transform_layout",
                                 f"index_map gives negative indices (from {x}) for "
                                 f"buffer {buf.name!r}")
        new.append(arith.simplify(hi + 1))
    return tuple(new)


def _allocated(func, buf) -> bool:
    for _, s in tree.walk(func):
        if isinstance(s, Block) and any(b is buf for b in s.alloc_buffers):
            return True
        if isinstance(s, Allocate) and s.buffer is buf:
            return True
    return False


class _Relayout(Mutator):
    def __init__(self, old, new, params, exprs):
        self.old, self.new, self.params, self.exprs = old, new, params, exprs

    def visit_buffer(self, buf):
        return self.new if buf is self.old else buf

    def _map(self, indices):
        for ix in indices:
            if ix.lanes != 1:
                raise schedule_error(LayoutError, "transform_layout",
                                     f"buffer {self.old.name!r} is accessed with the vector "
                                     f"index {ix}; transform the layout before vectorize")
        vm = dict(zip(self.params, indices))
        return tuple(arith.simplify(substitute(x, vm)) for x in self.exprs)

    def visit_BufferLoad(self, ld):
        idx = self.visit(ld.indices)
        if ld.buffer is not self.old:
            return ld if idx is ld.indices else type(ld)(ld.buffer, idx)
        return type(ld)(self.new, self._map(idx))

    def visit_BufferStore(self, st):
        idx, value = self.visit(st.indices), self.visit(st.value)
        if st.buffer is not self.old:
            if idx is st.indices and value is st.value:
                return st
            return type(st)(st.buffer, value, idx)
        return type(st)(self.new, value, self._map(idx))

    def visit_BufferRegion(self, r):
        if r.buffer is not self.old:
            return Mutator.generic_visit(self, r)
        if all(isinstance(g.extent, IntImm) and g.extent.value == 1 for g in r.region):
            return BufferRegion(self.new, tuple(Range(x, const(1, x.dtype))
                                                for x in self._map([g.min for g in r.region])))
        ranges = {p: g for p, g in zip(self.params, r.region)}
        out = []
        for d, x in enumerate(self.exprs):
            try:
                lo, hi = arith.bound_of(x, ranges)
                out.append(Range(arith.simplify(lo), arith.simplify(hi - lo + 1)))
            except Exception:  # unboundable: the whole new dimension
                out.append(Range(const(0, self.new.shape[d].dtype), self.new.shape[d]))
        return BufferRegion(self.new, tuple(out))


@primitive("transform_layout", block=BLOCK, buffer_index=INDEX, index_map=INDEX_MAP,
           buffer_index_type=STR)
def transform_layout(func, block, buffer_index: int, index_map,
                     buffer_index_type: str = "write"):
    """Re-lay out ``block``'s buffer through ``index_map`` (a lambda over its
    indices returning the new indices); every access is rewritten.

    Before/after ``transform_layout(B, 0, lambda i, j: (j, i))``::

        B = T.alloc_buffer((4, 8))        B = T.alloc_buffer((8, 4))
        B[i, j] = ...                     B[j, i] = ...

    Example::

        >>> import cuvil_tir as T
        >>> from schedules.handles import BlockRV
        >>> A = T.placeholder((4, 4), name="A")
        >>> B = T.compute((4, 4), lambda i, j: A[i, j], name="B")
        >>> f = T.create_prim_func([A, T.compute((4, 4), lambda i, j: B[i, j], name="C")])
        >>> g, _ = transform_layout(f, BlockRV("C"), 0, lambda i, j: (j, i), "read")
        >>> g.body.block.alloc_buffers[0].name
        'B'
    """
    prim = "transform_layout"
    bpath = resolve_block(func, block, prim)
    blk = tree.get(func, bpath).block
    if buffer_index_type not in ("read", "write"):
        raise schedule_error(ScheduleArgumentError, prim,
                             f"buffer_index_type must be 'read' or 'write', found "
                             f"{buffer_index_type!r}")
    regions = blk.writes if buffer_index_type == "write" else blk.reads
    if not isinstance(buffer_index, int) or not 0 <= buffer_index < len(regions):
        raise schedule_error(ScheduleArgumentError, prim,
                             f"block {blk.name!r} has {len(regions)} {buffer_index_type} "
                             f"buffer(s) {[r.buffer.name for r in regions]}; "
                             f"buffer_index {buffer_index!r} is out of range")
    if not callable(index_map):
        raise schedule_error(ScheduleArgumentError, prim,
                             f"index_map must be a lambda over the buffer's indices, found "
                             f"{index_map!r}")
    buf = regions[buffer_index].buffer
    if any(p is buf for p in func.params):
        raise schedule_error(LayoutError, prim,
                             f"buffer {buf.name!r} is a parameter of the function: its "
                             "layout is fixed by the caller; stage it through a copy with "
                             "cache_read / cache_write first and transform the copy", func,
                             blk)
    if not _allocated(func, buf):
        raise schedule_error(LayoutError, prim,
                             f"buffer {buf.name!r} is not allocated in the function "
                             "(no alloc_buffers / Allocate holds it)", func, blk)
    params, exprs = _apply_map(index_map, buf.ndim, buf.name)
    new_buf = Buffer(_new_shape(buf, params, exprs), buf.dtype, buf.name, (), buf.scope,
                     buf.align)
    body = _Relayout(buf, new_buf, params, exprs).visit(func.body)
    return func.with_body(body), None


__all__ = ["transform_layout", "LayoutError", "ENUMERATE_LIMIT"]
