"""Region cover: do a consumer's producers write everything it reads?

For a consumer block and the earlier blocks of its scope that write a buffer it reads
(its ``RAW`` producers, :mod:`schedules.block_scope`), the question is asked where the
two meet: at their lowest common loop (or the scope itself), one iteration of the
loops above that point fixed.  There the consumer reads at most a box of the buffer
(its read region relaxed over its own loops below the meeting point, clipped to the
buffer's shape), and each producer writes at least a box (below).  The consumer is
covered when, for every buffer and every meeting point, the union of the producers'
boxes provably contains the consumer's box.

The producer side is a *lower* bound, so a "covered" answer is never wrong: a dimension
indexed by ``base + sum(c * t)`` over the loops below the meeting point (each ``t`` a
loop variable ``v``, ``v // d`` or ``v % d``; one variable's atoms independent: ``v``
alone, or ``v // d`` with ``v % d`` where ``d`` divides its extent) writes the whole
interval from ``base`` when, taking the terms by increasing coefficient, each
coefficient is at most the span already covered (the access's extent, then growing by
``c * (range - 1)``).  ``B[vi * 4: vi * 4 + 4]`` over ``vi`` writes ``[0, 4 * n)``;
``B[vi * 4: vi * 4 + 2]`` leaves holes and proves nothing.  A ``T.where`` condition
narrows the dimension whose index (plus a constant) it bounds; any other condition must
hold at the loops' first iteration.  Anything else is "not proven".

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((8,), name="A")
    >>> B = T.compute((8,), lambda i: A[i] * 2.0, name="B")
    >>> f = T.create_prim_func([A, T.compute((8,), lambda i: B[i] + 1.0, name="C")])
    >>> from cuvil_tir.analysis import tree
    >>> region_covered(f, tree.find_block(f, "C"))
    True
"""

from __future__ import annotations

from cuvil_tir.analysis import tree
from cuvil_tir.analysis.regions import (bound_region, loop_doms, relax, scope_doms,
                                        shared_by_threads, simplify)
from cuvil_tir.arith import Analyzer
from cuvil_tir.arith.affine import Affine, Key
from cuvil_tir.expr import GE, GT, LE, LT, FloorDiv, FloorMod, IntImm, Var, const
from cuvil_tir.op import conjuncts, maximum, minimum
from cuvil_tir.stmt import For, Range
from cuvil_tir.visitor import substitute, used_vars

from .block_scope import DepKind, scope_dependences


def _atom(t, loops: dict):
    """``(var, kind, k)`` for ``v`` / ``v // k`` / ``v % k`` of a loop variable, else
    None (an atom the density rule does not read)."""
    if isinstance(t, Var) and id(t) in loops:
        return t, "id", 1
    if isinstance(t, (FloorDiv, FloorMod)) and isinstance(t.a, Var) and id(t.a) in loops \
            and isinstance(t.b, IntImm) and t.b.value > 0:
        return t.a, ("div" if isinstance(t, FloorDiv) else "mod"), t.b.value
    return None


def _dense(e, doms: dict):
    """``(vars, extent)`` when ``e`` is ``sum(c * v)`` over loop variables from 0 whose
    coefficients are a mixed radix (each the span of the smaller ones: a fused loop
    split again, ``bo * 32 + tx`` with ``tx`` in ``[0, 32)``): ``e`` takes every value
    of ``[0, extent)`` once.  Else None."""
    aff = Affine.of(e)
    if aff.const != 0 or not aff.terms:
        return None
    span, out = 1, []
    for t, c in sorted(aff.terms, key=lambda tc: tc[1]):
        if not (isinstance(t, Var) and id(t) in doms) or c != span:
            return None
        out.append(t)
        span *= doms[id(t)]
    return out, span


def _range(kind: str, k: int, n: int) -> int:
    return {"id": n, "div": -(-n // k), "mod": min(k, n)}[kind]


def _fused_atom(t, doms: dict, fused: dict, uses: dict):
    """``_atom`` of ``e // k`` or ``e % k`` whose ``e`` is :func:`_dense`: ``e`` is a
    loop of its own (one per distinct ``e``, in ``fused``); each loop in it is used
    once, by that loop, so no other use of it is independent."""
    if not (isinstance(t, (FloorDiv, FloorMod)) and isinstance(t.b, IntImm) and
            t.b.value > 0):
        return None
    key = Key(t.a)
    if key not in fused:
        dense = _dense(t.a, doms)
        if dense is None:
            return None
        v = Var("fused", t.a.dtype)
        fused[key] = v
        doms[id(v)] = dense[1]
        for part in dense[0]:
            uses.setdefault(id(part), []).append(("fused", id(v)))
    return fused[key], ("div" if isinstance(t, FloorDiv) else "mod"), t.b.value


def _independent(uses: list, n: int) -> bool:
    """One variable's atoms take all their value combinations: ``v`` (or one digit)
    alone, or ``v // d`` with ``v % d`` where ``d`` divides the extent."""
    if len(uses) == 1:
        return True
    if len(uses) == 2:
        (k1, d1), (k2, d2) = sorted(uses)
        return (k1, k2) == ("div", "mod") and d1 == d2 and n % d1 == 0
    return False


def produced_box(br, region, loops: list):
    """A box (per dimension ``(lo, hi)``, inclusive) that the block realize ``br``
    certainly writes of ``region`` (one of its ``writes``) when the loops ``loops``
    (``For`` nodes, below the meeting point) run through their domains; None when no
    box is proven.

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.analysis import tree
        >>> A = T.placeholder((8,), name="A")
        >>> f = T.create_prim_func([A, T.compute((8,), lambda i: A[i], name="B")])
        >>> p = tree.find_block(f, "B")
        >>> br = tree.get(f, p)
        >>> [(lo.value, hi.value) for lo, hi in produced_box(
        ...     br, br.block.writes[0], [l for _, l in tree.loops_above(f, p)])]
        [(0, 7)]
    """
    doms = {}
    for f in loops:
        if not (isinstance(f.min, IntImm) and f.min.value == 0 and
                isinstance(f.extent, IntImm) and f.extent.value > 0):
            return None
        doms[id(f.loop_var)] = f.extent.value
    dims, uses, fused = [], {}, {}
    for d, rng in enumerate(bound_region(br, region).region):
        ext = simplify(rng.extent)
        if not isinstance(ext, IntImm):
            return None
        aff = Affine.of(simplify(rng.min))
        base, terms = const(aff.const, rng.min.dtype), []
        for t, c in aff.terms:
            if not any(id(v) in doms for v in used_vars(t)):
                base = base + t * c
                continue
            atom = _atom(t, doms) or _fused_atom(t, doms, fused, uses)
            if atom is None:
                return None
            v, kind, k = atom
            uses.setdefault(id(v), []).append((kind, k))
            terms.append((c, _range(kind, k, doms[id(v)])))
        span = ext.value
        for c, r in sorted(terms, key=lambda cr: abs(cr[0])):
            if c < 0:
                base = base + c * (r - 1)
            if abs(c) > span:
                return None
            span += abs(c) * (r - 1)
        dims.append([simplify(base), simplify(base + (span - 1)), rng.min, ext.value])
    if not all(_independent(u, doms[k]) for k, u in uses.items()):
        return None
    return _narrow(br, dims, doms, loops)


def _narrow(br, dims: list, doms: dict, loops: list):
    """Apply the realize's predicate to the box (see the module docstring)."""
    boxed = {id(v) for _, _, m, _ in dims for v in used_vars(m) if id(v) in doms}
    first = {f.loop_var: f.min for f in loops if id(f.loop_var) not in boxed}
    for cond in conjuncts(br.predicate):
        inner = {id(v) for v in used_vars(cond) if id(v) in doms}
        if not inner & boxed:
            held = simplify(substitute(cond, first))
            if not (isinstance(held, IntImm) and held.value):
                return None
            continue
        if not isinstance(cond, (LT, LE, GT, GE)):
            return None
        # read as `e < bound` or `e >= bound`, e over the loops, the bound free of them
        a_in = any(id(v) in doms for v in used_vars(cond.a))
        if a_in == any(id(v) in doms for v in used_vars(cond.b)):
            return None
        e, bound = (cond.a, cond.b) if a_in else (cond.b, cond.a)
        upper = isinstance(cond, (LT, LE)) == a_in
        strict = isinstance(cond, (LT, GT))
        for dim in dims:
            delta = simplify(e - dim[2])
            # only a one-element access: every value of its index is written, so
            # the condition cuts the interval exactly
            if isinstance(delta, IntImm) and dim[3] == 1:
                if upper:
                    dim[1] = simplify(minimum(dim[1], bound - delta - (1 if strict else 0)))
                else:
                    dim[0] = simplify(maximum(dim[0], bound - delta + (1 if strict else 0)))
                break
        else:
            return None
    return [(lo, hi) for lo, hi, _, _ in dims]


def consumed_box(br, region, loops: list) -> list:
    """The box (per dimension ``(lo, hi)``) that ``region`` (one of the realize's
    ``reads``) can touch while ``loops`` run, clipped to the buffer's shape.

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.analysis import tree
        >>> A = T.placeholder((8,), name="A")
        >>> f = T.create_prim_func([A, T.compute((6,), lambda i: A[i + 2], name="B")])
        >>> p = tree.find_block(f, "B")
        >>> br = tree.get(f, p)
        >>> [(lo.value, hi.value) for lo, hi in consumed_box(
        ...     br, br.block.reads[0], [l for _, l in tree.loops_above(f, p)])]
        [(2, 7)]
    """
    relaxed = relax(bound_region(br, region), loop_doms([(None, f) for f in loops]))
    out = []
    for rng, size in zip(relaxed.region, region.buffer.shape):
        lo = simplify(maximum(rng.min, const(0, rng.min.dtype)))
        hi = simplify(minimum(rng.min + rng.extent - 1, size - 1))
        out.append((lo, hi))
    return out


def _union(boxes: list) -> list:
    """Merge boxes equal in all dimensions but one, where they touch or overlap."""
    boxes = list(boxes)
    merged = True
    while merged:
        merged = False
        for i in range(len(boxes)):
            for j in range(i + 1, len(boxes)):
                m = _merge(boxes[i], boxes[j])
                if m is not None:
                    boxes[i] = m
                    del boxes[j]
                    merged = True
                    break
            if merged:
                break
    return boxes


def _same(a, b) -> bool:
    d = simplify(a - b)
    return isinstance(d, IntImm) and d.value == 0


def _merge(a: list, b: list):
    differ = [k for k, (x, y) in enumerate(zip(a, b)) if not (_same(x[0], y[0]) and
                                                               _same(x[1], y[1]))]
    if len(differ) != 1:
        return a if not differ else None
    k = differ[0]
    (alo, ahi), (blo, bhi) = a[k], b[k]
    for lo, hi, other_lo, other_hi in ((alo, ahi, blo, bhi), (blo, bhi, alo, ahi)):
        # `other` starts inside (or right after) this interval
        d_start, d_end = simplify(other_lo - hi - 1), simplify(other_lo - lo)
        if isinstance(d_start, IntImm) and isinstance(d_end, IntImm) and \
                d_start.value <= 0 <= d_end.value:
            end = simplify(maximum(hi, other_hi))
            return a[:k] + [(lo, end)] + a[k + 1:]
    return None


def _contains(ana: Analyzer, have: list, want: list) -> bool:
    return all(ana.can_prove(h[0] <= w[0]) and ana.can_prove(w[1] <= h[1])
               for h, w in zip(have, want))


def region_covered(func, path: tuple, scope=None) -> bool:
    """Whether the producers of the block at ``path`` (in its scope) provably write
    every element it reads from them (see the module docstring).  ``scope``: the
    scope's :class:`~schedules.block_scope.BlockScope` when the caller has it.

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.analysis import tree
        >>> A = T.placeholder((8,), name="A")
        >>> B = T.compute((4,), lambda i: A[i], name="B")
        >>> f = T.create_prim_func([A, T.compute((8,), lambda i: T.if_then_else(
        ...     i < 4, B[T.min(i, 3)], 0.0), name="C")])
        >>> region_covered(f, tree.find_block(f, "C"))
        True
    """
    if not path:
        return True
    scope_path = tree.enclosing_block(func, path)
    scope = scope if scope is not None else scope_dependences(func, scope_path)
    me = tree.get(func, path).block.name
    producers = {d.src.name for d in scope.deps_by_dst(me) if d.kind is DepKind.RAW}
    if not producers:
        return True
    consumer = tree.get(func, path)
    c_loops = tree.loops_above(func, path)
    # group the producers by where they meet the consumer: the loops above it fixed
    groups: dict = {}
    for name in producers:
        p = tree.find_block(func, name)
        k = 0
        while k < len(p) and k < len(path) and p[k] == path[k]:
            k += 1
        fixed = sum(1 for lp, _ in c_loops if len(lp) < k)
        p_loops = [f for lp, f in tree.loops_above(func, p) if len(lp) >= k]
        groups.setdefault(fixed, []).append((tree.get(func, p), p_loops))
    for fixed, members in groups.items():
        inner = [f for _, f in c_loops[fixed:]]
        # the loops above the meeting point and the enclosing blocks' variables are
        # fixed, within their domains
        ana = Analyzer(index_no_overflow=True)
        for v, r in scope_doms(func, path).items():
            ana.bind(v, r)
        for _, f in tree.ancestors(func, path):
            if isinstance(f, For) and not any(f is g for g in inner):
                ana.bind(f.loop_var, Range(f.min, f.extent))
        for read in consumer.block.reads:
            if not any(w.buffer is read.buffer for pbr, _ in members
                       for w in pbr.block.writes):
                continue
            # a buffer shared by threads (shared, warp) is produced by all of them
            # before any reads it (the barrier lowering inserts)
            tags = shared_by_threads(read.buffer.scope)
            threads = [f for _, f in tree.ancestors(func, path) if isinstance(f, For) and
                       f.kind == "thread_binding" and f.thread_tag.startswith(tags) and
                       not any(f is g for g in inner)] if tags else []
            boxes = []
            for pbr, p_loops in members:
                for w in pbr.block.writes:
                    if w.buffer is read.buffer:
                        box = produced_box(pbr, w, p_loops + threads)
                        if box is not None:
                            boxes.append(box)
            want = consumed_box(consumer, read, inner + threads)
            if not any(_contains(ana, have, want) for have in _union(boxes)):
                return False
    return True


__all__ = ["produced_box", "consumed_box", "region_covered"]
