"""The legality checks of ``rfactor`` (TensorIR's conditions, and Cuvil's stricter ones).

Each raises a coded ``ScheduleError`` naming the reason; ``rfactor`` calls them before
building anything.

Example::

    >>> from cuvil_tir.te.examples import matmul
    >>> from cuvil_tir.analysis import tree
    >>> f = matmul(4, 4, 4)
    >>> path = tree.find_block(f, "C")
    >>> loops = [l for _, l in tree.loops_above(f, path)]
    >>> check_rfactor_block(f, tree.get(f, path), loops, loops[-1])
"""

from __future__ import annotations

from cuvil_tir.expr import IntImm, GE, GT, LE, LT
from cuvil_tir.stmt import For, Range
from cuvil_tir.analysis import tree
from cuvil_tir.visitor import substitute, used_vars
from cuvil_tir import arith
from cuvil_tir.op import conjuncts

from ..errors import LoopNestError, NotReductionError, ReductionLoopError, schedule_error
from ..analysis import quasi_affine


def check_rfactor_block(func, realize, loops, rf_loop) -> None:
    """TensorIR's conditions on the block rfactor factors: quasi-affine reduction
    bindings, a write that no reduction variable indexes (the block *dominates* its
    output element), serial reduction loops, and no loop driving both a spatial and a
    reduction iter var (its iterations would be split between the two blocks)."""
    blk = realize.block

    def refuse(cls, why, node=None):
        return schedule_error(cls, "rfactor", f"block {blk.name!r} {why}", func,
                              node if node is not None else blk)

    odd = next((iv for iv in blk.iter_vars if iv.kind not in ("spatial", "reduce")), None)
    if odd is not None:
        raise refuse(NotReductionError, f"has the {odd.kind} iterator {odd.var.name}: "
                     "rfactor needs a block of spatial and reduction iterators only")
    reduce_vars = {id(iv.var) for iv in blk.iter_vars if iv.kind == "reduce"}
    loop_ids = {id(l.loop_var): l for l in loops}
    kinds_of = {}
    for iv, val in zip(blk.iter_vars, realize.iter_values):
        if iv.kind == "reduce" and not quasi_affine(val):
            raise refuse(NotReductionError, f"binds the reduction variable {iv.var.name} "
                         f"to {val}, which is not quasi-affine in its loops (only "
                         "+, -, * by a constant, // and % by a constant); rfactor cannot "
                         "tell which partial result each iteration feeds")
        for u in used_vars(val):
            if id(u) in loop_ids:
                kinds_of.setdefault(id(u), set()).add(iv.kind)
    st = blk.body
    for k, idx in enumerate(st.indices):
        hit = [v.name for v in used_vars(idx) if id(v) in reduce_vars]
        if hit:
            raise refuse(NotReductionError, f"writes {st.buffer.name}"
                         f"[{', '.join(map(str, st.indices))}], indexed by the reduction "
                         f"variable {hit[0]}: each reduction step writes another element, "
                         "so the block does not reduce into one element (not dominant)")
    for lid, kinds in kinds_of.items():
        loop = loop_ids[lid]
        if "reduce" in kinds and loop.kind not in ("serial", "unrolled"):
            raise refuse(ReductionLoopError, f"has the reduction loop "
                         f"{loop.loop_var.name} marked {loop.kind!r}: rfactor needs the "
                         "reduction loops serial (rfactor first, then parallelize the "
                         "rfactor loop)", loop)
        if {"spatial", "reduce"} <= kinds:
            raise refuse(LoopNestError, f"has the loop {loop.loop_var.name} driving both "
                         "a spatial and a reduction iter var (it was fused from both "
                         "kinds): the partial results of one output element would be "
                         "spread over it. Split or reorder before fusing", loop)


def check_reduction_in_scope(func, bpath, realize) -> None:
    """The block's reduction runs whole inside its enclosing block: no reduce iterator
    is bound to a loop outside it (a loop_partition part, or a blockized tile, of a
    split reduction).  Such a loop runs the enclosing block once per iteration, so the
    partial-result buffer rfactor allocates there would restart, and the write-back's
    init would reset the output, on every one of them (fuzz case 181629056)."""
    blk = realize.block
    scope_path = tree.enclosing_block(func, bpath)
    if not scope_path:
        return
    reduce_ids = {id(u) for iv, val in zip(blk.iter_vars, realize.iter_values)
                  if iv.kind == "reduce" for u in used_vars(val)}
    outside = [f.loop_var.name for _, f in tree.ancestors(func, scope_path)
               if isinstance(f, For) and id(f.loop_var) in reduce_ids]
    if outside:
        scope = tree.get(func, scope_path).block.name
        raise schedule_error(
            ReductionLoopError, "rfactor",
            f"block {blk.name!r} reduces over the loops {outside} outside its enclosing "
            f"block {scope!r}: the partial results would restart on each of their "
            "iterations; apply rfactor before loop_partition (or blockize) splits the "
            "reduction", func, blk)


def check_slots_visited(func, realize, rf_loop, loops):
    """Every slot of the rfactor loop must be written (and so initialised) by some
    iteration: a predicate on the rfactor loop (the guard of a non-dividing split)
    may leave whole slots unvisited, which the write-back would then sum.

    Proved with a witness: the other reduction loops at their minimum must satisfy
    each guard involving the reduction loops, for every value of the rfactor loop
    (and of the spatial loops it mentions)."""
    v = rf_loop.loop_var
    reduce_ids = set()
    for iv, val in zip(realize.block.iter_vars, realize.iter_values):
        if iv.kind == "reduce":
            reduce_ids |= _var_ids(val)
    witness = {l.loop_var: l.min for l in loops
               if id(l.loop_var) in reduce_ids and l is not rf_loop}
    doms = {l.loop_var: Range(l.min, l.extent) for l in loops if l.loop_var not in witness}
    for c in conjuncts(realize.predicate):
        if not (_var_ids(c) & reduce_ids):
            continue
        guard, c = c, substitute(c, witness)
        gap = None
        if isinstance(c, (LT, LE)):
            gap = c.b - c.a - (1 if isinstance(c, LT) else 0)
        elif isinstance(c, (GT, GE)):
            gap = c.a - c.b - (1 if isinstance(c, GT) else 0)
        lo = arith.bound_of(gap, doms)[0] if gap is not None else None
        lo = arith.simplify(lo) if lo is not None else None
        if not (isinstance(lo, IntImm) and lo.value >= 0):
            raise schedule_error(ReductionLoopError, "rfactor",
                                 f"the guard {guard} of block {realize.block.name!r} leaves "
                                 f"some slots of loop {v.name!r} without any iteration: "
                                 "they would never be initialised and the write-back "
                                 "would sum them. Split with factors that divide the "
                                 "extent, or rfactor the inner loop of the split", func,
                                 rf_loop)


def _var_ids(e) -> set:
    return {id(v) for v in used_vars(e)}


def check_init_starts(func, realize, loops, rf_loop):
    """The block's init must run where its loops start: each reduce iter var, with the
    loops at their minimum, at the start of its domain.  A block that continues a
    reduction started elsewhere (a ``loop_partition`` part after the first) never runs
    its init, but the write-back rfactor builds would run it at the start of its own
    loop, dropping what the earlier part reduced.

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> f = matmul(4, 4, 4)
        >>> path = tree.find_block(f, "C")
        >>> loops = [l for _, l in tree.loops_above(f, path)]
        >>> check_init_starts(f, tree.get(f, path), loops, loops[-1])
    """
    start = {l.loop_var: l.min for l in loops}
    for iv, val in zip(realize.block.iter_vars, realize.iter_values):
        if iv.kind != "reduce" or realize.block.init is None:
            continue
        first = arith.simplify(substitute(val, start))
        at = arith.simplify(first - iv.dom.min)
        if not (isinstance(at, IntImm) and at.value == 0):
            raise schedule_error(ReductionLoopError, "rfactor",
                                 f"block {realize.block.name!r} starts its reduce iter var "
                                 f"{iv.var.name!r} at {first}, expected "
                                 f"the start of its domain {iv.dom.min}: the block "
                                 "continues a reduction another block began (a "
                                 "loop_partition part after the first), and the "
                                 "write-back would re-initialise its output. rfactor "
                                 "before loop_partition, or the first part", func, rf_loop)
