"""TVM's lowered cross-thread reductions in TVMScript: ``T.comm_reducer`` and
``T.tvm_thread_allreduce``.

TVM lowers a cross-thread reduction to a builtin call inside an attribute that names
its reducer::

    with T.attr(T.comm_reducer(lambda x, y: x + y, [T.float32(0)]), "reduce_scope",
                T.reinterpret("handle", T.uint64(0))):
        T.tvm_thread_allreduce(T.uint32(1), value, cond, red_buf[0], tx)

(or ``T.attr(...)`` as a statement, for the rest of the suite).  The call combines,
over the threads that differ only along the listed thread variables, each thread's
``value`` (the reducer's identity where ``cond`` is false) and leaves the result in
``red_buf`` of *every* thread of the group; ``T.uint32(n)`` values and ``n`` result
buffers for a tuple reducer (argmax: ``lambda x0, x1, y0, y1: (...)``).  Cuvil reads
it as the same all-reduce its own cross-thread reductions lower to
(:mod:`cuvil_tir.transform.gpu_allreduce`: warp shuffles, or a tree in shared
memory, with a barrier after each step: TVM's builtin synchronizes by itself), over
the ``threadIdx`` axes launched around the call (``T.launch_thread``).

Example::

    >>> import cuvil_tir as T
    >>> f = T.parse('''
    ... def f(A: T.Buffer((32,), "float32"), B: T.Buffer((1,), "float32")):
    ...     tx = T.launch_thread("threadIdx.x", 32)
    ...     red = T.allocate([1], "float32", "local")
    ...     red_1 = T.Buffer((1,), data=red, scope="local")
    ...     with T.attr(T.comm_reducer(lambda x, y: x + y, [T.float32(0)]),
    ...                 "reduce_scope", T.reinterpret("handle", T.uint64(0))):
    ...         T.tvm_thread_allreduce(T.uint32(1), A[tx], T.bool(True), red_1[0], tx)
    ...     if tx == 0:
    ...         B[0] = red_1[0]
    ... ''')
    >>> "warp_sum" in T.to_text(f)
    True
"""

from __future__ import annotations

from dataclasses import dataclass

from ..analysis.reducer import Reducer
from ..expr import Add, BufferLoad, Call, Expr, IntImm, Max, Min, Mul, Select, StringImm, Var
from ..ops.gpu import SYNC_OP
from ..stmt import Allocate, BufferStore, Evaluate, seq
from ..transform.gpu_allreduce import ThreadSpace, allreduce
from .values import Spec, to_expr

#: the attribute key that names a reducer
REDUCE_SCOPE = "reduce_scope"
_SIMPLE = {Add: "sum", Mul: "prod", Max: "max", Min: "min"}


@dataclass(frozen=True)
class Lambda:
    """A TVMScript ``lambda``: its parameter names and body, evaluated on a call with
    the parameters bound to the arguments."""

    params: tuple
    body: object
    evaluator: object

    def __call__(self, *args):
        ev = self.evaluator
        if len(args) != len(self.params):
            raise ValueError(f"the lambda takes {len(self.params)} arguments, given "
                             f"{len(args)}")
        ev.frames.append({n: (a, "let") for n, a in zip(self.params, args)})
        try:
            return ev.eval(self.body)
        finally:
            ev.frames.pop()


def comm_reducer(fn, identities) -> Reducer:
    """The :class:`~cuvil_tir.analysis.reducer.Reducer` of ``T.comm_reducer(fn,
    identities)``: ``fn`` takes the ``n`` left values, then the ``n`` right ones, and
    returns their combination (a tuple when ``n > 1``).

    Example::

        >>> import cuvil_tir as T
        >>> comm_reducer(lambda x, y: T.max(x, y), [T.float32(-3.0)]).kind
        'max'
    """
    ids = tuple(to_expr(i) for i in (identities if isinstance(identities, (list, tuple))
                                     else (identities,)))
    lhs = tuple(Var(f"x{k}", i.dtype) for k, i in enumerate(ids))
    rhs = tuple(Var(f"y{k}", i.dtype) for k, i in enumerate(ids))
    out = fn(*lhs, *rhs)
    results = tuple(to_expr(r) for r in (out if isinstance(out, (list, tuple)) else (out,)))
    if len(results) != len(ids):
        raise ValueError(f"T.comm_reducer: the combiner returns {len(results)} values for "
                         f"{len(ids)} identities")
    kind = "tuple"
    if len(ids) == 1:
        r = results[0]
        simple = _SIMPLE.get(type(r))
        if simple and {id(r.a), id(r.b)} == {id(lhs[0]), id(rhs[0])}:
            kind = simple
    return Reducer(kind, (), (), ids, (), lhs, rhs, results)


class TVMAllreduceMixin:
    """The Builder's ``T.attr``, ``T.comm_reducer`` and ``T.tvm_thread_allreduce``
    (module docstring)."""

    def lambda_value(self, params, body):
        """The value of ``lambda params: body``."""
        return Lambda(tuple(params), body, self)

    def b_comm_reducer(self, fn, identities):
        return comm_reducer(fn, identities)

    def b_reinterpret(self, dtype, value):
        return Spec("reinterpret", (dtype, value))

    def b_attr(self, node, key, value):
        return Spec("attr", (node, key, value))

    def reduce_scope(self, spec: Spec, t) -> Reducer:
        """The reducer a ``T.attr(reducer, "reduce_scope", ...)`` names; any other
        attribute is refused."""
        node, key, _ = spec.args
        if key != REDUCE_SCOPE or not isinstance(node, Reducer):
            raise self.error(f"T.attr(node, {key!r}, ...): only TVM's reducer attribute "
                             f"T.attr(T.comm_reducer(...), \"{REDUCE_SCOPE}\", ...) is "
                             "read", t)
        return node

    def with_attr(self, spec: Spec, suite, t):
        """``with T.attr(reducer, "reduce_scope", ...):`` its body, the reducer in
        scope."""
        saved = self.reducer
        self.reducer = self.reduce_scope(spec, t)
        try:
            return self.body(suite)
        finally:
            self.reducer = saved

    def b_tvm_thread_allreduce(self, size, *rest):
        reducer = self.reducer
        n = int(getattr(size, "value", size))
        if reducer is None or len(rest) < 2 * n + 2 or len(reducer.identities) != n:
            raise ValueError("T.tvm_thread_allreduce(n, values..., cond, results..., "
                             "threads...) must be inside T.attr(T.comm_reducer(...) of n "
                             "values, \"reduce_scope\", ...)")
        values, cond = rest[:n], to_expr(rest[n], "bool")
        dsts, tvars = rest[n + 1:2 * n + 1], rest[2 * n + 1:]
        if not all(isinstance(d, BufferLoad) for d in dsts):
            raise ValueError("T.tvm_thread_allreduce: the results must be buffer elements")
        axes = [(tag, var, launched_extent(ext), launched_extent(ext))
                for tag, var, ext in self.launched if tag.startswith("threadIdx")]
        red = {tag for tag, var, _, _ in axes if any(var is v for v in tvars)}
        if len(red) != len(tvars):
            raise ValueError("T.tvm_thread_allreduce: each reduced thread variable must "
                             "be a threadIdx launched around the call (T.launch_thread)")
        vals = tuple(to_expr(v) if isinstance(cond, IntImm) and cond.value
                     else Select(cond, to_expr(v), i)
                     for v, i in zip(values, reducer.identities))
        kind = reducer.kind if reducer.kind != "prod" else "tuple"
        stmts, bufs = allreduce(kind, reducer, vals, ThreadSpace(tuple(axes)), red,
                                "red_buf")
        if any(b.scope == "shared" for b in bufs):
            # TVM's builtin synchronizes by itself: a barrier after each step makes the
            # function's own GPU semantics right (and the next call's stores wait for
            # this one's reads)
            sync = Evaluate(Call("int32", SYNC_OP, (StringImm("shared"),)))
            stmts = [x for s in stmts for x in (s, sync)]
        stmts += [BufferStore(d.buffer, b[IntImm(0, "int32")], d.indices)
                  for d, b in zip(dsts, bufs)]
        body = seq(*stmts)
        for b in reversed(bufs):
            body = Allocate(b, body)
        return Spec("stmt", (body,))


def launched_extent(ext: Expr) -> int:
    """A launch extent as an int (an all-reduce needs constant thread counts).

    Example::

        >>> launched_extent(IntImm(128, "int32"))
        128
    """
    if not isinstance(ext, IntImm):
        raise ValueError(f"T.tvm_thread_allreduce under a thread launched with the "
                         f"symbolic extent {ext}: the all-reduce needs a constant one")
    return ext.value


__all__ = ["Lambda", "REDUCE_SCOPE", "TVMAllreduceMixin", "comm_reducer",
           "launched_extent"]
