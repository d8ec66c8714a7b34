"""The commutative reducer of a reduction block: one value or a tuple of them.

A reduction block (reduce iter vars and an ``init``) updates one or several buffers at
one index ``idx``.  Its *reducer* says how two partial results combine, which is what
a reduction split across threads (or across an ``rfactor``) needs: ``combine(a, b)``
for partial tuples ``a`` and ``b``, the ``identities`` the ``init`` stores, and the
``rhs`` each iteration brings in.  Recognised, as TVM's reducer templates do:

* component-wise: every buffer ``B_j[idx] = B_j[idx] op_j r_j`` with ``op_j`` one of
  ``+ * max min`` and ``r_j`` not reading any of the buffers (a sum, or a tuple of
  sums such as layernorm's mean and mean of squares), the init storing ``op_j``'s
  identity;
* a selection: every ``B_j[idx] = T.Select(c, B_j[idx], r_j)`` with one condition
  ``c`` over the buffers and the ``r_j`` (argmax, argmin: ``(index, value)`` keeps the
  pair whose value wins).

The update may name its values with lets first (``v: T.float32 = ...``), as TVM
prints tuple reductions.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((4, 8), name="A")
    >>> k = T.reduce_axis((0, 8), name="k")
    >>> f = T.create_prim_func([A, T.compute((4,), lambda i: T.max(A[i, k], axis=k),
    ...                                      name="M")])
    >>> r = reducer_of(f.body.block.body.body.body.block)
    >>> r.kind, [b.name for b in r.buffers]
    ('max', ['M'])
    >>> x, y = T.var("x", "float32"), T.var("y", "float32")
    >>> str(r.combine((x,), (y,))[0])
    'T.max(x, y)'
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import LoweringError
from ..expr import Add, BufferLoad, FloatImm, IntImm, Max, Min, Mul, Select, Var
from ..node import same
from ..op import max_value, min_value
from ..stmt import Block, BufferStore, LetStmt, SeqStmt
from ..visitor import Mutator, post_order_visit, substitute

_OPS = {Add: "sum", Mul: "prod", Max: "max", Min: "min"}


@dataclass(frozen=True)
class Reducer:
    """A block's reducer (module docstring): ``results`` is the combination of the
    partial tuples ``lhs`` and ``rhs_vars`` (template variables)."""

    kind: str                # "sum" "prod" "max" "min" (one buffer), "tuple", "select"
    buffers: tuple
    indices: tuple
    identities: tuple
    rhs: tuple               # what one iteration combines in, per buffer
    lhs: tuple
    rhs_vars: tuple
    results: tuple

    def combine(self, a, b) -> tuple:
        """The combination of the partial tuples ``a`` and ``b`` (expressions)."""
        vmap = dict(zip(self.lhs, a))
        vmap.update(zip(self.rhs_vars, b))
        return tuple(substitute(r, vmap) for r in self.results)

    @property
    def simple(self) -> str | None:
        """``"sum"``/``"prod"``/``"max"``/``"min"`` for a one-buffer reducer, else None."""
        return self.kind if len(self.buffers) == 1 and self.kind in _OPS.values() else None


def _flatten(stmt, lets: dict, out: list) -> bool:
    """The stores of ``stmt`` with its lets substituted; False on any other statement."""
    if isinstance(stmt, BufferStore):
        out.append(substitute(stmt, lets) if lets else stmt)
        return True
    if isinstance(stmt, SeqStmt):
        return all(_flatten(s, lets, out) for s in stmt.seq)
    if isinstance(stmt, LetStmt):
        inner = dict(lets)
        inner[stmt.var] = substitute(stmt.value, lets) if lets else stmt.value
        return _flatten(stmt.body, inner, out)
    return False


def _is_identity(kind: str, value) -> bool:
    if not isinstance(value, (IntImm, FloatImm)):
        return False
    v, dt = value.value, value.dtype
    if kind == "sum":
        return v == 0
    if kind == "prod":
        return v == 1
    if kind == "max":
        return v == float("-inf") or v == min_value(dt).value
    return v == float("inf") or v == max_value(dt).value


class _Loads(Mutator):
    """Loads of the reduction buffers at the reduction's index -> template variables."""

    def __init__(self, slots: dict, indices):
        self.slots, self.indices = slots, indices
        self.stray = []

    def visit_BufferLoad(self, e):
        var = self.slots.get(id(e.buffer))
        if var is None:
            return self.generic_visit(e)
        if not same(e.indices, self.indices):
            self.stray.append(e)
            return e
        return var


class _Replace(Mutator):
    """Each sub-expression structurally equal to one of ``pairs``' first items becomes
    the second."""

    def __init__(self, pairs):
        self.pairs = pairs

    def generic_visit(self, n):
        for old, new in self.pairs:
            if same(n, old):
                return new
        return Mutator.generic_visit(self, n)


def _uses(e, vars_) -> bool:
    ids = {id(v) for v in vars_}
    hit = []
    post_order_visit(e, lambda n: hit.append(1) if id(n) in ids else None)
    return bool(hit)


def reducer_of(block: Block) -> Reducer:
    """The reducer of the reduction ``block``; a ``LoweringError`` says why there is
    none (module docstring)."""
    name = block.name

    def refuse(why):
        return LoweringError(f"block '{name}' {why}")

    if block.init is None or not any(iv.kind == "reduce" for iv in block.iter_vars):
        raise refuse("is not a reduction block (it needs reduce iter vars and an init)")
    inits, updates = [], []
    if not _flatten(block.init, {}, inits) or not _flatten(block.body, {}, updates):
        raise refuse("is not a reduction of the form B[idx] = B[idx] <op> x: its body "
                     "holds statements other than stores and lets")
    by_buf = {id(u.buffer): u for u in updates}
    if len(by_buf) != len(updates):
        raise refuse("stores one buffer twice in its update")
    idx = updates[0].indices
    if any(not same(u.indices, idx) for u in updates):
        raise refuse("updates its buffers at different indices; a reduction updates "
                     "every buffer at one index")
    init_of = {id(s.buffer): s for s in inits}
    for u in updates:
        s = init_of.get(id(u.buffer))
        if s is None:
            raise refuse(f"updates {u.buffer.name} but its init does not store it")
        if not same(s.indices, idx):
            raise refuse(f"initialises {s.buffer.name}[{', '.join(map(str, s.indices))}] "
                         f"but updates {u.buffer.name}[{', '.join(map(str, idx))}]: the "
                         "init and the update must store at the same indices")
    if len(init_of) != len(updates):
        raise refuse("initialises a buffer its update does not store")
    bufs = tuple(u.buffer for u in updates)
    lhs = tuple(Var(f"x{k}", b.dtype) for k, b in enumerate(bufs))
    rhs_vars = tuple(Var(f"y{k}", b.dtype) for k, b in enumerate(bufs))
    loads = _Loads({id(b): v for b, v in zip(bufs, lhs)}, idx)
    values = [loads.visit(u.value) for u in updates]
    if loads.stray:
        raise refuse(f"reads {loads.stray[0]} beside the reduction's own element")
    identities = tuple(init_of[id(b)].value for b in bufs)
    found = _componentwise(values, lhs, rhs_vars, identities) or \
        _selection(values, lhs, rhs_vars)
    if found is None:
        text = "; ".join(f"{u.buffer.name}[...] = {u.value}" for u in updates)
        raise refuse(f"has no recognised combiner ({text}); expected B = B + x, B * x, "
                     "T.max(B, x), T.min(B, x) per buffer, or T.Select(c, B, x) with "
                     "one condition for all (argmax)")
    kind, rhs, results = found
    return Reducer(kind, bufs, idx, identities, rhs, lhs, rhs_vars, results)


def _componentwise(values, lhs, rhs_vars, identities):
    kinds, rhs, results = [], [], []
    for v, x, y, ident in zip(values, lhs, rhs_vars, identities):
        kind = _OPS.get(type(v))
        if kind is None:
            return None
        if v.a is x and not _uses(v.b, lhs):
            r = v.b
        elif v.b is x and not _uses(v.a, lhs):
            r = v.a
        else:
            return None
        if not _is_identity(kind, ident):
            raise LoweringError(f"the reduction's init stores {ident}, which is not the "
                                f"identity of its {kind}; a reduction split across "
                                "threads starts every part from the identity")
        kinds.append(kind)
        rhs.append(r)
        results.append(type(v)(x, y))
    kind = kinds[0] if len(kinds) == 1 else "tuple"
    return kind, tuple(rhs), tuple(results)


def _selection(values, lhs, rhs_vars):
    if not all(isinstance(v, Select) for v in values):
        return None
    cond = values[0].condition
    rhs = []
    for v, x in zip(values, lhs):
        if not same(v.condition, cond) or v.true_value is not x or \
                _uses(v.false_value, lhs):
            return None
        rhs.append(v.false_value)
    # the condition compares the partial results: the incoming values become y
    c = _Replace(list(zip(rhs, rhs_vars))).visit(cond)
    allowed = {id(v) for v in lhs + rhs_vars}
    free = []
    post_order_visit(c, lambda n: free.append(n) if isinstance(n, (Var, BufferLoad))
                     and id(n) not in allowed else None)
    if free:
        return None
    results = tuple(Select(c, x, y) for x, y in zip(lhs, rhs_vars))
    return "select", tuple(rhs), results


__all__ = ["Reducer", "reducer_of"]
