"""``lower_cross_thread_reduction``: a reduction loop bound to ``threadIdx.x``
(``sch.bind(k, "threadIdx.x")``: a loop bound to ``threadIdx.*`` that drives a reduce
iter var of a block under it, recognised from the IR as TensorIR does) becomes a
per-thread partial result, a warp-shuffle reduction, and, beyond one warp, a second
round through ``shared`` memory:

.. code-block:: text

    for tx in T.thread_binding(E, "threadIdx.x"):        # E: a power of two <= 32,
        red[0] = identity                                 # or a multiple of 32
        for ki ...: red[0] = red[0] + rhs                 # the thread's part
        red[0] = warp_sum(red[0], min(E, 32))        # __shfl_xor_sync butterfly
        if E > 32:
            if tx % 32 == 0: red_warps[tx // 32] = red[0]
            red[0] = warp_sum(tx < E // 32 ? red_warps[tx] : identity, 32)
        if tx == 0: S[idx] = red[0]

The barrier between the warp results and their read is left to
:func:`~cuvil_tir.transform.gpu_sync.insert_barriers`.  Runs on block-level IR,
before ``lower_blocks``.  The reduction's block must be the only block under the bound
loop and all its reduce iter values must vary only with that loop and loops inside it.

Example::

    >>> import cuvil_tir as T, schedules as S
    >>> A = T.placeholder((4, 64), name="A")
    >>> k = T.reduce_axis((0, 64), name="k")
    >>> sch = S.Schedule(T.create_prim_func([A, T.compute((4,), lambda i: T.sum(A[i, k], axis=k), name="B")]))
    >>> i, k = sch.get_loops(sch.get_block("B"))
    >>> sch.bind(i, "blockIdx.x"); sch.bind(k, "threadIdx.x")
    >>> "warp_sum" in T.to_text(lower_cross_thread_reduction(sch.func))
    True
"""

from __future__ import annotations

from cuvil_tir.buffer import Buffer
from cuvil_tir.errors import LoweringError
from cuvil_tir.expr import Call, EQ, FloorDiv, FloorMod, IntImm, LT, Var
from cuvil_tir.op import if_then_else
from cuvil_tir.printer import to_text
from cuvil_tir.stmt import (Allocate, BlockRealize, BufferStore, For, IfThenElse, seq)
from cuvil_tir.visitor import Mutator, post_order_visit, substitute
from cuvil_tir.analysis.reducer import (NotAReduction, combine, identity, match_reducer,
                                        reduction_block)

WARP = 32


def warp_reduce(combiner: str, value, width: int):
    """``warp_<combiner>(value, width)`` (an op of :mod:`cuvil_tir.ops.gpu`): every lane of each group of ``width``
    lanes gets the combination of the group's values.

    Example::

        >>> import cuvil_tir as T
        >>> warp_reduce("sum", T.var("x", "float32"), 32).op
        'warp_sum'
    """
    if combiner == "prod":
        raise LoweringError("a cross-thread product is not supported; use rfactor")
    return Call(value.dtype, f"warp_{combiner}", (value, IntImm(width, "int32")))


def _depends(e, var) -> bool:
    hit = []
    post_order_visit(e, lambda n: hit.append(1) if n is var else None)
    return bool(hit)


def _find_realizes(s) -> list:
    out = []
    post_order_visit(s, lambda n: out.append(n) if isinstance(n, BlockRealize) else None)
    return out


class _Lower(Mutator):
    def __init__(self, func):
        self.func = func
        self.enclosing: list = []

    def visit_For(self, loop):
        if dict(loop.annotations).get("cuda.cross_thread_done"):
            return loop
        self.enclosing.append(loop)
        try:
            loop = self.generic_visit(loop)
        finally:
            self.enclosing.pop()
        if not _reduces_across_threads(loop):
            return loop
        return self.rewrite(loop)

    def refuse(self, loop, why):
        return LoweringError(f"cross-thread reduction over {loop.loop_var.name} "
                             f"({loop.thread_tag}): {why}:\n"
                             + to_text(self.func, highlight=loop))

    def rewrite(self, loop):
        realizes = _find_realizes(loop.body)
        if len(realizes) != 1:
            raise self.refuse(loop, f"expected one reduction block under the loop, found "
                              f"{len(realizes)}; move other blocks out with compute_at")
        br = realizes[0]
        blk = br.block
        try:
            combiner, rhs = match_reducer(blk)
        except NotAReduction as why:
            raise self.refuse(loop, f"block {blk.name!r} {why}") from None
        if loop.thread_tag != "threadIdx.x":
            raise self.refuse(loop, "only threadIdx.x reduces across threads")
        if not isinstance(loop.extent, IntImm):
            raise self.refuse(loop, "the thread count must be a constant")
        ext = loop.extent.value
        if not ((ext <= WARP and ext & (ext - 1) == 0) or ext % WARP == 0):
            raise self.refuse(loop, f"{ext} threads: use a power of two up to 32 or a "
                              "multiple of 32")
        outer = {id(lp.loop_var) for lp in self.enclosing}
        for iv, v in zip(blk.iter_vars, br.iter_values):
            if iv.kind == "reduce" and any(id(x) in outer for x in _vars(v)):
                raise self.refuse(loop, f"reduce axis {iv.var.name} also varies with a "
                                  "loop outside the bound loop; bind the outermost "
                                  "reduction loop, or rfactor first")
        if ext > WARP and any(lp.kind == "thread_binding" and lp.thread_tag in
                              ("threadIdx.y", "threadIdx.z") for lp in self.enclosing):
            raise self.refuse(loop, "more than one warp per reduction with threadIdx.y/z "
                              "also bound; bind the other axis to blockIdx")
        dt = blk.body.buffer.dtype
        vmap = {iv.var: v for iv, v in zip(blk.iter_vars, br.iter_values)}
        st = blk.body
        red = Buffer((IntImm(1, "int32"),), dt, f"{st.buffer.name}_red", scope="local")
        zero = IntImm(0, "int32")
        ident = identity(combiner, dt)
        part = BufferStore(red, combine(combiner, red[zero], substitute(rhs, vmap)), (zero,))
        pred = br.predicate
        if not (isinstance(pred, IntImm) and pred.value):
            part = IfThenElse(pred, part)
        body = _Replace(br, part).visit(loop.body)
        tx = loop.loop_var
        steps = [BufferStore(red, ident, (zero,)), body,
                 BufferStore(red, warp_reduce(combiner, red[zero], min(ext, WARP)), (zero,))]
        allocs = [red]
        if ext > WARP:
            nw = ext // WARP
            warps = Buffer((IntImm(nw, "int32"),), dt, f"{st.buffer.name}_warps",
                           scope="shared")
            allocs.append(warps)
            c32 = IntImm(WARP, "int32")
            steps.append(IfThenElse(EQ(FloorMod(tx, c32), zero),
                                    BufferStore(warps, red[zero], (FloorDiv(tx, c32),))))
            # tx % nw == tx where it is read: the index stays inside the buffer's tile
            nwc = IntImm(nw, "int32")
            pick = if_then_else(LT(tx, nwc), warps[FloorMod(tx, nwc)], ident)
            steps.append(BufferStore(red, warp_reduce(combiner, pick, WARP), (zero,)))
        out_idx = tuple(substitute(ix, vmap) for ix in st.indices)
        steps.append(IfThenElse(EQ(tx, zero), BufferStore(st.buffer, red[zero], out_idx)))
        ann = dict(loop.annotations)
        ann["cuda.cross_thread_done"] = 1
        new = For(tx, loop.min, loop.extent, "thread_binding", seq(*steps),
                  loop.thread_tag, ann)
        for b in reversed(allocs):
            new = Allocate(b, new)
        return new


def _reduces_across_threads(loop) -> bool:
    """A loop bound to ``threadIdx.*`` whose variable drives a reduce iter var."""
    return loop.kind == "thread_binding" and (loop.thread_tag or "").startswith(
        "threadIdx.") and reduction_block(loop) is not None


def _vars(e) -> list:
    out = []
    post_order_visit(e, lambda n: out.append(n) if isinstance(n, Var) else None)
    return out


class _Replace(Mutator):
    def __init__(self, old, new):
        self.old, self.new = old, new

    def generic_visit(self, n):
        return self.new if n is self.old else Mutator.generic_visit(self, n)


def lower_cross_thread_reduction(func):
    """``func`` with every cross-thread reduction lowered (module docstring).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> lower_cross_thread_reduction(f) is f
        True
    """
    body = _Lower(func).visit(func.body)
    if body is func.body:
        return func
    return func.with_body(body)


__all__ = ["lower_cross_thread_reduction", "warp_reduce"]
