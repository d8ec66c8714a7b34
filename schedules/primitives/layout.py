"""``transform_layout``: re-index an intermediate buffer through an index map.

``index_map`` is a Python lambda over the buffer's indices returning the new indices,
e.g. ``lambda i, j: (i // 16, j, i % 16)``.  The buffer's new shape is the bounding
box of the map's image; every load, store and region of the buffer in the function is
rewritten.  A layout with padding (a bounding box larger than the buffer) needs a
``pad_value`` to fill it (see :mod:`schedules.primitives.layout_padding` for where it
is written); a parameter may change layout too (its caller then passes the new layout).
The map itself (``*rest`` parameters, ``AXIS_SEPARATOR``) is read by
:mod:`schedules.primitives.index_maps`.

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

import dataclasses

import numpy as np

from cuvil_tir import arith
from cuvil_tir import dtype as D
from cuvil_tir.buffer import check_axis_separators
from cuvil_tir.errors import ShapeError
from cuvil_tir.expr import IntImm, Var, const
from cuvil_tir.swizzle import SWIZZLE_KEY
from cuvil_tir.analysis import tree
from cuvil_tir.analysis.regions import union
from cuvil_tir.block_regions import infer_block_regions
from cuvil_tir.stmt import BufferRegion, Range
from cuvil_tir.visitor import Mutator, substitute

from ..errors import LayoutError, schedule_error
from ..primitive import BLOCK, INDEX, INDEX_MAP, STR, primitive
from .index_eval import eval_np
from .layout_tiles import map_swizzle, tile_layout, written_swizzle
from .layout_padding import inverse_of, pad_value_at, padding_predicate, write_padding
from .entry_checks import entry_check, with_entry_check
from .index_maps import AXIS_SEPARATOR, apply_index_map, bind_free_vars, function_vars
from .split_maps import split_shape, symbolic_divisors
from .buffer_ref import (block_buffer, is_allocated, is_param as _is_param, passed_to_calls,
                         swap_buffer)

#: maps over at most this many points are checked exhaustively (exact shape, one-to-one)
ENUMERATE_LIMIT = 1 << 22


def index_dtype(shape) -> str:
    """The dtype of an index into a buffer of ``shape``: int64 when every extent is
    (TVM's legalisation: an index map over an int64 buffer computes in int64), else
    int32.

    Example::

        >>> index_dtype((const(4, "int64"), const(8, "int64"))), index_dtype((const(4),))
        ('int64', 'int32')
    """
    return "int64" if shape and all(s.dtype == "int64" for s in shape) else "int32"


def _new_shape(func, buf, params, exprs, assume_injective: bool):
    """The new shape; a map Cuvil cannot check one-to-one by enumeration must have an
    inverse (or the caller must assume it injective): two elements sharing a position
    would overwrite each other."""
    what = f"buffer {buf.name!r}"
    shape = _enumerated_image(buf.shape, params, exprs, what)
    if shape is not None:
        return shape
    shape = split_shape(buf.shape, params, exprs)     # i -> (i // n, i % n)
    if shape is not None:
        return shape
    if written_swizzle(buf, params, exprs) is not None:  # a permutation of each row
        return tuple(buf.shape)
    if not assume_injective and inverse_of(buf.shape, params, exprs) is None:
        raise schedule_error(LayoutError, "transform_layout", f"cannot prove the index map "
                             f"{[str(x) for x in exprs]} one-to-one on {what} of shape "
                             f"{[str(s) for s in buf.shape]} (it has no inverse Cuvil can "
                             "write); use a quasi-affine map such as i -> (i // 4, i % 4), "
                             "or pass assume_injective_transform=True if it is one-to-one",
                             func)
    return _bounded_image(buf.shape, params, exprs, what, "transform_layout",
                          shape_vars_nonnegative(func))


def shape_vars_nonnegative(func):
    """An analyzer knowing that every size variable of ``func``'s buffer shapes is >= 0
    (an extent is never negative: the caller's arrays bind them)."""
    ana = arith.Analyzer(index_no_overflow=True)
    scalars = {id(p) for p in func.params if isinstance(p, Var)}
    for v in function_vars(func).values():
        if id(v) not in scalars:
            ana.bind(v, Range(const(0, v.dtype), const(1 << (D.bits(v.dtype) - 2), v.dtype)))
    return ana


def map_image(dims, params, exprs, what: str, prim: str = "transform_layout",
              ana=None) -> tuple:
    """The shape of the bounding box of the image of ``[0, dims)`` (one extent per
    param) under ``exprs``; refused when an index is negative or (for constant dims of
    at most ``ENUMERATE_LIMIT`` points, checked exhaustively) two points share one.
    ``ana`` may know facts about size variables (see :func:`shape_vars_nonnegative`)."""
    shape = _enumerated_image(dims, params, exprs, what, prim)
    return shape if shape is not None else _bounded_image(dims, params, exprs, what, prim,
                                                          ana)


def _enumerated_image(dims, params, exprs, what, prim="transform_layout"):
    shape = [s.value if isinstance(s, IntImm) else None for s in dims]
    size = int(np.prod(shape)) if None not in shape else None
    if size is None or size > ENUMERATE_LIMIT:
        return None
    grids = np.meshgrid(*[np.arange(n, dtype=np.int64) for n in shape], indexing="ij")
    env = {id(p): g.ravel() for p, g in zip(params, grids)}
    vals = [eval_np(x, env) for x in exprs]
    if any(v is None for v in vals):
        return None
    vals = [np.broadcast_to(v, (size,)) for v in vals]
    new = []
    for x, v in zip(exprs, vals):
        if size and v.min() < 0:
            raise schedule_error(LayoutError, prim,
                                 f"index_map gives the negative index {v.min()} "
                                 f"(from {x}) for {what}")
        new.append(const(int(v.max()) + 1 if size else 0, x.dtype))
    if size:
        # one linear key per point, sorted: far cheaper than a row-wise
        # np.unique on the millions of points of a big buffer
        keys = np.sort(np.ravel_multi_index(vals, [int(n.value) for n in new]))
        positions = 1 + int(np.count_nonzero(np.diff(keys)))
        if positions != size:
            raise schedule_error(LayoutError, prim,
                                 f"index_map is not one-to-one on {what} of shape "
                                 f"{shape}: {size} elements map to {positions} "
                                 "positions")
    return tuple(new)


def _bounded_image(dims, params, exprs, what, prim, ana=None):
    ranges = {p: Range(const(0, s.dtype), s) for p, s in zip(params, dims)}
    new = []
    for x in exprs:
        lo, hi = arith.bound_of(x, ranges, ana)
        if isinstance(lo, IntImm) and lo.value < 0:
            raise schedule_error(LayoutError, prim,
                                 f"index_map gives negative indices (from {x}) for {what}")
        new.append(arith.simplify(hi + 1))
    return tuple(new)


class _Relayout(Mutator):
    """Every access of ``old`` re-indexed through the map into ``new``; the new indices
    are simplified knowing the ranges of the loops and block iterators around them
    (``(vo * 16 + vi) // 16`` is ``vo`` when ``vi < 16``), as TensorIR does."""

    def __init__(self, old, new, params, exprs, keep=frozenset(), swizzle=None):
        self.old, self.new, self.params, self.exprs = old, new, params, exprs
        self.keep = keep        # ids of tile-op arguments left at the tile's origin
        self.swizzle = swizzle  # the map is this XOR swizzle (cuvil_tir.swizzle)
        self.ana = arith.Analyzer(index_no_overflow=True)

    def visit_buffer(self, buf):
        return self.new if buf is self.old else buf

    def _bind(self, var, dom):
        # a unit range binds the value: v_i0 * 32 * n + v_i1 * n is v_i1 * n when v_i0 = 0
        one = isinstance(dom.extent, IntImm) and dom.extent.value == 1
        self.ana.bind(var, dom.min if one else dom)

    def visit_For(self, s):
        self._bind(s.loop_var, Range(s.min, s.extent))
        return Mutator.generic_visit(self, s)

    def visit_Block(self, b):
        for iv in b.iter_vars:
            self._bind(iv.var, iv.dom)
        new = Mutator.generic_visit(self, b)
        if new is b or not tree.blocks_under(new.body):
            return new
        # a region's image is a bounding box, bounded one way for this block's region
        # and another for a nested block's (i % 3 over [0, 2) vs over [v - 1, v + 2)):
        # the block's must still cover what its nested blocks declare
        reads, writes = infer_block_regions(new)
        return dataclasses.replace(new, reads=self._cover(new.reads, reads),
                                   writes=self._cover(new.writes, writes))

    def _cover(self, declared, inferred):
        inner = {id(r.buffer): r for r in inferred if r.buffer is self.new}
        return tuple(union(r, inner[id(r.buffer)]) if id(r.buffer) in inner and
                     not self._inside(inner[id(r.buffer)], r) else r for r in declared)

    def _inside(self, a, b) -> bool:
        return all(self.ana.can_prove(y.min <= x.min) and
                   self.ana.can_prove(x.min + x.extent <= y.min + y.extent)
                   for x, y in zip(a.region, b.region))

    def _map(self, indices):
        for ix in indices:
            if ix.lanes != 1:
                raise schedule_error(LayoutError, "transform_layout",
                                     f"buffer {self.old.name!r} is accessed with the vector "
                                     f"index {ix}; transform the layout before vectorize")
        vm = dict(zip(self.params, indices))
        return tuple(self.ana.simplify(substitute(x, vm)) for x in self.exprs)

    def _swizzled(self, cols):
        return _swizzled_columns(self.swizzle, cols, self.ana.simplify)

    def visit_BufferLoad(self, ld):
        idx = self.visit(ld.indices)
        if ld.buffer is not self.old:
            return ld if idx is ld.indices else type(ld)(ld.buffer, idx)
        if id(ld) in self.keep:
            return type(ld)(self.new, idx)
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
        if self.swizzle is not None:
            return BufferRegion(self.new, (r.region[0], self._swizzled(r.region[1])))
        ranges = {p: g for p, g in zip(self.params, r.region)}
        out = []
        for d, x in enumerate(self.exprs):
            try:
                lo, hi = arith.bound_of(x, ranges)
                out.append(Range(arith.simplify(lo), arith.simplify(hi - lo + 1)))
            except Exception:  # unboundable: the whole new dimension
                out.append(Range(const(0, self.new.shape[d].dtype), self.new.shape[d]))
        return BufferRegion(self.new, tuple(out))


def _swizzled_columns(swizzle, cols, simplify):
    """The columns a swizzle may move the range ``cols`` to: the groups of
    ``swizzle.cols`` it touches (itself when it holds whole groups)."""
    c = swizzle.cols
    lo = simplify(cols.min // c * c)
    hi = simplify(((cols.min + cols.extent - 1) // c + 1) * c)
    return Range(lo, simplify(hi - lo))


def _pad_check(buf, new_shape, params, exprs, pad_value, func, blk, allow) -> bool:
    """Whether the new layout may have padding (elements no old index maps to: counted
    for constant shapes, else unless the padding condition is provably false); refused
    when it may and no ``pad_value`` says what they hold (unless ``allow``: the caller
    takes the padding as unwritten)."""
    old = [s.value if isinstance(s, IntImm) else None for s in buf.shape]
    new = [s.value if isinstance(s, IntImm) else None for s in new_shape]
    if None in old or None in new:
        probe = [Var(f"v{d}", n.dtype) for d, n in enumerate(new_shape)]
        cond = padding_predicate(buf.shape, params, exprs, probe)
        if isinstance(cond, IntImm) and not cond.value:
            return False
        if pad_value is None and not allow:
            raise schedule_error(LayoutError, "transform_layout", f"the index map lays "
                                 f"buffer {buf.name!r} of shape {_dims(buf.shape)} out as "
                                 f"{_dims(new_shape)}, which has padding for some sizes "
                                 f"({cond if cond is not None else 'no index maps to it'}). "
                                 "Pass pad_value=<the value it holds> (e.g. 0.0), or "
                                 "assume_injective_transform=True to leave it unwritten",
                                 func, blk)
        return True
    extra = int(np.prod(new)) - int(np.prod(old))
    if extra > 0 and pad_value is None and not allow:
        raise schedule_error(LayoutError, "transform_layout", f"the index map lays buffer "
                             f"{buf.name!r} of shape {tuple(old)} out as {tuple(new)}: "
                             f"{extra} padding element(s) that no index maps to, and so "
                             "that nothing writes. Pass pad_value=<the value they hold> "
                             "(e.g. 0.0), or use a map whose image fills its bounding box",
                             func, blk)
    return extra > 0


def _dims(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


@primitive("transform_layout", block=BLOCK, buffer_index=INDEX, index_map=INDEX_MAP,
           buffer_index_type=STR)
def transform_layout(func, block, buffer_index: int, index_map,
                     buffer_index_type: str = "write", pad_value=None,
                     assume_injective_transform: bool = False):
    """Re-lay out ``block``'s buffer through ``index_map`` (a lambda over its
    indices returning the new indices); every access is rewritten.

    The new shape is the bounding box of the map's image.  When the box holds more
    elements than the buffer (``i -> (i // 7, i % 7)`` on 30 elements gives 5 x 7),
    ``pad_value`` (a number of the buffer's dtype, or a function of the new indices) is
    required and is written into the padding: in the producer's loops rebuilt over the
    new shape when one row-major loop nest writes the buffer, else by a block after the
    writers (see :mod:`schedules.primitives.layout_padding`).  A function parameter may
    change layout too (the caller then passes arrays in the new layout, and supplies an
    input's padding).  ``S.AXIS_SEPARATOR`` among the results sets the new buffer's
    ``axis_separators``.  ``assume_injective_transform=True`` leaves padding without a
    ``pad_value`` unwritten (the function never reads it; the map is still checked
    one-to-one where Cuvil can).

    Before/after ``transform_layout(B, 0, lambda i, j: (j, i))``::

        B = T.alloc_buffer((4, 8))        B = T.alloc_buffer((8, 4))
        B[i, j] = ...                     B[j, i] = ...

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((30,), name="A")
        >>> B = T.compute((30,), lambda i: A[i] * 2.0, name="B")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute((30,), lambda i: B[i],
        ...                                                   name="C")]))
        >>> sch.transform_layout("B", 0, lambda i: (i // 8, i % 8), pad_value=0.0)
        >>> [int(s) for s in sch.func.body.block.alloc_buffers[0].shape]
        [4, 8]
        >>> from cuvil_tir.analysis import tree
        >>> print(tree.get(sch.func, tree.find_block(sch.func, "B")).block.body)
        B[v0, v1] = T.if_then_else(v0 == 3 and 6 <= v1, T.float32(0), A[v0 * 8 + v1] * T.float32(2))
    """
    prim = "transform_layout"
    _, blk, buf = block_buffer(func, block, buffer_index, buffer_index_type, prim)
    is_param = _is_param(func, buf)
    if not is_param and not is_allocated(func, buf):
        raise schedule_error(LayoutError, prim,
                             f"buffer {buf.name!r} is not allocated in the function "
                             "(no alloc_buffers / Allocate holds it)", func, blk)
    calls = passed_to_calls(func, buf)
    if calls:
        raise schedule_error(LayoutError, prim, f"buffer {buf.name!r} is passed to "
                             f"{sorted(set(calls))}, which index(es) its memory in the "
                             "current layout; transform the layout before tensorize or "
                             "the extern call", func, blk)
    params, exprs, seps = apply_index_map(index_map, buf.ndim, buf.name, separators=True,
                                          dtype=index_dtype(buf.shape))
    exprs = bind_free_vars(exprs, params, func, prim)
    pad_at = pad_value_at(pad_value, buf, len(exprs), prim)
    try:
        seps = check_axis_separators(seps, len(exprs), f"the index map of {buf.name!r}")
    except ShapeError as err:
        raise schedule_error(LayoutError, prim, str(err).split("] ", 1)[-1], func,
                             blk) from None
    if len(exprs) == len(params) and all(x is p for x, p in zip(exprs, params)):
        # the identity: only the separators may change (no access is re-indexed)
        if seps == buf.axis_separators:
            return func, None
        return swap_buffer(func, buf, buf.with_changes(axis_separators=seps)), None
    new_buf = buf.with_changes(shape=_new_shape(func, buf, params, exprs,
                                                assume_injective_transform), strides=(),
                               axis_separators=seps)
    padding = _pad_check(buf, new_buf.shape, params, exprs, pad_value, func, blk,
                         assume_injective_transform)
    swizzle = map_swizzle(buf, new_buf, params, exprs)
    keep = tile_layout(func, blk, buf, swizzle)
    g = swap_buffer(func, buf, new_buf,
                    _Relayout(buf, new_buf, params, exprs, keep, swizzle).visit(func.body))
    if swizzle is not None and keep:
        rest = tuple(x for x in func.attr(SWIZZLE_KEY, ()) or () if x[0] != buf.name)
        g = g.with_attr(SWIZZLE_KEY, rest + ((buf.name, swizzle.pack()),))
    if padding and pad_at is not None:
        g = write_padding(func, g, buf, new_buf, params, exprs, pad_at, prim, blk)
    return _positive_divisors(func, g, buf, params, exprs, blk), None


def _positive_divisors(func, g, buf, params, exprs, blk):
    """``g`` with a check on entry that each symbolic divisor of the map is positive
    (``i -> (i // n, i % n)`` is one-to-one for ``n > 0`` only), unless provable."""
    ana = shape_vars_nonnegative(func)
    for c in symbolic_divisors(params, exprs):
        if not ana.can_prove(c > 0):
            g = with_entry_check(g, entry_check(
                func, c > 0, f"transform_layout of buffer {buf.name}: the index map "
                f"divides by {c}, which must be positive; found {{}}", (c,),
                "transform_layout", LayoutError, blk))
    return g


__all__ = ["transform_layout", "LayoutError", "ENUMERATE_LIMIT", "AXIS_SEPARATOR",
           "apply_index_map", "map_image", "eval_np", "index_dtype",
           "shape_vars_nonnegative"]
