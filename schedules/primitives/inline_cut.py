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
from cuvil_tir.analysis import map_inverse
from cuvil_tir.analysis.guarded_loads import guarded_loads
from cuvil_tir.stmt import BlockRealize, For, Range
from cuvil_tir.visitor import substitute, used_vars

from cuvil_tir.analysis import tree
from cuvil_tir.analysis.regions import region_of, scope_doms
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


def refuse_unwritten_loads(func, bpath, inv, loops, prim) -> None:
    """``compute_inline``: raise ``InlineError`` unless every element a consumer loads
    from the producer at ``bpath`` is one the producer stores, i.e. the producer's
    ``T.where`` (over its block variables, its own loops ``loops`` mapped to them)
    provably holds at the producer iteration ``inv`` names for each load, under the
    consumer's ``T.where`` and the conditions around the load.  A consumer that loads
    an element the producer never stores reads unwritten memory; inlined, it would
    evaluate the producer's value there instead: a cache_read copy clipped to its
    buffer then reads the buffer out of bounds (fuzz case 3820702966)."""
    preal = tree.get(func, bpath)
    prod = preal.block
    buf = prod.body.buffer
    pconds = predicate_conditions(func, preal, loops, prim, InlineError)
    if not pconds:
        return
    own = {id(iv.var) for iv in prod.iter_vars} | {id(lp.loop_var) for lp in loops}
    for cpath, creal in tree.walk(func):
        if cpath == bpath or not isinstance(creal, BlockRealize) or \
                region_of(creal.block.reads, buf) is None:
            continue
        cons = creal.block
        binding = dict(zip((iv.var for iv in cons.iter_vars), creal.iter_values))
        ana = Analyzer(index_no_overflow=True)
        for _, s in tree.ancestors(func, cpath):
            if isinstance(s, For):
                ana.bind(s.loop_var, Range(s.min, s.extent))
        for v, r in scope_doms(func, cpath).items():
            ana.bind(v, r)
        for g in guarded_loads(cons.body, buf):
            indices = g.load.indices
            at = map_inverse.at(inv, indices)
            holds = [substitute(c, binding) for c in g.guards] + [creal.predicate]
            with ana.constraint(all_of(*holds)):
                for c in pconds:
                    e = substitute(substitute(c, at), binding)
                    if any(id(v) in own for v in used_vars(e)) or not ana.can_prove(e):
                        raise fail(InlineError, prim, f"the producer {prod.name!r} stores "
                                   f"{buf.name} only where {c} holds, but block "
                                   f"{cons.name!r} loads {buf.name}[{_show(indices)}] also "
                                   "where that may fail: it reads elements never written, "
                                   "and once inlined it would evaluate the producer's "
                                   "value there (e.g. a cache_read copy clipped to its "
                                   "buffer would read that buffer out of bounds). Guard "
                                   "the consumer's load with the same condition, or "
                                   "schedule the consumer before adding the producer's "
                                   "T.where", func)


def _show(indices) -> str:
    return ", ".join(str(e) for e in indices)


__all__ = ["refuse_cut_producer", "refuse_unwritten_loads"]
