"""``inject_double_buffer``: two stages of each shared tile of a loop annotated
``double_buffer`` (``sch.annotate(ko, "double_buffer", 1)``), so the copy of the next
tile is issued before the computation on the current one.

Runs after :func:`~cuvil_tir.transform.gpu_memory.plan_gpu_memory` has placed the
tiles inside the loop and before ``flatten_buffers``.  The loop body must be the
shared allocations, then the statements that fill them (each writes only tiles), then
the statements that use them:

.. code-block:: text

    for ko in T.serial(n):                       tile[0] <- fill(ko = 0)
        tile <- fill(ko)              ->          for ko in T.serial(n):
        use(tile)                                    if ko + 1 < n: tile[(ko + 1) % 2] <- fill(ko + 1)
                                                     use(tile[ko % 2])

Barriers are inserted afterwards by the conservative pass, which treats both stages
as one buffer: it keeps a barrier before the use as well as before the fill, so double
buffering here overlaps the copy's latency with the previous computation but does not
remove a barrier.

Example::

    >>> import cuvil_tir as T
    >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
    >>> inject_double_buffer(f) is f
    True
"""

from __future__ import annotations

from cuvil_tir.buffer import Buffer
from cuvil_tir.errors import LoweringError
from cuvil_tir.expr import FloorMod, IntImm, LT
from cuvil_tir.printer import to_text
from cuvil_tir.stmt import Allocate, BufferStore, For, IfThenElse, SeqStmt, seq
from cuvil_tir.visitor import Mutator, post_order_visit, substitute


def _writes_only(stmt, bufs) -> bool:
    stores = []
    post_order_visit(stmt, lambda n: stores.append(n.buffer) if isinstance(n, BufferStore)
                     else None)
    return bool(stores) and all(any(b is x for x in bufs) for b in stores)


class _Stage(Mutator):
    """Every access of a tile gets the stage index first."""

    def __init__(self, bmap, stage):
        self.bmap, self.stage = bmap, stage

    def visit_BufferLoad(self, e):
        e = self.generic_visit(e)
        new = self.bmap.get(id(e.buffer))
        return new[(self.stage,) + tuple(e.indices)] if new is not None else e

    def visit_BufferStore(self, s):
        s = self.generic_visit(s)
        new = self.bmap.get(id(s.buffer))
        if new is None:
            return s
        return BufferStore(new, s.value, (self.stage,) + tuple(s.indices))


class _Inject(Mutator):
    def __init__(self, func):
        self.func = func

    def visit_For(self, loop):
        loop = self.generic_visit(loop)
        if not dict(loop.annotations).get("double_buffer"):
            return loop
        body, tiles = loop.body, []
        while isinstance(body, Allocate) and body.buffer.scope == "shared":
            tiles.append(body.buffer)
            body = body.body
        stmts = list(body.seq) if isinstance(body, SeqStmt) else [body]
        fills = []
        while stmts and _writes_only(stmts[0], tiles):
            fills.append(stmts.pop(0))
        if not tiles or not fills or not stmts:
            raise LoweringError(
                f"double_buffer on loop {loop.loop_var.name}: expected its body to be "
                "shared tiles, the statements filling them, then the statements using "
                "them (cache_read(..., 'shared') + compute_at on this loop):\n"
                + to_text(self.func, highlight=loop))
        bmap = {id(b): Buffer((IntImm(2, "int32"),) + tuple(b.shape), b.dtype, b.name,
                              scope="shared", align=b.align) for b in tiles}
        v, lo, ext = loop.loop_var, loop.min, loop.extent
        two = IntImm(2, v.dtype)
        first = [_Stage(bmap, IntImm(0, "int32")).visit(substitute(s, {v: lo}))
                 for s in fills]
        nxt_stage = FloorMod(v - lo + IntImm(1, v.dtype), two)
        nxt = [_Stage(bmap, nxt_stage).visit(substitute(s, {v: v + IntImm(1, v.dtype)}))
               for s in fills]
        use = [_Stage(bmap, FloorMod(v - lo, two)).visit(s) for s in stmts]
        ann = {k: x for k, x in loop.annotations if k != "double_buffer"}
        new_body = seq(IfThenElse(LT(v + IntImm(1, v.dtype), lo + ext), seq(*nxt)), *use)
        out = seq(*first, For(v, lo, ext, loop.kind, new_body, loop.thread_tag, ann))
        for b in reversed(tiles):
            out = Allocate(bmap[id(b)], out)
        return out


def inject_double_buffer(func):
    """``func`` with two-stage shared tiles in ``double_buffer`` loops (module doc).

    Example::

        >>> inject_double_buffer.__name__
        'inject_double_buffer'
    """
    body = _Inject(func).visit(func.body)
    return func if body is func.body else func.with_body(body)


__all__ = ["inject_double_buffer"]
