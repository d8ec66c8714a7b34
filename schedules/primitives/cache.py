"""``cache_read`` and ``cache_write``: stage a buffer through a copy in another scope.

``cache_read(block, i, scope)`` adds a block copying the block's ``i``-th read buffer
``A`` into a new buffer ``A_<scope>``, right before its first reader; every reader in
the scope then reads the copy.  ``cache_write(block, i, scope)`` makes the block
write ``C_<scope>`` instead of its ``i``-th write buffer ``C`` and adds a block right
after it copying ``C_<scope>`` back to ``C``.  Both return the new block, named like
the new buffer; the buffer is allocated in the enclosing (root) block.

Before ``cache_read(C, 0, "local")``::

    with T.block("C"): C[vi] = A[vi] + 1

after::

    A_local = T.alloc_buffer((8,), scope="local")
    for ax0 in range(8):
        with T.block("A_local"): A_local[v0] = A[v0]
    for i in range(8):
        with T.block("C"): C[vi] = A_local[vi] + 1

Inside a loop (when the buffer's writer and its readers share loops) the copy sits
under the innermost shared loop and covers the region written there.

Example::

    >>> import cuvil_tir as T
    >>> from schedules.handles import BlockRV
    >>> A = T.placeholder((8,), name="A")
    >>> f = T.create_prim_func([A, T.compute((8,), lambda i: A[i] + 1.0, name="C")])
    >>> g, rv = cache_read(f, BlockRV("C"), 0, "local")
    >>> rv, [b.name for b in g.body.block.alloc_buffers]
    (BlockRV('A_local'), ['A_local'])
"""

from __future__ import annotations

from cuvil_tir.arith import Analyzer
from cuvil_tir.expr import GE, LT, Add, Expr, IntImm, Max, Min, Var, const, SizeVar
from cuvil_tir.op import conjuncts
from cuvil_tir.stmt import (Block, BufferRegion, BufferStore, For, IterVar, Range,
                            SeqStmt, seq)
from cuvil_tir.visitor import Mutator, substitute, used_vars

from cuvil_tir.analysis import tree
from cuvil_tir.transform.plan_allocation import Retarget
from ..handles import BlockRV
from ..analysis import block_path, fresh_name
from ..primitive import BLOCK, SCOPE, Kind, Mismatch, primitive
from ..errors import CacheStageError, fail
from cuvil_tir.analysis.regions import (accessed_region, loop_doms, needed_region, provably_le,
                                        readers, scope_doms, simplify, writers, child_blocks)
from cuvil_tir.node import same
from .nests import block_names, make_nest, subtrees, with_fields
from ..block_scope import DepKind, scope_dependences
from ..region_cover import region_covered
from .enclosing import within_enclosing
from .cache_elements import (element_condition, outer_written, unreset_reduction,
                             writes_whole)


def _names(func) -> tuple:
    blocks = {b.block.name for b in tree.blocks_under(func.body)}
    bufs = {b.name for b in func.buffers}
    for b in tree.blocks_under(func.body):
        bufs |= {x.name for x in b.block.alloc_buffers}
    return blocks, bufs


def _buffer_at(func, blk, index, kind, prim):
    regions = getattr(blk, kind)
    what = "read_buffer_index" if kind == "reads" else "write_buffer_index"
    if isinstance(index, bool) or not isinstance(index, int) or not \
            0 <= index < len(regions):
        raise fail(CacheStageError, prim, f"{what} {index!r} is out of range: block "
                   f"{blk.name!r} {kind[:-1]}s {len(regions)} buffer(s) "
                   f"{[r.buffer.name for r in regions]}", func)
    return regions[index].buffer


def _locate(func, scope_path, writer_names, reader_names, prim):
    """Where the copy goes: ``(container node, container path)`` — the scope block or
    the innermost loop shared by the writer and its first reader."""
    node = tree.get(func, scope_path).block
    in_init = block_names(node.init) & (reader_names | writer_names) \
        if node.init is not None else set()
    if in_init:
        raise fail(CacheStageError, prim, f"block{'s' * (len(in_init) > 1)} "
                   f"{sorted(in_init)} sit{'s' * (len(in_init) == 1)} in the T.init of "
                   f"block {node.name!r}, where a copy stage has no place (expected the "
                   "buffer's writer and readers in the block's body); cache the buffer before "
                   "the blockize that made this init, or decompose_reduction "
                   f"{node.name!r} at a loop above it so its init becomes a nest of its "
                   "own",
                   func)
    path, body_path = scope_path, scope_path + ("block", "body")
    while True:
        body = node.body
        items = subtrees(body)
        rpos = next((k for k, s in enumerate(items) if block_names(s) & reader_names),
                    len(items))
        wpos = max((k for k, s in enumerate(items) if block_names(s) & writer_names),
                   default=-1)
        if wpos < rpos:
            return node, path
        if wpos > rpos or not isinstance(items[rpos], For):
            raise fail(CacheStageError, prim, "a reader of the buffer runs before (or inside "
                       "the same block as) its writer; there is no place for the copy",
                       func)
        path = body_path + ((("seq", rpos),) if isinstance(body, SeqStmt) else ())
        node = items[rpos]
        body_path = path + ("body",)


class _Stage(Mutator):
    """Insert the copy nest into ``container``, allocate the cache in ``scope_block``
    and rewrite the blocks named in ``rewrite``."""

    def __init__(self, container, place, scope_block, cache, rewrite):
        self.container, self.place = container, place
        self.scope_block, self.cache, self.rewrite = scope_block, cache, rewrite

    def visit(self, n):
        if isinstance(n, Expr):
            return n
        new = super().visit(n)
        if isinstance(n, Block) and n.name in self.rewrite:
            new = self.rewrite[n.name](new)
        if n is self.container:
            new = self.place(new)
        if n is self.scope_block:
            new = with_fields(new, alloc_buffers=new.alloc_buffers + (self.cache,))
        return new


def _copy_block(name, src, dst, region, outer, shape, src_off, dst_off, tile_vars=False,
                guard=(), keep=None, keep_dst=False):
    """The nest copying ``src[v - src_off]`` to ``dst[v - dst_off]`` for ``v`` over
    ``region`` of a buffer of ``shape``.

    With ``tile_vars`` (a cache of a nested block's tile, copied in that block's body)
    the block's variables run over the region itself, as TensorIR writes it:
    ``A_local[v0, v1] = A[i * 16 + v0, j * 16 + v1]``.  ``guard``: conditions on the
    loops around the copy, under which alone it runs; ``keep(index)``: conditions on
    the index of ``src`` (of ``dst`` with ``keep_dst``) under which an element is
    copied (None: every element)."""
    if tile_vars:
        return _tile_copy(name, src, dst, region, src_off, dst_off, outer, guard, keep,
                          keep_dst)
    vs = [Var(f"v{d}", s.dtype) for d, s in enumerate(shape)]
    ivs = tuple(IterVar(v, Range(const(0, s.dtype), s), "spatial")
                for v, s in zip(vs, shape))
    at_src = tuple(simplify(v - o) for v, o in zip(vs, src_off))
    at_dst = tuple(simplify(v - o) for v, o in zip(vs, dst_off))
    blk = Block(name, ivs, (BufferRegion(src, tuple(Range(i, const(1, i.dtype))
                                                     for i in at_src)),),
                (BufferRegion(dst, tuple(Range(i, const(1, i.dtype)) for i in at_dst)),),
                BufferStore(dst, src.load(list(at_src)), at_dst))

    staged = at_dst if keep_dst else at_src

    def guards(values):
        vmap = dict(zip(vs, values))
        return _unique(list(guard) + (keep([substitute(i, vmap) for i in staged])
                                      if keep else []))
    return make_nest(blk, [(r.min, r.extent) for r in region.region], outer,
                     clip=True, guards=guards), BlockRV(name)


def _unique(conds: list) -> list:
    """``conds`` without repeats (a reader's guard often restates the buffer's bound),
    and of two constant bounds of one index (``x < 6``, ``x < 2``: the buffer's end and
    an enclosing block's region) only the tighter."""
    out: list = []
    for c in conds:
        if any(same(c, d) for d in out):
            continue
        k = next((k for k, d in enumerate(out) if _same_side(c, d)), None)
        if k is None:
            out.append(c)
        elif (c.b.value < out[k].b.value) == isinstance(c, LT):
            out[k] = c
    return out


def _same_side(c, d) -> bool:
    """Whether ``c`` and ``d`` bound one index from one side by constants
    (``x < 2`` and ``x < 6``, or ``x >= 0`` and ``x >= 1``)."""
    return type(c) is type(d) and isinstance(c, (LT, GE)) and same(c.a, d.a) and \
        isinstance(c.b, IntImm) and isinstance(d.b, IntImm)


def _start_plus(start, v):
    """``start + v`` as TensorIR writes a tile index (``v`` alone from 0)."""
    return v if isinstance(start, IntImm) and start.value == 0 else Add(start, v)


def _tile_copy(name, src, dst, region, src_off, dst_off, outer, guard, keep, keep_dst):
    exts = [r.extent for r in region.region]
    vs = [Var(f"v{d}", e.dtype) for d, e in enumerate(exts)]
    ivs = tuple(IterVar(v, Range(const(0, e.dtype), e), "spatial") for v, e in zip(vs, exts))
    at_src = tuple(_start_plus(simplify(r.min - o), v)
                   for r, o, v in zip(region.region, src_off, vs))
    at_dst = tuple(_start_plus(simplify(r.min - o), v)
                   for r, o, v in zip(region.region, dst_off, vs))
    blk = Block(name, ivs, (BufferRegion(src, tuple(Range(i, const(1, i.dtype))
                                                     for i in at_src)),),
                (BufferRegion(dst, tuple(Range(i, const(1, i.dtype)) for i in at_dst)),),
                BufferStore(dst, src.load(list(at_src)), at_dst))

    def inside(values):
        # a tile may overhang its buffer (a guarded access, a non-dividing split):
        # only what lies inside is copied; make_nest drops what holds everywhere
        vmap = dict(zip(vs, values))
        out = list(guard)
        for buf, at in ((src, at_src), (dst, at_dst)):
            for ix, n in zip(at, buf.shape):
                ix = substitute(ix, vmap)
                out += [ix >= const(0, ix.dtype), ix < n]
        staged = at_dst if keep_dst else at_src
        return _unique(out + (keep([substitute(i, vmap) for i in staged]) if keep else []))
    return make_nest(blk, [None] * len(vs), outer, preserve_unit_loops=True,
                     guards=inside), BlockRV(name)


def _within(region: BufferRegion, tile: BufferRegion) -> BufferRegion:
    """``region`` cut to ``tile`` in each dimension where their ends differ by constants
    (the tile is all a nested block touches of the buffer: no copy needs more)."""
    out = []
    for r, t in zip(region.region, tile.region):
        lo = simplify(t.min - r.min)
        hi = simplify((t.min + t.extent) - (r.min + r.extent))
        if not (isinstance(lo, IntImm) and isinstance(hi, IntImm)):
            out.append(r)
            continue
        start = t.min if lo.value > 0 else r.min
        ext = simplify(r.extent - max(lo.value, 0) + min(hi.value, 0))
        # a symbolic extent (a dimension of size n) may be empty: keep the region
        out.append(Range(start, ext) if isinstance(ext, IntImm) and ext.value > 0 else r)
    return BufferRegion(region.buffer, tuple(out))


def _inside_buffer(region: BufferRegion, doms: dict) -> BufferRegion:
    """``region`` cut to the buffer in each dimension it may overshoot by more than the
    buffer's extent.  The bounds of indices through a symbolic ``%`` or ``//`` are
    loose (``(f * 5 + g) % n`` bounded by the index type's maximum), and a copy over
    such a region runs 2**31 iterations of which at most ``n`` pass its guard."""
    ana = Analyzer(index_no_overflow=True)
    for v, r in doms.items():
        ana.bind(v, r)
    out = []
    for r, dim in zip(region.region, region.buffer.shape):
        if ana.can_prove(r.extent <= dim):
            out.append(r)
            continue
        hi = simplify(r.min + r.extent - 1)
        lo = const(0, r.min.dtype) if ana.can_prove(r.min <= 0) else Max(r.min, const(0, r.min.dtype))
        hi = simplify(dim - 1) if ana.can_prove(dim - 1 <= hi) else Min(hi, dim - 1)
        out.append(Range(ana.simplify(lo), ana.simplify(hi - lo + 1)))
    return BufferRegion(region.buffer, tuple(out))


def _both(keep, other):
    """The conditions of two ``keep`` callables together (None: no condition)."""
    if keep is None or other is None:
        return keep or other
    return lambda index: keep(index) + other(index)


def _writer_guard(func, wpath, outer_loops) -> list:
    """The parts of the writer's ``T.where`` that name only loops around the copy (or
    none): where they fail, the writer writes nothing in that iteration, so a copy of
    what it writes there would read (cache_read) or write back (cache_write) elements
    no store has written yet."""
    around = {id(f.loop_var) for _, f in outer_loops}
    between = {id(f.loop_var) for _, f in tree.loops_above(func, wpath)} - around
    return [c for c in conjuncts(tree.get(func, wpath).predicate)
            if not any(id(v) in between for v in used_vars(c))]


def _tile(func, scope_path, buf):
    """The region of ``buf`` the (nested) scope block at ``scope_path`` accesses, when
    its size does not depend on the block's variables: a cache inside that block needs
    only this tile.  None at the root, or when the tile cannot be sized."""
    if not scope_path:
        return None
    blk = tree.get(func, scope_path).block
    tile = accessed_region(blk, buf)
    if tile is None:
        return None
    own = {id(iv.var) for iv in blk.iter_vars}
    if any(any(id(v) in own for v in used_vars(d.extent)) for d in tile.region):
        return None
    return tile


def _consumers(func, rs, consumers, buf, prim):
    """The names of the blocks ``consumer_blocks`` names, each checked to read ``buf``
    in the scope (None: not given)."""
    if consumers is None:
        return None
    names = {rv.name for rv in consumers}
    known = {b.block.name for _, b in rs}
    stray = sorted(names - known)
    if stray:
        raise fail(CacheStageError, prim, f"consumer_blocks {stray} do not read "
                   f"{buf.name!r} in this scope (its readers: {sorted(known)}); pass "
                   "blocks that consume the buffer", func)
    return names


def _check_produced(func, cpath, buf, rs, region, prim):
    """The readers ``rs`` under ``cpath`` need no more of ``buf`` than ``region`` (what
    its writer produces there)."""
    under = [p for p, _ in rs if p[:len(cpath)] == cpath]
    # both sides count the instances that run (each block's T.where cuts its loops)
    need = needed_region(func, cpath, buf, under, "reads", by_predicate=True)
    # the loops around the copy's place bound what both sides name (a loop of one
    # iteration folded away on one side only: 0 against bx * 64)
    ana = Analyzer()
    place = tree.get(func, cpath)
    for _, f in tree.loops_above(func, cpath) + ([(cpath, place)] if isinstance(place, For)
                                                  else []):
        ana.bind(f.loop_var, Range(f.min, f.extent))

    def le(a, b):
        return provably_le(a, b) or ana.can_prove(a <= b)
    for have, want in zip(region.region, need.region if need else ()):
        if not (le(have.min, want.min) and le(
                simplify(want.min + want.extent), simplify(have.min + have.extent))):
            raise fail(CacheStageError, prim, f"the readers of {buf.name!r} need more "
                       "than its writer produces at the copy's place; move the "
                       "writer (compute_at) or cache before scheduling", func)


def _writers_come_after(func, scope_path, wnames, rnames) -> bool:
    """Every writer runs after every chosen reader, in later statements of the scope's
    body (no loop holds both, so no iteration of a writer precedes a reader; a loop of
    one iteration holding both is looked into, as cache_inplace leaves one)."""
    body = tree.get(func, scope_path).block.body
    while True:
        items = subtrees(body)
        rpos = [k for k, s in enumerate(items) if block_names(s) & rnames]
        wpos = [k for k, s in enumerate(items) if block_names(s) & wnames]
        if not rpos or not wpos:
            return False
        if max(rpos) < min(wpos):
            return True
        both = items[rpos[0]]
        if not (rpos == wpos == [rpos[0]] and isinstance(both, For) and
                isinstance(both.extent, IntImm) and both.extent.value == 1):
            return False
        body = both.body


def _readers_before(func, scope_path, wnames, rnames) -> set:
    """The readers in ``rnames`` whose statement of the scope's body comes before the
    first statement holding a writer."""
    items = subtrees(tree.get(func, scope_path).block.body)
    first = min((k for k, s in enumerate(items) if block_names(s) & wnames),
                default=len(items))
    return {n for s in items[:first] for n in block_names(s) & rnames}


def _offsets_of_own(func, scope_path, tile) -> bool:
    """Whether ``tile`` starts at an offset made of the scope block's own iterators and
    spans extents of sizes alone: a block without iterators (loop_partition's) names
    the loops around it in its regions, and a cache block may not use those in its
    indices, nor an allocation in its shape, so its cache then has the buffer's whole
    shape (the copy still covers only the tile)."""
    own = {id(iv.var) for iv in tree.get(func, scope_path).block.iter_vars}
    return all(isinstance(v, SizeVar) or id(v) in own
               for d in tile.region for v in used_vars(d.min)) and \
        all(isinstance(v, SizeVar) for d in tile.region for v in used_vars(d.extent))


def _read_keep(func, cpath, buf, rs, prim):
    """For a copy of ``buf`` that no writer in the scope fills (the outer level's cache
    read in a nested block, an in-place read), the condition on an element that one
    of the readers ``rs`` reads it (:mod:`.cache_readers`); None: copy every element
    (a parameter's hold the caller's values; unguarded readers read their whole
    region).  Refused when guarded readers read a part the copy cannot follow: the
    rest was never written."""
    if any(p is buf for p in func.params):
        return None
    keep = element_condition(func, cpath, buf, [p for p, _ in rs])
    cut = [b.block.name for _, b in rs
           if conjuncts(b.predicate) or next(iter(tree.blocks_under(b.block.body)), None)]
    if keep is None and cut:
        raise fail(CacheStageError, prim, f"no block in this scope writes {buf.name!r}, "
                   f"and its readers {cut} read only part of it (under a T.where or in "
                   "nested blocks) by indices the copy cannot follow: a copy of the "
                   "whole region would read elements no store wrote; cache_read at the "
                   "block that writes the buffer, or before blockize", func)
    written = outer_written(func, cpath, buf, prim)
    if written is None:
        return keep
    return lambda index: (keep(index) if keep else []) + written(index)


def _write_keep(func, cpath, buf, wpath, outer_loops, prim):
    """The condition on an element that the writer at ``wpath`` writes it under the
    copy's place (None: it writes its whole region there).  Refused when its
    ``T.where`` cuts a tile's loops inside the copy's place by
    indices the copy cannot follow: a copy of the whole region would take elements
    no store wrote."""
    keep = element_condition(func, cpath, buf, [wpath], "writes")
    if keep is not None:
        return keep
    br = tree.get(func, wpath)
    around = {id(f.loop_var) for _, f in outer_loops}
    inside = {id(f.loop_var) for _, f in tree.loops_above(func, wpath)} - around

    def tile_cut(c):
        # a boundary tile's cut names loops inside the copy and the tile's position
        # (v_k_o * 4 + ax1 < 6); a cut naming only loops inside (a fused loop's tail,
        # f * 5 + g < n * n) leaves out elements past the buffer, not in it
        names = used_vars(c)
        return any(id(v) in inside for v in names) and any(
            id(v) not in inside and not isinstance(v, SizeVar) for v in names)
    if any(tile_cut(c) for c in conjuncts(br.predicate)):
        raise fail(CacheStageError, prim, f"block {br.block.name!r} writes only part of "
                   f"{buf.name!r} here (under a T.where), by indices the copy cannot "
                   "follow (a loop split or fused inside it): a copy of its whole region "
                   f"would take elements no store wrote; apply {prim} before splitting "
                   f"or fusing the loops of {br.block.name!r}", func)
    return None


def _stage(func, bpath, buf, scope, prim, is_read, consumers=None):
    scope_path = tree.enclosing_block(func, bpath)
    ws = writers(func, scope_path, buf)
    if len(ws) > 1:
        raise fail(CacheStageError, prim, f"buffer {buf.name!r} is written by "
                   f"{[b.block.name for _, b in ws]}; only a buffer with a single writer "
                   "can be cached", func)
    wnames = {b.block.name for _, b in ws}
    rs = [(p, b) for p, b in readers(func, scope_path, buf) if b.block.name not in wnames]
    chosen = _consumers(func, rs, consumers, buf, prim)
    # cache_read: only the chosen readers read the copy; cache_write: the chosen
    # readers read the cache, the copy back goes before the first of the others
    cache_readers = chosen if chosen is not None else (
        {b.block.name for _, b in rs} if is_read else set())
    rs_cache = [(p, b) for p, b in rs if b.block.name in cache_readers]
    rnames = cache_readers if is_read else {b.block.name for _, b in rs} - cache_readers
    if not is_read:
        # a reader in an earlier statement of the scope reads the buffer before the
        # writer runs (an in-place pattern): it never sees the cache
        rnames -= _readers_before(func, scope_path, wnames, rnames)
    rs = rs_cache if is_read else rs
    if is_read and _writers_come_after(func, scope_path, wnames, rnames):
        # an in-place pattern (read, then overwrite): the copy is of the buffer as the
        # readers see it, before any writer runs
        ws, wnames = [], set()
    if is_read and not rnames:
        raise fail(CacheStageError, prim, f"{buf.name!r} is read in this scope only by "
                   f"its writer {sorted(wnames)}: a copy made before the writer would "
                   "go stale at its first write; cache_write the buffer instead", func)
    container, cpath = _locate(func, scope_path, wnames, rnames, prim)
    outer_loops = tree.loops_above(func, cpath) if isinstance(container, For) else []
    if isinstance(container, For):
        outer_loops = outer_loops + [(cpath, container)]
    # the loops around an iterator-less scope block bound what its regions name
    around = {f.loop_var: Range(f.min, f.extent) for _, f in tree.ancestors(func, cpath)
              if isinstance(f, For)}
    outer = {**around, **scope_doms(func, bpath), **loop_doms(outer_loops)}
    tile = _tile(func, scope_path, buf)
    if ws:
        # what the writer's running instances write: its T.where cuts its loops
        region = needed_region(func, cpath, buf, [ws[0][0]], "writes", by_predicate=True)
        region = region if tile is None else _within(region, tile)
    else:
        region = tile if tile is not None else BufferRegion.full(buf)
    region = _inside_buffer(region, outer)
    if is_read and ws:
        _check_produced(func, cpath, buf, rs, region, prim)
    if not is_read and rs_cache:
        # the readers of the cache see it as the writer leaves it
        _, kpath = _locate(func, scope_path, wnames, cache_readers, prim)
        _check_produced(func, kpath, buf, rs_cache,
                        needed_region(func, kpath, buf, [ws[0][0]], "writes",
                                      by_predicate=True), prim)
    blocks, bufs = _names(func)
    name = fresh_name(f"{buf.name}_{scope}", bufs | blocks)
    # inside a nested block the cache holds that block's tile, at offset tile.min
    zero = tuple(const(0, s.dtype) for s in buf.shape)
    shape, off = buf.shape, zero
    if tile is not None and _offsets_of_own(func, scope_path, tile):
        shape = tuple(d.extent for d in tile.region)
        off = tuple(d.min for d in tile.region)
    cache = buf.with_changes(shape=shape, name=name, strides=(), scope=scope)
    own = {id(iv.var) for iv in tree.get(func, scope_path).block.iter_vars}
    # the copy's body may name only the scope block's own variables (an opaque scope
    # block may use the loops around it, which a block inside it may not)
    sizes = {id(v) for b in func.buffers for s in b.shape for v in used_vars(s)}
    tile_vars = off is not zero and not isinstance(container, For) and not any(
        id(v) in own for d in region.region for v in used_vars(d.extent)) and all(
        id(v) in own or id(v) in sizes
        for d in list(region.region) + list(tile.region) for v in used_vars(d.min))
    guard = _writer_guard(func, ws[0][0], outer_loops) if ws else []
    # the elements the writer writes under the copy's place (its T.where may leave part
    # of the region unwritten)
    keep = _write_keep(func, cpath, buf, ws[0][0], outer_loops, prim) if ws else None
    if not is_read and keep is None and not guard and \
            not writes_whole(func, buf, ws[0][0], outer_loops, region, outer):
        raise fail(CacheStageError, prim, f"block {ws[0][1].block.name!r} writes "
                   f"{buf.name!r} by indices the copy cannot follow, and cannot be "
                   f"proven to write every element of {region} here: a copy back of "
                   "that box would overwrite the elements it does not write (a part of "
                   "a fused loop after loop_partition, a tile of a reshaped buffer); "
                   f"apply {prim} before those primitives", func)
    if is_read:
        keep = keep if ws else _read_keep(func, cpath, buf, rs, prim)
    # the blocks around the copy declare all their insides access of the buffer: a box
    # overshooting that (a blockized tile cut by its T.where) is cut to it
    keep = _both(keep, within_enclosing(func, cpath, buf, write=not is_read))
    if is_read:
        nest, rv = _copy_block(name, buf, cache, region, outer, buf.shape, zero, off,
                               tile_vars, guard, keep)
        redirect = Retarget(buf, cache, off, writes=False)
        rewrite = {n: redirect.visit for n in rnames}

        def position(items):
            return next(k for k, s in enumerate(items) if block_names(s) & rnames)
    else:
        nest, rv = _copy_block(name, cache, buf, region, outer, buf.shape, off, zero,
                               tile_vars, guard, keep, keep_dst=True)
        retarget = Retarget(buf, cache, off, writes=True)
        rewrite = {n: retarget.visit for n in wnames}
        redirect = Retarget(buf, cache, off, writes=False)
        rewrite.update({n: redirect.visit for n in cache_readers})

        def position(items):
            if not rnames and cache_readers:
                return len(items)     # every reader reads the cache: copy back last
            return 1 + max(k for k, s in enumerate(items) if block_names(s) & wnames)

    def place(node):
        items = subtrees(node.body)
        pos = position(items)
        return with_fields(node, body=seq(*items[:pos], nest, *items[pos:]))

    scope_block = tree.get(func, scope_path).block
    body = _Stage(container, place, scope_block, cache, rewrite).visit(func.body)
    return func.with_body(body), rv


def _block_list(v):
    if not isinstance(v, (list, tuple)):
        raise Mismatch()
    return [BLOCK.convert(b) for b in v]


BLOCK_LIST = Kind("block_list", "a list of block handles or block names", _block_list)


@primitive("cache_read", block=BLOCK, scope=SCOPE, consumer_blocks=BLOCK_LIST,
           returns=BLOCK)
def cache_read(func, block, read_buffer_index: int, scope: str, consumer_blocks=None):
    """Copy the block's ``read_buffer_index``-th read buffer into a new buffer in
    ``scope`` right before its first reader; every reader reads the copy.  Returns the
    copy block (named ``<buffer>_<scope>``).  With ``consumer_blocks`` only those
    readers read the copy, which goes right before the first of them.

    Before/after ``cache_read(C, 0, "shared")``::

                                          A_shared[i] = A[i]
        C[i] = A[i] + 1.0                 C[i] = A_shared[i] + 1.0

    Example::

        >>> import cuvil_tir as T
        >>> from schedules.handles import BlockRV
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] * 2.0, name="B")])
        >>> g, rv = cache_read(f, BlockRV("B"), 0, "shared")
        >>> tree.get(g, tree.find_block(g, "B")).block.reads[0].buffer.scope
        'shared'
    """
    prim = "cache_read"
    bpath = block_path(func, block, prim)
    blk = tree.get(func, bpath).block
    buf = _buffer_at(func, blk, read_buffer_index, "reads", prim)
    return _stage(func, bpath, buf, scope, prim, True, consumer_blocks)


def _reads_own_writes_only(func, bpath, buf) -> bool:
    """Whether the block at ``bpath`` reads of ``buf`` only what its own inner blocks
    wrote first (a scope block that fills a tile, then reads it): every child that
    reads ``buf`` has an earlier child producing it, and its producers provably cover
    what it reads (:func:`schedules.region_cover.region_covered`).  Then the cache
    needs no initial contents."""
    children = child_blocks(func, bpath)
    if not children:
        return False
    scope = scope_dependences(func, bpath)
    for cpath, cbr in children:
        if not any(r.buffer is buf for r in cbr.block.reads):
            continue
        fed = any(d.kind is DepKind.RAW and buf.name in d.buffers
                  for d in scope.deps_by_dst(cbr.block.name))
        if not (fed and region_covered(func, cpath, scope)):
            return False
    return True


@primitive("cache_write", block=BLOCK, scope=SCOPE, consumer_blocks=BLOCK_LIST,
           returns=BLOCK)
def cache_write(func, block, write_buffer_index: int, scope: str, consumer_blocks=None):
    """Make the block write a new buffer in ``scope`` instead of its
    ``write_buffer_index``-th write buffer, and copy that back right after it.  Returns
    the copy block (named ``<buffer>_<scope>``).  The readers in ``consumer_blocks``
    read the cache itself; the copy back then goes right before the first other reader.

    Before/after ``cache_write(C, 0, "local")``::

        C[i] = A[i] + 1.0                 C_local[i] = A[i] + 1.0
                                          C[i] = C_local[i]

    Example::

        >>> import cuvil_tir as T
        >>> from schedules.handles import BlockRV
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] * 2.0, name="B")])
        >>> g, rv = cache_write(f, BlockRV("B"), 0, "local")
        >>> tree.get(g, tree.find_block(g, "B")).block.writes[0].buffer.name, rv.name
        ('B_local', 'B_local')
    """
    prim = "cache_write"
    bpath = block_path(func, block, prim)
    blk = tree.get(func, bpath).block
    buf = _buffer_at(func, blk, write_buffer_index, "writes", prim)
    if blk.init is None and any(r.buffer is buf for r in blk.reads) and \
            not _reads_own_writes_only(func, bpath, buf):
        raise fail(CacheStageError, prim, f"block {blk.name!r} reads {buf.name!r} before "
                   "writing it and has no init (an update whose init was decomposed or "
                   "lives in an outer block): the cache would start uninitialised. Apply "
                   "cache_write before decompose_reduction / blockize", func)
    why = unreset_reduction(func, bpath, prim)
    if why is not None:
        raise fail(CacheStageError, prim, why, func)
    return _stage(func, bpath, buf, scope, prim, False, consumer_blocks)
