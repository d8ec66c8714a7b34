"""Where a consumer moved under its producers' loop (``reverse_compute_at``) may read:
only the elements they wrote by then.

The region a producer writes in one iteration of the loop is relaxed over its inner
loops, a box.  A producer's ``T.where`` that cuts those loops by more than its domain
(``split`` of a split: ``i_1_0 * 2 + i_1_1 < 3``) writes less than the box, and a
consumer guarded by the box alone reads elements a later iteration writes.  Each such
conjunct ``k * I + rest < 0``, where ``I`` is the inner part of the producer's write
index in one dimension (``index = I + outer``), becomes the consumer's guard
``k * (ix - outer) + rest < 0`` on the index ``ix`` it reads there.  A conjunct that only
re-states the producer's domain (a non-dividing split's ``i_0 * 3 + i_1 < 5``) is left
to the domain guards; one over the loops above only becomes a guard as it is; any other
is refused.

Example::

    >>> import cuvil_tir as T
    >>> X = T.placeholder((5,), "int32", name="X")
    >>> Y = T.compute((5,), lambda i: X[i] + 1, name="Y")
    >>> Z = T.compute((5,), lambda i: Y[i] * 3, name="Z")
    >>> import schedules as S
    >>> sch = S.Schedule(T.create_prim_func([X, Z]))
    >>> _, i1 = sch.split(sch.get_loops("Y")[0], [None, 3])
    >>> i10, _ = sch.split(i1, [None, 2])
    >>> sch.reverse_compute_at("Z", i10)
    >>> "T.where(i_0 * 3 + i_1_0 * 2 + ax0 < 5 and i_1_0 * 2 + ax0 < 3)" in str(sch.func)
    True
"""

from __future__ import annotations

from cuvil_tir.analysis import tree
from cuvil_tir.analysis.predicate_doms import below_zero, bound_conjuncts
from cuvil_tir.analysis.regions import bound_region, inner_loops, region_of, simplify
from cuvil_tir.arith.affine import Affine, is_index_dtype
from cuvil_tir.expr import LT, IntImm, Var, const
from cuvil_tir.op import conjuncts
from cuvil_tir.visitor import used_vars

from ..errors import BlockLocationError, fail
from .block_predicates import implied_by_domain


class WrittenGuard:
    """``k * ix + rest < 0``, with ``ix`` the consumer's index into dimension ``dim`` of
    its read ``read`` (a position in the pairs of ``reverse_compute_at``), and ``rest``
    over the loops at and above the target loop.

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> g = WrittenGuard(0, 0, 1, i * 3 - 3)
        >>> str(g.condition(T.var("ax0")))
        'ax0 + i * 3 < 3'
    """

    __slots__ = ("read", "dim", "k", "rest")

    def __init__(self, read: int, dim: int, k: int, rest):
        self.read, self.dim, self.k, self.rest = read, dim, k, rest

    def condition(self, ix):
        """The guard at the index ``ix`` (an expression over the new loops); the
        condition itself for one over the loops only (``dim`` None)."""
        if self.dim is None:
            return self.rest
        aff = Affine(ix.dtype).combine(Affine.of(simplify(ix)), self.k).combine(
            Affine.of(self.rest), 1)
        bound = -aff.const
        aff.const = 0
        if aff.is_const():
            return const(0 < bound)
        return LT(simplify(aff.to_expr()), const(bound, ix.dtype))


def _inner_terms(aff: Affine, inner: set):
    """``({id(var): (var, coeff)}, rest)``: the terms over ``inner`` loop variables, each
    a plain variable, and the rest; None when an inner variable is inside another atom
    (``(i_1 * 4 + j) // 3``)."""
    terms, rest = {}, Affine(aff.dtype, const=aff.const)
    for atom, c in aff.terms:
        if any(id(v) in inner for v in used_vars(atom)):
            if not isinstance(atom, Var):
                return None
            terms[id(atom)] = (atom, c)
        else:
            rest = rest.combine(Affine.of(atom), c)
    return terms, rest


def _translate(e, write_region, inner: set):
    """``(dim, k, rest)`` with ``e == k * index[dim] + rest`` and ``rest`` free of the
    ``inner`` loops, from a dimension of the producer's write region (one element wide)
    whose inner part ``e``'s is a multiple of; None when there is none."""
    got = _inner_terms(Affine.of(simplify(e)), inner)
    if got is None:
        return None
    eterms, erest = got
    for dim, r in enumerate(write_region.region):
        ext = simplify(r.extent)
        if not (isinstance(ext, IntImm) and ext.value == 1):
            continue
        dgot = _inner_terms(Affine.of(simplify(r.min)), inner)
        if dgot is None or set(dgot[0]) != set(eterms):
            continue
        dterms, drest = dgot
        var_id, (_, dc) = next(iter(dterms.items()))
        ec = eterms[var_id][1]
        if ec % dc:
            continue
        k = ec // dc
        if all(eterms[v][1] == k * c for v, (_, c) in dterms.items()):
            return dim, k, simplify(erest.combine(drest, -k).to_expr())
    return None


def written_guards(func, lpath, pairs, producers, consumer: str, lname: str) -> list:
    """The :class:`WrittenGuard` s that keep ``consumer`` (moved under the loop at
    ``lpath``) to what its ``producers`` (``(path, BlockRealize)``) wrote under their
    predicates; ``pairs`` are its ``(read region, produced region)``.  Refused
    (BlockLocationError, CVL-E103) where a producer's predicate cuts its inner loops in a
    form the guard cannot follow.

    Example::

        >>> written_guards(None, (), [], [], "C", "i")
        []
    """
    out = []
    for n, (read, _) in enumerate(pairs):
        writers = [(p, b) for p, b in producers
                   if region_of(b.block.writes, read.buffer) is not None]
        for p, b in writers:
            cuts = _cuts(func, p, b)
            if cuts and len(writers) > 1:
                raise _refuse(b, cuts[0], consumer, lname,
                              f"{read.buffer.name!r} has {len(writers)} producers under "
                              "the loop, and the guard follows one only")
            inner = {id(lp.loop_var) for _, lp in inner_loops(func, lpath, p)}
            written = bound_region(b, region_of(b.block.writes, read.buffer))
            for cond in cuts:
                if not any(id(v) in inner for v in used_vars(cond)):
                    out.append(WrittenGuard(n, None, 0, cond))
                    continue
                for part in bound_conjuncts(cond):
                    e = below_zero(part)
                    got = _translate(e, written, inner) if e is not None and \
                        is_index_dtype(e.dtype) else None
                    if got is None:
                        raise _refuse(b, cond, consumer, lname,
                                      "it is not a bound on one dimension of what the "
                                      "producer writes")
                    out.append(WrittenGuard(n, *got))
    return out


def _cuts(func, p, b) -> list:
    """The conjuncts of producer ``b``'s predicate that cut it by more than its
    domain."""
    if b.predicate is None or (isinstance(b.predicate, IntImm) and b.predicate.value):
        return []
    loops = [lp for _, lp in tree.loops_above(func, p)]
    return [c for c in conjuncts(b.predicate) if not implied_by_domain(b, c, loops)]


def _refuse(b, cond, consumer, lname, why):
    return fail(BlockLocationError, "reverse_compute_at",
                f"producer {b.block.name!r} runs under T.where({b.predicate}); its "
                f"condition {cond} cuts what it writes in one iteration of loop {lname!r}, "
                f"and {why}, so block {consumer!r} could read elements written in a later "
                "iteration. Move the block before splitting the producer's loops, or pass "
                "the outermost of the split loops")


__all__ = ["WrittenGuard", "written_guards"]
