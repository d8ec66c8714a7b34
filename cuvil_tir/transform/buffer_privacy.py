"""Whether each iteration of a loop uses a buffer on its own (block-level IR).

The memory planner allocates a buffer inside a loop (one copy per iteration) only when
no value flows through it from one iteration to another.  Two proofs are accepted:

* **coverage** (:func:`private`): every block that reads the buffer reads only what an
  earlier block of the same iteration wrote (the producer computed at the loop covers
  its consumer's region), or what it wrote itself under its own ``init``, and no
  reduction into the buffer runs across the loop's iterations;
* **disjointness** (:func:`disjoint`): the iterations touch disjoint boxes of the
  buffer (one dimension's index steps by at least the box's extent per iteration, the
  tile of a register accumulator: ``C_local[io * 4 + ii, ...]`` with ``ii < 4``), so
  nothing one iteration writes is ever seen by another.

Example::

    >>> import cuvil_tir as T
    >>> f = T.parse('''
    ... @T.prim_func
    ... def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    ...     B = T.alloc_buffer((8,), "float32")
    ...     for i in T.serial(8):
    ...         with T.block("B"):
    ...             vi = T.axis.remap("S", [i])
    ...             B[vi] = A[vi]
    ...         with T.block("C"):
    ...             vi = T.axis.remap("S", [i])
    ...             C[vi] = B[vi]
    ... ''')
    >>> loop, buf = f.body.block.body, f.body.block.alloc_buffers[0]
    >>> private(loop, buf), disjoint(loop, buf)
    (True, True)
"""

from __future__ import annotations

from ..analysis.regions import bound_region, relax, simplify, union
from ..arith.affine import is_index_dtype, Affine, Key
from ..expr import Broadcast, BufferLoad, Call, IntImm, Let, Ramp, Var, GE, GT, LE, LT, SizeVar
from ..node import Node, field_names, same
from ..ops.gpu import tiles_of
from ..stmt import (Allocate, BlockRealize, BufferRegion, BufferStore, For, IfThenElse,
                    LetStmt, Range, SeqStmt)
from ..visitor import post_order_visit, substitute, used_vars
from ..arith import Analyzer
from ..op import all as all_of, conjuncts


def count(stmt, buf) -> int:
    """How many loads, stores and declared regions of ``buf`` ``stmt`` holds.

    Example::

        >>> import cuvil_tir as T
        >>> count(T.Evaluate(T.const(0)), None)
        0
    """
    hits = []
    post_order_visit(stmt, lambda n: hits.append(1) if isinstance(
        n, (BufferLoad, BufferStore, BufferRegion)) and n.buffer is buf else None)
    return len(hits)


def accesses(node, buf) -> list | None:
    """``[(region over loop variables, loops around it, conditions)]`` of every access
    of ``buf`` in ``node``: a block's declared regions (under its predicate), and in
    opaque code each load, store, region handed to a call and tile a tile op touches
    (under the conditions of the ``if``s around it).  None when an index uses a variable bound inside ``node``
    other than by a loop (a ``let``): no box can be taken over it.

    Example::

        >>> import cuvil_tir as T
        >>> accesses(T.Evaluate(T.const(0)), None)
        []
    """
    out, bound = [], set()
    _walk(node, buf, (), (), out, bound)
    if None in out:
        return None
    if bound and any(id(v) in bound for r, _, _ in out for d in r.region
                     for v in used_vars(d.min) + used_vars(d.extent)):
        return None
    return out


def _walk(n, buf, path, conds, out, bound):
    if isinstance(n, BlockRealize):
        pred = simplify(n.predicate)
        here = conds if isinstance(pred, IntImm) else conds + (pred,)
        for r in n.block.reads + n.block.writes:
            if r.buffer is buf:
                out.append((bound_region(n, r), path, here))
        return
    if isinstance(n, For):
        _walk(n.body, buf, path + (n,), conds, out, bound)
        return
    if isinstance(n, IfThenElse):
        _walk(n.condition, buf, path, conds, out, bound)
        _walk(n.then_case, buf, path, conds + (n.condition,), out, bound)
        _walk(n.else_case, buf, path, conds, out, bound)
        return
    if isinstance(n, (LetStmt, Let)):
        bound.add(id(n.var))
    if isinstance(n, Call):
        # a tile op (the op registry's tiles: a tensor-core load) touches a whole
        # tile from the element its argument loads
        for tile in tiles_of(n):
            arg = n.args[tile.arg]
            if isinstance(arg, BufferLoad) and arg.buffer is buf and len(arg.indices) >= 2:
                *head, r, c = arg.indices
                dims = tuple(Range(x, IntImm(1, x.dtype)) for x in head) + (
                    Range(r, IntImm(tile.rows, r.dtype)), Range(c, IntImm(tile.cols, c.dtype)))
                out.append((BufferRegion(buf, dims), path, conds))
    if isinstance(n, BufferRegion) and n.buffer is buf:
        out.append((n, path, conds))
    elif isinstance(n, (BufferLoad, BufferStore)) and n.buffer is buf:
        dims = tuple(_index_range(x) for x in n.indices)
        out.append(None if None in dims else (BufferRegion(buf, dims), path, conds))
    if isinstance(n, Node):
        for name in field_names(type(n)):
            _walk(getattr(n, name), buf, path, conds, out, bound)
    elif isinstance(n, (tuple, list)):
        for x in n:
            _walk(x, buf, path, conds, out, bound)


def _index_range(x):
    """The elements an index touches: one, or a vector's lanes (None: not known)."""
    if isinstance(x, Ramp) and isinstance(x.stride, IntImm) and x.stride.value >= 0:
        return Range(x.base, IntImm(x.stride.value * (x.lanes - 1) + 1, x.base.dtype))
    if isinstance(x, Broadcast):
        return Range(x.value, IntImm(1, x.value.dtype))
    return Range(x, IntImm(1, x.dtype)) if is_index_dtype(x.dtype) else None


def relax_region(region, doms: dict) -> BufferRegion:
    """:func:`~cuvil_tir.analysis.regions.relax`, computed directly where each
    dimension is an affine sum of loop variables with constant ranges (the common
    case, and the planner's hot path); any other region goes through ``relax``.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((64,), "float32", "A")
        >>> i, j = T.var("i"), T.var("j")
        >>> r = BufferRegion(A, (Range(i * 16 - j, T.const(2)),))
        >>> d = relax_region(r, {j: Range.from_extent(4)}).region[0]
        >>> str(d.min), d.extent.value
        ('i * 16 - 3', 5)
    """
    if not doms:
        return region
    out = []
    for r in region.region:
        fast = _relax_affine(r, doms)
        if fast is None:
            return relax(region, doms)
        out.append(fast)
    return BufferRegion(region.buffer, tuple(out))


def _relax_affine(r, doms):
    if not any(v in doms for v in used_vars(r.min)):
        return r if not any(v in doms for v in used_vars(r.extent)) else None
    if not is_index_dtype(r.min.dtype) or any(v in doms for v in used_vars(r.extent)):
        return None
    aff = Affine.of(r.min)
    base, lo, hi = Affine(aff.dtype, const=aff.const), 0, 0
    for atom, c in aff.terms:
        if isinstance(atom, Var) and atom in doms:
            d = doms[atom]
            if not (isinstance(d.min, IntImm) and isinstance(d.extent, IntImm)):
                return None
            a, b = c * d.min.value, c * (d.min.value + d.extent.value - 1)
            lo, hi = lo + min(a, b), hi + max(a, b)
        elif any(v in doms for v in used_vars(atom)):
            return None
        else:
            base.coeffs[Key(atom)] = c
    base.const += lo
    ext = r.extent
    ext = IntImm(ext.value + hi - lo, ext.dtype) if isinstance(ext, IntImm) else \
        simplify(ext + IntImm(hi - lo, ext.dtype))
    return Range(base.to_expr(), ext)


def relax_guarded(region, doms: dict, conds=()) -> BufferRegion:
    """:func:`~cuvil_tir.analysis.regions.relax` narrowed by ``conds`` (a block's
    predicate, the ``if`` around an access): a copy spread over a fused thread index
    with the guard ``tx < 32`` touches only the rows those threads reach.  A dimension
    is narrowed when its index is an affine sum of terms over the relaxed variables
    and terms free of them, and the former's bounds under ``conds`` are constants.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((64,), "float32", "A")
        >>> t = T.var("t")
        >>> r = BufferRegion(A, (Range(t // 2, T.const(1)),))
        >>> relax_guarded(r, {t: Range.from_extent(64)}, (t < 32,)).region[0].extent.value
        16
    """
    out = relax_region(region, doms)
    if not conds or not doms:
        return out
    ana = Analyzer(index_no_overflow=True)
    for v, r in doms.items():
        ana.bind(v, r)
    dims = []
    with ana.constraint(all_of(*conds)):
        for d, loose in zip(region.region, out.region):
            tight = _narrowed(d, doms, ana)
            better = tight is not None and isinstance(loose.extent, IntImm) and \
                tight.extent.value < loose.extent.value
            dims.append(tight if better or (tight is not None and not
                                            isinstance(loose.extent, IntImm)) else loose)
    return BufferRegion(region.buffer, tuple(dims))


def _narrowed(d, doms, ana):
    ext = simplify(d.extent)
    if not is_index_dtype(d.min.dtype) or not isinstance(ext, IntImm):
        return None
    aff = Affine.of(d.min)
    inner, outer = Affine(aff.dtype, const=aff.const), Affine(aff.dtype)
    for atom, c in aff.terms:
        (inner if any(v in doms for v in used_vars(atom)) else outer).coeffs[Key(atom)] = c
    lo, hi = ana.const_int_bound(inner.to_expr())
    if not isinstance(lo, int) or not isinstance(hi, int) or hi - lo > (1 << 24):
        return None
    base = simplify(outer.to_expr() + IntImm(lo, d.min.dtype))
    return Range(base, IntImm(hi - lo + ext.value, ext.dtype))


def doms_of(loops) -> dict:
    """``{loop var: Range}`` of ``loops``.

    Example::

        >>> doms_of(())
        {}
    """
    return {lp.loop_var: Range(lp.min, lp.extent) for lp in loops}


def region_of(realize, regions, buf, doms):
    """The union of ``realize``'s ``regions`` of ``buf`` over the iter values, the
    variables of ``doms`` relaxed (None: no region).

    Example::

        >>> region_of(None, (), None, {}) is None
        True
    """
    out = None
    for r in regions:
        if r.buffer is buf:
            out = union(out, relax_region(bound_region(realize, r), doms))
    return out


def _covers(have: BufferRegion, want: BufferRegion, doms=()) -> bool:
    """Whether ``want`` lies in ``have`` for all values of the loops ``doms``."""
    ana = Analyzer(index_no_overflow=True)
    for v, r in doms:
        ana.bind(v, r)
    return all(ana.can_prove(h.min <= w.min) and
               ana.can_prove(w.min + w.extent <= h.min + h.extent)
               for h, w in zip(have.region, want.region))


def private(loop: For, buf, memo=None, outer: dict | None = None) -> bool:
    """Coverage (module doc).  ``memo`` (a dict) shares the regions of blocks and their
    relaxation over inner loops between the calls for the loops of one nest; ``outer``
    gives the ranges of the variables above the loop.

    Example::

        >>> import cuvil_tir as T
        >>> loop = T.For(T.var("i"), T.const(0), T.const(2), "serial", T.Evaluate(T.const(0)))
        >>> private(loop, None)
        True
    """
    memo = {} if memo is None else memo
    # the loop's own variable is fixed within an iteration but known to lie in its
    # range (a loop of one iteration is its start)
    own = list((outer or {}).items()) + [(loop.loop_var, Range(loop.min, loop.extent))]
    return _flow(loop.body, buf, [], own, loop.loop_var, memo) is not None


def _memo(memo, key, make):
    # ids of nodes of the tree being planned, alive during the pass; the values keep
    # the regions they were computed from alive too
    if key not in memo:
        memo[key] = make()
    return memo[key]


def _flow(stmt, buf, written, loops, var, memo):
    """The regions of ``buf`` that ``stmt`` writes (over the variables above it), or
    None when ``stmt`` reads an element not written before it within one iteration of
    the loop of ``var``.  ``written``: ``(region, depth)`` written earlier, recorded
    when ``depth`` of the ``loops`` (``(var, Range)`` entered below that loop) were
    open; a later read is relaxed over the loops entered since."""
    if not _memo(memo, ("count", id(stmt)), lambda: count(stmt, buf)):
        return []
    if isinstance(stmt, SeqStmt):
        out = []
        for s in stmt.seq:
            w = _flow(s, buf, written + [(r, len(loops)) for r in out], loops, var, memo)
            if w is None:
                return None
            out += w
        return out
    if isinstance(stmt, For):
        dom = (stmt.loop_var, Range(stmt.min, stmt.extent))
        w = _flow(stmt.body, buf, written, loops + [dom], var, memo)
        return None if w is None else [
            _memo(memo, ("relax", id(stmt), id(r)),
                  lambda r=r: (r, relax_region(r, dict([dom]))))[1]
            for r in w]
    if isinstance(stmt, Allocate):
        return _flow(stmt.body, buf, written, loops, var, memo)
    if not isinstance(stmt, BlockRealize):
        return None                         # opaque code: not analysed
    blk = stmt.block
    reads, writes = _memo(memo, ("block", id(stmt)), lambda: (
        region_of(stmt, blk.reads, buf, {}), region_of(stmt, blk.writes, buf, {})))
    # a reduction into buf (its update reads buf even when only the init is declared)
    if writes is not None and any(iv.kind == "reduce" and any(u is var for u in used_vars(v))
                                  for iv, v in zip(blk.iter_vars, stmt.iter_values)):
        return None                         # an accumulation across the loop's iterations
    if reads is not None:
        own = writes is not None and blk.init is not None and _covers(writes, reads)
        def relaxed(depth):
            inner = loops[depth:]
            return _memo(memo, ("reads", id(stmt), tuple(id(v) for v, _ in inner)),
                         lambda: relax_region(reads, dict(inner)))
        if not own and not any(_covers(w, relaxed(depth), loops) for w, depth in written):
            return None
    if writes is None or not _writes_all_it_declares(stmt):
        return []       # what a predicated block skips comes from elsewhere: no coverage
    return [writes]


def _writes_all_it_declares(realize) -> bool:
    """Whether the block writes its whole declared region: its predicate only keeps
    each iter value inside its domain (a boundary tile), like ``i_0 * 4 + i_1 < n``.
    Any other condition (a rolling buffer's ``i_0 < 1 or 5 <= ax0``) skips elements
    whose values an earlier iteration left in the buffer."""

    def bounds_a_value(c):
        if not isinstance(c, (LT, LE, GT, GE)):
            return False
        for iv, val in zip(realize.block.iter_vars, realize.iter_values):
            for left in (True, False):
                side, other = (c.a, c.b) if left else (c.b, c.a)
                if not same(side, val) or any(not isinstance(v, SizeVar)
                                              for v in used_vars(other)):
                    continue
                w = Var("w", val.dtype)
                ana = Analyzer(index_no_overflow=True)
                ana.bind(w, iv.dom)
                if ana.can_prove(type(c)(w, other) if left else type(c)(other, w)):
                    return True
        return False

    pred = simplify(realize.predicate)
    if isinstance(pred, IntImm):
        return bool(pred.value)
    return all(bounds_a_value(c) for c in conjuncts(pred))


def disjoint(loop: For, buf) -> bool:
    """Disjointness (module doc): the box of ``buf`` that one iteration of ``loop``
    touches (declared regions, relaxed over the loops inside it) moves in some
    dimension by at least its extent from one iteration to the next.

    Example::

        >>> import cuvil_tir as T
        >>> loop = T.For(T.var("i"), T.const(0), T.const(2), "serial", T.Evaluate(T.const(0)))
        >>> disjoint(loop, None)
        False
    """
    found = accesses(loop.body, buf)
    box = None
    for r, path, conds in found or ():
        box = union(box, relax_guarded(r, doms_of(path), conds))
    if box is None:
        return False
    v = loop.loop_var
    one = IntImm(1, v.dtype)
    for d in box.region:
        ext = simplify(d.extent)
        if any(u is v for u in used_vars(ext)):
            continue
        step = simplify(substitute(d.min, {v: v + one}) - d.min)
        if not isinstance(step, IntImm) or not isinstance(ext, IntImm):
            continue
        if abs(step.value) >= ext.value > 0:
            return True
    return False


__all__ = ["accesses", "count", "disjoint", "doms_of", "private", "region_of",
           "relax_guarded", "relax_region"]
