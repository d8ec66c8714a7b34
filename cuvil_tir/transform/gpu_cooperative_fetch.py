"""``cooperative_fetch``: MetaSchedule's ``meta_schedule.cooperative_fetch`` annotation,
as TVM's ``RewriteCooperativeFetch`` gives it a meaning.

MetaSchedule marks the block that copies a tile into shared memory with
``T.block_attr({"meta_schedule.cooperative_fetch": v})``: the copy's loop (the
innermost loop above the block, one fused loop) is shared by all the threads of the
block.  The loop of extent ``N`` becomes

.. code-block:: text

    for o in T.serial(ceil(N / (Y * X * v))):
        for ty in T.thread_binding(Y, "threadIdx.y"):       # when the kernel binds y
            for tx in T.thread_binding(X, "threadIdx.x"):
                for l in T.vectorized(v):                    # v lanes per thread
                    copy(((o * Y + ty) * X + tx) * v + l)    # guarded when it overshoots

(a loop of symbolic extent is left as it is, as TVM's postprocessor leaves it), with
``X`` and ``Y`` the extents of the ``threadIdx.x``/``threadIdx.y`` loops around the
copy (``X = 32`` in a kernel whose tensor-core blocks say ``warp_execution``: one
warp).  ``v`` falls back to 1 when it does not divide ``N`` or the copy moves
values wider than 4 bytes.  The new loops are bound to the same axes as the loops
around them (the same hardware indices; see
:func:`~cuvil_tir.transform.gpu_threads.normalize_thread_bindings`).  Runs on
block-level IR, first in the ``cuda`` pipeline.

Example::

    >>> import cuvil_tir as T
    >>> f = T.parse('''
    ... @T.prim_func
    ... def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    ...     S = T.alloc_buffer((64,), scope="shared")
    ...     for tx in T.thread_binding(16, thread="threadIdx.x"):
    ...         for i in T.serial(64):
    ...             with T.block("S"):
    ...                 v = T.axis.spatial(64, i)
    ...                 T.block_attr({"meta_schedule.cooperative_fetch": 2})
    ...                 S[v] = A[v]
    ...         for j in T.serial(4):
    ...             with T.block("B"):
    ...                 v = T.axis.spatial(64, j * 16 + tx)
    ...                 B[v] = S[v]
    ... ''')
    >>> "i_tx" in T.to_text(cooperative_fetch(f))
    True
"""

from __future__ import annotations

from .. import dtype as D
from ..errors import LoweringError
from ..expr import IntImm, LT, Var
from ..function import PrimFunc
from ..printer import to_text
from ..stmt import Block, BlockRealize, For, IfThenElse, LetStmt, SeqStmt
from ..visitor import Mutator, post_order_visit, substitute

#: TVM's annotation names
COOPERATIVE_FETCH = "meta_schedule.cooperative_fetch"
WARP_EXECUTION = "warp_execution"
WARP = 32


def _annotated(loop) -> list:
    """The blocks whose innermost enclosing loop is ``loop`` and that carry the
    annotation."""
    out = []

    def walk(s):
        if isinstance(s, BlockRealize):
            if COOPERATIVE_FETCH in dict(s.block.annotations):
                out.append(s)
        elif isinstance(s, SeqStmt):
            for c in s.seq:
                walk(c)
        elif isinstance(s, IfThenElse):
            walk(s.then_case)
            if s.else_case is not None:
                walk(s.else_case)
        elif isinstance(s, LetStmt):
            walk(s.body)
    walk(loop.body)
    return out


def _widest_bytes(block) -> int:
    widest = [1]

    def look(n):
        dt = getattr(n, "dtype", None)
        if isinstance(dt, str) and dt not in ("handle", "bool"):
            widest[0] = max(widest[0], D.bits(dt) * D.lanes(dt) // 8)
    post_order_visit(block.body, look)
    return widest[0]


class _Unannotate(Mutator):
    def __init__(self, realizes):
        self.ids = {id(r) for r in realizes}

    def visit_BlockRealize(self, br):
        if id(br) not in self.ids:
            return br
        blk = br.block
        ann = tuple((k, v) for k, v in blk.annotations if k != COOPERATIVE_FETCH)
        return BlockRealize(br.iter_values, br.predicate, Block(
            blk.name, blk.iter_vars, blk.reads, blk.writes, blk.body, blk.init,
            blk.alloc_buffers, ann))


class _Fetch(Mutator):
    def __init__(self, func):
        self.func = func
        self.stack: list = []

    def visit_For(self, loop):
        self.stack.append(loop)
        try:
            new = self.generic_visit(loop)
        finally:
            self.stack.pop()
        blocks = _annotated(new)
        return self.spread(new, blocks) if blocks else new

    def threads(self, loop) -> tuple:
        """``(Y, X)`` of the kernel around ``loop`` (Y None when it binds no y)."""
        ext = {}
        for s in self.stack:
            if s.kind == "thread_binding" and s.thread_tag in ("threadIdx.x", "threadIdx.y"):
                ext.setdefault(s.thread_tag, s.extent)
        x = ext.get("threadIdx.x")
        if x is None and self.warp_execution():
            x = IntImm(WARP, "int32")
        if x is None:
            raise LoweringError(f"meta_schedule.cooperative_fetch: the copy under loop "
                                f"{loop.loop_var.name} is not inside a loop bound to "
                                "threadIdx.x, so there are no threads to share it: bind "
                                "the kernel's threads first:\n"
                                + to_text(self.func, highlight=loop))
        y = ext.get("threadIdx.y")
        for e in (x, y):
            if e is not None and not isinstance(e, IntImm):
                raise LoweringError(f"meta_schedule.cooperative_fetch: the thread extent "
                                    f"{e} is not a constant")
        return (y.value if y is not None else None), x.value

    def warp_execution(self) -> bool:
        kernel = next((s for s in self.stack if s.kind == "thread_binding"), None)
        hit = []
        post_order_visit(kernel, lambda n: hit.append(1) if isinstance(n, Block) and
                         dict(n.annotations).get(WARP_EXECUTION) else None)
        return bool(hit)

    def spread(self, loop, blocks):
        if not isinstance(loop.extent, IntImm) or loop.kind != "serial":
            # as TVM's postprocessor: a copy loop of symbolic extent stays as it is,
            # every thread running it
            return For(loop.loop_var, loop.min, loop.extent, loop.kind,
                       _Unannotate(blocks).visit(loop.body), loop.thread_tag,
                       loop.annotations)
        n = loop.extent.value
        lanes = int(dict(blocks[0].block.annotations)[COOPERATIVE_FETCH])
        if lanes < 1 or n % lanes or any(_widest_bytes(b.block) > 4 for b in blocks):
            lanes = 1
        y, x = self.threads(loop)
        per = (y or 1) * x * lanes
        dt = loop.loop_var.dtype
        name = loop.loop_var.name
        o = Var(f"{name}_o", dt)
        ty, tx, ln = Var(f"{name}_ty", dt), Var(f"{name}_tx", dt), Var(f"{name}_v", dt)
        index = o
        if y is not None:
            index = index * IntImm(y, dt) + ty
        index = index * IntImm(x, dt) + tx
        if lanes > 1:
            index = index * IntImm(lanes, dt) + ln
        # annotations off first: substitute rebuilds the blocks it rewrites
        body = substitute(_Unannotate(blocks).visit(loop.body), {loop.loop_var: index})
        if n % per:
            body = IfThenElse(LT(index, IntImm(n, dt)), body)
        zero = IntImm(0, dt)
        if lanes > 1:
            body = For(ln, zero, IntImm(lanes, dt), "vectorized", body)
        body = For(tx, zero, IntImm(x, dt), "thread_binding", body, "threadIdx.x")
        if y is not None:
            body = For(ty, zero, IntImm(y, dt), "thread_binding", body, "threadIdx.y")
        return For(o, zero, IntImm(-(-n // per), dt), "serial", body, None,
                   loop.annotations)


def cooperative_fetch(func: PrimFunc) -> PrimFunc:
    """``func`` with every ``meta_schedule.cooperative_fetch`` copy shared by the
    threads of its block (module docstring).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> cooperative_fetch(f) is f
        True
    """
    body = _Fetch(func).visit(func.body)
    return func if body is func.body else func.with_body(body)


__all__ = ["COOPERATIVE_FETCH", "WARP_EXECUTION", "cooperative_fetch"]
