"""``compute_at`` and ``reverse_compute_at``: move a block under another block's loop.

``compute_at(block, loop)`` moves a producer under a loop of its consumers' nest and
regenerates its loops so that, in each iteration of ``loop``, it computes exactly the
region its consumers under ``loop`` read (TVM's TensorIR semantics).
``reverse_compute_at(block, loop)`` moves a consumer under a loop of its producers'
nest, covering the region they write in one iteration.

Before ``compute_at(B, i)``::

    for i, j in T.grid(8, 8):
        with T.block("B"): B[vi, vj] = A[vi, vj] * 2
    for i, j in T.grid(8, 8):
        with T.block("C"): C[vi, vj] = B[vi, vj] + 1

after::

    for i in range(8):
        for ax0 in range(8):
            with T.block("B"): vi = i; vj = ax0; B[vi, vj] = A[vi, vj] * 2
        for j in range(8):
            with T.block("C"): C[vi, vj] = B[vi, vj] + 1

The tree edits the other block primitives share (removing a block's own loop nest,
the :class:`Relocate` mutator, rebuilding a nest) are in :mod:`.nests`.

Example::

    >>> import cuvil_tir as T
    >>> from schedules.handles import BlockRV, LoopRV
    >>> from cuvil_tir.analysis import tree
    >>> A = T.placeholder((8,), name="A")
    >>> B = T.compute((8,), lambda i: A[i] * 2.0, name="B")
    >>> C = T.compute((8,), lambda i: B[i] + 1.0, name="C")
    >>> f = T.create_prim_func([A, C])
    >>> i = tree.get(f, tree.loops_above(f, tree.find_block(f, "C"))[0][0]).loop_var
    >>> g, _ = compute_at(f, BlockRV("B"), LoopRV(i))
    >>> [l.loop_var.name for _, l in tree.loops_above(g, tree.find_block(g, "B"))]
    ['i']
"""

from __future__ import annotations


from cuvil_tir.expr import IntImm, Var
from cuvil_tir.stmt import Block, seq
from cuvil_tir.visitor import substitute, used_vars

from cuvil_tir.analysis import tree
from ..analysis import block_path, loop_path
from ..primitive import BLOCK, BOOL, INT, LOOP, primitive
from ..errors import BlockLocationError, fail
from .insertion import insertion_point
from ..handles import INLINE_MARK, LocationMark
from .inline import compute_inline
from .nests import (Relocate, block_names, exclusive_nest, make_nest, subtrees, with_fields)
from .block_predicates import predicate_conditions
from .produced_guards import written_guards
from cuvil_tir.analysis.regions import (bounds, child_blocks, encloses, is_complete,
                                        is_param, is_reduction, loop_doms, needed_region,
                                        precedes, provably_le, region_of, scope_doms,
                                        simplify)
from cuvil_tir.analysis import index_map
from cuvil_tir.arith.affine import Affine
from cuvil_tir.errors import ScheduleError


def _with_predicate(guards, block, conds):
    """``guards`` (a ``make_nest`` callback or None) that also adds ``conds`` (over the
    block's iteration variables) at the new iter values."""
    if not conds:
        return guards

    def both(values):
        vm = {iv.var: v for iv, v in zip(block.iter_vars, values)}
        return (guards(values) if guards else []) + [substitute(c, vm) for c in conds]
    return both


def _block_domain(block: Block, pairs, outer: dict, prim: str) -> list:
    """Per iter var of ``block``: the ``(min, extent)`` for which its accesses
    (``provided``, over the block vars) cover the ``required`` regions (over the loops
    of ``outer``), or None (its whole domain), from
    :func:`cuvil_tir.analysis.index_map.solve`."""
    indices, boxes = [], []
    ivars = {iv.var for iv in block.iter_vars}
    for provided, required in pairs:
        idx, box = [], []
        for pdim, rdim in zip(provided.region, required.region):
            over = simplify(pdim.extent - 1)      # an access wider than one element
            own = [v.name for v in used_vars(over) if v in ivars]
            if own:
                # a width that moves with the block's own iterators cannot be solved
                # for them: the domain would name them (undefined outside the block)
                raise fail(BlockLocationError, prim,
                           f"block {block.name!r} accesses {provided.buffer.name}"
                           f"[{pdim.min}:{pdim.min} + {pdim.extent}], whose width depends "
                           f"on its own iterators {sorted(set(own))}, so its iteration "
                           "domain cannot be derived from the region; move the block "
                           "before the layout change that produced this region (e.g. "
                           "transform_layout with pad_value), or blockize after moving it")
            if prim == "reverse_compute_at" and not used_vars(pdim.min) and not \
                    _covered_always(pdim, rdim, outer):
                # no iteration variable to solve for: the block would run in every
                # iteration, reading what later ones have not produced yet
                raise fail(BlockLocationError, prim,
                           f"block {block.name!r} reads {provided.buffer.name}"
                           f"[{pdim.min}:{simplify(pdim.min + pdim.extent)}] (the union of "
                           "its accesses, over no variable of its own), which one "
                           "iteration of the loop does not produce whole (it produces "
                           f"{required.buffer.name}[{rdim.min}:"
                           f"{simplify(rdim.min + rdim.extent)}]); reverse_compute_at "
                           "needs each read produced in the iteration that reads it. "
                           "Use compute_at on the producer instead")
            if prim == "reverse_compute_at" and used_vars(pdim.min) and not (
                    isinstance(over, IntImm) and over.value == 0):
                # a window spans what several iterations of the loop write: no single
                # iteration has produced all of it
                raise fail(BlockLocationError, prim,
                           f"block {block.name!r} reads {provided.buffer.name}"
                           f"[{pdim.min}:{pdim.min} + {pdim.extent}], a window over "
                           "several elements its producers write in different "
                           "iterations; reverse_compute_at needs one element per "
                           "access. Use compute_at on the producer instead")
            idx.append(pdim.min)
            box.append((simplify(rdim.min - over), simplify(rdim.min + rdim.extent - 1)))
        indices.append(idx)
        boxes.append(box)
    try:
        spans = index_map.solve(block.iter_vars, indices, boxes, outer)
    except (index_map.NotInvertible, ScheduleError) as why:
        raise fail(BlockLocationError, prim,
                   f"cannot derive the iteration domain of block {block.name!r} from its "
                   f"accesses {_show_accesses(pairs)}: {why}. Only quasi-affine, "
                   "invertible index maps (sums of block variables, their multiples, "
                   "// and % by constants) can be solved; inline or rewrite the block "
                   "first") from None
    out = []
    for iv, sp in zip(block.iter_vars, spans):
        if sp is None:
            out.append(None)
        elif sp.extent is None:
            raise fail(BlockLocationError, prim,
                       f"the iteration range [{sp.lo}, {sp.hi}] of {iv.var.name} in block "
                       f"{block.name!r} has no bound on its size that holds for every "
                       "iteration of the loops above; pass another loop")
        else:
            out.append((sp.lo, sp.extent))
    return out


def _covered_always(pdim, rdim, outer) -> bool:
    """Whether the range ``pdim`` (free of the block's variables) lies inside ``rdim``
    (over the loops of ``outer``) in every iteration of those loops."""
    _, start_hi = bounds(rdim.min, outer)
    end_lo, _ = bounds(simplify(rdim.min + rdim.extent - 1), outer)
    return provably_le(start_hi, pdim.min) and \
        provably_le(simplify(pdim.min + pdim.extent - 1), end_lo)


def _reduction_order_blocker(block: Block, doms: list, outer: dict):
    """The first reduce iter var of ``block`` whose new range starts lower as a loop of
    ``outer`` grows (``v_k = 1 - ax1``), or None: its init, which runs where it sits at
    its minimum, would come last and drop the partial sums."""
    for iv, dom in zip(block.iter_vars, doms):
        if iv.kind != "reduce" or dom is None:
            continue
        for atom, c in Affine.of(simplify(dom[0])).terms:
            if any(v in outer for v in used_vars(atom)) and not (
                    isinstance(atom, Var) and c > 0):
                return iv, dom[0]
    return None


def _show_accesses(pairs) -> str:
    return ", ".join(f"{p.buffer.name}[{', '.join(str(r.min) for r in p.region)}]"
                     for p, _ in pairs)


def _in_boxes(block: Block, pairs, written=()):
    """``guards`` for :func:`make_nest`: each access of ``pairs`` lies in its required
    region (a consumer moved under its producers' loop must not read ahead), and at an
    element its producers' predicates let them write (``written``, from
    :func:`.produced_guards.written_guards`)."""
    def guards(values):
        vm = {iv.var: v for iv, v in zip(block.iter_vars, values)}
        out = []
        for provided, required in pairs:
            for pdim, rdim in zip(provided.region, required.region):
                ix = simplify(substitute(pdim.min, vm))
                if used_vars(pdim.min):
                    out.append(ix >= rdim.min)
                    out.append(ix < simplify(rdim.min + rdim.extent))
        for g in written:
            provided = pairs[g.read][0]
            out.append(g.condition(None if g.dim is None else simplify(
                substitute(provided.region[g.dim].min, vm))))
        return out
    return guards


def _move(func, block, loop, reverse: bool, preserve_unit_loops: bool, index: int = -1):
    prim = "reverse_compute_at" if reverse else "compute_at"
    if isinstance(loop, LocationMark):     # from sample_compute_location
        # the root mark leaves the block where it is; the inline mark inlines it
        return compute_inline.raw(func, block) if loop is INLINE_MARK else (func, None)

    def err(reason, node=None):
        return fail(BlockLocationError, prim, reason, func, node)

    bpath = block_path(func, block, prim)
    blk = tree.get(func, bpath).block
    lpath = loop_path(func, loop, prim)
    loop_node = tree.get(func, lpath)
    lname = loop_node.loop_var.name
    if encloses(lpath, bpath):
        raise err(f"loop {lname!r} is an ancestor of block {blk.name!r} (one of "
                            f"its own loops); pass a loop of a {'producer' if reverse else 'consumer'}"
                            f"'s nest (get_loops of that block)")
    scope = tree.enclosing_block(func, bpath)
    if tree.enclosing_block(func, lpath) != scope:
        raise err(f"loop {lname!r} and block {blk.name!r} are not in "
                            "the same block scope (different block scopes); pass a loop "
                            "of the same scope")
    if any(iv.kind in ("opaque", "scan") for iv in blk.iter_vars) or not (
            is_complete(blk) or is_reduction(blk)):
        raise err(f"block {blk.name!r} is neither a complete block nor a "
                            "reduction block (it has opaque or scan iter vars or reads "
                            "what it writes); only those can be moved")
    around = {id(f.loop_var): f.loop_var.name for _, f in tree.loops_above(func, bpath)}
    named = sorted({around[id(v)] for v in used_vars(blk) if id(v) in around})
    if named:
        raise err(f"block {blk.name!r} names the loops {named} around it inside its body "
                  "(a block without iterators, such as loop_partition's wrapper): moved, "
                  "they would be left undefined; move the blocks inside it, or move it "
                  "before partitioning")
    if is_reduction(blk) and blk.init is None:
        raise err(f"block {blk.name!r} is a reduction update without an init (e.g. "
                  "what decompose_reduction leaves): recomputed for overlapping consumer "
                  "regions it would accumulate again onto finished values. Move the "
                  "reduction before decomposing it")
    if len(blk.writes) != 1:
        raise err(f"block {blk.name!r} writes {len(blk.writes)} buffers; "
                            "only a block writing exactly one buffer can be moved")
    out = blk.writes[0].buffer
    co_writers = [b.block.name for p, b in child_blocks(func, scope)
                  if p != bpath and region_of(b.block.writes, out) is not None]
    if co_writers:
        raise err(f"block {blk.name!r} is not the only writer of {out.name!r} (also "
                  f"written by {co_writers}): the moved block would be widened over the "
                  "others' part. A block must be complete for its buffer to be moved "
                  "(a complete block: the only writer of its output)")
    if not reverse and is_param(func, out):
        raise err(f"block {blk.name!r} is an output block (it writes "
                            f"the parameter {out.name!r}); nothing consumes it, so there is "
                            "no region to compute. Use reverse_compute_at to move it "
                            "under its producers' loop")
    others = [(p, b) for p, b in child_blocks(func, scope) if b.block.name != blk.name]
    wrote = {id(w.buffer) for w in blk.writes}
    read = {id(r.buffer) for r in blk.reads}
    consumers = [(p, b) for p, b in others if any(id(r.buffer) in wrote for r in b.block.reads)]
    producers = [(p, b) for p, b in others if any(id(w.buffer) in read for w in b.block.writes)]
    deps, kind = (producers, "producer") if reverse else (consumers, "consumer")
    if not deps:
        raise err(f"block {blk.name!r} has no {kind} in its scope, so no "
                            f"region to cover under loop {lname!r}")
    outside = [b.block.name for p, b in deps if not encloses(lpath, p)]
    if outside:
        raise err(f"onto a loop that does not enclose every {kind}: "
                  f"{kind}(s) {outside} of block {blk.name!r} are outside loop "
                  f"{lname!r}; {prim} requires all the {kind}s under the loop: pass a "
                  "loop that encloses all of them")
    for p, b in producers:
        if not encloses(lpath, p) and not precedes(p, lpath):
            raise err(f"producer {b.block.name!r} of block {blk.name!r} "
                                f"runs after loop {lname!r}; the block would read it too early")
    for p, b in consumers:
        if not encloses(lpath, p) and not precedes(lpath, p):
            raise err(f"consumer {b.block.name!r} of block {blk.name!r} "
                                f"runs before loop {lname!r}; it would read the block's "
                                "result too early")
    nest_path, nest_obj = exclusive_nest(func, bpath, prim)
    subs = [s for s in subtrees(loop_node.body) if s is not nest_obj]
    cons_names = {b.block.name for _, b in consumers}
    prod_names = {b.block.name for _, b in producers}
    cpos = [k for k, s in enumerate(subs) if block_names(s) & cons_names]
    ppos = [k for k, s in enumerate(subs) if block_names(s) & prod_names]
    if cpos and ppos and max(ppos) >= min(cpos):
        raise err(f"under loop {lname!r}, a producer and a consumer of "
                            f"block {blk.name!r} share one statement, so there is no place "
                            "between them; pass a loop further inside")
    outer = {**scope_doms(func, lpath),
             **loop_doms(tree.loops_above(func, lpath) + [(lpath, loop_node)])}
    if reverse:
        _check_complete_producers(func, blk, producers, outer, lname)
        pairs = []
        for r in blk.reads:
            prods = [p for p, b in producers if region_of(b.block.writes, r.buffer)]
            if prods:
                pairs.append((r, needed_region(func, lpath, r.buffer, prods, "writes")))
    else:
        pairs = [(blk.writes[0], needed_region(func, lpath, out, [p for p, _ in consumers],
                                               "reads", relax_threads=True))]
    doms = _block_domain(blk, pairs, outer, prim)
    _check_whole_reduction(func, bpath, doms, prim, lname)
    guards = None
    if reverse:
        backwards = _reduction_order_blocker(blk, doms, outer)
        if backwards is not None:
            iv, start = backwards
            raise err(f"under loop {lname!r} the reduction of block {blk.name!r} would "
                      f"run backwards: {iv.var.name} starts at {start}, lower as the loops "
                      "above grow, so its init (run where it is at its minimum) would come "
                      "last and drop the partial sums. Keep the block where it is, or make "
                      "the producer's loop run in the order the reduction reads")
        _check_covered(func, blk, doms, outer, lname)
        guards = _in_boxes(blk, pairs, written_guards(func, lpath, pairs, producers,
                                                      blk.name, lname))
    # the loops the block leaves: its own nest, and loops it shared with a neighbour
    # (a reverse_compute_at before): a T.where naming those would be left undefined
    left = [f for p, f in tree.loops_above(func, bpath) if not encloses(p, lpath)]
    guards = _with_predicate(guards, blk, predicate_conditions(
        func, tree.get(func, bpath), left, prim))
    nest = make_nest(blk, doms, outer, preserve_unit_loops, guards, clip=not reverse)

    def place(new_loop):
        items = subtrees(new_loop.body)
        pos = insertion_point(items, prod_names, cons_names, index, prim, lname, func)
        return with_fields(new_loop, body=seq(*items[:pos], nest, *items[pos:]))

    body = Relocate(remove=nest_obj, target=loop_node, place=place).visit(func.body)
    return func.with_body(body), None


def _check_whole_reduction(func, bpath, doms, prim, lname):
    """The moved nest runs a reduce iterator the region does not fix over its whole
    domain: where the block's loops provably run it over less (a loop_partition part of
    a fused reduction), the moved block would add the other iterations again."""
    br = tree.get(func, bpath)
    around = {**scope_doms(func, bpath), **loop_doms(tree.loops_above(func, bpath))}
    for iv, val, dom in zip(br.block.iter_vars, br.iter_values, doms):
        if iv.kind != "reduce" or dom is not None:
            continue
        try:
            first, last = bounds(val, around)
        except ScheduleError:
            continue
        last = simplify(last)
        dmax = simplify(iv.dom.min + iv.dom.extent - 1)
        one = IntImm(1, dmax.dtype)
        if provably_le(simplify(iv.dom.min + one), first) or \
                provably_le(simplify(last + one), dmax):
            raise fail(BlockLocationError, prim,
                       f"block {br.block.name!r} runs its reduction over {iv.var.name} in "
                       f"[{simplify(first)}, {last}] only, of its domain [{iv.dom.min}, "
                       f"{dmax}] (its loops were partitioned or cut); under loop {lname!r} "
                       "it would run the whole domain and add the other iterations "
                       "again. Move the block before partitioning its reduction, or "
                       "partition a loop that is not fused with the reduction", func)


def _check_covered(func, blk, doms, outer, lname):
    """A consumer moved under its producers' loop runs only where they write; over all
    iterations of the loops it must still cover its whole domain (a padding stage's
    border reads nothing its producer writes, and would never run)."""
    for iv, dom in zip(blk.iter_vars, doms):
        if dom is None:
            continue
        lo, ext = dom
        first, _ = bounds(lo, outer)
        _, last = bounds(simplify(lo + ext - 1), outer)
        dmax = simplify(iv.dom.min + iv.dom.extent - 1)
        if not (provably_le(first, iv.dom.min) and provably_le(dmax, last)):
            raise fail(BlockLocationError, "reverse_compute_at",
                       f"under loop {lname!r} block {blk.name!r} would run only for "
                       f"{iv.var.name} in [{first}, {last}] of its domain "
                       f"[{iv.dom.min}, {dmax}]: the other iterations read nothing its "
                       "producers write there (e.g. a padding border) and would never "
                       "run. Keep the block where it is, or inline the padding", func)


def _check_complete_producers(func, blk, producers, outer, lname):
    # a consumer placed under a loop that drives a producer's reduction would read
    # partial results
    for p, b in producers:
        for iv, val in zip(b.block.iter_vars, b.iter_values):
            if iv.kind == "reduce" and any(v in outer for v in used_vars(val)):
                raise fail(BlockLocationError, "reverse_compute_at",
                    f"loop {lname!r} (or a loop above it) drives the "
                    f"reduction of producer {b.block.name!r}; block {blk.name!r} would "
                    "read partial results. Pass a loop outside the reduction loops")


@primitive("compute_at", block=BLOCK, loop=LOOP, preserve_unit_loops=BOOL, index=INT)
def compute_at(func, block, loop, preserve_unit_loops: bool = False, index: int = -1):
    """Move producer ``block`` under ``loop`` of its consumers' nest; it then computes,
    in each iteration of ``loop``, exactly the region the consumers there read.

    Legal when: ``block`` is a complete or reduction block writing one (non-parameter)
    buffer; ``loop`` is in the same scope, is not one of the block's own loops, and
    encloses every consumer; producers of what the block reads run before it.
    ``index``: where in ``loop``'s body, see :mod:`schedules.primitives.insertion`.

    Before/after ``compute_at(B, i)``::

        for i in T.serial(8): B[i] = ...      for i in T.serial(8):
        for i in T.serial(8): C[i] = B[i]         B[i] = ...
                                                  C[i] = B[i]

    Example::

        >>> import cuvil_tir as T
        >>> from schedules.handles import BlockRV, LoopRV
        >>> A = T.placeholder((4, 4), name="A")
        >>> B = T.compute((4, 4), lambda i, j: A[i, j] + 1.0, name="B")
        >>> f = T.create_prim_func([A, T.compute((4, 4), lambda i, j: B[i, j], name="C")])
        >>> i = tree.loops_above(f, tree.find_block(f, "C"))[0][1].loop_var
        >>> g, _ = compute_at(f, BlockRV("B"), LoopRV(i))
        >>> tree.get(g, tree.find_block(g, "B")).iter_values[0] is i
        True
    """
    return _move(func, block, loop, False, preserve_unit_loops, index)


@primitive("reverse_compute_at", block=BLOCK, loop=LOOP,
           preserve_unit_loops=BOOL, index=INT)
def reverse_compute_at(func, block, loop, preserve_unit_loops: bool = False,
                       index: int = -1):
    """Move consumer ``block`` under ``loop`` of its producers' nest, right after them;
    it then consumes, in each iteration of ``loop``, the region they wrote there.

    Legal when: ``block`` is a complete or reduction block writing one buffer;
    ``loop`` is in the same scope, not one of the block's own loops, encloses every
    producer, and does not drive a producer's reduction.
    ``index``: where in ``loop``'s body, see :mod:`schedules.primitives.insertion`.

    Before/after ``reverse_compute_at(C, i)``: the same picture as compute_at, the
    consumer moving up into the producer's loop.

    Example::

        >>> import cuvil_tir as T
        >>> from schedules.handles import BlockRV, LoopRV
        >>> A = T.placeholder((4, 4), name="A")
        >>> B = T.compute((4, 4), lambda i, j: A[i, j] + 1.0, name="B")
        >>> f = T.create_prim_func([A, T.compute((4, 4), lambda i, j: B[i, j], name="C")])
        >>> i = tree.loops_above(f, tree.find_block(f, "B"))[0][1].loop_var
        >>> g, _ = reverse_compute_at(f, BlockRV("C"), LoopRV(i))
        >>> [l.loop_var.name for _, l in tree.loops_above(g, tree.find_block(g, "C"))]
        ['i', 'ax0']
    """
    return _move(func, block, loop, True, preserve_unit_loops, index)
