"""``lower_cross_thread_reduction``: reductions whose loops are bound to ``threadIdx``,
as TensorIR defines them (TVM's ``LowerCrossThreadReduction``).

A reduction block is *cross-thread* when a loop bound to ``threadIdx.*`` drives one of
its reduce iter vars (recognised from the IR, so TVMScript read from text lowers
too).  Its *reduction loops* are the loops around it that drive a reduce iter var,
bound or not.  The outermost of them is replaced by, under the bound ones:

.. code-block:: text

    for ty in T.thread_binding(4, "threadIdx.y"):      # the bound reduction loops
        acc[0] = identity                               # in-thread part, when some
        for ko in T.serial(8): acc[0] = acc[0] + rhs    # reduction loop is not bound
        red[0] = all-reduce of acc[0] over ty           # (or the block has a predicate)
        if ty == 0: B[i] = red[0]                       # write-back

The all-reduce (:mod:`.gpu_allreduce`) leaves the result in *every* thread of the
group; the write-back stores it from the first thread only when the output is in
``global`` or ``shared`` memory, from every thread when it is ``local`` (each
thread's own copy, as later statements of the same thread read it).  A later block
of the same kernel that reads the result, writes non-local memory and is not itself
under the reduction's thread loops would otherwise run in every thread: it gets those
loops with the predicate ``ty == 0`` (TVM's thread broadcast).  Threads of axes the
kernel binds elsewhere but not around the reduction run it too: the reduction is
bound to them explicitly (each such copy is its own group, writing from its first
thread).

The reduction must be the last block under its outermost reduction loop, its
reduction loops the innermost statements around it, its bound loops on ``threadIdx``
(a reduction across blocks needs atomics or ``rfactor``), and its reducer one
:func:`~cuvil_tir.analysis.reducer.reducer_of` recognises; otherwise a
``LoweringError`` names the block.  Runs on block-level IR, before ``lower_blocks``.

Example::

    >>> import cuvil_tir as T
    >>> f = T.parse('''
    ... @T.prim_func
    ... def rows(A: T.Buffer((4, 256), "float32"), B: T.Buffer((4,), "float32")):
    ...     for i in T.thread_binding(4, thread="blockIdx.x"):
    ...         for ko in T.serial(4):
    ...             for ki in T.thread_binding(64, thread="threadIdx.x"):
    ...                 with T.block("B"):
    ...                     vi = T.axis.spatial(4, i)
    ...                     vk = T.axis.reduce(256, ko * 64 + ki)
    ...                     with T.init():
    ...                         B[vi] = T.float32(0)
    ...                     B[vi] = B[vi] + A[vi, vk]
    ... ''')
    >>> "warp_sum" in T.to_text(lower_cross_thread_reduction(f))
    True
"""

from __future__ import annotations

from ..analysis.reducer import NotAReduction, reducer_of
from ..errors import LoweringError
from ..expr import EQ, And, IntImm, Var, const
from ..function import PrimFunc
from ..printer import to_text
from ..stmt import (Allocate, Block, BlockRealize, BufferRegion, BufferStore, Evaluate,
                    For, IfThenElse, Range, SeqStmt, seq)
from ..thread_axes import is_thread_axis, thread_axis
from ..visitor import Mutator, post_order_visit, substitute
from .gpu_allreduce import ThreadSpace, allreduce
from .gpu_threads import thread_loops


def _is_bound(loop) -> bool:
    return loop.kind == "thread_binding" and is_thread_axis(loop.thread_tag) and \
        thread_axis(loop.thread_tag).launched


def _vars_of(e) -> set:
    out = set()
    post_order_visit(e, lambda n: out.add(id(n)) if isinstance(n, Var) else None)
    return out


class _ToScratch(Mutator):
    """The reduction buffers at the reduction's index -> the thread's accumulator."""

    def __init__(self, pairs):
        self.pairs = {id(b): a for b, a in pairs}
        self.zero = IntImm(0, "int32")

    def visit_BufferLoad(self, e):
        acc = self.pairs.get(id(e.buffer))
        return acc[self.zero] if acc is not None else self.generic_visit(e)

    def visit_BufferStore(self, s):
        acc = self.pairs.get(id(s.buffer))
        if acc is None:
            return self.generic_visit(s)
        return BufferStore(acc, self.visit(s.value), (self.zero,))


class _InThread(Mutator):
    """The outermost reduction loop's subtree with the block replaced (or dropped)
    and the bound reduction loops opened (they are re-made around everything)."""

    def __init__(self, realize, new, bound_ids):
        self.realize, self.new, self.bound = realize, new, bound_ids

    def visit_BlockRealize(self, br):
        return self.new if br is self.realize else br

    def visit_For(self, loop):
        body = self.visit(loop.body)
        if id(loop) in self.bound:
            return body
        if body is None:
            return None
        return loop if body is loop.body else For(loop.loop_var, loop.min, loop.extent,
                                                  loop.kind, body, loop.thread_tag,
                                                  loop.annotations)

    def visit_SeqStmt(self, s):
        kept = [x for x in (self.visit(c) for c in s.seq) if x is not None]
        return seq(*kept) if kept else None


class _Lower(Mutator):
    def __init__(self, func):
        self.func = func
        self.stack: list = []          # enclosing statements, outermost first
        self.blocks: list = []         # enclosing Blocks' new buffers
        self.plans: dict = {}          # id(outermost reduction loop) -> replacement
        self.results: dict = {}        # id(buffer) -> reduction thread loops (broadcast)
        self.top: list = []            # buffers with no enclosing block

    def refuse(self, node, why, loop=None):
        where = "" if loop is None else f" over {loop.loop_var.name} ({loop.thread_tag})"
        return LoweringError(f"cross-thread reduction{where}: {why}:\n"
                             + to_text(self.func, highlight=node))

    # traversal -------------------------------------------------------------------------
    def visit_For(self, loop):
        self.stack.append(loop)
        grid = _is_bound(loop) and thread_axis(loop.thread_tag).level == "grid"
        saved = self.results
        if grid:
            self.results = {}          # a result lives within one block of threads
        try:
            new = self.generic_visit(loop)
        finally:
            self.stack.pop()
            if grid:
                self.results = saved
        return self.plans.pop(id(loop), None) or new

    def visit_SeqStmt(self, s):
        self.stack.append(s)
        try:
            return self.generic_visit(s)
        finally:
            self.stack.pop()

    def visit_IfThenElse(self, s):
        self.stack.append(s)
        try:
            return self.generic_visit(s)
        finally:
            self.stack.pop()

    def visit_Block(self, b):
        self.stack.append(b)
        self.blocks.append([])
        try:
            new = self.generic_visit(b)
        finally:
            self.stack.pop()
            extra = self.blocks.pop()
        if not extra:
            return new
        return Block(new.name, new.iter_vars, new.reads, new.writes, new.body, new.init,
                     new.alloc_buffers + tuple(extra), new.annotations)

    def visit_BlockRealize(self, br):
        loops = self.reduction_loops(br)
        if loops:
            self.plan(br, loops)
            return br
        free = self.broadcast_axes(br)
        self.stack.append(br)
        try:
            new = self.generic_visit(br)
        finally:
            self.stack.pop()
        return self.broadcast(new, free) if free else new

    # the reduction ---------------------------------------------------------------------
    def reduction_loops(self, br) -> list:
        blk = br.block
        if blk.init is None or not self.stack:
            return []
        used = set()
        for iv, v in zip(blk.iter_vars, br.iter_values):
            if iv.kind == "reduce":
                used |= _vars_of(v)
        loops = [s for s in self.stack if isinstance(s, For) and id(s.loop_var) in used]
        return loops if any(_is_bound(lp) for lp in loops) else []

    def plan(self, br, loops) -> None:
        blk = br.block
        bound = [lp for lp in loops if _is_bound(lp)]
        for lp in bound:
            if thread_axis(lp.thread_tag).level != "thread":
                raise self.refuse(lp, f"block '{blk.name}' reduces over loop "
                                  f"{lp.loop_var.name} bound to {lp.thread_tag}; threads "
                                  "of different blocks cannot combine their values: bind "
                                  "the loop to threadIdx, or rfactor it and reduce the "
                                  "factored results in a second kernel")
        self.check_innermost(blk, loops)
        if _last_block(loops[0]) is not br:
            raise self.refuse(loops[0], f"block '{blk.name}' is not the last block under "
                              f"its outermost reduction loop {loops[0].loop_var.name}")
        try:
            red = reducer_of(blk)
        except NotAReduction as why:
            raise self.refuse(blk, f"block '{blk.name}' {why}", bound[0]) from None
        scopes = {b.scope == "local" for b in red.buffers}
        if len(scopes) > 1:
            raise self.refuse(blk, f"block '{blk.name}' reduces into local and non-local "
                              "buffers at once; use one kind of memory for all", bound[0])
        self.plans[id(loops[0])] = self.rewrite(br, loops, bound, red)

    def check_innermost(self, blk, loops) -> None:
        ids = {id(lp) for lp in loops}
        seen = 0
        for s in reversed(self.stack):
            if isinstance(s, SeqStmt):
                continue
            if id(s) not in ids:
                break
            seen += 1
            if seen == len(loops):
                return
        raise self.refuse(loops[0], f"block '{blk.name}' reduces across threads, but "
                          "other loops or conditions lie between its reduction loops and "
                          "it; its reduction loops must be the innermost statements "
                          "around it (reorder them inward)")

    def thread_space(self, bound) -> tuple:
        """The threadIdx axes around the reduction (adding loops for the kernel's other
        axes) and the launch extent of each."""
        kernel = next((s for s in self.stack if isinstance(s, For) and _is_bound(s)), None)
        launch = {}
        for lp in thread_loops(kernel):
            if thread_axis(lp.thread_tag).level == "thread":
                if not isinstance(lp.extent, IntImm):
                    raise self.refuse(lp, f"loop {lp.loop_var.name} bound to "
                                      f"{lp.thread_tag} has a symbolic extent")
                launch[lp.thread_tag] = max(launch.get(lp.thread_tag, 0), lp.extent.value)
        here = {}
        for s in self.stack + bound:
            if isinstance(s, For) and _is_bound(s) and \
                    thread_axis(s.thread_tag).level == "thread":
                here.setdefault(s.thread_tag, s)
        extra = []
        for tag, n in sorted(launch.items()):
            if tag not in here and n > 1:
                # a placeholder body: the loop is re-made around the reduction
                extra.append(For(Var(tag.replace(".", "_"), "int32"), const(0), const(n),
                                 "thread_binding", Evaluate(const(0)), tag))
        axes = [(t, lp.loop_var, lp.extent.value, launch.get(t, lp.extent.value))
                for t, lp in here.items()]
        axes += [(lp.thread_tag, lp.loop_var, lp.extent.value, lp.extent.value)
                 for lp in extra]
        return ThreadSpace(tuple(axes)), extra

    def rewrite(self, br, loops, bound, red):
        blk = br.block
        vmap = {iv.var: v for iv, v in zip(blk.iter_vars, br.iter_values)}
        name = red.buffers[0].name
        in_thread = len(bound) < len(loops) or not _is_true(br.predicate)
        space, extra = self.thread_space(bound)
        red_tags = {lp.thread_tag for lp in bound}
        stmts, new_bufs = [], []
        zero = IntImm(0, "int32")
        if in_thread:
            accs = [type(b)((IntImm(1, "int32"),), b.dtype, f"{b.name}_in_thread",
                            scope="local") for b in red.buffers]
            new_bufs += accs
            stmts += [BufferStore(a, i, (zero,)) for a, i in zip(accs, red.identities)]
            body = _ToScratch(zip(red.buffers, accs)).visit(blk.body)
            reads = tuple(r for r in blk.reads
                          if all(r.buffer is not b for b in red.buffers))
            writes = tuple(BufferRegion(a, (Range(zero, IntImm(1, "int32")),))
                           for a in accs)
            new = BlockRealize(br.iter_values, br.predicate, Block(
                f"{blk.name}_in_thread", blk.iter_vars, reads, writes, body, None,
                blk.alloc_buffers, blk.annotations))
            values = tuple(a[zero] for a in accs)
        else:
            new = None
            values = tuple(substitute(r, vmap) for r in red.rhs)
        part = _InThread(br, new, {id(lp) for lp in bound}).visit(loops[0])
        if part is not None:
            stmts.append(part)
        kind = red.simple or red.kind
        ar, scratch = allreduce(kind, red, values, space, red_tags,
                                f"{name}_cross_thread")
        new_bufs += scratch
        stmts += ar
        dsts = scratch[:len(red.buffers)]
        idx = tuple(substitute(ix, vmap) for ix in red.indices)
        back = seq(*[BufferStore(b, d[zero], idx) for b, d in zip(red.buffers, dsts)])
        cond = _spatial_predicate(br.predicate, {id(lp.loop_var) for lp in loops})
        if red.buffers[0].scope != "local":
            for lp in bound + extra:
                c = EQ(lp.loop_var, IntImm(0, lp.loop_var.dtype))
                cond = c if cond is None else cond & c
        stmts.append(back if cond is None else IfThenElse(cond, back))
        out = seq(*stmts)
        # the scratch buffers live inside the thread loops, where all their uses are:
        # a local one is each thread's own, a shared one the block's (already inside
        # every kernel, whatever host loops enclose it)
        for b in reversed(new_bufs):
            out = Allocate(b, out)
        for lp in reversed(bound + extra):
            out = For(lp.loop_var, lp.min, lp.extent, "thread_binding", out,
                      lp.thread_tag, lp.annotations)
        for b in red.buffers:
            self.results[id(b)] = bound
        return out


    # thread broadcast ------------------------------------------------------------------
    def broadcast_axes(self, br) -> list:
        blk = br.block
        if not self.results or any(w.buffer.scope == "local" for w in blk.writes):
            return []
        axes = {}
        for r in blk.reads:
            for lp in self.results.get(id(r.buffer), ()):
                axes.setdefault(lp.thread_tag, lp)
        around = {s.thread_tag for s in self.stack if isinstance(s, For) and _is_bound(s)}
        return [lp for tag, lp in axes.items() if tag not in around]

    def broadcast(self, br, loops):
        pred = br.predicate
        fresh = [Var(f"t{lp.thread_tag[-1]}", lp.loop_var.dtype) for lp in loops]
        for v in fresh:
            c = EQ(v, IntImm(0, v.dtype))
            pred = c if _is_true(pred) else c & pred
        out = BlockRealize(br.iter_values, pred, br.block)
        for lp, v in zip(loops, fresh):
            out = For(v, lp.min, lp.extent, "thread_binding", out, lp.thread_tag)
        return out


def _is_true(e) -> bool:
    return isinstance(e, IntImm) and bool(e.value)


def _last_block(stmt):
    """The last block realize under ``stmt``, not looking inside blocks."""
    last = None

    class _Find(Mutator):
        def visit_BlockRealize(self, br):
            nonlocal last
            last = br
            return br
    _Find().visit(stmt)
    return last


def _spatial_predicate(pred, loop_ids):
    """The conjuncts of a block predicate that use no reduction loop."""
    if _is_true(pred):
        return None
    parts = []

    def split(e):
        if isinstance(e, And):
            split(e.a)
            split(e.b)
        else:
            parts.append(e)
    split(pred)
    keep = [p for p in parts if not (_vars_of(p) & loop_ids)]
    out = None
    for p in keep:
        out = p if out is None else out & p
    return out


def lower_cross_thread_reduction(func: PrimFunc) -> PrimFunc:
    """``func`` with every cross-thread reduction lowered (module docstring).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> lower_cross_thread_reduction(f) is f
        True
    """
    low = _Lower(func)
    body = low.visit(func.body)
    if body is func.body:
        return func
    for buf in low.top:
        body = Allocate(buf, body)
    return func.with_body(body)


__all__ = ["lower_cross_thread_reduction"]
