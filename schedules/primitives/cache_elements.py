"""Which elements of a buffer some blocks read or write, as a condition on the element.

A cache's copy covers a box: the region its writer writes, or the tile of a nested
block.  Where the blocks carry a ``T.where`` (a non-dividing split, a padding block, a
tile overhanging its buffer), part of the box is never written: a ``cache_read``
copying it reads memory no store wrote, and a ``cache_write`` copies garbage back over
the buffer.  :func:`element_condition` turns the blocks' regions and predicates into
a condition on the element index, so a copy takes exactly the elements they access:
what the writer wrote, or (a buffer no block in the scope writes: the outer level's
cache read in a second blockized block) what the readers read.

The condition exists when each block is a leaf whose declared region, over the loops
between the copy and the block, indexes each dimension by one of those loops
(``± loop + outer``), by loops already solved, by none, or as a range fixed outside;
every loop its ``T.where`` names is one of the solved loops.  Then the block accesses
element ``e`` iff each solved loop's value (from ``e``) lies in the loop's range and
the predicate holds there.  Otherwise it is None, and a ``cache_write`` copies its box
back only where :func:`writes_whole` proves the writer writes all of it.  A reduction
writing a cache (which starts unwritten) must reset each element there first:
:func:`unreset_reduction` says where it does not.

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.analysis import tree
    >>> A = T.placeholder((8,), name="A")
    >>> f = T.create_prim_func([A, T.compute((8,), lambda i: A[i] + 1.0, name="B")])
    >>> p = tree.find_block(f, "B")
    >>> cond = element_condition(f, (), f.params[0], [p])
    >>> [str(c) for c in cond([T.var("e")])]
    ['0 <= e', 'e < 8']
"""

from __future__ import annotations

from cuvil_tir.arith import Analyzer
from cuvil_tir.arith.affine import Affine, is_index_dtype
from cuvil_tir.expr import EQ, IntImm, Var
from cuvil_tir.stmt import For
from cuvil_tir.op import all as all_of, any as any_of, conjuncts
from cuvil_tir.visitor import substitute, used_vars

from cuvil_tir.analysis import tree
from cuvil_tir.analysis.regions import bound_region, inner_loops, region_of, simplify, writers
from ..errors import CacheStageError, fail
from ..region_cover import produced_box


def _solve(index, inner: dict):
    """``(loop var, sign, rest)`` when ``index`` is ``sign * loop + rest`` with ``rest``
    free of ``inner`` loops; ``()`` when ``index`` names no inner loop; None
    otherwise."""
    if not is_index_dtype(index.dtype):
        return None
    ins = [(t, c) for t, c in Affine.of(index).terms
           if any(id(v) in inner for v in used_vars(t))]
    if not ins:
        return ()
    if len(ins) != 1 or not isinstance(ins[0][0], Var) or ins[0][1] not in (1, -1):
        return None
    t, c = ins[0]
    return t, c, simplify(index - t * IntImm(c, index.dtype))


def _accesses(func, cpath, buf, rpath, elems, kind):
    """The conditions on ``elems`` (one placeholder per dimension) under which the
    block at ``rpath`` accesses that element, or None (see the module docstring)."""
    br = tree.get(func, rpath)
    reg = region_of(getattr(br.block, kind), buf)
    if reg is None or next(iter(tree.blocks_under(br.block.body)), None) is not None:
        return None
    reg = bound_region(br, reg)
    inner = {id(l.loop_var): l for _, l in inner_loops(func, cpath, rpath)}
    # a loop of one iteration is its start (a split by [None, 1, 1] of the copy's loop
    # binds ax0_0 + ax0_1 + ax0_2, which names three loops but one value)
    units = {l.loop_var: l.min for l in inner.values()
             if isinstance(simplify(l.extent), IntImm) and simplify(l.extent).value == 1}
    if units:
        reg = substitute(reg, units)
        inner = {k: l for k, l in inner.items() if l.loop_var not in units}
    vmap: dict = {}
    conds, later = [], []
    for e, r in zip(elems, reg.region):
        ext = simplify(r.extent)
        found = _solve(r.min, inner)
        if found == ():
            conds += [r.min <= e, e < simplify(r.min + ext)]
        elif found is None or not (isinstance(ext, IntImm) and ext.value == 1) or \
                id(found[0]) in vmap:
            later.append((e, r.min, ext))
        else:
            t, sign, rest = found
            vmap[id(t)] = (t, simplify((e - rest) * IntImm(sign, e.dtype)))
    # a dimension indexed by loops already solved (A[i, 3 - i]) is fixed by them
    for e, index, ext in later:
        if not (isinstance(ext, IntImm) and ext.value == 1):
            return None
        conds.append(e == index)
    for t, v in vmap.values():
        loop = inner[id(t)]
        conds += [loop.min <= v, v < simplify(loop.min + loop.extent)]
    conds += conjuncts(substitute(br.predicate, units) if units else br.predicate)
    # whatever names a loop left unsolved (a bound of a triangular loop included)
    # holds for some of its values only: no exact condition
    if any(id(v) in inner and id(v) not in vmap for c in conds for v in used_vars(c)):
        return None
    sub = dict(vmap.values())
    return [simplify(substitute(c, sub)) for c in conds]


def element_condition(func, cpath, buf, paths, kind: str = "reads"):
    """A function from an element's index (a list of expressions, one per dimension)
    to the conditions under which one of the blocks at ``paths`` reads it (``kind``
    ``"reads"``) or writes it (``"writes"``), over the loops at and above ``cpath``
    (where the copy goes); None when no exact condition is known.

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.analysis import tree
        >>> A = T.placeholder((4, 4), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i, 3 - i], name="B")])
        >>> cond = element_condition(f, (), f.params[0], [tree.find_block(f, "B")])
        >>> [str(c) for c in cond([T.var("r"), T.var("c")])]
        ['c == 3 - r', '0 <= r', 'r < 4']
    """
    elems = [Var(f"e{d}", s.dtype) for d, s in enumerate(buf.shape)]
    per = [_accesses(func, cpath, buf, p, elems, kind) for p in paths]
    if not per or any(c is None for c in per):
        return None

    def at(index):
        emap = dict(zip(elems, index))
        out = [[simplify(substitute(c, emap)) for c in conds] for conds in per]
        return out[0] if len(out) == 1 else [any_of(*[all_of(c) for c in out])]
    return at


def writes_whole(func, buf, wpath, outer_loops, region, doms) -> bool:
    """Whether the writer at ``wpath`` provably writes every element of ``region`` of
    ``buf`` while the loops between ``outer_loops`` (``(path, For)``, around the copy)
    and it run (:func:`schedules.region_cover.produced_box`), ``doms`` bounding what
    stays fixed.  A copy back of a box the writer writes only part of (a part of a
    fused loop, a row tile of a reshaped buffer) would overwrite the other elements.
    Loops of symbolic extents are not decided: taken as writing the box (a fused,
    split ``n * n`` loop under its ``T.where`` does).

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.analysis import tree
        >>> A = T.placeholder((8,), name="A")
        >>> f = T.create_prim_func([A, T.compute((8,), lambda i: A[i], name="B")])
        >>> p, B = tree.find_block(f, "B"), f.params[1]
        >>> writes_whole(f, B, p, [], T.BufferRegion.full(B), {})
        True
    """
    br = tree.get(func, wpath)
    written = region_of(br.block.writes, buf)
    if written is None:
        return False
    between = [f for _, f in tree.loops_above(func, wpath)
               if not any(f is g for _, g in outer_loops)]
    if not all(isinstance(simplify(f.extent), IntImm) for f in between):
        return True
    box = produced_box(br, written, between)
    if box is None:
        return False
    ana = Analyzer(index_no_overflow=True)
    for v, r in doms.items():
        ana.bind(v, r)
    return all(ana.can_prove(lo <= r.min) and ana.can_prove(r.min + r.extent - 1 <= hi)
               for (lo, hi), r in zip(box, region.region))


def unreset_reduction(func, bpath, prim: str = "cache_write"):
    """Why the reduction block at ``bpath`` cannot write a cache that starts unwritten
    (a sentence naming the fix for ``prim``), or None: each element it writes must be
    reset by its ``T.init`` there first.  Not so where its reduction loops run outside
    the block holding the cache (a part of loop_partition under the outer loop of a
    split reduction: each instance of that block would start on a fresh cache), nor
    where a loop inside does not start its reduce iterators at their start (a later
    part of a partitioned reduce loop, or of a fused spatial-and-reduce loop, goes on
    with a sum an earlier part began).

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> f = matmul(4, 4, 4)
        >>> unreset_reduction(f, tree.find_block(f, "C")) is None
        True
    """
    br = tree.get(func, bpath)
    if br.block.init is None:
        return None
    scope_path = tree.enclosing_block(func, bpath)
    name = br.block.name
    reduce_vars = {id(v) for iv, val in zip(br.block.iter_vars, br.iter_values)
                   if iv.kind == "reduce" for v in used_vars(val)}
    outside = [f.loop_var.name for _, f in tree.ancestors(func, scope_path)
               if isinstance(f, For) and id(f.loop_var) in reduce_vars]
    if scope_path and outside:
        return (f"block {name!r} reduces over the loops {outside} outside the block "
                f"{tree.get(func, scope_path).block.name!r} that would hold the cache: "
                f"each of their iterations would start on a fresh cache; apply {prim} "
                "before loop_partition (or blockize) inside the reduction")
    inside = [f for _, f in tree.loops_above(func, bpath) if id(f.loop_var) in reduce_vars]
    at_start = {f.loop_var: IntImm(0, f.loop_var.dtype) for f in inside}
    ana = Analyzer(index_no_overflow=True)
    late = [f.loop_var.name for f in inside
            if not ana.can_prove(EQ(f.min, IntImm(0, f.min.dtype)))] + [
        iv.var.name for iv, val in zip(br.block.iter_vars, br.iter_values)
        if iv.kind == "reduce" and
        not ana.can_prove(EQ(substitute(val, at_start), iv.dom.min))]
    if late:
        return (f"block {name!r} does not start its reduction where its loops start "
                f"({late}): it goes on with sums begun outside them (a later part of a "
                f"partitioned reduction loop), which the cache would not hold; apply "
                f"{prim} before loop_partition")
    return None


__all__ = ["element_condition", "writes_whole", "unreset_reduction"]


def outer_written(func, cpath, buf, prim):
    """The condition on an element that the writer of ``buf`` in an enclosing scope
    (the outer level's cache copy, clipped to its buffer by a ``T.where``) writes it;
    None where that writer writes its whole region.  A nested copy of the rest would
    read elements no store wrote, even where the readers read them only under an
    ``if_then_else`` that skips them.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> outer_written(f, tree.find_block(f, "B"), f.params[0], "cache_read") is None
        True
    """
    path = cpath
    while path:
        path = tree.enclosing_block(func, path)
        ws = [(p, b) for p, b in writers(func, path, buf) if cpath[:len(p)] != p]
        if not ws:
            continue
        if len(ws) != 1 or not conjuncts(ws[0][1].predicate):
            return None
        cond = element_condition(func, path, buf, [ws[0][0]], "writes")
        if cond is None:
            raise fail(CacheStageError, prim, f"block {ws[0][1].block.name!r} writes "
                       f"only part of {buf.name!r} (under a T.where), by indices the copy "
                       "cannot follow: a copy of the whole region would read elements "
                       f"no store wrote; cache_read {buf.name!r} at its writer's level",
                       func)
        return cond
    return None

