"""Reductions: the combiners, their identities, and the reducer of a block.

A reduction block (TensorIR) has reduce iter vars, an ``init`` storing the combiner's
identity, and a body ``C[idx] = C[idx] <op> rhs`` with ``<op>`` one of the combiners
``sum`` (``+``), ``prod`` (``*``), ``max`` and ``min``.  The te reductions build such
blocks (:mod:`cuvil_tir.te.create_prim_func`); ``rfactor`` and ``decompose_reduction``
(schedules), the CUDA cross-thread reduction (targets) and the tuner's space read them
back with :func:`match_reducer` and :func:`reduction_block`: one definition for all.

A reduction may also update several buffers at one index (a *tuple*): TVM prints
argmax and layernorm's sums so, naming the values with lets first.
:func:`reducer_of` reads one buffer or a tuple as a :class:`Reducer`, which says how
two partial results combine (what a reduction split across threads needs):

* component-wise: every buffer ``B_j[idx] = B_j[idx] op_j r_j`` with ``op_j`` one of
  the combiners and ``r_j`` not reading any of the buffers (a sum, or layernorm's
  sum and sum of squares), the init storing ``op_j``'s identity;
* a selection: every ``B_j[idx] = T.Select(c, B_j[idx], r_j)`` with one condition
  ``c`` over the buffers and the ``r_j`` (argmax, argmin: ``(index, value)`` keeps
  the pair whose value wins).

Example::

    >>> from cuvil_tir.analysis import tree
    >>> from cuvil_tir.te.examples import matmul
    >>> f = matmul(4, 4, 4)
    >>> combiner, rhs = match_reducer(tree.get(f, tree.find_block(f, "C")).block)
    >>> combiner, str(identity(combiner, "float32"))
    ('sum', 'T.float32(0)')
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtype as D
from ..expr import Add, BufferLoad, Expr, FloatImm, IntImm, Max, Min, Mul, Select, Var, const
from ..node import same
from ..op import max_value, maximum, min_value, minimum
from ..stmt import Block, BufferStore, For, LetStmt, SeqStmt
from ..visitor import Mutator, post_order_visit, substitute, used_vars
from . import tree

#: the combiners, with the expression node each one is
COMBINERS = {"sum": Add, "prod": Mul, "max": Max, "min": Min}


class NotAReduction(Exception):
    """A block is not a reduction Cuvil can read; the message says why (callers add
    the block's name and raise their own coded error).

    Example::

        >>> str(NotAReduction("has no init"))
        'has no init'
    """


def identity(combiner: str, dtype: str) -> Expr:
    """The identity of ``combiner`` in ``dtype`` (``max`` of floats: ``-inf``).

    Example::

        >>> str(identity("max", "int8")), str(identity("min", "float32"))
        ('T.int8(-128)', 'T.float32("inf")')
    """
    if combiner == "sum":
        return const(0, dtype)
    if combiner == "prod":
        return const(1, dtype)
    if D.is_float(dtype):
        return const(float("-inf") if combiner == "max" else float("inf"), dtype)
    return min_value(dtype) if combiner == "max" else max_value(dtype)


def is_identity(combiner: str, value) -> bool:
    """True when the constant ``value`` is an identity of ``combiner`` (for ``max``,
    ``-inf`` or the dtype's lowest value; for ``min``, ``inf`` or its highest).

    Example::

        >>> is_identity("max", min_value("float32")), is_identity("sum", const(1))
        (True, False)
    """
    if not isinstance(value, (IntImm, FloatImm)):
        return False
    v, dt = value.value, value.dtype
    if combiner == "sum":
        return v == 0
    if combiner == "prod":
        return v == 1
    if combiner == "max":
        return v == float("-inf") or v == min_value(dt).value
    return v == float("inf") or v == max_value(dt).value


def combine(combiner: str, acc, x) -> Expr:
    """``acc <combiner> x``.

    Example::

        >>> import cuvil_tir as T
        >>> type(combine("max", T.var("a", "float32"), T.var("b", "float32"))).__name__
        'Max'
    """
    if combiner == "sum":
        return acc + x
    if combiner == "prod":
        return acc * x
    return maximum(acc, x) if combiner == "max" else minimum(acc, x)


def match_reducer(blk: Block) -> tuple:
    """``(combiner, rhs)`` of the reduction block ``C[idx] = C[idx] <op> rhs`` whose
    init stores the combiner's identity at the same indices; :class:`NotAReduction`
    saying what is missing otherwise.

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.analysis import tree
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] * 2.0, name="B")])
        >>> try:
        ...     match_reducer(tree.get(f, tree.find_block(f, "B")).block)
        ... except NotAReduction as why:
        ...     print(str(why)[:28])
        is not a reduction block (it
    """
    if blk.init is None or not any(iv.kind == "reduce" for iv in blk.iter_vars):
        raise NotAReduction("is not a reduction block (it needs reduce iter vars and an "
                            "init); apply it to a block computed with "
                            "T.sum/T.max/T.min/T.prod")
    st = blk.body
    if not isinstance(st, BufferStore):
        raise NotAReduction(f"has a {type(st).__name__} body; expected one store "
                            "C[idx] = C[idx] <op> rhs")

    def is_acc(e):
        return (isinstance(e, BufferLoad) and e.buffer is st.buffer
                and same(e.indices, st.indices))

    for name, cls in COMBINERS.items():
        if type(st.value) is not cls:
            continue
        if is_acc(st.value.a):
            rhs = st.value.b
        elif is_acc(st.value.b):
            rhs = st.value.a
        else:
            continue
        init = blk.init
        if not (isinstance(init, BufferStore) and init.buffer is st.buffer
                and is_identity(name, init.value)):
            raise NotAReduction(f"has init {init} which is not the identity of its {name} "
                                "reduction; only identity inits can be factored")
        if not same(init.indices, st.indices):
            raise NotAReduction(f"initialises {init.buffer.name}"
                                f"[{', '.join(map(str, init.indices))}] but updates "
                                f"{st.buffer.name}[{', '.join(map(str, st.indices))}]: "
                                "the init and the update must store at the same indices")
        return name, rhs
    raise NotAReduction(f"has body {st}; no recognised combiner (expected C = C + x, "
                        "C * x, T.max(C, x) or T.min(C, x))")


def has_reduce_axes(blk: Block) -> bool:
    """True when the block has a reduce iter var.

    Example::

        >>> from cuvil_tir.analysis import tree
        >>> from cuvil_tir.te.examples import matmul
        >>> f = matmul(2, 2, 2)
        >>> has_reduce_axes(tree.get(f, tree.find_block(f, "C")).block)
        True
    """
    return any(iv.kind == "reduce" for iv in blk.iter_vars)


def reduction_block(loop: For):
    """The name of a block under ``loop`` whose reduce iter var it drives, else None.

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.analysis import tree
        >>> A = T.placeholder((4, 4), name="A")
        >>> k = T.reduce_axis((0, 4), name="k")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: T.sum(A[i, k], axis=k),
        ...                                      name="S")])
        >>> i_loop = tree.get(f, ("block", "body"))
        >>> reduction_block(i_loop), reduction_block(i_loop.body)
        (None, 'S')
    """
    for br in tree.blocks_under(loop.body):
        for iv, value in zip(br.block.iter_vars, br.iter_values):
            if iv.kind == "reduce" and any(v is loop.loop_var for v in used_vars(value)):
                return br.block.name
    return None


_KINDS = {cls: name for name, cls in COMBINERS.items()}


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
        return self.kind if len(self.buffers) == 1 and self.kind in COMBINERS else None


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
    """The reducer of the reduction ``block`` (one buffer or a tuple, module
    docstring); :class:`NotAReduction` says why there is none.

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

    def refuse(why):
        return NotAReduction(why)

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
        kind = _KINDS.get(type(v))
        if kind is None:
            return None
        if v.a is x and not _uses(v.b, lhs):
            r = v.b
        elif v.b is x and not _uses(v.a, lhs):
            r = v.a
        else:
            return None
        if not is_identity(kind, ident):
            raise NotAReduction(f"has init {ident} which is not the identity of its "
                                f"{kind}; a reduction split into parts starts every part "
                                "from the identity")
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


__all__ = ["COMBINERS", "NotAReduction", "Reducer", "combine", "has_reduce_axes",
           "identity", "is_identity", "match_reducer", "reducer_of", "reduction_block"]
