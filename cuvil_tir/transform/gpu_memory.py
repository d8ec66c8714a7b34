"""``plan_gpu_memory``: place and size ``shared`` and ``local`` buffers inside kernels.

After ``lower_blocks`` a cache buffer (``cache_read(blk, 0, "shared")``) is allocated
at the top of the function with the whole shape of what it caches.  On a GPU a
``shared`` buffer lives once per thread block and a ``local`` buffer once per thread,
so each is moved into the one kernel that uses it, at the innermost statement that
holds all its accesses, and shrunk to the box those accesses cover there:

* ``shared``: the box is taken over all threads of the block (``threadIdx`` variables
  are relaxed to their ranges, also where the allocation lands inside the thread
  loops); ``blockIdx`` variables are fixed;
* ``local``: ``threadIdx`` and ``blockIdx`` variables are fixed (each thread has its
  own copy), so the box is what one thread touches;
* a ``vthread`` loop (a serial loop by then, annotated ``virtual_thread``) is a
  thread: relaxed for ``shared``, and each of its iterations has its own ``local``
  tile.

Serial loops enclosing all accesses either separate their iterations (each iteration
its own box, as in :mod:`.compact`) or are relaxed (one box for all iterations).  When
no box can be proven the buffer keeps its shape (it must then be constant).  Runs after ``normalize_thread_bindings`` (one
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
    for tx in T.thread_binding(16, thread="threadIdx.x"):
        with T.allocate((16,), "float32", scope="shared") as S:
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
from ..visitor import Mutator, used_vars
from ..arith.affine import Affine, Key, is_index_dtype
from ..expr import Var
from .compact import _Collect, _descend, _Rebase, _Replace, _Skip, _touches, _uses_any
from ..ops.gpu import tiles_of
from .gpu_threads import VIRTUAL, is_thread_loop, kernels, thread_loops

GPU_SCOPES = ("shared", "local")


class _Strip(Mutator):
    def __init__(self, allocs):
        self.allocs = allocs

    def visit_Allocate(self, a):
        body = self.visit(a.body)
        if a.buffer.scope in GPU_SCOPES:
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
    """``(shape, dims, inner ids)`` of ``buf`` compacted at ``lca``, or ``_Skip``.

    An enclosing serial loop is relaxed too (the box covers all its iterations, so an
    element has one place in all of them) when the accesses disagree on a term of its
    variable (a copy that every iteration repeats, read by each at its own offset), a
    term mixes its iterations (``rh // 2``), or its iterations' tiles may overlap
    (the windows of a convolution's reduction loop)."""
    relaxed: set = set()
    while True:
        try:
            return _plan_once(buf, kernel, loops, lca, relaxed)
        except _Relax as more:
            relaxed |= more.ids


class _Relax(Exception):
    def __init__(self, ids):
        super().__init__()
        self.ids = ids


def _plan_once(buf, kernel, loops, lca, relaxed) -> tuple:
    col = _Guarded(buf)
    col.visit(lca)
    ana = Analyzer(index_no_overflow=True)
    inner_ids = set(col.defined)
    tloops = thread_loops(kernel)
    for lp in tloops:
        inner_ids.discard(id(lp.loop_var))
        if buf.scope == "shared" and lp.thread_tag.startswith("threadIdx"):
            inner_ids.add(id(lp.loop_var))
        ana.bind(lp.loop_var, Range(lp.min, lp.extent))
    inner_ids |= relaxed
    virtual = [lp for lp in loops if dict(lp.annotations).get(VIRTUAL)]
    for lp in virtual:
        # virtual threads share the block's shared memory, and each has its own tile of
        # a local buffer (their iterations are independent: no proof needed)
        if buf.scope == "shared":
            inner_ids.add(id(lp.loop_var))
    for lp in loops:
        ana.bind(lp.loop_var, Range(lp.min, lp.extent))
    for v, r in col.ranges.items():
        ana.bind(v, r)
    serial = [lp for lp in loops if not is_thread_loop(lp) and lp not in virtual
              and id(lp.loop_var) not in relaxed]
    by_loop = {id(lp.loop_var): lp for lp in serial}
    seen, shape, dims = set(), [], []
    for d in range(len(buf.shape)):
        parts = [_split(ix[d], inner_ids) for ix in col.indices]
        outer0 = parts[0][0]
        key0 = {k: c for k, (_, c) in outer0.items()}
        if any({k: c for k, (_, c) in o.items()} != key0 for o, _ in parts):
            _relax_or_skip(parts, by_loop)
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
                    # a term mixing iterations (rh // 2): one tile for all of them
                    raise _Relax({id(v) for v in used_vars(var) if id(v) in by_loop})
                continue
            if not isinstance(loop.extent, IntImm) or abs(c) < step:
                # iterations may share elements (overlapping windows): one tile for
                # all of them, so an element keeps its place from one to the next
                raise _Relax({id(var)})
            seen.add(id(var))
            step = abs(c) * loop.extent.value
        shape.append(extent)
        dims.append((outer0, lo))
    for lp in serial:
        if id(lp.loop_var) not in seen and not (isinstance(lp.extent, IntImm)
                                                 and lp.extent.value == 1):
            raise _Skip(f"loop '{lp.loop_var.name}' reuses the same elements")
    return tuple(shape), dims, inner_ids


def _relax_or_skip(parts, by_loop):
    """Raise ``_Relax`` with the serial loops whose variables make the accesses'
    outer parts differ, or ``_Skip`` when another variable does."""
    terms = [{k: c for k, (_, c) in o.items()} for o, _ in parts]
    common = set.intersection(*[set(t.items()) for t in terms])
    ids = set()
    for o, _ in parts:
        for k, (atom, c) in o.items():
            if (k, c) in common:
                continue
            used = [id(v) for v in used_vars(atom)]
            if not used or any(u not in by_loop for u in used):
                raise _Skip("accesses disagree on the part outside the tile")
            ids.update(used)
    raise _Relax(ids)


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
    # a shared buffer too sits at the innermost statement holding its accesses, inside
    # thread loops if need be (as TVM places it): its box is relaxed over the threads
    # of the block (one copy per block however deep the allocation), and inside a
    # serial loop whose iterations each use their own tile it is that one tile
    loops, lca = _descend(kernel, buf)
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
    """Move and size every ``shared``/``local`` buffer (module docstring).

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
