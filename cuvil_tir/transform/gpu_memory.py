"""``plan_gpu_memory``: place and size ``shared`` and ``local`` buffers inside kernels.

After ``lower_blocks`` a cache buffer (``cache_read(blk, 0, "shared")``) is allocated
at the top of the function with the whole shape of what it caches.  On a GPU a
``shared`` buffer lives once per thread block and a ``local`` buffer once per thread,
so each is moved into the one kernel that uses it, at the innermost statement that
holds all its accesses, and shrunk to the box those accesses cover there:

* ``shared``: the box is taken over all threads of the block (``threadIdx`` variables
  are relaxed to their ranges); ``blockIdx`` variables are fixed;
* ``local``: ``threadIdx`` and ``blockIdx`` variables are fixed (each thread has its
  own copy), so the box is what one thread touches;
* a per-warp scope (``wmma.accumulator``: :func:`~cuvil_tir.ops.gpu.per_warp`):
  ``threadIdx.x`` (the lanes) is relaxed, the other variables fixed: the box is what
  one warp touches.

Serial loops enclosing all accesses must separate their iterations (each iteration
its own box), as in :mod:`.compact`.  When no box can be proven the buffer keeps its
shape (it must then be constant).  Runs after ``normalize_thread_bindings`` (one
variable per thread axis) and before ``flatten_buffers``.

Example::

    >>> import cuvil_tir as T
    >>> A = T.decl_buffer((64,), "float32", "A")
    >>> S = T.decl_buffer((64,), "float32", "S", scope="shared")
    >>> bx, tx = T.var("bx"), T.var("tx")
    >>> body = T.For(bx, T.const(0), T.const(4), "thread_binding", T.For(
    ...     tx, T.const(0), T.const(16), "thread_binding",
    ...     T.BufferStore(S, A[bx * 16 + tx], (bx * 16 + tx,)), "threadIdx.x"), "blockIdx.x")
    >>> f = plan_gpu_memory(T.PrimFunc([A], T.Allocate(S, body)))
    >>> print(T.to_text(f.body.body))
    with T.allocate((16,), "float32", scope="shared") as S:
        for tx in T.thread_binding(16, thread="threadIdx.x"):
            S[tx] = A[bx * 16 + tx]
"""

from __future__ import annotations

from ..arith import Analyzer
from ..buffer import Buffer
from ..errors import LoweringError
from ..expr import BufferLoad, IntImm
from ..function import PrimFunc
from ..printer import to_text
from ..stmt import Allocate, Range
from ..visitor import Mutator
from ..arith.affine import Affine, Key, is_index_dtype
from ..expr import Var
from .compact import _Collect, _descend, _Rebase, _Replace, _Skip, _touches, _uses_any
from ..ops.gpu import per_warp, tiles_of
from .gpu_threads import is_thread_loop, kernels, thread_loops

GPU_SCOPES = ("shared", "local")


class _Strip(Mutator):
    def __init__(self, allocs):
        self.allocs = allocs

    def visit_Allocate(self, a):
        body = self.visit(a.body)
        if a.buffer.scope in GPU_SCOPES or per_warp(a.buffer.scope):
            self.allocs.append(a.buffer)
            return body
        return a if body is a.body else Allocate(a.buffer, body)


class _Guarded(_Collect):
    """Accesses with the conditions guarding them (a thread guard narrows the tile)."""

    def visit_Call(self, e):
        # a tile op (the op registry's tiles) reads or writes a whole tile from the
        # element an argument loads
        for tile in tiles_of(e):
            arg, shape = e.args[tile.arg], (tile.rows, tile.cols)
            if isinstance(arg, BufferLoad) and arg.buffer is self.buf:
                # the tile's last element is accessed too
                last = tuple(ix + IntImm(n - 1, ix.dtype)
                             for ix, n in zip(arg.indices, shape))
                self.indices.append(last)
                self.conds.append(tuple(self.stack))
        self.generic_visit(e)

    def __init__(self, buf):
        super().__init__(buf)
        self.conds, self.stack = [], []

    def visit_IfThenElse(self, s):
        self.visit(s.condition)
        self.stack.append(s.condition)
        self.visit(s.then_case)
        self.stack.pop()
        if s.else_case is not None:
            self.visit(s.else_case)

    def visit_BufferLoad(self, e):
        n = len(self.indices)
        super().visit_BufferLoad(e)
        self.conds.extend([tuple(self.stack)] * (len(self.indices) - n))

    def visit_BufferStore(self, s):
        n = len(self.indices)
        super().visit_BufferStore(s)
        self.conds.extend([tuple(self.stack)] * (len(self.indices) - n))


def _split(ix, inner_ids: set):
    """``(outer {Key: (atom, coefficient)}, inner Affine)`` of one index: unlike the
    CPU compaction, an outer atom may be any expression of fixed variables
    (``bf // 4`` of a fused blockIdx)."""
    if not is_index_dtype(ix.dtype):
        raise _Skip("a non-integer index")
    aff = Affine.of(ix)
    outer, inner = {}, Affine(aff.dtype, const=aff.const)
    for atom, c in aff.terms:
        if _uses_any(atom, inner_ids):
            inner.coeffs[Key(atom)] = c
        else:
            outer[Key(atom)] = (atom, c)
    return outer, inner


class _RebaseTile(_Rebase):
    def _idx(self, indices):
        out = []
        for ix, (_, lo) in zip(indices, self.dims):
            _, inner = _split(ix, self.inner)
            out.append(Analyzer(index_no_overflow=True).simplify(
                inner.to_expr() - IntImm(lo, ix.dtype)))
        return tuple(out)


def _bound(ana, e, conds):
    if not conds:
        return ana.const_int_bound(e)
    with ana.constraint(conds[0]):
        return _bound(ana, e, conds[1:])


def _plan(buf, kernel, loops, lca) -> tuple:
    """``(shape, dims, inner ids)`` of ``buf`` compacted at ``lca``, or ``_Skip``."""
    col = _Guarded(buf)
    col.visit(lca)
    ana = Analyzer(index_no_overflow=True)
    inner_ids = set(col.defined)
    tloops = thread_loops(kernel)
    for lp in tloops:
        inner_ids.discard(id(lp.loop_var))
        if (buf.scope == "shared" and lp.thread_tag.startswith("threadIdx")) or (
                per_warp(buf.scope) and lp.thread_tag == "threadIdx.x"):
            inner_ids.add(id(lp.loop_var))
        ana.bind(lp.loop_var, Range(lp.min, lp.extent))
    for lp in loops:
        ana.bind(lp.loop_var, Range(lp.min, lp.extent))
    for v, r in col.ranges.items():
        ana.bind(v, r)
    serial = [lp for lp in loops if not is_thread_loop(lp)]
    by_loop = {id(lp.loop_var): lp for lp in serial}
    seen, shape, dims = set(), [], []
    for d in range(len(buf.shape)):
        parts = [_split(ix[d], inner_ids) for ix in col.indices]
        outer0 = parts[0][0]
        key0 = {k: c for k, (_, c) in outer0.items()}
        if any({k: c for k, (_, c) in o.items()} != key0 for o, _ in parts):
            raise _Skip("accesses disagree on the part outside the tile")
        lo = hi = None
        for (_, inner), conds in zip(parts, col.conds):
            a, b = _bound(ana, inner.to_expr(), conds)
            lo = a if lo is None else min(lo, a)
            hi = b if hi is None else max(hi, b)
        if not isinstance(lo, int) or not isinstance(hi, int) or hi - lo > (1 << 24):
            raise _Skip("the tile has no constant size")
        extent, step = hi - lo + 1, hi - lo + 1
        serial_ids = set(by_loop)
        for var, c in sorted(outer0.values(), key=lambda vc: abs(vc[1])):
            loop = by_loop.get(id(var)) if isinstance(var, Var) else None
            if loop is None:
                if not isinstance(var, Var) and _uses_any(var, serial_ids):
                    raise _Skip(f"the index term {var} mixes loop iterations")
                continue
            if not isinstance(loop.extent, IntImm) or c < step:
                raise _Skip("iterations of the enclosing loops may share elements")
            seen.add(id(var))
            step = c * loop.extent.value
        shape.append(extent)
        dims.append((outer0, lo))
    for lp in serial:
        if id(lp.loop_var) not in seen and not (isinstance(lp.extent, IntImm)
                                                 and lp.extent.value == 1):
            raise _Skip(f"loop '{lp.loop_var.name}' reuses the same elements")
    return tuple(shape), dims, inner_ids


def _place(func, buf, body):
    users = [k for k in kernels(body) if _touches(k, buf)]
    if not users:
        return body
    if len(users) > 1 or any(_touches(s, buf) for s in _outside(body, users[0])):
        raise LoweringError(f"{buf.scope} buffer {buf.name} is used by more than one "
                            f"kernel (or by the host); a {buf.scope} buffer lives only "
                            f"as long as one {'thread block' if buf.scope == 'shared' else 'thread'}"
                            f": use a global buffer to pass data between kernels:\n"
                            + to_text(func))
    kernel = users[0]
    loops, lca = _descend(kernel, buf)
    if buf.scope == "shared":
        # one copy per block: allocated above the first threadIdx loop
        for k, lp in enumerate(loops):
            if lp.thread_tag is not None and lp.thread_tag.startswith("threadIdx"):
                loops, lca = loops[:k], lp
                break
    try:
        shape, dims, inner = _plan(buf, kernel, loops, lca)
        new = Buffer(tuple(IntImm(n, "int32") for n in shape), buf.dtype, buf.name,
                     scope=buf.scope, align=buf.align)
        moved = Allocate(new, _RebaseTile(buf, new, dims, inner).visit(lca))
    except _Skip:
        if not all(isinstance(s, IntImm) for s in buf.shape):
            raise LoweringError(f"{buf.scope} buffer {buf.name} has the symbolic shape "
                                f"{tuple(str(s) for s in buf.shape)} and its accesses do "
                                "not cover a constant tile per block/thread; compute_at "
                                "its producer under a loop so each iteration uses a "
                                "constant-size tile:\n" + to_text(func)) from None
        moved = Allocate(buf, lca)
    new_kernel = _Replace(lca, moved).visit(kernel)
    return _Replace(kernel, new_kernel).visit(body)


def _outside(body, kernel) -> list:
    """Host statements (leaves) outside ``kernel``: none in valid IR; kernels aside."""
    return [k for k in kernels(body) if k is not kernel]


def plan_gpu_memory(func: PrimFunc) -> PrimFunc:
    """Move and size every ``shared``/``local``/per-warp buffer (module docstring).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> plan_gpu_memory(f) is f
        True
    """
    allocs: list = []
    body = _Strip(allocs).visit(func.body)
    if not allocs:
        return func
    for buf in allocs:
        body = _place(func, buf, body)
    return func.with_body(body)


__all__ = ["GPU_SCOPES", "plan_gpu_memory"]
