"""``flatten_buffers``: every buffer becomes one-dimensional.

Each multi-dimensional (or strided) buffer is replaced by a new ``Buffer`` of shape
``(numel,)`` with the same name, dtype, scope and alignment; loads and stores get one
index ``sum(idx_d * stride_d)`` (row-major strides unless the buffer has explicit
ones, whose ``numel`` then covers the padded layout).  Vector accesses stay vector
accesses: a ``Ramp`` index keeps a ``Ramp`` on the flat index, with the stride
scaled.  Function parameters are replaced positionally by their flat buffers;
symbolic sizes stay the same ``Var`` objects.  Run after ``lower_blocks``.

A buffer's ``axis_separators`` (groups of logical axes, one physical axis each) are
honoured by flattening each group row-major and then the groups together, row-major:
every memory of every Cuvil target is linearly addressed, and on a linear memory this
is the layout an N-d physical array of those groups has, so no value changes.  A
target with a memory that is not linear would have to lower separated buffers itself.

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.transform.lower_blocks import lower_blocks
    >>> A = T.placeholder((4, 8), name="A")
    >>> B = T.compute((4, 8), lambda i, j: A[i, j] + 1.0, name="B")
    >>> f = flatten_buffers(lower_blocks(T.create_prim_func([A, B])))
    >>> print(f)
    @T.prim_func
    def main(A: T.Buffer((32,), "float32"), B: T.Buffer((32,), "float32")):
        for i in T.serial(4):
            for j in T.serial(8):
                B[i * 8 + j] = A[i * 8 + j] + T.float32(1)
"""

from __future__ import annotations

from .. import dtype as D
from ..arith import Analyzer
from ..buffer import Buffer
from ..errors import LoweringError
from ..expr import Broadcast, BufferLoad, Expr, IntImm, Ramp, cast
from ..function import PrimFunc
from ..stmt import Allocate, BufferRegion, BufferStore, Range
from ..visitor import Mutator
from .storage_align import apply_storage_align


def _is_one(e) -> bool:
    return isinstance(e, IntImm) and e.value == 1


def _index_dtype(exprs) -> str:
    return "int64" if any(D.element(e.dtype) == "int64" for e in exprs) else "int32"


def flat_numel(buf: Buffer, ana: Analyzer) -> Expr:
    """Elements of the flat buffer: the product of the shape, or, with explicit
    strides, the extent of the strided layout.

    Example::

        >>> import cuvil_tir as T
        >>> B = T.decl_buffer((4, 8), "float32", "B", strides=(12, 1))
        >>> flat_numel(B, Analyzer()).value
        48
    """
    dt = _index_dtype(tuple(buf.shape) + tuple(buf.strides))
    if not buf.shape:
        return IntImm(1, dt)
    if buf.strides:
        sizes = [cast(s, dt) * cast(st, dt) for s, st in zip(buf.shape, buf.strides)]
        if all(isinstance(ana.simplify(x), IntImm) for x in sizes):
            return IntImm(max(ana.simplify(x).value for x in sizes), dt)
        return ana.simplify(sizes[0])   # outermost dimension spans the others
    if dt == "int32" and all(isinstance(s, IntImm) for s in buf.shape):
        total = 1
        for s in buf.shape:
            total *= s.value
        if total > 1 << 31:
            # its flat indices would wrap in int32 (a (2**20, 2**20) buffer became extent 0)
            shape = ", ".join(f"T.int64({s.value})" for s in buf.shape)
            raise LoweringError(
                f"buffer '{buf.name}' of shape {tuple(s.value for s in buf.shape)} has "
                f"{total} elements, more than 32-bit indexing reaches (2**31); declare "
                f"its shape with int64 sizes, e.g. ({shape})")
    n = cast(buf.shape[0], dt)
    for s in buf.shape[1:]:
        n = n * cast(s, dt)
    return ana.simplify(n)


def _needs_flatten(buf: Buffer) -> bool:
    if len(buf.shape) != 1:
        return True
    return bool(buf.strides) and not _is_one(buf.strides[0])


class _Flatten(Mutator):
    def __init__(self):
        self.ana = Analyzer(index_no_overflow=True)
        self.map: dict = {}

    def flat(self, buf: Buffer) -> Buffer:
        new = self.map.get(buf)
        if new is None:
            if not _needs_flatten(buf):
                new = buf
            else:
                new = Buffer((flat_numel(buf, self.ana),), buf.dtype, buf.name, (),
                             buf.scope, buf.align)
            self.map[buf] = new
        return new

    def visit_buffer(self, buf):
        return self.flat(buf)

    def index(self, buf: Buffer, indices: tuple) -> tuple:
        indices = self.visit_tuple(indices)
        if not _needs_flatten(buf):
            return indices
        if not indices:
            return (IntImm(0, "int32"),)
        strides = buf.default_strides()
        dt = _index_dtype(tuple(indices) + tuple(strides))
        base: Expr = IntImm(0, dt)
        step: Expr = IntImm(0, dt)
        lanes = 1
        other_vectors = []
        for ix, st in zip(indices, strides):
            st = cast(st, dt)
            if isinstance(ix, Ramp):
                lanes = ix.lanes
                base = base + cast(ix.base, dt) * st
                step = step + cast(ix.stride, dt) * st
            elif isinstance(ix, Broadcast):
                base = base + cast(ix.value, dt) * st
            elif ix.lanes > 1:
                other_vectors.append((ix, st))
            else:
                base = base + cast(ix, dt) * st
        if other_vectors:
            # a gather: the flat index is a general vector expression
            n = other_vectors[0][0].lanes
            flat: Expr = Broadcast(self.ana.simplify(base), n)
            if lanes > 1:
                flat = Ramp(self.ana.simplify(base), self.ana.simplify(step), lanes)
            for ix, st in other_vectors:
                flat = flat + cast(ix, D.with_lanes(dt, n)) * Broadcast(st, n)
            return (self.ana.simplify(flat),)
        if lanes > 1:
            return (Ramp(self.ana.simplify(base), self.ana.simplify(step), lanes),)
        return (self.ana.simplify(base),)

    def visit_BufferLoad(self, ld):
        idx = self.index(ld.buffer, ld.indices)
        buf = self.flat(ld.buffer)
        if buf is ld.buffer and idx is ld.indices:
            return ld
        return BufferLoad(buf, idx)

    def visit_BufferStore(self, st):
        value = self.visit(st.value)
        idx = self.index(st.buffer, st.indices)
        buf = self.flat(st.buffer)
        if buf is st.buffer and idx is st.indices and value is st.value:
            return st
        return BufferStore(buf, value, idx)

    def visit_BufferRegion(self, r):
        # a region passed to an extern call: one flat range from its first element to
        # its last (the callee gets a pointer to the first)
        if not _needs_flatten(r.buffer):
            return self.generic_visit(r)
        lo = self.index(r.buffer, tuple(rg.min for rg in r.region))[0]
        hi = self.index(r.buffer, tuple(rg.min + rg.extent - 1 for rg in r.region))[0]
        return BufferRegion(self.flat(r.buffer), (Range(lo, self.ana.simplify(hi - lo + 1)),))

    def visit_Allocate(self, a):
        body = self.visit(a.body)
        buf = self.flat(a.buffer)
        return a if (buf is a.buffer and body is a.body) else Allocate(buf, body)

    def visit_Block(self, b):
        name = b.block.name if hasattr(b, "block") else b.name
        raise LoweringError(f"flatten_buffers: found block '{name}'; blocks must be "
                            "lowered first: run lower_blocks before flatten_buffers")

    visit_BlockRealize = visit_Block


def flatten_buffers(func: PrimFunc) -> PrimFunc:
    """``func`` with one-dimensional buffers (see the module docstring).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((2, 3), "int8", "A")
        >>> f = flatten_buffers(T.PrimFunc([A], T.BufferStore(A, T.const(1, "int8"), (T.const(1), T.const(2)))))
        >>> f.params[0].shape[0].value, T.to_text(f.body)
        (6, 'A[5] = T.int8(1)')
    """
    func = apply_storage_align(func)    # strides from storage_align, on final shapes
    m = _Flatten()
    params = tuple(m.flat(p) if isinstance(p, Buffer) else p for p in func.params)
    body = m.visit(func.body)
    if body is func.body and all(a is b for a, b in zip(params, func.params)):
        return func
    return PrimFunc(params, body, func.attrs)
