"""Whether the producer's ``T.where`` lets ``reverse_compute_inline`` drop elements.

Once the consumer is inlined, its stores run at the producer's iterations, under the
producer's ``T.where``.  A consumer that reads the producer's buffer only under a
condition (``T.if_then_else(i + 1 < 7, X_local[i], 0)``) computes elements where the
producer stored nothing: a cache_read copy clipped to its buffer (``T.where(v + 1 <
7)``) has no iteration for the consumer's last row, which then is never written (fuzz
case 3848889141: an uninitialised read).  A consumer that reads the buffer
unconditionally reads only what the producer stored, so the producer's predicate
holds wherever the consumer runs.  :func:`refuse_cut_producer` refuses the guarded
case unless the producer's conditions provably hold at every iteration the consumer
runs.

Example (a producer without a T.where: nothing to refuse)::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.analysis import tree
    >>> X = T.placeholder((3, 2), name="X")
    >>> P = T.compute((3, 2), lambda i, j: X[i, j] + 1.0, name="P")
    >>> g = T.create_prim_func([X, T.compute((3, 2), lambda i, j: P[i, j] * 3.0, name="Q")])
    >>> q_at = tree.find_block(g, "Q")
    >>> q = tree.get(g, q_at).block
    >>> refuse_cut_producer(g, tree.get(g, tree.find_block(g, "P")), q, q_at,
    ...                     q.body.value.a.indices, [], "reverse_compute_inline")
"""

from __future__ import annotations

from contextlib import nullcontext

from cuvil_tir.arith import Analyzer
from cuvil_tir.block_regions import block_accesses
from cuvil_tir.expr import Var
from cuvil_tir.op import all as all_of
from cuvil_tir.stmt import For, Range
from cuvil_tir.visitor import substitute, used_vars

from cuvil_tir.analysis import tree
from cuvil_tir.analysis.regions import scope_doms
from ..errors import InlineError, fail
from .block_predicates import predicate_conditions


def refuse_cut_producer(func, preal, cons, cpath, load, cconds, prim) -> None:
    """Raise ``InlineError`` when the producer realize ``preal`` runs under conditions
    that may fail where the consumer ``cons`` (at ``cpath``, under its conditions
    ``cconds`` over its iterators) computes an element while reading the producer's
    buffer at ``load`` only under a condition (see the module docstring)."""
    prod = preal.block
    buf = prod.body.buffer
    pconds = predicate_conditions(func, preal, [], prim, InlineError)
    if not pconds or not any(a.buffer is buf and a.guarded for a in block_accesses(cons)):
        return
    own = {id(iv.var) for iv in prod.iter_vars}
    # the producer's iteration storing the element the consumer loads
    at: dict = {}
    for ix, x in zip(prod.body.indices, load):
        if isinstance(ix, Var) and id(ix) in own and ix not in at:
            at[ix] = x
    ana = Analyzer(index_no_overflow=True)
    outer = {s.loop_var: Range(s.min, s.extent) for _, s in tree.ancestors(func, cpath)
             if isinstance(s, For)}
    for v, r in {**outer, **scope_doms(func, cpath)}.items():
        ana.bind(v, r)
    for iv in cons.iter_vars:
        ana.bind(iv.var, iv.dom)
    with ana.constraint(all_of(*cconds)) if cconds else nullcontext():
        for c in pconds:
            if any(id(v) in own and v not in at for v in used_vars(c)) or \
                    not ana.can_prove(substitute(c, at)):
                raise fail(InlineError, prim, f"the producer {prod.name!r} runs only where "
                           f"{c} holds, but block {cons.name!r} reads {buf.name} under a "
                           "condition and computes elements also where that fails (e.g. "
                           "a cache_read copy clipped to its buffer): once inlined, those "
                           "elements would never be computed. Inline before the step that "
                           "added the producer's T.where, or inline the producer into the "
                           "consumer instead (compute_inline)", func)


__all__ = ["refuse_cut_producer"]
