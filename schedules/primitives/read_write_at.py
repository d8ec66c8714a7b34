"""``read_at`` and ``write_at``: stage the tile a block accesses under a loop.

``read_at(loop, block, i, scope)`` copies, at the start of each iteration of ``loop``,
the region of the block's ``i``-th read buffer ``A`` that the block reads during that
iteration into ``A_<scope>`` (a buffer of ``A``'s shape in ``scope``), and makes the
block read the copy.  ``write_at(loop, block, i, scope)`` makes the block write
``C_<scope>`` and copies the region it wrote back to ``C`` at the end of each
iteration.  The copy is one block (annotated ``auto_copy``, as in TensorIR) whose
iteration variables are the loops above that the region moves with, and whose body
is a loop nest over the tile.  Loops bound to threads that share a buffer of that
scope (``shared``: ``threadIdx``/``vthread``) are relaxed too: every thread copies the
whole tile of its thread block.

Before/after ``read_at(k0, C, 1, "shared")``::

    for k0 in range(256):                 for k0 in range(256):
                                              with T.block("A_shared"):   # v1 = k0
                                                  for ax1 in range(8):
                                                      A_shared[.., v1 * 8 + ax1] = A[.., v1 * 8 + ax1]
        for k1 in range(8):                   for k1 in range(8):
            C[..] += A[.., k0 * 8 + k1]           C[..] += A_shared[.., k0 * 8 + k1]

Refused (``CacheStageError``): a loop that is not above the block, a buffer another
block writes under the loop (``read_at``: the copy would be stale), a tile of
non-constant size, a block nested in another block, and for ``write_at`` a buffer
with another writer or a tile the block does not write densely (the copy would write
back elements nothing computed).

Example::

    >>> import cuvil_tir as T
    >>> import schedules as S
    >>> A = T.placeholder((8, 4), name="A")
    >>> k = T.reduce_axis((0, 4), name="k")
    >>> f = T.create_prim_func([A, T.compute((8,), lambda i: T.sum(A[i, k], axis=k),
    ...                                      name="B")])
    >>> sch = S.Schedule(f)
    >>> sch.read_at(sch.get_loops("B")[0], "B", 0, "local")
    BlockRV('A_local')
"""

from __future__ import annotations

import itertools

from cuvil_tir.buffer import Buffer
from cuvil_tir.expr import IntImm, Var, const
from cuvil_tir.stmt import (BlockRealize, Block, BufferRegion, BufferStore, For, IterVar,
                            Range, seq)
from cuvil_tir.transform.plan_allocation import Retarget
from cuvil_tir.visitor import substitute, used_vars

from cuvil_tir.analysis import tree
from cuvil_tir.analysis.regions import (bound_region, inner_loops, loop_doms, region_of,
                                        relax, simplify, thread_relaxed_loops, writers)
from ..analysis import block_path, fresh_name, loop_path
from ..errors import CacheStageError, fail
from ..handles import BlockRV
from ..primitive import BLOCK, INDEX, LOOP, SCOPE, primitive
from .cache import _names
from .nests import subtrees, with_fields
from .rolling_buffer import holds_everywhere

_DENSE_LIMIT = 1 << 16       # tile points the write_at density check may enumerate


def _tile(func, lpath, bpath, br, buf, kind, scope, prim):
    """The region of ``buf`` the block accesses per iteration of the loop, over the
    loops at and above it (thread loops sharing ``scope`` relaxed), with the relaxed
    loops."""
    reg = region_of(getattr(br.block, kind), buf)
    doms = {**thread_relaxed_loops(func, lpath, scope),
            **loop_doms(inner_loops(func, lpath, bpath))}
    tile = relax(bound_region(br, reg), doms)
    if any(not isinstance(d.extent, IntImm) for d in tile.region):
        raise fail(CacheStageError, prim, f"the tile of {buf.name!r} that block "
                   f"{br.block.name!r} accesses per iteration ({tile}) has a size that "
                   "is not constant; pick an inner loop", func)
    return tile, doms


def _copy(name, src, dst, tile, func, lpath):
    """The copy block: one iter var per loop (at or above the loop) the tile moves with,
    a loop nest over the tile inside."""
    above = tree.loops_above(func, lpath) + [(lpath, tree.get(func, lpath))]
    vm, ivs, values = {}, [], []
    for d in tile.region:          # in the order the tile's dimensions use them
        used = {id(v) for v in used_vars(d.min)}
        for _, f in above:
            if id(f.loop_var) in used and f.loop_var not in vm:
                v = Var(f"v{len(ivs)}", f.loop_var.dtype)
                vm[f.loop_var] = v
                ivs.append(IterVar(v, Range(f.min, f.extent), "spatial"))
                values.append(f.loop_var)
    mins = [simplify(substitute(d.min, vm)) for d in tile.region]
    axes = [Var(f"ax{d}", m.dtype) for d, m in enumerate(mins)]
    at = tuple(simplify(m + a) for m, a in zip(mins, axes))
    body = BufferStore(dst, src.load(list(at)), at)
    for a, d in reversed(list(zip(axes, tile.region))):
        body = For(a, const(0, a.dtype), d.extent, "serial", body)
    region = tuple(Range(m, d.extent) for m, d in zip(mins, tile.region))
    blk = Block(name, tuple(ivs), (BufferRegion(src, region),), (BufferRegion(dst, region),),
                body, annotations={"auto_copy": True})
    return BlockRealize(tuple(values), const(True), blk)


def _dense(br, buf, doms):
    """How many distinct elements the block writes per iteration (0: unknown): its write
    index minus its value at the relaxed loops' minima must be free of the outer
    loops; the relaxed loops it uses are then enumerated."""
    st_idx = [simplify(substitute(d.min, {iv.var: v for iv, v in
                                          zip(br.block.iter_vars, br.iter_values)}))
              for d in region_of(br.block.writes, buf).region]
    relaxed = {id(v): (v, r) for v, r in doms.items()}
    at_min = {v: r.min for v, r in doms.items()}
    for e in st_idx:
        rest = simplify(e - substitute(e, at_min))
        if any(id(u) not in relaxed for u in used_vars(rest)):
            return 0
    inner = list({id(u): relaxed[id(u)] for e in st_idx for u in used_vars(e)
                  if id(u) in relaxed}.values())
    if any(not isinstance(r.extent, IntImm) or not isinstance(r.min, IntImm)
           for _, r in inner):
        return 0
    total = 1
    for _, r in inner:
        total *= r.extent.value
    if total > _DENSE_LIMIT:
        return 0
    base = [simplify(substitute(e, at_min)) for e in st_idx]
    offsets = [simplify(e - b) for e, b in zip(st_idx, base)]
    seen = set()
    for point in itertools.product(*[range(r.min.value, r.min.value + r.extent.value)
                                     for _, r in inner]):
        vm = {v: const(x, v.dtype) for (v, _), x in zip(inner, point)}
        key = tuple(simplify(substitute(o, vm)) for o in offsets)
        if any(not isinstance(k, IntImm) for k in key):
            return 0
        seen.add(tuple(k.value for k in key))
    return len(seen)


def _stage_at(func, loop, block, index, scope, prim, is_read):
    lpath = loop_path(func, loop, prim)
    bpath = block_path(func, block, prim)
    br = tree.get(func, bpath)
    if bpath[:len(lpath)] != lpath or tree.enclosing_block(func, bpath) != \
            tree.enclosing_block(func, lpath):
        raise fail(CacheStageError, prim, f"loop {tree.get(func, lpath).loop_var.name} is "
                   f"not a loop above block {br.block.name!r} in its scope", func)
    kind = "reads" if is_read else "writes"
    pool = getattr(br.block, kind)
    what = "read_buffer_index" if is_read else "write_buffer_index"
    if index >= len(pool):
        raise fail(CacheStageError, prim, f"{what} {index} is out of range: block "
                   f"{br.block.name!r} {kind[:-1]}s {len(pool)} buffer(s) "
                   f"{[r.buffer.name for r in pool]}", func)
    buf = pool[index].buffer
    scope_path = tree.enclosing_block(func, bpath)
    ws = writers(func, scope_path, buf)
    others = [b.block.name for p, b in ws if p != bpath and
              (not is_read or p[:len(lpath)] == lpath)]
    if others:
        raise fail(CacheStageError, prim, f"buffer {buf.name!r} is also written by "
                   f"{others}" + (" under the loop: the copy made at its start would be "
                                  "stale" if is_read else ": the copy back would overwrite "
                                  "their elements"), func)
    tile, doms = _tile(func, lpath, bpath, br, buf, kind, scope, prim)
    above = tree.loops_above(func, lpath) + [(lpath, tree.get(func, lpath))]
    for d, s in zip(tile.region, buf.shape):
        if not (holds_everywhere(d.min, above) and
                holds_everywhere(s - (d.min + d.extent), above)):
            raise fail(CacheStageError, prim, f"the tile {tile} of {buf.name!r} may reach "
                       "outside the buffer (a partial tile): the copy would access out of "
                       "bounds. Split by factors that divide, or pick another loop", func)
    if not is_read and not (isinstance(br.predicate, IntImm) and br.predicate.value):
        raise fail(CacheStageError, prim, f"block {br.block.name!r} has the predicate "
                   f"{br.predicate}: the copy back of its whole tile would store elements "
                   "it skips", func)
    if is_read and region_of(br.block.writes, buf) is not None:
        raise fail(CacheStageError, prim, f"block {br.block.name!r} also writes "
                   f"{buf.name!r}; stage it with write_at", func)
    if not is_read:
        volume = 1
        for d in tile.region:
            volume *= d.extent.value
        if _dense(br, buf, doms) != volume:
            raise fail(CacheStageError, prim, f"block {br.block.name!r} does not write all "
                       f"of its tile {tile} of {buf.name!r} in one iteration (or Cuvil "
                       "cannot show it does); the copy back would store elements nothing "
                       "computed. Pick another loop", func)
    blocks, bufs = _names(func)
    name = fresh_name(f"{buf.name}_{scope}", bufs | blocks)
    cache = Buffer(buf.shape, buf.dtype, name, (), scope, buf.align)
    src, dst = (buf, cache) if is_read else (cache, buf)
    copy = _copy(name, src, dst, tile, func, lpath)
    zero = tuple(const(0, s.dtype) for s in buf.shape)
    new_block = Retarget(buf, cache, zero, writes=not is_read).visit(br)
    func = tree.replace(func, bpath, new_block)
    loop_node = tree.get(func, lpath)
    items = subtrees(loop_node.body)
    step = bpath[len(lpath) + 1] if len(bpath) > len(lpath) + 1 else None
    k = step[1] if isinstance(step, tuple) and len(items) > 1 else 0
    items = items[:k] + [copy] + items[k:] if is_read else \
        items[:k + 1] + [copy] + items[k + 1:]
    func = tree.replace(func, lpath, with_fields(loop_node, body=seq(*items)))
    root = tree.get(func, scope_path)
    root_blk = root.block
    func = tree.replace(func, scope_path, with_fields(
        root, block=with_fields(root_blk, alloc_buffers=root_blk.alloc_buffers + (cache,))))
    return func, BlockRV(name)


@primitive("read_at", loop=LOOP, block=BLOCK, read_buffer_index=INDEX, scope=SCOPE,
           returns=BLOCK, error=CacheStageError)
def read_at(func, loop, block, read_buffer_index: int, scope: str):
    """Copy the tile of the block's ``read_buffer_index``-th read buffer that it reads
    per iteration of ``loop`` into a buffer in ``scope`` at the start of each iteration;
    the block reads the copy.  Returns the copy block (``<buffer>_<scope>``).

    Example::

        >>> import cuvil_tir as T
        >>> from schedules.handles import LoopRV
        >>> A = T.placeholder((8, 4), name="A")
        >>> f = T.create_prim_func([A, T.compute((8, 4), lambda i, j: A[i, j] + 1.0,
        ...                                      name="B")])
        >>> g, rv = read_at(f, LoopRV(f.body.block.body.loop_var), BlockRV("B"), 0, "local")
        >>> print(T.to_text(g.body.block.body.body.seq[0].block.body).strip())
        for ax0 in T.serial(1):
            for ax1 in T.serial(4):
                A_local[v0 + ax0, ax1] = A[v0 + ax0, ax1]
    """
    return _stage_at(func, loop, block, read_buffer_index, scope, "read_at", True)


@primitive("write_at", loop=LOOP, block=BLOCK, write_buffer_index=INDEX, scope=SCOPE,
           returns=BLOCK, error=CacheStageError)
def write_at(func, loop, block, write_buffer_index: int, scope: str):
    """Make the block write its ``write_buffer_index``-th write buffer into a buffer in
    ``scope``, copied back at the end of each iteration of ``loop`` (the tile it wrote
    there, which it must write whole).  Returns the copy block (``<buffer>_<scope>``).

    Example::

        >>> import cuvil_tir as T, schedules as S
        >>> X = T.placeholder((6,), name="X")
        >>> sch = S.Schedule(T.create_prim_func([X, T.compute((6,), lambda i: -X[i],
        ...                                                   name="Y")]))
        >>> io, _ = sch.split(sch.get_loops("Y")[0], [3, 2])
        >>> sch.write_at(io, "Y", 0, "local")
        BlockRV('Y_local')
    """
    return _stage_at(func, loop, block, write_buffer_index, scope, "write_at", False)


__all__ = ["read_at", "write_at"]
