"""Reduction primitives: ``decompose_reduction`` and ``rfactor`` (TVM TensorIR semantics).

A reduction block carries an ``init`` (the identity store) and a body
``C[idx] = C[idx] <op> rhs``.  ``decompose_reduction`` moves the init into a block of
its own, placed before a chosen loop; ``rfactor`` turns one reduction loop into a
spatial dimension of a new buffer ``C_rf`` of partial results, then reduces ``C_rf``.

Example::

    >>> import cuvil_tir as T
    >>> from schedules.handles import BlockRV, LoopRV
    >>> from cuvil_tir.te.examples import matmul
    >>> f = matmul(4, 4, 4)
    >>> k = tree.get(f, tree.find_block(f, "C")[:-1])      # the k loop
    >>> g, init = decompose_reduction(f, BlockRV("C"), LoopRV(k.loop_var))
    >>> init.name, tree.get(g, tree.find_block(g, "C_update")).block.init is None
    ('C_init', True)
"""

from __future__ import annotations

from cuvil_tir.buffer import Buffer
from cuvil_tir.arith import Analyzer
from cuvil_tir.expr import GE, IntImm, Var, const
from cuvil_tir.op import all as all_of, conjuncts
from cuvil_tir.stmt import (Block, BlockRealize, BufferRegion, BufferStore, For, IterVar,
                            LetStmt, Range, SeqStmt)
from cuvil_tir.visitor import substitute, used_vars

from cuvil_tir.analysis import tree
from cuvil_tir.analysis.init_placement import init_blocker, init_nest
from cuvil_tir.analysis.reducer import NotAReduction, combine, match_reducer
from ..errors import (NotReductionError, LoopNestError, ReductionLoopError, ScheduleArgumentError,
                      StagePipelineError, schedule_error)
from ..analysis import (block_path as resolve_block, fresh_block_name, fresh_name,
                        loop_path as resolve_loop)
from ..handles import BlockRV
from ..primitive import BLOCK, INT, LOOP, Renamed, primitive
from .rfactor_checks import (_var_ids, check_reduction_in_scope, check_rfactor_block,
                             check_init_starts, check_slots_visited)
from .insertion import insert_after, insert_before
from .rfactor_nest import check_hoistable, place_shared
from ..block_flags import pipeline_blocker


# -- helpers shared with blockize / tensorize ---------------------------------------------

def make_init_nest(realize: BlockRealize, loops: list, name: str, suffix: str = "_init",
                   prim: str = "decompose_reduction", func=None):
    """The init of ``realize``'s block as a block ``name`` under regenerated loops
    (:func:`cuvil_tir.analysis.init_placement.init_nest`).  Raises
    ``ReductionLoopError`` (for ``prim``) when ``loops`` may reach one instance of the
    block twice, or when a predicate part can be neither kept nor dropped.

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> f = matmul(4, 4, 4)
        >>> path = tree.find_block(f, "C")
        >>> loops = [l for _, l in tree.loops_above(f, path)]
        >>> nest = make_init_nest(tree.get(f, path), loops, "C_init")
        >>> nest.loop_var.name, nest.body.loop_var.name
        ('i_init', 'j_init')
    """
    why = init_blocker(realize, loops)
    if why is not None:
        names = [l.loop_var.name for l in loops]
        raise schedule_error(ReductionLoopError, prim,
                             f"cannot run the init of block {realize.block.name!r} once "
                             f"ahead of the loops {names}: {why}; "
                             + ("decompose at a loop nearer the block, or keep the init in "
                                "it" if prim == "decompose_reduction" else
                                "pick a loop nearer the block"), func, realize.block)
    return init_nest(realize, loops, name, suffix)


def with_write_reads(blk: Block) -> tuple:
    """``blk.reads`` with its written regions prepended (a read-modify-write block).

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> f = matmul(4, 4, 4)
        >>> [r.buffer.name for r in with_write_reads(tree.get(f, tree.find_block(f, "C")).block)]
        ['C', 'A', 'B']
    """
    have = {id(r.buffer) for r in blk.reads}
    return tuple(w for w in blk.writes if id(w.buffer) not in have) + blk.reads


# -- reducers -------------------------------------------------------------------------

def reducer_of(blk: Block, prim: str, func=None):
    """``(combiner, rhs)`` of a reduction block ``C[idx] = C[idx] <op> rhs``
    (:func:`cuvil_tir.analysis.reducer.match_reducer`); ``NotReductionError`` of ``prim``
    naming what is missing.

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> f = matmul(4, 4, 4)
        >>> reducer_of(tree.get(f, tree.find_block(f, "C")).block, "rfactor")[0]
        'sum'
    """
    try:
        return match_reducer(blk)
    except NotAReduction as why:
        raise schedule_error(NotReductionError, prim, f"block {blk.name!r} {why}", func,
                             blk) from None


# -- decompose_reduction --------------------------------------------------------------

@primitive("decompose_reduction", block=BLOCK, loop=LOOP, returns=BLOCK)
def decompose_reduction(func, block, loop):
    """Move the ``init`` of reduction ``block`` into its own block placed before
    ``loop``; returns the init block.  As in TensorIR the init block is named
    ``C_init`` and the update ``C_update``; a handle or name of ``C`` from before
    still finds the update (the schedule follows the rename).

    Before/after ``decompose_reduction(C, k)``::

        for k in T.serial(8):             C_init: C[i] = 0.0
            with T.block("C"):            for k in T.serial(8):
                with T.init(): C[i] = 0.0     with T.block("C_update"):
                C[i] = C[i] + A[i, k]             C[i] = C[i] + A[i, k]

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> from schedules.handles import LoopRV
        >>> f = matmul(4, 4, 4)
        >>> i = f.body.block.body.loop_var
        >>> g, rv = decompose_reduction(f, BlockRV("C"), LoopRV(i))
        >>> type(g.body.block.body).__name__, rv.name
        ('SeqStmt', 'C_init')
    """
    prim = "decompose_reduction"
    bpath = resolve_block(func, block, prim)
    lpath = resolve_loop(func, loop, prim)
    realize = tree.get(func, bpath)
    blk = realize.block
    if blk.init is None:
        raise schedule_error(NotReductionError, prim,
                             f"block {blk.name!r} is not a reduction block (it has no "
                             "init); nothing to decompose", func, blk)
    above = tree.loops_above(func, bpath)
    paths = [p for p, _ in above]
    if lpath not in paths:
        names = [l.loop_var.name for _, l in above]
        raise schedule_error(LoopNestError, prim,
                             f"loop {loop.var.name!r} is not above block {blk.name!r} "
                             f"(within its enclosing block); use one of its loops {names}",
                             func, tree.get(func, lpath))
    at = paths.index(lpath)
    reduce_ids = set()
    for iv, val in zip(blk.iter_vars, realize.iter_values):
        if iv.kind == "reduce":
            reduce_ids |= _var_ids(val)
    for _, l in above[:at]:
        if id(l.loop_var) in reduce_ids:
            raise schedule_error(ReductionLoopError, prim,
                                 f"loop {loop.var.name!r} is under the reduction loop "
                                 f"{l.loop_var.name!r} of block {blk.name!r}, so the init "
                                 "would rerun inside the reduction; pick a loop above it "
                                 "(or reorder the reduction loops inward first)", func, l)
    _refuse_init_inside_outer_reduction(func, bpath, realize, reduce_ids, above, prim)
    name = fresh_block_name(func, blk.name + "_init")
    nest = make_init_nest(realize, [l for _, l in above[at:]], name, func=func)
    # TensorIR's names: the init block <name>_init, the update <name>_update
    renamed = fresh_name(blk.name + "_update",
                         {b.block.name for b in tree.blocks_under(func.body)} | {name})
    update = Block(renamed, blk.iter_vars, with_write_reads(blk), blk.writes, blk.body,
                   None, blk.alloc_buffers, blk.annotations)
    g = tree.replace(func, bpath, BlockRealize(realize.iter_values, realize.predicate,
                                               update))
    return insert_before(g, lpath, nest), Renamed(BlockRV(name), {blk.name: renamed})


def _refuse_init_inside_outer_reduction(func, bpath, realize, reduce_ids, above, prim):
    """Refuse (``ReductionLoopError``) a block whose reduction is driven from outside
    the block that holds it (a loop, or that block's iter var: a ``loop_partition``
    part, a blockized tile) when the reduction may run no iteration.  The hoisted init
    then sits inside that loop and runs only where the reduction starts, so over an
    empty range it never runs, and the output, which must hold the reduction's
    identity, is left unwritten (the block's own ``T.init`` is written by
    :func:`cuvil_tir.transform.empty_reductions.write_empty_reductions`)."""
    ana = Analyzer()
    extents = [iv.dom.extent for iv in realize.block.iter_vars if iv.kind == "reduce"
               and not ana.can_prove(GE(iv.dom.extent, const(1, iv.dom.extent.dtype)))]
    if not extents:
        return
    inside = {id(l.loop_var) for _, l in above}
    for _, s in reversed(tree.ancestors(func, bpath)):
        drives = [s.loop_var] if isinstance(s, For) else \
            [iv.var for iv in s.block.iter_vars] if isinstance(s, BlockRealize) else []
        hit = [v for v in drives if id(v) in reduce_ids and id(v) not in inside]
        if hit:
            encl = tree.get(func, tree.enclosing_block(func, bpath)).block.name
            raise schedule_error(ReductionLoopError, prim,
                                 f"the reduction of block {realize.block.name!r} is driven "
                                 f"by {hit[0].name!r}, outside its enclosing block "
                                 f"{encl!r}, and may run no iteration ({extents[0]} may be "
                                 "0): the init would run inside it, only where the "
                                 "reduction starts, and an empty reduction would leave "
                                 "the output unwritten; decompose_reduction before the "
                                 "step that nested the block (loop_partition, blockize), "
                                 "or keep the init in it", func, realize.block)


# -- rfactor ----------------------------------------------------------------------------

@primitive("rfactor", loop=LOOP, factor_axis=INT, returns=BLOCK)
def rfactor(func, loop, factor_axis: int = 0):
    """Factor the reduction over ``loop`` into a new buffer of partial results
    (dimension ``factor_axis``); returns the rfactor block.

    Before/after ``rfactor(ki, 0)`` with ``k = ko * 4 + ki``::

        C[i] += A[i, ko*4 + ki]           C_rf[ki, i] += A[i, ko*4 + ki]
                                          C[i] += C_rf[ki, i]

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> from schedules.handles import LoopRV
        >>> f = matmul(4, 4, 4)
        >>> k = tree.get(f, tree.find_block(f, "C")[:-1]).loop_var
        >>> g, rv = rfactor(f, LoopRV(k), 0)
        >>> rv.name, [b.name for b in g.body.block.alloc_buffers]
        ('C_rf', ['C_rf'])
    """
    prim = "rfactor"
    lpath = resolve_loop(func, loop, prim)
    rf_loop = tree.get(func, lpath)
    under = tree.blocks_under(rf_loop)
    if len(under) != 1:
        raise schedule_error(LoopNestError, prim,
                             f"loop {loop.var.name!r} holds {len(under)} blocks "
                             f"{[b.block.name for b in under]}; rfactor needs a loop over "
                             "exactly one reduction block", func, rf_loop)
    bpath = tree.find_block(func, under[0].block.name)
    _check_stage_pipeline(func, bpath, prim)
    realize = tree.get(func, bpath)
    blk = _without_lets(realize.block, func)
    realize = BlockRealize(realize.iter_values, realize.predicate, blk)
    combiner, rhs = reducer_of(blk, prim, func)
    v = rf_loop.loop_var
    used_by_reduce = False
    for iv, val in zip(blk.iter_vars, realize.iter_values):
        if any(u is v for u in used_vars(val)):
            if iv.kind != "reduce":
                raise schedule_error(ReductionLoopError, prim,
                                     f"loop {v.name!r} is bound to the spatial iter var "
                                     f"{iv.var.name!r} of block {blk.name!r}; rfactor "
                                     "needs a loop that only drives reduction iter vars",
                                     func, rf_loop)
            used_by_reduce = True
    # a unit loop no binding uses (left by a fuse or split of the reduction loops)
    # factors into one slot: the rfactor block reduces everything into it
    unit = isinstance(rf_loop.extent, IntImm) and rf_loop.extent.value == 1
    if not used_by_reduce and not unit:
        raise schedule_error(ReductionLoopError, prim,
                             f"loop {v.name!r} is not a reduction loop of block "
                             f"{blk.name!r} (no reduce iter var uses it, and its extent "
                             "is not 1); pass one of the loops its reduce iter vars are "
                             "bound to", func, rf_loop)
    check_reduction_in_scope(func, bpath, realize)
    above = tree.loops_above(func, bpath)
    check_rfactor_block(func, realize, [l for _, l in above], rf_loop)
    top_path, top = above[0]
    shared = len(tree.blocks_under(top)) != 1
    if shared:
        check_hoistable(func, realize, top)
    check_slots_visited(func, realize, rf_loop, [l for _, l in above])
    check_init_starts(func, realize, [l for _, l in above], rf_loop)
    buf = blk.body.buffer
    nd = len(buf.shape)
    if not isinstance(factor_axis, int) or not -(nd + 1) <= factor_axis <= nd:
        raise schedule_error(ScheduleArgumentError, prim,
                             f"factor_axis must be an int in [{-(nd + 1)}, {nd}] for "
                             f"buffer {buf.name!r} of rank {nd}, found {factor_axis!r}")
    fa = factor_axis + nd + 1 if factor_axis < 0 else factor_axis
    loops = [l for _, l in above]
    rf_buf = Buffer(buf.shape[:fa] + (rf_loop.extent,) + buf.shape[fa:], buf.dtype,
                    buf.name + "_rf", (), buf.scope, buf.align)

    def rf_index(idx, rv):
        pos = rv if _is_zero(rf_loop.min) else rv - rf_loop.min
        return tuple(idx[:fa]) + (pos,) + tuple(idx[fa:])

    # the rfactor block: rf loop as a new spatial iter var, the rest kept
    rf_iv = IterVar(Var("v" + v.name, v.dtype), Range(rf_loop.min, rf_loop.extent),
                    "spatial")
    loop_bvar = {v: rf_iv.var}
    ivs, vals, vmap = [rf_iv], [v], {}
    for iv, val in zip(blk.iter_vars, realize.iter_values):
        if iv.kind != "reduce" or not any(u is v for u in used_vars(val)):
            nv = Var(iv.var.name, iv.var.dtype)
            ivs.append(IterVar(nv, iv.dom, iv.kind))
            vals.append(val)
            vmap[iv.var] = nv
            continue
        for u in used_vars(val):
            l = next((l for l in loops if l.loop_var is u), None)
            if l is not None and u not in loop_bvar:
                nv = Var("v" + u.name, u.dtype)
                loop_bvar[u] = nv
                ivs.append(IterVar(nv, Range(l.min, l.extent), "reduce"))
                vals.append(u)
        vmap[iv.var] = substitute(val, loop_bvar)
    st = blk.body
    idx = tuple(substitute(i, vmap) for i in st.indices)
    ridx = rf_index(idx, rf_iv.var)
    rf_name = fresh_block_name(func, blk.name + "_rf")
    part = substitute(rhs, vmap)
    # each slot reduces one value when no reduction variable is left: the slot is that
    # value (identity <op> x is x), a spatial block without init, as in TensorIR
    single = not any(iv.kind == "reduce" for iv in ivs)
    rf_blk = Block(rf_name, tuple(ivs),
                   tuple(substitute(r, vmap) for r in blk.reads if r.buffer is not buf),
                   (BufferRegion(rf_buf, tuple(Range(i, const(1, i.dtype)) for i in ridx)),),
                   BufferStore(rf_buf, part if single else
                               combine(combiner, rf_buf[ridx], part), ridx),
                   None if single else BufferStore(rf_buf, blk.init.value, ridx),
                   blk.alloc_buffers, blk.annotations)
    rf_realize = BlockRealize(tuple(vals), realize.predicate, rf_blk)

    # the write-back block: reduce C_rf over the rf iter var, in fresh loops
    wb_rv = IterVar(Var("v" + v.name, v.dtype), Range(rf_loop.min, rf_loop.extent), "reduce")
    wivs, wvals, wmap = [wb_rv], [v], {}
    for iv, val in zip(blk.iter_vars, realize.iter_values):
        if iv.kind != "reduce":
            nv = Var(iv.var.name, iv.var.dtype)
            wivs.append(IterVar(nv, iv.dom, iv.kind))
            wvals.append(val)
            wmap[iv.var] = nv
    widx = tuple(substitute(i, wmap) for i in st.indices)
    wridx = rf_index(widx, wb_rv.var)
    needed = set()
    for val in wvals:
        needed |= _var_ids(val)
    # unit loops no binding uses stay too (as in TensorIR): they run once either way
    bound = set().union(*(_var_ids(x) for x in realize.iter_values))
    lmap = {l.loop_var: Var(l.loop_var.name, l.loop_var.dtype) for l in loops
            if id(l.loop_var) in needed or (id(l.loop_var) not in bound and
                                            _is_one(l.extent))}
    kept = [c for c in conjuncts(realize.predicate)
            if all(id(u) in needed or not any(u is l.loop_var for l in loops)
                   for u in used_vars(c))]
    wb_blk = Block(blk.name, tuple(wivs),
                   (BufferRegion(rf_buf, tuple(Range(i, const(1, i.dtype)) for i in wridx)),),
                   tuple(substitute(w, wmap) for w in blk.writes),
                   BufferStore(buf, combine(combiner, buf[widx], rf_buf[wridx]), widx),
                   substitute(blk.init, wmap), (), blk.annotations)
    if shared:
        g = place_shared(func, bpath, above, rf_realize,
                         BlockRealize(tuple(wvals), all_of(kept), wb_blk),
                         [l for l in loops if l.loop_var in lmap], rf_loop)
    else:
        wb = BlockRealize(tuple(substitute(x, lmap) for x in wvals),
                          all_of([substitute(c, lmap) for c in kept]), wb_blk)
        for l in reversed(loops):
            if l.loop_var in lmap:
                # the rf loop now carries the final reduction: it must run serially
                kind = "serial" if l is rf_loop else l.kind
                wb = For(lmap[l.loop_var], l.min, l.extent, kind, wb,
                         l.thread_tag if kind == "thread_binding" else None, l.annotations)
        g = tree.replace(func, bpath, rf_realize)
        g = insert_after(g, top_path, wb)
    scope_path = tree.enclosing_block(func, bpath)
    scope = tree.get(g, scope_path)
    sb = scope.block
    new_scope = Block(sb.name, sb.iter_vars, sb.reads, sb.writes, sb.body, sb.init,
                      sb.alloc_buffers + (rf_buf,), sb.annotations)
    g = tree.replace(g, scope_path, BlockRealize(scope.iter_values, scope.predicate,
                                                 new_scope))
    return g, BlockRV(rf_name)


def _check_stage_pipeline(func, bpath, prim):
    """TensorIR's rfactor needs the block's scope to be a stage pipeline: the rfactor
    block and the write-back are two stages, which a scope whose consumers are not
    covered by their producers (or that overwrites what it read) does not order."""
    scope = tree.enclosing_block(func, bpath)
    why = pipeline_blocker(func, scope)
    if why is not None:
        name = tree.get(func, scope).block.name
        raise schedule_error(StagePipelineError, prim, f"the scope {name!r} of block "
                             f"{tree.get(func, bpath).block.name!r} is not a stage "
                             f"pipeline: {why}; rfactor needs every read in the scope "
                             "covered by its producers and nothing overwritten after it "
                             "is read", func)


def _without_lets(blk: Block, func) -> Block:
    """The block with the ``LetStmt`` s around its store substituted into it (a let
    binds a pure value: ``v = C + A * B; C = v`` is ``C = C + A * B``).  A body that
    stores several buffers (a tuple reduction such as argmax) is refused."""
    body, lets = blk.body, {}
    while isinstance(body, LetStmt):
        lets[body.var] = substitute(body.value, lets)
        body = body.body
    if not lets:
        return blk
    if isinstance(body, SeqStmt) and all(isinstance(x, BufferStore) for x in body.seq):
        names = ", ".join(x.buffer.name for x in body.seq)
        raise schedule_error(NotReductionError, "rfactor", f"block {blk.name!r} reduces "
                             f"into {len(body.seq)} buffers ({names}) at once, a tuple "
                             "reduction such as argmax: rfactor factors one buffer. (An "
                             "argmax whose ties keep the accumulator is not commutative "
                             "either: factoring would change which index a tie returns)",
                             func, blk)
    if not isinstance(body, BufferStore):
        return blk
    return Block(blk.name, blk.iter_vars, blk.reads, blk.writes, substitute(body, lets),
                 blk.init, blk.alloc_buffers, blk.annotations)


def _is_one(e) -> bool:
    return isinstance(e, IntImm) and e.value == 1


def _is_zero(e) -> bool:
    return isinstance(e, IntImm) and e.value == 0


__all__ = ["decompose_reduction", "rfactor", "NotReductionError", "make_init_nest",
           "reducer_of", "combine", "resolve_block", "resolve_loop", "fresh_block_name",
           "insert_before", "insert_after", "with_write_reads"]
