"""``unroll_loops``: replace ``unrolled`` loops of constant bounds by copies of the body.

After unrolling, the loop variable is a constant in each copy and every index that
used it is folded, so accesses to a small ``local`` buffer have constant indices and
LLVM's SROA/mem2reg keeps the buffer in registers (the register-blocked
accumulators of a GEMM micro-kernel).  Loops with more than ``max_extent``
iterations, or whose copies would exceed ``max_nodes`` statements in total, stay
loops; the LLVM backend marks them ``llvm.loop.unroll.full``.

Example::

    >>> import cuvil_tir as T
    >>> C = T.decl_buffer((2,), "float32", "C", scope="local")
    >>> i = T.var("i")
    >>> f = T.PrimFunc([C], T.For(i, T.const(0), T.const(2), "unrolled",
    ...                 T.BufferStore(C, T.const(0.0), (i * 1 + 0,))))
    >>> print(T.to_text(unroll_loops(f).body).strip())
    C[0] = T.float32(0)
    C[1] = T.float32(0)
"""

from __future__ import annotations

from ..arith import Analyzer
from ..arith.affine import Key
from ..expr import BufferLoad, IntImm, Ramp
from ..function import PrimFunc
from ..stmt import BufferStore, Evaluate, For, IfThenElse, seq
from ..visitor import Mutator, post_order_visit

#: the default limits on what is unrolled in the IR
MAX_EXTENT = 64
MAX_NODES = 4096


def _count_stmts(s) -> int:
    n = [0]
    post_order_visit(s, lambda x: n.__setitem__(0, n[0] + 1)
                     if isinstance(x, BufferStore) else None)
    return max(1, n[0])


class _FoldIndices(Mutator):
    """Substitute ``vmap`` (the unrolled loop's variable by one copy's constant) and
    simplify the indices of loads and stores, in one traversal of the copy.

    The analyzer knows no bounds, so a simplified expression depends on the expression
    alone: ``memo`` (shared by every unrolled loop of one function) keeps each result.
    The copies of a register tile repeat most indices (an operand's index in every
    copy of the other axis's loop, an accumulator's in its load and its store): a
    GEMM candidate's 470 simplifications were 105 distinct expressions."""

    def __init__(self, memo: dict | None = None, vmap: dict | None = None):
        self.ana = Analyzer(index_no_overflow=True)
        self.memo = {} if memo is None else memo
        self.vmap = vmap or {}

    def visit_Var(self, v):
        return self.vmap.get(v, v)

    def _simplify(self, e):
        key = Key(e)
        got = self.memo.get(key)
        if got is None:
            got = self.memo[key] = self.ana.simplify(e)
        return got

    def _idx(self, indices):
        out = []
        for ix in indices:
            if isinstance(ix, Ramp):
                ix = Ramp(self._simplify(self.visit(ix.base)),
                          self._simplify(self.visit(ix.stride)), ix.lanes)
            elif ix.lanes == 1:
                ix = self._simplify(self.visit(ix))
            else:   # a gather's vector index: substituted, left as it is
                ix = self.visit(ix)
            out.append(ix)
        return tuple(out)

    def visit_BufferLoad(self, e):
        return BufferLoad(e.buffer, self._idx(e.indices))

    def visit_BufferStore(self, s):
        return BufferStore(s.buffer, self.visit(s.value), self._idx(s.indices))

    def visit_IfThenElse(self, s):
        cond = self._simplify(self.visit(s.condition))
        then = self.visit(s.then_case)
        if isinstance(cond, IntImm):            # decided once the loop var is known
            return then if cond.value else (s.else_case and self.visit(s.else_case)) or \
                Evaluate(IntImm(0, "int32"))
        other = None if s.else_case is None else self.visit(s.else_case)
        return IfThenElse(cond, then, other)


class LoopUnroller(Mutator):
    """The mutator behind :func:`unroll_loops`.

    Example::

        >>> LoopUnroller().max_extent
        64
    """

    def __init__(self, max_extent: int = MAX_EXTENT, max_nodes: int = MAX_NODES):
        self.max_extent, self.max_nodes = max_extent, max_nodes
        self.memo: dict = {}

    def visit_For(self, s):
        body = self.visit(s.body)
        if body is not s.body:
            s = For(s.loop_var, s.min, s.extent, s.kind, body, s.thread_tag, s.annotations)
        if s.kind != "unrolled" or not isinstance(s.min, IntImm) or \
                not isinstance(s.extent, IntImm):
            return s
        n = s.extent.value
        if n > self.max_extent or n * _count_stmts(s.body) > self.max_nodes:
            return s
        copies = [_FoldIndices(self.memo, {s.loop_var: IntImm(s.min.value + k,
                                                              s.loop_var.dtype)}).visit(s.body)
                  for k in range(n)]
        return seq(*copies)


def unroll_loops(func: PrimFunc, max_extent: int = MAX_EXTENT,
                 max_nodes: int = MAX_NODES) -> PrimFunc:
    """Fully unroll the ``unrolled`` loops with constant bounds (see the module doc).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((3,), "int32", "A")
        >>> i = T.var("i")
        >>> f = T.PrimFunc([A], T.For(i, T.const(0), T.const(3), "unrolled",
        ...                 T.BufferStore(A, i * 2, (i,))))
        >>> print(T.to_text(unroll_loops(f).body).strip())
        A[0] = 0 * 2
        A[1] = 1 * 2
        A[2] = 2 * 2
    """
    body = LoopUnroller(max_extent, max_nodes).visit(func.body)
    return func if body is func.body else func.with_body(body)


__all__ = ["LoopUnroller", "MAX_EXTENT", "MAX_NODES", "unroll_loops"]
