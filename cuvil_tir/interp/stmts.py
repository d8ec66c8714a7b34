"""Compile statements, blocks included, into closures.

TensorIR semantics: a ``BlockRealize`` evaluates its iter values and predicate, binds
the block's iter vars (each must lie in its domain), runs ``init`` when every reduce
iter var is at its domain minimum, and allocates the block's ``alloc_buffers`` afresh
for each execution (the root block runs once, so its buffers are allocated once).
Every loop kind runs serially; a ``thread_binding`` loop iterates its extent.

Example::

    >>> import numpy as np, cuvil_tir as T
    >>> from cuvil_tir.interp.exprs import Frame
    >>> A = T.decl_buffer((4,), "int32", "A")
    >>> i = T.var("i")
    >>> c = StmtCompiler(Frame())
    >>> with c.buffer_binding(A) as k:
    ...     run = c.stmt(T.For(i, T.const(0), T.const(4), "serial",
    ...                        T.BufferStore(A, i * i, (i,))))
    ...     c.frame.bufs[k] = np.zeros(4, "int32"); run(); c.frame.bufs[k].tolist()
    [0, 1, 4, 9]
"""

from __future__ import annotations

from contextlib import ExitStack

from ..errors import LoweringError, check_error
from ..printer import to_text
from .exprs import ExprCompiler, as_index
from .memory import compile_shape, compile_store, new_array


def _nothing():
    return None


class StmtCompiler(ExprCompiler):
    """Statement -> closure (expressions handled by :class:`ExprCompiler`).

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.interp.exprs import Frame
        >>> StmtCompiler(Frame()).stmt(T.Evaluate(T.const(0)))() is None
        True
    """

    def stmt(self, s):
        """The closure running ``s``."""
        method = getattr(self, "_s_" + type(s).__name__, None)
        if method is None:
            raise LoweringError(f"the interpreter cannot run {type(s).__name__} "
                                f"statements:\n{to_text(s)}")
        return method(s)

    def _s_BufferStore(self, s):
        return compile_store(self, s)

    def _s_Evaluate(self, s):
        fv = self.expr(s.value)

        def evaluate():
            fv()
        return evaluate

    def _s_AssertStmt(self, s):
        fc = self.expr(s.condition)
        fvals = [self.expr(v) for v in s.values]

        def check():
            if not fc():
                values = [int(f()) for f in fvals]
                raise check_error(s.kind, s.format(values), values)
        return check

    def _s_SeqStmt(self, s):
        fs = tuple(self.stmt(x) for x in s.seq)
        if not fs:
            return _nothing
        if len(fs) == 1:
            return fs[0]

        def run_seq():
            for f in fs:
                f()
        return run_seq

    def _s_For(self, s):
        flo, fext = self.expr(s.min), self.expr(s.extent)
        with self.binding(s.loop_var) as k:
            body = self.stmt(s.body)
        env = self.frame.env

        def loop():
            lo = as_index(flo())
            for v in range(lo, lo + as_index(fext())):
                env[k] = v
                body()
        return loop

    def _s_IfThenElse(self, s):
        fc = self.expr(s.condition)
        ft = self.stmt(s.then_case)
        fe = self.stmt(s.else_case) if s.else_case is not None else _nothing

        def branch():
            if fc():
                ft()
            else:
                fe()
        return branch

    def _s_LetStmt(self, s):
        fv = self.expr(s.value)
        with self.binding(s.var) as k:
            body = self.stmt(s.body)
        env = self.frame.env

        def let():
            env[k] = fv()
            body()
        return let

    def _s_Allocate(self, s):
        return self._with_buffers((s.buffer,), lambda: self.stmt(s.body))

    def _with_buffers(self, buffers, compile_body):
        """Compile ``compile_body()`` with ``buffers`` allocated around each run."""
        shapes = [compile_shape(self, b) for b in buffers]
        with ExitStack() as stack:
            slots = [stack.enter_context(self.buffer_binding(b)) for b in buffers]
            body = compile_body()
        if not buffers:
            return body
        bufs = self.frame.bufs
        allocs = list(zip(slots, buffers, shapes))

        def allocate():
            saved = [bufs[k] for k in slots]
            for k, b, shape in allocs:
                bufs[k] = new_array(b, shape())
            try:
                body()
            finally:
                for k, old in zip(slots, saved):
                    bufs[k] = old
        return allocate

    def _s_Block(self, blk):
        # a Block not under a BlockRealize: an opaque block without iter vars
        if blk.iter_vars:
            raise LoweringError(f"block {blk.name} has iter vars but no BlockRealize "
                                "binds them")
        return self._block_body(blk, [])

    def _block_body(self, blk, reduce_checks):
        def compile_body():
            body = self.stmt(blk.body)
            if blk.init is None:
                return body
            init = self.stmt(blk.init)

            def with_init():
                for f, lo in reduce_checks:
                    if f() != lo():
                        break
                else:
                    init()
                body()
            return with_init
        return self._with_buffers(tuple(blk.alloc_buffers), compile_body)

    def _s_BlockRealize(self, br):
        blk = br.block
        fvals = [self.expr(v) for v in br.iter_values]
        fpred = self.expr(br.predicate)
        doms = [(self.expr(iv.dom.min), self.expr(iv.dom.extent)) for iv in blk.iter_vars]
        env = self.frame.env
        with ExitStack() as stack:
            slots = [stack.enter_context(self.binding(iv.var)) for iv in blk.iter_vars]
            checks = [(_slot_reader(env, k), lo) for k, iv, (lo, _) in
                      zip(slots, blk.iter_vars, doms) if iv.kind == "reduce"]
            body = self._block_body(blk, checks)
        binds = list(zip(slots, fvals, doms, blk.iter_vars))

        def realize():
            if not fpred():
                return
            vals = [f() for f in fvals]
            for (k, _, (lo, ext), iv), v in zip(binds, vals):
                lo_v = lo()
                if not lo_v <= v < lo_v + ext():
                    raise LoweringError(
                        f"block {blk.name}: iter var {iv.var.name} is bound to {v}, "
                        f"outside its domain [{lo_v}, {lo_v + ext()})")
            for (k, *_), v in zip(binds, vals):
                env[k] = v
            body()
        return realize


def _slot_reader(env, k):
    return lambda: env[k]

