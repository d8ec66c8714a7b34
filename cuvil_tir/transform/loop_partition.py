"""``loop_partition``: split a loop where the guards in its body start or stop holding.

A split whose factor does not divide the extent guards its body with
``io * 6 + ii < M`` (the block predicate ``T.where``, an ``if`` after
``lower_blocks``).  Left in place, that guard is evaluated on every iteration of every
loop below it: six compare-and-branch per k step of a 6-row GEMM micro-kernel.  Like
TVM's ``LoopPartition``, this pass finds, for a ``serial`` or ``parallel`` loop ``v``,
the guards (conjuncts of ``if`` conditions in its body) that are affine in ``v``, in
the variables of inner loops whose bounds do not depend on ``v``, and in values fixed
outside the loop; it computes, symbolically, the range ``[h, t)`` of ``v`` on which
every such guard holds for *all* values of the inner loops, and rewrites

* a ``serial`` loop as ``for v in [lo, h)`` (guarded) ``; for v in [h, t)``
  (guards removed) ``; for v in [t, hi)`` (guarded), dropping empty pieces;
* a ``parallel`` loop as one parallel loop whose body is
  ``if h <= v < t: <guards removed> else: <guarded>`` (one test per task, the tasks
  stay balanced and the thread pool is entered once).

Only loops that a guard depends on are split, each guard at the outermost loop it
depends on, and a body is copied only when the copies stay under ``max_nodes`` stores
(``PassContext`` config ``"loop_partition.max_nodes"``, default 4096).  Guards that
are not affine, that involve a ``let`` variable or an inner loop whose bounds depend
on ``v``, and ``vectorized`` / ``unrolled`` / thread-bound loops are left alone: the
result is always exact, and unchanged when nothing can be proved.

Example::

    >>> import cuvil_tir as T
    >>> A = T.decl_buffer((10,), "float32", "A")
    >>> io, ii = T.var("io"), T.var("ii")
    >>> body = T.For(io, T.const(0), T.const(4), "serial",
    ...     T.For(ii, T.const(0), T.const(3), "serial",
    ...         T.IfThenElse(io * 3 + ii < 10, T.BufferStore(A, T.const(0.0), (io * 3 + ii,)))))
    >>> from cuvil_tir.transform import simplify
    >>> print(T.to_text(simplify(loop_partition(T.PrimFunc([A], body))).body).strip())
    for io in T.serial(3):
        for ii in T.serial(3):
            A[io * 3 + ii] = T.float32(0)
    A[9] = T.float32(0)

The pieces are left for ``simplify`` (which runs next in the CPU pipelines) to fold:
here the single-iteration tail ``io = 3`` was substituted, its inner loop split
again at ``ii < 1``, and the guarded rest ``ii in [1, 3)`` is provably empty.
"""

from __future__ import annotations

from ..arith import Analyzer
from ..arith.affine import Affine, is_index_dtype
from ..errors import LoweringError
from ..expr import GE, GT, LE, LT, And, FloorDiv, IntImm, Let, Max, Min, Not, Var
from ..function import PrimFunc
from ..op import conjuncts
from ..stmt import Block, BufferStore, For, IfThenElse, LetStmt, Range, seq
from ..visitor import Mutator, post_order_visit, substitute
from .pass_manager import PassContext

#: default limit on the stores a copied loop body may hold
MAX_NODES = 4096
_SPLIT_KINDS = ("serial", "parallel")


def _defined_inside(body) -> set:
    """Ids of the variables bound below ``body`` (loops, lets, block iter vars)."""
    ids: set = set()

    def look(n):
        if isinstance(n, For):
            ids.add(id(n.loop_var))
        elif isinstance(n, (LetStmt, Let)):
            ids.add(id(n.var))
        elif isinstance(n, Block):
            ids.update(id(iv.var) for iv in n.iter_vars)

    post_order_visit(body, look)
    return ids


def _uses(e, ids: set) -> bool:
    hit = []
    post_order_visit(e, lambda n: hit.append(1) if isinstance(n, Var) and id(n) in ids
                     else None)
    return bool(hit)


def _rebuild(parts):
    out = None
    for p in parts:
        out = p if out is None else And(out, p)
    return out if out is not None else IntImm(1, "bool")


class _Guards(Mutator):
    """Walks the body of loop ``v``: collects, for every guard affine in ``v``, the
    bound on ``v`` under which it holds for all inner iterations (``bounds``: pairs
    ``("upper", t)`` meaning ``v < t``, ``("lower", h)`` meaning ``v >= h``); with
    ``strip`` it also replaces those guards by ``True``."""

    def __init__(self, v: Var, inside: set, strip: bool):
        self.v, self.inside, self.strip = v, inside, strip
        self.outer_ids = inside | {id(v)}    # what an invariant must not use
        self.ranges: dict = {}               # id(inner loop var) -> (min, extent)
        self.bounds: list = []

    def visit_For(self, s):
        if not (_uses(s.min, self.outer_ids) or _uses(s.extent, self.outer_ids)):
            self.ranges[id(s.loop_var)] = (s.min, s.extent)
        return self.generic_visit(s)

    def visit_IfThenElse(self, s):
        parts = conjuncts(s.condition)
        found = [self.bound_of(c) for c in parts]
        self.bounds.extend(b for b in found if b is not None)
        then = self.visit(s.then_case)
        other = None if s.else_case is None else self.visit(s.else_case)
        cond = s.condition
        if self.strip and any(b is not None for b in found):
            kept = [c for c, b in zip(parts, found) if b is None]
            if not kept:
                return then
            cond = _rebuild(kept)
        if cond is s.condition and then is s.then_case and other is s.else_case:
            return s
        return IfThenElse(cond, then, other)

    def visit_Expr(self, e):
        return e                            # guards inside expressions are not split

    def bound_of(self, cmp):
        """``("upper", t)`` / ``("lower", h)`` for one conjunct, or None."""
        if not isinstance(cmp, (LT, LE, GT, GE)) or cmp.a.dtype != self.v.dtype or \
                not is_index_dtype(cmp.a.dtype):
            return None
        d = Affine.of(cmp.a).combine(Affine.of(cmp.b), -1)
        if isinstance(cmp, (GT, GE)):         # a > b  <=>  b - a < 0
            d = Affine(d.dtype).combine(d, -1)
        slack = 1 if isinstance(cmp, (LT, GT)) else 0     # d + slack <= 0
        dt = d.dtype
        coeff, worst = 0, IntImm(d.const + slack, dt)
        for atom, c in d.terms:
            if atom is self.v:
                coeff = c
            elif isinstance(atom, Var) and id(atom) in self.ranges:
                lo, ext = self.ranges[id(atom)]
                worst = worst + (lo + ext - 1 if c > 0 else lo) * IntImm(c, dt)
            elif _uses(atom, self.outer_ids):
                return None
            else:
                worst = worst + atom * IntImm(c, dt)
        if coeff > 0:                       # coeff * v + worst <= 0
            return "upper", FloorDiv(IntImm(0, dt) - worst, IntImm(coeff, dt)) + 1
        if coeff < 0:                       # v >= ceil(worst / -coeff)
            return "lower", IntImm(0, dt) - FloorDiv(IntImm(0, dt) - worst,
                                                      IntImm(-coeff, dt))
        return None


class _Renew(Mutator):
    """A copy of a statement with fresh loop and let variables."""

    def visit_For(self, s):
        new = Var(s.loop_var.name, s.loop_var.dtype)
        body = substitute(self.visit(s.body), {s.loop_var: new})
        return For(new, s.min, s.extent, s.kind, body, s.thread_tag, s.annotations)

    def visit_LetStmt(self, s):
        new = Var(s.var.name, s.var.dtype)
        return LetStmt(new, s.value, substitute(self.visit(s.body), {s.var: new}))


def _is_one(e) -> bool:
    return isinstance(e, IntImm) and e.value == 1


def _stores(s) -> int:
    n = [0]
    post_order_visit(s, lambda x: n.__setitem__(0, n[0] + 1)
                     if isinstance(x, BufferStore) else None)
    return n[0]


class LoopPartitioner(Mutator):
    """The mutator behind :func:`loop_partition`; ``partitioned`` lists the names of
    the loops it split.

    Example::

        >>> LoopPartitioner().max_nodes
        4096
    """

    def __init__(self, max_nodes: int = MAX_NODES):
        self.max_nodes = max_nodes
        self.ana = Analyzer(index_no_overflow=True)
        self.partitioned: list = []

    def _within(self, loop, lo, ext, body):
        saved = dict(self.ana.bounds), dict(self.ana.ranges)
        self.ana.bind(loop.loop_var, Range(lo, ext))
        try:
            return self.visit(body)
        finally:
            self.ana.bounds, self.ana.ranges = saved

    def _piece(self, loop, var, lo, hi, body):
        ext = self.ana.simplify(hi - lo)
        if isinstance(ext, IntImm) and ext.value <= 0:
            return None
        if _is_one(ext):
            # one iteration (the tail of a non-dividing split): the variable becomes a
            # value, so the guards below it are decided and inner loops split exactly
            return self.visit(substitute(body, {loop.loop_var: lo}))
        if var is not loop.loop_var:
            body = substitute(body, {loop.loop_var: var})
        new = For(var, lo, ext, loop.kind, body, loop.thread_tag, loop.annotations)
        return For(var, lo, ext, loop.kind, self._within(new, lo, ext, body),
                   loop.thread_tag, loop.annotations)

    def visit_For(self, loop):
        if loop.kind not in _SPLIT_KINDS:
            return self._keep(loop)
        scan = _Guards(loop.loop_var, _defined_inside(loop.body), strip=False)
        scan.visit(loop.body)
        if not scan.bounds:
            return self._keep(loop)
        ana, dt = self.ana, loop.loop_var.dtype
        lo, hi = loop.min, ana.simplify(loop.min + loop.extent)
        head = tail = None
        for kind, b in scan.bounds:
            if kind == "lower":
                head = b if head is None else Max(head, b)
            else:
                tail = b if tail is None else Min(tail, b)
        h = lo if head is None else ana.simplify(Min(Max(head, lo), hi))
        t = hi if tail is None else ana.simplify(Min(Max(tail, h), hi))
        main_ext = ana.simplify(t - h)
        if isinstance(main_ext, IntImm) and main_ext.value <= 0:
            return self._keep(loop)             # the guards never all hold
        strip = _Guards(loop.loop_var, scan.inside, strip=True)
        main = strip.visit(loop.body)
        whole_h = ana.can_prove(h <= lo)
        whole_t = ana.can_prove(t >= hi)
        copies = (0 if whole_h else 1) + (0 if whole_t else 1)
        if copies and (1 if loop.kind == "parallel" else copies) * _stores(loop.body) \
                > self.max_nodes:
            return self._keep(loop)
        self.partitioned.append(loop.loop_var.name)
        if copies == 0:                         # the guards hold on the whole range
            return self._keep(For(loop.loop_var, loop.min, loop.extent, loop.kind, main,
                                  loop.thread_tag, loop.annotations))
        v = loop.loop_var
        if loop.kind == "parallel":
            cond = [c for c, whole in ((h <= v, whole_h), (v < t, whole_t)) if not whole]
            rest = loop.body
            only = lo if whole_t else t             # the one value outside [h, t)?
            if copies == 1 and _is_one(ana.simplify(h - lo if whole_t else hi - t)):
                rest = substitute(rest, {v: only})
            with_if = IfThenElse(_rebuild(cond), main, rest)
            return self._keep(For(v, loop.min, loop.extent, loop.kind, with_if,
                                  loop.thread_tag, loop.annotations))
        pieces = []
        if not whole_h:
            pieces.append(self._piece(loop, Var(v.name, dt), lo, h, _Renew().visit(loop.body)))
        pieces.append(self._piece(loop, v, h, t, main))
        if not whole_t:
            pieces.append(self._piece(loop, Var(v.name, dt), t, hi, _Renew().visit(loop.body)))
        return seq(*[p for p in pieces if p is not None])

    def _keep(self, loop):
        body = self._within(loop, loop.min, loop.extent, loop.body)
        if body is loop.body:
            return loop
        return For(loop.loop_var, loop.min, loop.extent, loop.kind, body, loop.thread_tag,
                   loop.annotations)

    def visit_IfThenElse(self, s):
        then = s.then_case
        with self.ana.constraint(s.condition):
            then = self.visit(then)
        other = s.else_case
        if other is not None:
            with self.ana.constraint(Not(s.condition)):
                other = self.visit(other)
        if then is s.then_case and other is s.else_case:
            return s
        return IfThenElse(s.condition, then, other)

    def visit_Expr(self, e):
        return e


def loop_partition(func: PrimFunc) -> PrimFunc:
    """Split loops at the edges of their guards' ranges (see the module docstring).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> loop_partition(f) is f
        True
    """
    limit = PassContext.current().config.get("loop_partition.max_nodes", MAX_NODES)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise LoweringError(f"PassContext config 'loop_partition.max_nodes': expected a "
                            f"non-negative int (stores a copied loop body may hold), found "
                            f"{limit!r}; use 0 to disable loop partitioning")
    body = LoopPartitioner(limit).visit(func.body)
    return func if body is func.body else func.with_body(body)


__all__ = ["LoopPartitioner", "MAX_NODES", "loop_partition"]
