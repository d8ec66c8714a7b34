"""``compact_local_buffers``: shrink a ``local`` buffer to the tile one loop iteration uses.

``cache_write(C, 0, "local")`` makes a ``local`` copy of the whole ``C``, allocated at
the top of the function.  When every access of it sits under one loop nest and each
iteration of those loops touches its own box of the buffer (the box of a GEMM
micro-kernel: ``C_local[io * 4 + ii, jo * 16 + ji]`` with ``ii < 4, ji < 16``), the
allocation moves inside the innermost such loop and shrinks to the box
(``C_local[ii, ji]``, 4 x 16), so that after unrolling its indices are constants and
LLVM keeps it in registers.  Inside a ``parallel`` loop this also gives every thread
its own copy.

Runs after ``lower_blocks`` and before ``flatten_buffers`` (it reads N-d indices).  A
buffer is left alone unless all of these hold: scope ``local``; every index is
affine; in each dimension the part of the index that depends on the enclosing loops
is the same for every access and separates the iterations (coefficients at least the
box size, each at least the previous one times its loop's extent); every enclosing
loop of extent > 1 appears in it; the box has constant size.  Then no value can
flow from one iteration to another, so the move is exact.

Example::

    >>> import cuvil_tir as T
    >>> L = T.decl_buffer((8, 4), "float32", "L", scope="local")
    >>> O = T.decl_buffer((8, 4), "float32", "O")
    >>> i, j = T.var("i"), T.var("j")
    >>> body = T.Allocate(L, T.For(i, T.const(0), T.const(8), "serial", T.seq(
    ...     T.For(j, T.const(0), T.const(4), "serial", T.BufferStore(L, T.const(1.0), (i, j))),
    ...     T.For(j, T.const(0), T.const(4), "serial", T.BufferStore(O, L[i, j], (i, j))))))
    >>> print(T.to_text(compact_local_buffers(T.PrimFunc([O], body)).body).strip())
    for i in T.serial(8):
        with T.allocate((1, 4), "float32", scope="local") as L:
            for j in T.serial(4):
                L[0, j] = T.float32(1)
            for j in T.serial(4):
                O[i, j] = L[0, j]
"""

from __future__ import annotations

from ..arith import Analyzer
from ..arith.affine import Affine, Key, is_index_dtype
from ..buffer import Buffer
from ..expr import BufferLoad, IntImm, Var
from ..function import PrimFunc
from ..stmt import Allocate, BufferRegion, BufferStore, For, Range, SeqStmt
from ..visitor import Mutator, Visitor, post_order_visit


class _Skip(Exception):
    """This buffer cannot be compacted (the pass leaves it as it is)."""


def _touches(stmt, buf) -> bool:
    hit = []

    def look(n):
        if isinstance(n, (BufferLoad, BufferStore)) and n.buffer is buf:
            hit.append(1)

    post_order_visit(stmt, look)
    return bool(hit)


def _in_region(stmt, buf) -> bool:
    hit = []
    post_order_visit(stmt, lambda n: hit.append(1) if isinstance(n, BufferRegion)
                     and n.buffer is buf else None)
    return bool(hit)


def _descend(body, buf):
    """``(enclosing loops, lca statement)``: walk down while one child holds every
    access of ``buf``; only loops are collected."""
    loops = []
    node = body
    while True:
        if isinstance(node, For):
            loops.append(node)
            node = node.body
        elif isinstance(node, SeqStmt):
            users = [s for s in node.seq if _touches(s, buf)]
            if len(users) != 1:
                return loops, node
            node = users[0]
        elif isinstance(node, Allocate) and node.buffer is not buf:
            # another buffer's allocation (a packed copy from cache_read allocated
            # next to a cache_write's tile): its scope does not bound ours
            node = node.body
        else:
            return loops, node


class _Collect(Visitor):
    def __init__(self, buf):
        self.buf, self.indices, self.ranges, self.defined = buf, [], {}, set()

    def visit_For(self, s):
        self.defined.add(id(s.loop_var))
        self.ranges[s.loop_var] = Range(s.min, s.extent)
        self.generic_visit(s)

    def visit_LetStmt(self, s):
        self.defined.add(id(s.var))
        self.generic_visit(s)

    def visit_BufferLoad(self, e):
        if e.buffer is self.buf:
            self.indices.append(e.indices)
        self.generic_visit(e)

    def visit_BufferStore(self, s):
        if s.buffer is self.buf:
            self.indices.append(s.indices)
        self.generic_visit(s)


def _uses_any(e, ids: set) -> bool:
    hit = []
    post_order_visit(e, lambda n: hit.append(1) if isinstance(n, Var) and id(n) in ids
                     else None)
    return bool(hit)


def _split(ix, inner_ids: set):
    """``(outer coefficients {var id: (var, c)}, inner Affine)`` of one index."""
    if not is_index_dtype(ix.dtype):
        raise _Skip("a non-integer index")
    aff = Affine.of(ix)
    outer, inner = {}, Affine(aff.dtype, const=aff.const)
    for atom, c in aff.terms:
        if _uses_any(atom, inner_ids):
            inner.coeffs[Key(atom)] = c
        elif isinstance(atom, Var):
            outer[id(atom)] = (atom, c)
        else:
            raise _Skip("a non-affine index outside the tile")
    return outer, inner


def plan(buf: Buffer, loops: list, lca) -> tuple:
    """``(new shape, per-dimension (outer part, inner lower bound))`` of the compacted
    ``buf`` (all accesses under ``lca``, inside ``loops``), or raise ``_Skip``.

    Example::

        >>> import cuvil_tir as T
        >>> L = T.decl_buffer((8,), "float32", "L", scope="local")
        >>> i, j = T.var("i"), T.var("j")
        >>> inner = T.For(j, T.const(0), T.const(2), "serial",
        ...               T.BufferStore(L, T.const(0.0), (i * 2 + j,)))
        >>> outer = T.For(i, T.const(0), T.const(4), "serial", inner)
        >>> plan(L, [outer], inner)[0]
        (2,)
    """
    col = _Collect(buf)
    col.visit(lca)
    if not col.indices:
        raise _Skip("no access")
    ana = Analyzer(index_no_overflow=True)
    for loop in loops:
        ana.bind(loop.loop_var, Range(loop.min, loop.extent))
    for v, r in col.ranges.items():
        ana.bind(v, r)
    shape, dims = [], []
    seen_loops = set()
    for d in range(len(buf.shape)):
        parts = [_split(ix[d], col.defined) for ix in col.indices]
        outer0 = parts[0][0]
        if any({k: c for k, (_, c) in o.items()} != {k: c for k, (_, c) in outer0.items()}
               for o, _ in parts):
            raise _Skip("accesses disagree on the part outside the tile")
        lo = hi = None
        for _, inner in parts:
            a, b = ana.const_int_bound(inner.to_expr())
            lo = a if lo is None else min(lo, a)
            hi = b if hi is None else max(hi, b)
        if not isinstance(lo, int) or not isinstance(hi, int) or hi - lo > (1 << 20):
            raise _Skip("the tile has no constant size")
        extent = hi - lo + 1
        step = extent
        by_loop = {id(lp.loop_var): lp for lp in loops}
        for var, c in sorted(outer0.values(), key=lambda vc: abs(vc[1])):
            loop = by_loop.get(id(var))
            if loop is None or (isinstance(loop.extent, IntImm) and loop.extent.value == 1):
                continue                       # outside the allocation, or a unit loop
            if not isinstance(loop.extent, IntImm) or c < step:
                raise _Skip("iterations of the enclosing loops may share elements")
            seen_loops.add(id(var))
            step = c * loop.extent.value
        shape.append(extent)
        dims.append((outer0, lo))
    for loop in loops:
        if id(loop.loop_var) not in seen_loops and not (
                isinstance(loop.extent, IntImm) and loop.extent.value == 1):
            raise _Skip(f"loop '{loop.loop_var.name}' reuses the same elements")
    return tuple(shape), dims


class _Rebase(Mutator):
    def __init__(self, old, new, dims, inner_ids):
        self.old, self.new, self.dims, self.inner = old, new, dims, inner_ids

    def _idx(self, indices):
        out = []
        for ix, (_, lo) in zip(indices, self.dims):
            _, inner = _split(ix, self.inner)
            out.append(Analyzer(index_no_overflow=True).simplify(
                inner.to_expr() - IntImm(lo, ix.dtype)))
        return tuple(out)

    def visit_BufferLoad(self, e):
        e = self.generic_visit(e)
        return BufferLoad(self.new, self._idx(e.indices)) if e.buffer is self.old else e

    def visit_BufferStore(self, s):
        s = self.generic_visit(s)
        if s.buffer is not self.old:
            return s
        return BufferStore(self.new, s.value, self._idx(s.indices))


class _Replace(Mutator):
    def __init__(self, target, new):
        self.target, self.new = target, new

    def generic_visit(self, n):
        if n is self.target:
            return self.new
        return Mutator.generic_visit(self, n)


class LocalCompactor(Mutator):
    """The mutator behind :func:`compact_local_buffers`; ``skipped`` lists
    ``(buffer name, reason)``.

    Example::

        >>> LocalCompactor().skipped
        []
    """

    def __init__(self):
        self.skipped: list = []

    def visit_Allocate(self, a):
        body = self.visit(a.body)
        buf = a.buffer
        if buf.scope != "local" or buf.strides:
            return a if body is a.body else Allocate(buf, body)
        loops, lca = _descend(body, buf)
        try:
            if _in_region(body, buf):
                raise _Skip("passed to an extern call as a region")
            shape, dims = plan(buf, loops, lca)
        except _Skip as why:
            self.skipped.append((buf.name, str(why)))
            return a if body is a.body else Allocate(buf, body)
        new = Buffer(tuple(IntImm(n, "int32") for n in shape), buf.dtype, buf.name,
                     scope=buf.scope, align=buf.align)
        col = _Collect(buf)
        col.visit(lca)
        moved = Allocate(new, _Rebase(buf, new, dims, col.defined).visit(lca))
        return _Replace(lca, moved).visit(body)


def compact_local_buffers(func: PrimFunc) -> PrimFunc:
    """Move and shrink ``local`` allocations to per-iteration tiles (module doc).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> compact_local_buffers(f) is f
        True
    """
    body = LocalCompactor().visit(func.body)
    return func if body is func.body else func.with_body(body)


__all__ = ["LocalCompactor", "compact_local_buffers", "plan"]

