"""``reindex``, ``reindex_cache_read``, ``reindex_cache_write``: stage one buffer access
of a block through a new buffer indexed by the block's iteration variables.

The block must access the buffer at one index tuple (all its loads and stores alike),
over its own iteration variables.  The *used* variables are those that tuple mentions,
in the block's order.  The new buffer is indexed by them:

- ``reindex`` uses them as they are (the buffer's shape is their extents);
- ``reindex_cache_*`` passes ``index_map``, a lambda over all of the block's
  iteration variables.  It must use only the used ones, one-to-one.

A copy block named like the new buffer is placed right before the block's loops (a read)
or right after them (a write).  It runs under copies of the block's own loops that bind
the used variables, with the same bindings (TensorIR's placement).  So it covers, in each
iteration of the shared outer loops, exactly what the block accesses there.

Before/after ``reindex(B, ("read", 0))``::

    for i, j in T.grid(4, 8):                 for i, j in T.grid(4, 8):
        with T.block("B"):                        with T.block("A_reindex"):
            B[vi, vj] = A[vj, vi] * 2.0               A_reindex[vi, vj] = A[vj, vi]
                                              for i, j in T.grid(4, 8):
                                                  with T.block("B"):
                                                      B[vi, vj] = A_reindex[vi, vj] * 2.0

Example::

    >>> import cuvil_tir as T
    >>> from schedules.handles import BlockRV
    >>> A = T.placeholder((8, 4), name="A")
    >>> f = T.create_prim_func([A, T.compute((4, 8), lambda i, j: A[j, i] * 2.0, name="B")])
    >>> g, rv = reindex(f, BlockRV("B"), ("read", 0))
    >>> rv, [(b.name, [int(s) for s in b.shape]) for b in g.body.block.alloc_buffers]
    (BlockRV('A_reindex'), [('A_reindex', [4, 8])])
"""

from __future__ import annotations

from cuvil_tir.arith import Analyzer
from cuvil_tir.buffer import Buffer
from cuvil_tir.block_regions import block_accesses
from cuvil_tir.expr import BufferLoad, IntImm, Var, const
from cuvil_tir.stmt import (Block, BlockRealize, BufferRegion, BufferStore, For,
                            IfThenElse, IterVar, Range)
from cuvil_tir.visitor import Mutator, post_order_visit, substitute, used_vars

from cuvil_tir.analysis import tree
from cuvil_tir.analysis.init_placement import start_guard
from cuvil_tir.analysis.regions import bounds, provably_le, region_of, simplify, tree_same
from ..analysis import block_path, fresh_name
from ..errors import CacheStageError, ScheduleArgumentError, ScheduleError, schedule_error
from ..handles import BlockRV
from ..primitive import BLOCK, INDEX, INDEX_MAP, SCOPE, primitive
from .block_layout import _nest
from .cache import _names
from .nests import with_fields
from .layout import apply_index_map, map_image
from cuvil_tir.op import all as all_of, conjuncts
from .insertion import insert_after, insert_before


def _accesses(blk, buf) -> list:
    found = []

    def visit(n):
        if isinstance(n, (BufferLoad, BufferStore)) and n.buffer is buf:
            found.append(n.indices)
    post_order_visit(blk.body, visit)
    if blk.init is not None:
        post_order_visit(blk.init, visit)
    return found


def _one_access(func, blk, buf, prim):
    """The one index tuple at which ``blk`` accesses ``buf``, over its own vars."""
    found = _accesses(blk, buf)
    if not found:
        raise schedule_error(CacheStageError, prim, f"block {blk.name!r} does not load or "
                             f"store {buf.name!r} in its body", func, blk)
    if any(not tree_same(ix, found[0]) for ix in found[1:]):
        shown = sorted({f"{buf.name}[{', '.join(map(str, ix))}]" for ix in found})
        raise schedule_error(CacheStageError, prim, f"block {blk.name!r} accesses "
                             f"{buf.name!r} at different indices {shown}; {prim} needs one "
                             "index tuple (use cache_read / cache_write)", func, blk)
    own = {id(iv.var) for iv in blk.iter_vars}
    stray = sorted({v.name for ix in found[0] for v in used_vars(ix) if id(v) not in own})
    if stray:
        raise schedule_error(CacheStageError, prim, f"block {blk.name!r} accesses "
                             f"{buf.name}[{', '.join(map(str, found[0]))}], which uses "
                             f"{stray}, not its own iteration variables (a block holding "
                             "blocks?); apply it to the inner block", func, blk)
    return found[0]


def _in_domain(blk, indices) -> tuple:
    """``indices`` simplified with each iter var in its domain: ``co // 64 * 3 + rc``
    with ``co < 64`` is ``rc``, so the new buffer does not get a dimension for ``co``."""
    ana = Analyzer(index_no_overflow=True)
    for iv in blk.iter_vars:
        ana.bind(iv.var, iv.dom)
    return tuple(ana.simplify(x) for x in indices)


def _check_everywhere(func, blk, buf, indices, is_read, prim):
    """The copy block touches ``buf`` at ``indices`` for every point of the block's
    domain, while the block itself may touch it only where a condition holds (a padding
    block's guarded load, a store under ``if``).  Refuse what the copy would get wrong:
    a read index outside the buffer somewhere in the domain (an out-of-bounds load), a
    conditional store (the copy-back would write elements the block leaves alone)."""
    shown = f"{buf.name}[{', '.join(map(str, indices))}]"
    if not is_read:
        guarded = []
        post_order_visit(blk.body, lambda n: guarded.append(n) if isinstance(
            n, IfThenElse) and _found(n, buf, BufferStore) else None)
        if guarded:
            raise schedule_error(CacheStageError, prim, f"block {blk.name!r} stores "
                                 f"{shown} only where {guarded[0].condition} holds; the "
                                 "copy-back would write every element of its domain, "
                                 "overwriting the others. Write the block without the "
                                 "condition (T.if_then_else on the value) first", func, blk)
        return
    _refuse_cut_writer(func, blk, buf, shown, prim)
    doms = {iv.var: iv.dom for iv in blk.iter_vars}
    for axis, (x, extent) in enumerate(zip(indices, buf.shape)):
        try:
            lo, hi = bounds(x, doms)
            inside = provably_le(const(0, lo.dtype), lo) and provably_le(hi + 1, extent)
        except ScheduleError:   # an index the bounds analysis cannot bound
            inside = False
        if not inside:
            raise schedule_error(CacheStageError, prim, f"block {blk.name!r} reads {shown}, "
                                 f"whose index {x} (axis {axis}) is not within [0, "
                                 f"{extent}) over the block's domain (the block loads it "
                                 "only where a condition holds); the copy would load "
                                 f"{buf.name!r} out of bounds. Pad {buf.name!r} first "
                                 "(transform_layout with pad_value) or use cache_read, "
                                 "which copies only the region read", func, blk)


def _refuse_cut_writer(func, blk, buf, shown, prim):
    """A guarded read of a buffer whose writer runs under a ``T.where`` (a cache_read
    copy clipped to its buffer) may name elements no store wrote where the guard
    fails; the unguarded copy would read them (fuzz case 3820702966: an uninitialised
    read, and an out-of-bounds one once the writer was inlined into the copy)."""
    if not any(a.buffer is buf and a.guarded and not a.write for a in block_accesses(blk)):
        return
    for _, br in tree.walk(func):
        if isinstance(br, BlockRealize) and br.block is not blk and \
                region_of(br.block.writes, buf) is not None and \
                not (isinstance(br.predicate, IntImm) and br.predicate.value != 0):
            raise schedule_error(CacheStageError, prim, f"block {blk.name!r} reads {shown} "
                                 "only where a condition holds, and its writer "
                                 f"{br.block.name!r} stores it only where {br.predicate} "
                                 "holds; the copy would read every element of the "
                                 "block's domain, also ones never written. Reindex before "
                                 f"the step that gave {br.block.name!r} its T.where "
                                 "(cache_read, split), or leave the read as it is",
                                 func, blk)


class _Redirect(Mutator):
    """Every access of ``old`` (at the one index tuple) goes to ``new[indices]``."""

    def __init__(self, old, new, indices):
        self.old, self.new, self.indices = old, new, tuple(indices)

    def visit_BufferLoad(self, ld):
        ld = self.generic_visit(ld)
        return BufferLoad(self.new, self.indices) if ld.buffer is self.old else ld

    def visit_BufferStore(self, st):
        st = self.generic_visit(st)
        if st.buffer is not self.old:
            return st
        return BufferStore(self.new, st.value, self.indices)

    def region(self, r):
        if r.buffer is not self.old:
            return r
        return BufferRegion(self.new, tuple(Range(x, const(1, x.dtype)) for x in self.indices))


def _point(buf, indices):
    return BufferRegion(buf, tuple(Range(x, const(1, x.dtype)) for x in indices))


def _stage_nest(func, realize, loops, used, cache_at, indices, buf, cache, name, is_read,
                prim):
    """The copy block over the ``used`` iter vars, under copies of the nest ``loops``
    their bindings use; ``cache_at`` gives the cache indices over the block's vars."""
    blk = realize.block
    ivs = [blk.iter_vars[k] for k in used]
    vals = [realize.iter_values[k] for k in used]
    needed = {id(v) for x in vals for v in used_vars(x)}
    kept = [lp for lp in loops if id(lp.loop_var) in needed]
    copies = {lp.loop_var: Var(lp.loop_var.name, lp.loop_var.dtype) for lp in kept}
    dropped = {id(lp.loop_var) for lp in loops if lp.loop_var not in copies}
    conds = []
    for c in conjuncts(realize.predicate):
        if any(id(v) in dropped for v in used_vars(c)):
            raise schedule_error(CacheStageError, prim, f"block {blk.name!r} runs under "
                                 f"T.where({realize.predicate}), which uses a loop the copy "
                                 f"of {buf.name!r} does not need; the copy could not keep "
                                 "the condition", func, blk)
        conds.append(substitute(c, copies))
    new_vars = {iv.var: Var(iv.var.name, iv.var.dtype) for iv in ivs}
    at_buf = tuple(substitute(x, new_vars) for x in indices)
    at_cache = tuple(substitute(x, new_vars) for x in cache_at)
    if is_read:
        body = BufferStore(cache, BufferLoad(buf, at_buf), at_cache)
        reads, writes = (_point(buf, at_buf),), (_point(cache, at_cache),)
    else:
        body = BufferStore(buf, BufferLoad(cache, at_cache), at_buf)
        reads, writes = (_point(cache, at_cache),), (_point(buf, at_buf),)
    stage = Block(name, tuple(IterVar(new_vars[iv.var], iv.dom, "spatial") for iv in ivs),
                  reads, writes, body)
    stmt = BlockRealize(tuple(substitute(v, copies) for v in vals), all_of(conds), stage)
    for lp in reversed(kept):
        stmt = For(copies[lp.loop_var], lp.min, lp.extent, lp.kind, stmt, lp.thread_tag)
    return stmt


def _reindex(func, block, buf_of, scope_of, cache_map, name_of, is_read, prim):
    bpath = block_path(func, block, prim)
    realize = tree.get(func, bpath)
    blk = realize.block
    buf = buf_of(blk)
    inner = [b.block.name for b in tree.blocks_under(blk.body)
             if any(r.buffer is buf for r in b.block.reads + b.block.writes)]
    if inner:
        # the accesses to redirect sit in blocks of their own, with regions over their
        # own iterators: staging them is the inner block's reindex
        raise schedule_error(CacheStageError, prim, f"block {blk.name!r} accesses "
                             f"{buf.name!r} through the blocks {inner} inside it; "
                             "reindex the innermost block that accesses it (before "
                             "blockize)", func, blk)
    indices = _in_domain(blk, _one_access(func, blk, buf, prim))
    _check_everywhere(func, blk, buf, indices, is_read, prim)
    writes_it = any(w.buffer is buf for w in blk.writes)
    if is_read and writes_it:
        raise schedule_error(CacheStageError, prim, f"block {blk.name!r} also writes "
                             f"{buf.name!r}; stage its write instead", func, blk)
    if not is_read and blk.init is None and (
            any(r.buffer is buf for r in blk.reads) or _found(blk.body, buf, BufferLoad)):
        raise schedule_error(CacheStageError, prim, f"block {blk.name!r} reads "
                             f"{buf.name!r} and has no init (an update whose init is "
                             "elsewhere): the new buffer would never be initialised. "
                             "Stage the write before decompose_reduction", func, blk)
    if not is_read and blk.init is not None:
        _refuse_unreached_init(func, bpath, realize, buf, prim)
    used_ids = {id(v) for x in indices for v in used_vars(x)}
    used = [k for k, iv in enumerate(blk.iter_vars) if id(iv.var) in used_ids]
    shape, cache_at = cache_map(func, blk, used)
    blocks, bufs = _names(func)
    name = fresh_name(name_of(buf), bufs | blocks)
    cache = Buffer(shape, buf.dtype, name, (), scope_of(buf), buf.align)
    top, loops = _nest(func, bpath)
    stage = _stage_nest(func, realize, loops, used, cache_at, indices, buf, cache, name,
                        is_read, prim)
    redirect = _Redirect(buf, cache, cache_at)
    new_blk = with_fields(blk, body=redirect.visit(blk.body),
                          init=redirect.visit(blk.init) if blk.init is not None else None,
                          reads=tuple(redirect.region(r) for r in blk.reads),
                          writes=tuple(redirect.region(w) for w in blk.writes))
    g = tree.replace(func, bpath, with_fields(realize, block=new_blk))
    spath = tree.enclosing_block(func, bpath)
    scope_realize = tree.get(g, spath)
    g = tree.replace(g, spath, with_fields(scope_realize, block=with_fields(
        scope_realize.block, alloc_buffers=scope_realize.block.alloc_buffers + (cache,))))
    g = (insert_before if is_read else insert_after)(g, top, stage)
    return g, BlockRV(name)


def _refuse_unreached_init(func, bpath, realize, buf, prim):
    """A reduction's staged output starts where its ``T.init`` fires: the new buffer,
    allocated in the block's scope, holds nothing else.  Refuse where the reduction's
    start is not inside that scope's loops: a reduce iter var bound through a loop or
    iterator outside it, or one whose binding's least value is not provably its
    domain's start (a ``loop_partition`` part after the first, whose init never fires:
    it accumulates into what the first part wrote; fuzz case 248028249)."""
    blk = realize.block
    spath = tree.enclosing_block(func, bpath)
    loops = [l for p, l in tree.loops_above(func, bpath) if p[:len(spath)] == spath]
    mine = {id(l.loop_var) for l in loops}
    outside = sorted({v.name for iv, val in zip(blk.iter_vars, realize.iter_values)
                      if iv.kind == "reduce" for v in used_vars(val) if id(v) not in mine})
    needed = {id(v) for iv, val in zip(blk.iter_vars, realize.iter_values)
              if iv.kind != "reduce" for v in used_vars(val)} & mine
    starts = [] if outside else start_guard(realize, loops, needed)
    if outside or starts:
        why = (f"its reduce iter vars are bound through {outside}, outside the block's "
               "scope" if outside else "its reduction does not provably start inside "
               "the block's scope (its init may never fire there)")
        raise schedule_error(CacheStageError, prim, f"block {blk.name!r} accumulates into "
                             f"{buf.name!r}, but {why}: a new buffer there would start "
                             "unwritten instead of from what the reduction holds. "
                             "reindex before loop_partition, split or blockize of the "
                             "reduction", func, blk)


def _found(stmt, buf, kind) -> list:
    """The ``kind`` nodes (``BufferLoad`` or ``BufferStore``) of ``buf`` in ``stmt``."""
    out = []
    post_order_visit(stmt, lambda n: out.append(n)
                     if isinstance(n, kind) and n.buffer is buf else None)
    return out


def _identity_map(func, blk, used):
    ivs = [blk.iter_vars[k] for k in used]
    return (tuple(iv.dom.extent for iv in ivs),
            tuple(simplify(iv.var - iv.dom.min) for iv in ivs))


def _custom_map(index_map, prim):
    def make(func, blk, used):
        ivs = blk.iter_vars
        params, exprs = apply_index_map(index_map, len(ivs), blk.name, prim,
                                        f"block {blk.name!r} has")
        keep = {id(params[k]) for k in used}
        extra = sorted({p.name for x in exprs for p in used_vars(x) if id(p) not in keep})
        if extra:
            raise schedule_error(CacheStageError, prim, f"index_map uses {extra}, which "
                                 f"the access of block {blk.name!r} does not: the new "
                                 "buffer would hold one element per value of them. Map only "
                                 f"{[ivs[k].var.name for k in used]}", func, blk)
        shifted = [substitute(x, {params[k]: params[k] + ivs[k].dom.min for k in used})
                   for x in exprs]
        shape = map_image([ivs[k].dom.extent for k in used], [params[k] for k in used],
                          [simplify(x) for x in shifted],
                          f"the accessed iteration variables of block {blk.name!r}", prim)
        to_ivs = {params[k]: ivs[k].var for k in range(len(ivs))}
        return shape, tuple(simplify(substitute(x, to_ivs)) for x in exprs)
    return make


def _pick(regions_of, index, prim):
    def buf_of(blk):
        regions = getattr(blk, regions_of)
        if not 0 <= index < len(regions):
            raise schedule_error(ScheduleArgumentError, prim, f"block {blk.name!r} has "
                                 f"{len(regions)} {regions_of[:-1]} buffer(s) "
                                 f"{[r.buffer.name for r in regions]}; index {index} is out "
                                 "of range")
        return regions[index].buffer
    return buf_of


@primitive("reindex", block=BLOCK, returns=BLOCK)
def reindex(func, block, buffer):
    """Stage ``block``'s access of one buffer through ``<buffer>_reindex``, a buffer
    indexed by the iteration variables the access uses (see the module docstring).

    ``buffer`` is ``("read", i)``, ``("write", i)`` or a buffer name.  The copy block
    (returned) is placed right before the block's loops for a read, right after them
    for a write.  Use it to give an operand the layout of the computation, e.g. before
    ``transform_layout`` or tensorization.

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((8, 4), name="A")
        >>> B = T.compute((4, 8), lambda i, j: A[j, i] * 2.0, name="B")
        >>> sch = S.Schedule(T.create_prim_func([A, B]))
        >>> sch.reindex("B", ("read", 0))
        BlockRV('A_reindex')
        >>> [b.name for b in sch.get_child_blocks("root")]
        ['A_reindex', 'B']
    """
    prim = "reindex"
    if isinstance(buffer, str):
        def buf_of(blk):
            for kind in ("reads", "writes"):
                for r in getattr(blk, kind):
                    if r.buffer.name == buffer:
                        return r.buffer
            raise schedule_error(ScheduleArgumentError, prim, f"block {blk.name!r} "
                                 f"accesses no buffer named {buffer!r}; it reads "
                                 f"{[r.buffer.name for r in blk.reads]} and writes "
                                 f"{[w.buffer.name for w in blk.writes]}")
        is_read = None
    elif (isinstance(buffer, (tuple, list)) and len(buffer) == 2
          and buffer[0] in ("read", "write") and isinstance(buffer[1], int)
          and not isinstance(buffer[1], bool) and buffer[1] >= 0):
        is_read = buffer[0] == "read"
        buf_of = _pick("reads" if is_read else "writes", buffer[1], prim)
    else:
        raise schedule_error(ScheduleArgumentError, prim, f"argument 2, 'buffer' to "
                             "reindex: expected ('read', i), ('write', i) or a buffer name, "
                             f"found {buffer!r}")
    if is_read is None:
        bpath = block_path(func, block, prim)
        blk = tree.get(func, bpath).block
        target = buf_of(blk)
        is_read = not any(w.buffer is target for w in blk.writes)
    return _reindex(func, block, buf_of, lambda b: b.scope, _identity_map,
                    lambda b: f"{b.name}_reindex", is_read, prim)


@primitive("reindex_cache_read", block=BLOCK, read_buffer_index=INDEX, storage_scope=SCOPE,
           index_map=INDEX_MAP, returns=BLOCK)
def reindex_cache_read(func, block, read_buffer_index, storage_scope, index_map):
    """Stage ``block``'s ``read_buffer_index``-th read through ``<buffer>_<scope>``,
    laid out by ``index_map`` (a lambda over all of the block's iteration variables,
    using only those the access uses, one-to-one); returns the copy block, placed right
    before the block's loops under copies of the loops it needs.

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((4, 8), name="A")
        >>> B = T.compute((4, 8), lambda i, j: A[i, j] + 1.0, name="B")
        >>> sch = S.Schedule(T.create_prim_func([A, B]))
        >>> sch.reindex_cache_read("B", 0, "local", lambda i, j: (j, i // 2, i % 2))
        BlockRV('A_local')
        >>> [int(s) for s in sch.func.body.block.alloc_buffers[0].shape]
        [8, 2, 2]
    """
    prim = "reindex_cache_read"
    return _reindex(func, block, _pick("reads", read_buffer_index, prim),
                    lambda b: storage_scope, _custom_map(index_map, prim),
                    lambda b: f"{b.name}_{storage_scope}", True, prim)


@primitive("reindex_cache_write", block=BLOCK, write_buffer_index=INDEX,
           storage_scope=SCOPE, index_map=INDEX_MAP, returns=BLOCK)
def reindex_cache_write(func, block, write_buffer_index, storage_scope, index_map):
    """Make ``block`` write ``<buffer>_<scope>``, laid out by ``index_map`` (as for
    :func:`reindex_cache_read`), and copy it back to the buffer right after the block's
    loops; returns the copy block.  A reduction keeps its init on the new buffer; an
    update without its init is refused.

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> X = T.placeholder((4, 6), name="X")
        >>> k = T.reduce_axis((0, 6), name="k")
        >>> Y = T.compute((4,), lambda i: T.sum(X[i, k], axis=k), name="Y")
        >>> sch = S.Schedule(T.create_prim_func([X, Y]))
        >>> sch.reindex_cache_write("Y", 0, "local", lambda i, k: (i // 2, i % 2))
        BlockRV('Y_local')
        >>> [b.name for b in sch.get_child_blocks("root")]
        ['Y', 'Y_local']
    """
    prim = "reindex_cache_write"
    return _reindex(func, block, _pick("writes", write_buffer_index, prim),
                    lambda b: storage_scope, _custom_map(index_map, prim),
                    lambda b: f"{b.name}_{storage_scope}", False, prim)


__all__ = ["reindex", "reindex_cache_read", "reindex_cache_write"]
