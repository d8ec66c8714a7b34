"""``cache_inplace``: stage a buffer that one block both reads and writes (an in-place
operation, often an opaque call) through a copy in another scope, copied in right
before the block and back right after it (TVM's ``cache_inplace``).

Before ``cache_inplace(ext_call, 0, "local")``::

    for i0 in T.serial(1):
        with T.block("ext_call"):
            T.reads(data_io[0:64])
            T.writes(data_io[0:64])
            T.evaluate(T.call_extern("call_impl", data_io.data, dtype=""))

after::

    data_io_local = T.alloc_buffer((64,), "int32", scope="local")
    for i0 in T.serial(1):
        for ax0 in T.serial(64):
            with T.block("data_io_local"):
                data_io_local[v0] = data_io[v0]
        with T.block("ext_call"):
            T.reads(data_io_local[0:64])
            T.writes(data_io_local[0:64])
            T.evaluate(T.call_extern("call_impl", data_io_local.data, dtype=""))
        for ax0 in T.serial(64):
            with T.block("data_io_local_1"):
                data_io[v0] = data_io_local[v0]

The copies sit next to the block, under the innermost loop around it (or in its scope
block's body), so each instance of the block gets its own copy in and out and no other
block runs between them.  They cover the block instance's region: what it reads
together with what it declares it writes, so the copy back returns unchanged values for
elements the block did not write.  TensorIR names both copies like the buffer; Cuvil
block names are unique, so the copy back is ``<buffer>_<scope>_1``.

Example::

    >>> import cuvil_tir as T
    >>> from schedules.handles import BlockRV
    >>> f = T.parse('''
    ... def f(A: T.Buffer((4,), "float32")):
    ...     for i in range(4):
    ...         with T.block("inc"):
    ...             vi = T.axis.remap("S", [i])
    ...             A[vi] = A[vi] + T.float32(1)
    ... ''')
    >>> g, (cin, cout) = cache_inplace(f, BlockRV("inc"), 0, "local")
    >>> cin.name, cout.name, [b.name for b in g.body.block.alloc_buffers]
    ('A_local', 'A_local_1', ['A_local'])
"""

from __future__ import annotations

from cuvil_tir.analysis import tree
from cuvil_tir.analysis.regions import accessed_region, loop_doms, scope_doms, simplify
from cuvil_tir.expr import const
from cuvil_tir.stmt import BlockRealize, BufferRegion, For, Range, seq
from cuvil_tir.transform.plan_allocation import Retarget
from cuvil_tir.visitor import substitute

from ..analysis import block_path, fresh_name
from ..errors import CacheStageError, fail
from ..primitive import BLOCK, BLOCKS, SCOPE, primitive
from .cache import _Stage, _buffer_at, _copy_block, _names
from .nests import block_names, subtrees, with_fields


def _container(func, bpath):
    """``(node, path)``: the innermost loop around the block inside its scope, else
    the scope block itself (TVM's insertion place)."""
    loops = tree.loops_above(func, bpath)
    if loops:
        path, loop = loops[-1]
        return loop, path
    scope_path = tree.enclosing_block(func, bpath)
    return tree.get(func, scope_path).block, scope_path


def _instance_region(br: BlockRealize, buf) -> BufferRegion | None:
    """What one instance of the block reads or writes of ``buf``, in the variables
    around it (its iter vars replaced by their bindings)."""
    blk = br.block
    region = accessed_region(blk, buf)
    if region is None:
        return None
    binding = {iv.var: v for iv, v in zip(blk.iter_vars, br.iter_values)}
    return BufferRegion(buf, tuple(Range(simplify(substitute(d.min, binding)),
                                         simplify(substitute(d.extent, binding)))
                                   for d in region.region))


@primitive("cache_inplace", block=BLOCK, scope=SCOPE, returns=BLOCKS)
def cache_inplace(func, block, read_buffer_index: int, scope: str):
    """Stage the block's ``read_buffer_index``-th read buffer, which the block also
    writes, through a new buffer in ``scope``: a copy in right before the block and a
    copy back right after it; the block reads and writes the new buffer.  Returns the
    two copy blocks, the copy in first (see the module docstring for before/after).

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> f = T.parse('''
        ... def f(A: T.Buffer((4,), "float32")):
        ...     for i in range(4):
        ...         with T.block("inc"):
        ...             vi = T.axis.remap("S", [i])
        ...             A[vi] = A[vi] + T.float32(1)
        ... ''')
        >>> sch = S.Schedule(f)
        >>> sch.cache_inplace("inc", 0, "local")
        [BlockRV('A_local'), BlockRV('A_local_1')]
        >>> sch.get("inc").writes[0].buffer.name
        'A_local'
    """
    prim = "cache_inplace"
    bpath = block_path(func, block, prim)
    br = tree.get(func, bpath)
    blk = br.block
    if not bpath:
        raise fail(CacheStageError, prim, "the root block has no place around it for "
                   "the copies; pass a block inside the function", func)
    buf = _buffer_at(func, blk, read_buffer_index, "reads", prim)
    if not any(r.buffer is buf for r in blk.writes):
        raise fail(CacheStageError, prim, f"block {blk.name!r} reads {buf.name!r} but does "
                   f"not write it (its writes: {[r.buffer.name for r in blk.writes]}); "
                   "cache_inplace stages a buffer the block both reads and writes: use "
                   "cache_read for a buffer it only reads", func, blk)
    container, cpath = _container(func, bpath)
    scope_path = tree.enclosing_block(func, bpath)
    loops = tree.loops_above(func, cpath) if isinstance(container, For) else []
    if isinstance(container, For):
        loops = loops + [(cpath, container)]
    around = {f.loop_var: Range(f.min, f.extent) for _, f in tree.ancestors(func, cpath)
              if isinstance(f, For)}
    outer = {**around, **scope_doms(func, bpath), **loop_doms(loops)}
    region = _instance_region(br, buf)
    blocks, bufs = _names(func)
    name = fresh_name(f"{buf.name}_{scope}", bufs | blocks)
    back = fresh_name(name, bufs | blocks | {name})
    cache = buf.with_changes(name=name, strides=(), scope=scope)
    zero = tuple(const(0, s.dtype) for s in buf.shape)
    copy_in, rv_in = _copy_block(name, buf, cache, region, outer, buf.shape, zero, zero)
    copy_out, rv_out = _copy_block(back, cache, buf, region, outer, buf.shape, zero, zero)
    retarget = Retarget(buf, cache, zero, writes=True)

    def place(node):
        items = subtrees(node.body)
        pos = next(k for k, s in enumerate(items) if blk.name in block_names(s))
        return with_fields(node, body=seq(*items[:pos], copy_in, items[pos], copy_out,
                                          *items[pos + 1:]))

    scope_block = tree.get(func, scope_path).block
    body = _Stage(container, place, scope_block, cache,
                  {blk.name: retarget.visit}).visit(func.body)
    return func.with_body(body), [rv_in, rv_out]


__all__ = ["cache_inplace"]
