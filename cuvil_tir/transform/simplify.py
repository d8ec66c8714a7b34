"""The ``simplify`` pass: arithmetic simplification with the bounds the IR implies.

Every expression is simplified by an :class:`~cuvil_tir.arith.Analyzer` that knows the
ranges of the enclosing loops and the conditions of enclosing ``IfThenElse``\\ s (index
arithmetic assumed not to wrap).  Loops of extent 1 are replaced by their body with
the loop variable substituted by the min (except thread-bound loops, which carry the
launch configuration), loops of extent <= 0 and ``IfThenElse`` with provable conditions
are removed, and empty ``SeqStmt``\\ s disappear.

Example::

    >>> import cuvil_tir as T
    >>> A = T.decl_buffer((16,), "float32", "A")
    >>> i, j = T.var("i"), T.var("j")
    >>> body = T.For(i, T.const(0), T.const(4), "serial",
    ...     T.For(j, T.const(0), T.const(1), "serial",
    ...         T.IfThenElse(i < 8, T.BufferStore(A, T.const(0.0), ((i * 4 + j) // 4 * 4,)))))
    >>> print(simplify(T.PrimFunc([A], body)).body)
    for i in T.serial(4):
        A[i * 4] = T.float32(0)
"""

from __future__ import annotations

from ..arith import Analyzer
from ..expr import Expr, IntImm, Not
from ..function import PrimFunc
from ..stmt import For, IfThenElse, Range, SeqStmt, seq
from ..visitor import Mutator, substitute


def _is_empty(s) -> bool:
    return isinstance(s, SeqStmt) and not s.seq


class _Simplify(Mutator):
    def __init__(self):
        self.ana = Analyzer(index_no_overflow=True)

    def visit(self, n):
        if isinstance(n, Expr):
            return self.ana.simplify(n)
        return Mutator.visit(self, n)

    def visit_For(self, loop):
        lo, ext = self.ana.simplify(loop.min), self.ana.simplify(loop.extent)
        if isinstance(ext, IntImm) and ext.value <= 0:
            return SeqStmt(())
        if isinstance(ext, IntImm) and ext.value == 1 and loop.kind != "thread_binding":
            return self.visit(substitute(loop.body, {loop.loop_var: lo}))
        saved = dict(self.ana.bounds)
        self.ana.bind(loop.loop_var, Range(lo, ext))
        try:
            body = self.visit(loop.body)
        finally:
            self.ana.bounds = saved
        if _is_empty(body):
            return body
        if lo is loop.min and ext is loop.extent and body is loop.body:
            return loop
        return For(loop.loop_var, lo, ext, loop.kind, body, loop.thread_tag, loop.annotations)

    def visit_IfThenElse(self, s):
        cond = self.ana.simplify(s.condition)
        if isinstance(cond, IntImm):
            taken = s.then_case if cond.value else s.else_case
            return SeqStmt(()) if taken is None else self.visit(taken)
        with self.ana.constraint(cond):
            then = self.visit(s.then_case)
        other = None
        if s.else_case is not None:
            with self.ana.constraint(Not(cond)):
                other = self.visit(s.else_case)
            if _is_empty(other):
                other = None
        if _is_empty(then):
            if other is None:
                return SeqStmt(())
            return IfThenElse(self.ana.simplify(Not(cond)), other)
        if cond is s.condition and then is s.then_case and other is s.else_case:
            return s
        return IfThenElse(cond, then, other)

    def visit_AssertStmt(self, s):
        new = self.generic_visit(s)
        if isinstance(new.condition, IntImm) and new.condition.value:
            return SeqStmt(())          # proven: no run-time check left
        return new

    def visit_LetStmt(self, s):
        value = self.ana.simplify(s.value)
        with self.ana.bound_scope(s.var, value):
            body = self.visit(s.body)
        if value is s.value and body is s.body:
            return s
        return type(s)(s.var, value, body)

    def visit_SeqStmt(self, s):
        out = [self.visit(x) for x in s.seq]
        # a sequence inside a sequence is flattened even when nothing else changed:
        # the text prints both alike, so the parsed text equals the function
        if all(a is b for a, b in zip(out, s.seq)) and not any(
                _is_empty(x) or isinstance(x, SeqStmt) for x in out):
            return s
        return seq(*[x for x in out if not _is_empty(x)])


def simplify(func: PrimFunc) -> PrimFunc:
    """``func`` with every expression and control statement simplified (see above).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((4,), "int32", "A")
        >>> f = T.PrimFunc([A], T.BufferStore(A, T.const(2) * 3, (T.const(1) - 1,)))
        >>> T.to_text(simplify(f).body)
        'A[0] = 6'
    """
    return func.with_body(_Simplify().visit(func.body))
