"""Turn te stages into a PrimFunc with one TensorIR block per compute stage.

Each stage becomes a loop nest (spatial axes, then reduction axes) around a block
whose iter vars are typed spatial/reduce, whose reads/writes are the regions it
touches, and which, for a reduction, has an ``init``.  Intermediate tensors are
allocated in the root block.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((4, 4), name="A")
    >>> k = T.reduce_axis((0, 4), name="k")
    >>> S = T.compute((4,), lambda i: T.sum(A[i, k], axis=k), name="S")
    >>> f = T.create_prim_func([A, S])
    >>> print(f)  # doctest: +ELLIPSIS
    @T.prim_func
    def main(A: T.Buffer((4, 4), "float32"), S: T.Buffer((4,), "float32")):
    ...
"""

from __future__ import annotations

from ..analysis.reducer import combine, identity
from ..buffer import Buffer
from ..deep import deep_ok
from ..errors import ShapeError
from ..expr import Expr, IntImm, Var, const, Add, Sub, SizeVar
from ..op import if_then_else
from ..function import PrimFunc
from ..stmt import (Block, BlockRealize, BufferRegion, BufferStore, For, IterVar, Range,
                    seq)
from ..visitor import Visitor, substitute, used_vars
from .reduction import Reduce
from .tensor import ComputeOp, PlaceholderOp, Tensor


def _split_const(e: Expr):
    if isinstance(e, IntImm):
        return None, e.value
    if isinstance(e, Add) and isinstance(e.b, IntImm):
        return e.a, e.b.value
    if isinstance(e, Sub) and isinstance(e.b, IntImm):
        return e.a, -e.b.value
    return e, 0


def _offset(base: Expr, c: int) -> Expr:
    """``base + c`` as the simplifier writes it: ``i - 3``, not ``i + -3``."""
    if c > 0:
        return base + c
    return base - (-c) if c < 0 else base


def access_regions(stmt_or_expr, exclude=()) -> list:
    """Regions of the buffers read by ``stmt_or_expr``, in order of first read.

    Loads of one buffer at indices that differ by constants are merged into one
    region; other differences widen that dimension to the whole extent.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((8,), "float32", "A")
        >>> i = T.var("i")
        >>> r = access_regions(A[i] + A[i + 2])[0]
        >>> str(r.region[0].extent)
        '3'
    """
    loads: dict[int, list] = {}
    bufs: dict[int, Buffer] = {}
    skip = {id(b) for b in exclude}

    class _V(Visitor):
        def visit_BufferLoad(self, ld):
            if id(ld.buffer) not in skip:
                bufs.setdefault(id(ld.buffer), ld.buffer)
                loads.setdefault(id(ld.buffer), []).append(ld.indices)
            self.visit(ld.indices)

    _V().visit(stmt_or_expr)
    out = []
    for key, idx_list in loads.items():
        buf = bufs[key]
        region = []
        for d in range(buf.ndim):
            parts = [_split_const(ix[d]) for ix in idx_list]
            base = parts[0][0]
            if all((p[0] is None and base is None) or
                   (p[0] is not None and base is not None and p[0] == base) for p in parts):
                lo = min(p[1] for p in parts)
                hi = max(p[1] for p in parts)
                dt = idx_list[0][d].dtype
                start = const(lo, dt) if base is None else _offset(base, lo)
                region.append(Range(start, const(hi - lo + 1, dt)))
            else:
                region.append(Range(const(0, buf.shape[d].dtype), buf.shape[d]))
        out.append(BufferRegion(buf, tuple(region)))
    return out


def _collect_stages(outputs: list[Tensor]) -> list[Tensor]:
    order: list[Tensor] = []
    state: dict[int, int] = {}

    def visit(t: Tensor):
        s = state.get(id(t), 0)
        if s == 2:
            return
        if s == 1:
            raise ShapeError(f"compute {t.name} depends on itself")
        state[id(t)] = 1
        for inp in t.op.inputs:
            visit(inp)
        state[id(t)] = 2
        order.append(t)

    for t in outputs:
        visit(t)
    return order


def _stage_nest(t: Tensor, block_name: str) -> object:
    op: ComputeOp = t.op
    body = op.body
    axes = list(op.axis) + list(op.reduce_axis)
    block_vars = {ax.var: Var("v_" + ax.var.name, ax.var.dtype) for ax in axes}
    loop_vars = {ax.var: Var(ax.var.name, ax.var.dtype) for ax in axes}
    iter_vars = tuple(IterVar(block_vars[ax.var], ax.dom, ax.kind) for ax in axes)
    out_idx = tuple(block_vars[ax.var] for ax in op.axis)
    buf = t.buffer
    init = None
    if isinstance(body, Reduce):
        src = substitute(body.source, block_vars)
        if body.condition is not None:
            cond = substitute(body.condition, block_vars)
            src = if_then_else(cond, src, identity(body.combiner, src.dtype))
        value = combine(body.combiner, buf[out_idx], src)
        start = identity(body.combiner, buf.dtype) if body.init is None else \
            substitute(body.init, block_vars)
        init = BufferStore(buf, start, out_idx)
        # the init's reads (a bias) count as the block's (the dtypes agree: T.sum)
        reads = access_regions(src if body.init is None else Add(src, start))
    else:
        value = substitute(body, block_vars)
        reads = access_regions(value)
    store = BufferStore(buf, value, out_idx)
    writes = [BufferRegion(buf, tuple(Range(v, const(1, v.dtype)) for v in out_idx))]
    block = Block(block_name, iter_vars, tuple(reads), tuple(writes), store, init,
                  annotations=op.attrs)
    stmt = BlockRealize(tuple(loop_vars[ax.var] for ax in axes), const(True), block)
    for ax in reversed(axes):
        stmt = For(loop_vars[ax.var], ax.dom.min, ax.dom.extent, "serial", stmt)
    return stmt


@deep_ok
def create_prim_func(args, name: str = "main") -> PrimFunc:
    """A PrimFunc computing every stage needed by ``args`` (the argument order).

    ``args`` holds tensors (placeholders and outputs) and optionally scalar ``T.var``
    parameters.  Stages not in ``args`` become intermediate buffers.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((8,), name="A")
        >>> B = T.compute((8,), lambda i: T.exp(A[i]), name="B")
        >>> C = T.compute((8,), lambda i: B[i] + 1.0, name="C")
        >>> f = T.create_prim_func([A, C])
        >>> [b.name for b in f.body.block.alloc_buffers]
        ['B']
    """
    if not isinstance(args, (list, tuple)):
        raise ShapeError(f"create_prim_func: expected a list of tensors (and scalar vars), "
                         f"e.g. T.create_prim_func([A, B]), found {args!r}")
    args = list(args)
    tensors = [a for a in args if isinstance(a, Tensor)]
    for a in args:
        if not isinstance(a, (Tensor, Var)):
            raise ShapeError(f"create_prim_func: arguments are tensors or T.var scalars, "
                             f"found {a!r}")
    stages = _collect_stages(tensors)
    arg_ids = {id(t) for t in tensors}
    nests = []
    allocs = []
    names: dict[str, int] = {}
    for t in stages:
        if isinstance(t.op, PlaceholderOp):
            if id(t) not in arg_ids:
                raise ShapeError(f"create_prim_func: placeholder {t.name} is read by a "
                                 "compute but is not in the argument list; add it")
            continue
        k = names.get(t.op.name, 0)
        names[t.op.name] = k + 1
        # block names must be unique for get_block
        nests.append(_stage_nest(t, f"{t.op.name}_{k}" if k else t.op.name))
        if id(t) not in arg_ids:
            allocs.append(t.buffer)
    root = Block("root", (), (), (), seq(*nests), None, tuple(allocs))
    body = BlockRealize((), const(True), root)
    params = tuple(a.buffer if isinstance(a, Tensor) else a for a in args)
    _check_sizes_bound(params, body, allocs)
    return PrimFunc(params, body, {"global_symbol": name})


def _check_sizes_bound(params, body, allocs) -> None:
    """Every size var the stages use must be bound by a parameter: a buffer parameter's
    shape (the caller's array gives its value) or a scalar parameter.  Otherwise the
    function has a size nothing can give a value, and would fail only when built."""
    bound = set()
    for p in params:
        for v in used_vars(p) if isinstance(p, Var) else \
                [u for d in p.shape for u in used_vars(d)]:
            bound.add(id(v))
    seen = used_vars(body) + [u for b in allocs for d in b.shape for u in used_vars(d)]
    for v in seen:
        if isinstance(v, SizeVar) and id(v) not in bound:
            users = [b.name for b in allocs if any(u is v for d in b.shape
                                                   for u in used_vars(d))]
            where = f" (the shape of {', '.join(users)})" if users else ""
            raise ShapeError(f"create_prim_func: the size var {v.name!r} is used"
                             f"{where} but no parameter binds it: expected it in the "
                             "shape of an argument tensor or as a scalar argument. Add "
                             f"the tensor whose shape holds {v.name!r} to the argument "
                             f"list, or pass {v.name!r} itself: "
                             f"T.create_prim_func([..., {v.name}])")


