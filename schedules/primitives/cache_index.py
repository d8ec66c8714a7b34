"""``cache_index``: precompute a block's index arithmetic into buffers.

The computations cached are the largest sub-expressions of the block's stores (values
and indices) that are pure arithmetic on the block's iterators: they load nothing, call
only pure math functions, use at least one iterator and no other variable (size
variables aside), and divide only by constants (evaluated over the whole domain, a
division by an iterator could trap where the block never runs).  With ``cse_thresh =
t`` only computations occurring at least ``t`` times are cached; one occurring fewer
times is looked into for smaller ones that do.  The larger computations come first.

Each cached computation ``e`` gets a buffer ``index_var_<k>`` with one dimension per
iterator it uses (their domains), filled by a stage ``index_<k>`` placed before the
block's loop nest, and the block reads ``index_var_<k>[vi, vj]`` where it computed
``e``.  A block with nothing to cache is left as it is.

Example::

    >>> import cuvil_tir as T
    >>> import schedules as S
    >>> A = T.placeholder((40,), name="A")
    >>> sch = S.Schedule(T.create_prim_func([A, T.compute((80,), lambda i: A[i // 2],
    ...                                                   name="B")]))
    >>> sch.cache_index("B", "global")
    [BlockRV('index_0')]
    >>> "B[v_i] = A[index_var_0[v_i]]" in str(sch.func)
    True
"""

from __future__ import annotations

from cuvil_tir import ops
from cuvil_tir.buffer import Buffer
from cuvil_tir.expr import (BufferLoad, Div, Expr, FloatImm, FloorDiv, FloorMod,
                            IntImm, Mod, Ramp, Broadcast, SizeVar, StringImm, Var)
from cuvil_tir.node import field_names
from cuvil_tir.stmt import BlockRealize, BufferRegion, BufferStore, Range, seq
from cuvil_tir.analysis.regions import tree_same
from cuvil_tir.visitor import Mutator, Visitor, substitute, used_vars

from cuvil_tir.analysis import tree
from ..analysis import block_path, fresh_name
from ..handles import BlockRV
from ..primitive import BLOCK, BLOCKS, INDEX, SCOPE, primitive
from .nests import make_nest, subtrees, with_fields


def _children(e) -> list:
    out = []
    for f in field_names(type(e)):
        v = getattr(e, f)
        if isinstance(v, Expr):
            out.append(v)
        elif isinstance(v, tuple):
            out.extend(x for x in v if isinstance(x, Expr))
    return out


def _eligible(e, own: set) -> bool:
    if isinstance(e, (Var, IntImm, FloatImm, StringImm, Ramp, Broadcast, BufferLoad)):
        return False
    ok = [True]

    class _Check(Visitor):
        def visit_BufferLoad(self, ld):
            ok[0] = False

        def visit_Call(self, c):
            if ops.call_effect(c) != "pure":
                ok[0] = False
            self.generic_visit(c)

        def visit_BinaryOp(self, b):
            if isinstance(b, (Div, Mod, FloorDiv, FloorMod)) and not isinstance(
                    b.b, (IntImm, FloatImm)):
                ok[0] = False
            self.generic_visit(b)

    _Check().visit(e)
    vs = used_vars(e)
    return ok[0] and any(id(v) in own for v in vs) and all(
        id(v) in own or isinstance(v, SizeVar) for v in vs)


def _size(e) -> int:
    return 1 + sum(_size(c) for c in _children(e))


def _roots(blk) -> list:
    """The expressions of the block's stores: indices, then the value."""
    out = []

    class _Stores(Visitor):
        def visit_BufferStore(self, st):
            out.extend(st.indices)
            out.append(st.value)

        def visit_BlockRealize(self, br):      # a nested block is its own business
            return None

    for part in (blk.init, blk.body):
        if part is not None:
            _Stores().visit(part)
    return out


def _choose(blk, thresh: int) -> list:
    own = {id(iv.var) for iv in blk.iter_vars}
    counts: list = []          # [(expr, count)]

    def count(e):
        if _eligible(e, own):
            for k, (x, n) in enumerate(counts):
                if tree_same(x, e):
                    counts[k] = (x, n + 1)
                    break
            else:
                counts.append((e, 1))
        for c in _children(e):
            count(c)

    roots = _roots(blk)
    for r in roots:
        count(r)
    chosen: list = []

    def pick(e):
        hit = next((n for x, n in counts if tree_same(x, e)), 0)
        if hit and hit >= thresh:
            if not any(tree_same(x, e) for x in chosen):
                chosen.append(e)
            return
        for c in _children(e):
            pick(c)

    for r in roots:
        pick(r)
    return sorted(chosen, key=_size, reverse=True)


class _Use(Mutator):
    """Replace each cached computation by a load of its buffer."""

    def __init__(self, loads):
        self.loads = loads

    def visit(self, n):
        if isinstance(n, Expr) and not isinstance(n, (Var, IntImm, FloatImm)):
            for e, load in self.loads:
                if tree_same(n, e):
                    return load
        return super().visit(n)

    def visit_BlockRealize(self, br):
        return br


@primitive("cache_index", block=BLOCK, storage_scope=SCOPE, cse_thresh=INDEX,
           returns=BLOCKS)
def cache_index(func, block, storage_scope, cse_thresh: int = 0):
    """Precompute ``block``'s index arithmetic into buffers of ``storage_scope`` (see
    :mod:`schedules.primitives.cache_index`); returns the stages' blocks.

    Before/after::

        for i in T.serial(80):                    for ax0 in T.serial(80):
            with T.block("B"):                        with T.block("index_0"):
                B[vi] = A[vi // 2]                        index_var_0[v0] = v0 // 2
                                                  for i in T.serial(80):
                                                      with T.block("B"):
                                                          B[vi] = A[index_var_0[vi]]

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((8, 8), name="A")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute(
        ...     (8,), lambda i: A[i // 2, i // 2] + A[i % 4, 0], name="B")]))
        >>> sch.cache_index("B", "global", cse_thresh=2)
        [BlockRV('index_0')]
    """
    bpath = block_path(func, block, "cache_index")
    realize = tree.get(func, bpath)
    blk = realize.block
    chosen = _choose(blk, cse_thresh)
    if not chosen:
        return func, []
    spath = tree.enclosing_block(func, bpath)
    taken = {b.block.name for b in tree.blocks_under(func.body)} | {
        b.name for br in tree.blocks_under(func.body) for b in br.block.alloc_buffers}
    stages, bufs, loads, rvs = [], [], [], []
    for k, e in enumerate(chosen):
        used = [iv for iv in blk.iter_vars if any(v is iv.var for v in used_vars(e))]
        buf = Buffer(tuple(iv.dom.extent for iv in used), e.dtype,
                     fresh_name(f"index_var_{k}", taken), (), storage_scope)
        taken.add(buf.name)
        name = fresh_name(f"index_{k}", taken)
        taken.add(name)
        new = {iv.var: Var(f"v{n}", iv.var.dtype) for n, iv in enumerate(used)}
        ivs = tuple(with_fields(iv, var=new[iv.var], kind="spatial") for iv in used)
        at = tuple(new[iv.var] - iv.dom.min if not _zero(iv.dom.min) else new[iv.var]
                   for iv in used)
        stage = with_fields(blk, name=name, iter_vars=ivs, reads=(), init=None,
                            writes=(BufferRegion(buf, tuple(Range(x, IntImm(1, x.dtype))
                                                            for x in at)),),
                            body=BufferStore(buf, substitute(e, new), at),
                            alloc_buffers=(), annotations=())
        stages.append(make_nest(stage, [None] * len(ivs), {}))
        bufs.append(buf)
        idx = tuple(iv.var - iv.dom.min if not _zero(iv.dom.min) else iv.var for iv in used)
        loads.append((e, BufferLoad(buf, idx)))
        rvs.append(BlockRV(name))
    use = _Use(loads)
    extra = tuple(BufferRegion(ld.buffer, tuple(Range(x, IntImm(1, x.dtype))
                                                for x in ld.indices)) for _, ld in loads)
    new_blk = with_fields(blk, body=use.visit(blk.body), reads=extra + blk.reads,
                          init=use.visit(blk.init) if blk.init is not None else None)
    g = tree.replace(func, bpath, BlockRealize(realize.iter_values, realize.predicate,
                                               new_blk))
    scope = tree.get(g, spath)
    items = subtrees(scope.block.body)
    here = next(k for k, s in enumerate(items)
                if any(b.block.name == blk.name for b in tree.blocks_under(s)))
    body = seq(*items[:here], *stages, *items[here:])
    sblk = with_fields(scope.block, body=body,
                       alloc_buffers=scope.block.alloc_buffers + tuple(bufs))
    return tree.replace(g, spath, with_fields(scope, block=sblk)), rvs


def _zero(e) -> bool:
    return isinstance(e, IntImm) and e.value == 0


__all__ = ["cache_index"]
