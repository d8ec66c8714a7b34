"""MetaSchedule's completion of a CUDA sketch before TVM builds it, in Cuvil.

A MetaSchedule test's sketch is what the design space holds; TVM builds a candidate
only after its postprocessors.  Two of them give a sketch's annotations their meaning
and Cuvil's lowering honours those annotations itself (``meta_schedule.
cooperative_fetch``: :mod:`cuvil_tir.transform.gpu_cooperative_fetch`;
``meta_schedule.auto_tensorize``: the tensor intrinsic of that name).  The third,
``RewriteUnboundBlock``, binds the blocks a sketch left outside every kernel; TVM's
own build refuses such a function, and so does Cuvil's, so the runner applies the
same rewrite, with Cuvil's schedule primitives, to the MetaSchedule sketches only:

* a block under ``threadIdx`` loops but no ``blockIdx`` loop: the loops above the
  first thread loop (up to the first loop with several children) are fused and bound
  to ``blockIdx.x``;
* a block under no thread loop: its outer data-parallel loops (up to the first with
  several children) are fused, split by ``min(1024, extent)`` and bound to
  ``blockIdx.x`` / ``threadIdx.x`` (beyond 256 x 1024 iterations, the split keeps a
  serial loop inside, as TVM's does).

Example::

    >>> import cuvil_tir as T
    >>> f = T.parse('''
    ... @T.prim_func
    ... def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    ...     for i in range(64):
    ...         with T.block("B"):
    ...             v = T.axis.spatial(64, i)
    ...             B[v] = A[v]
    ... ''')
    >>> "threadIdx.x" in T.to_text(rewrite_unbound_blocks(f))
    True
"""

from __future__ import annotations

import schedules as S
from cuvil_tir.stmt import Block, BlockRealize, For, SeqStmt
from cuvil_tir.thread_axes import is_thread_axis, thread_axis
from cuvil_tir.visitor import post_order_visit, used_vars

MAX_THREADS = 1024
MAX_BLOCKS = 256


def _level(loop):
    if loop.kind != "thread_binding" or not is_thread_axis(loop.thread_tag):
        return None
    return thread_axis(loop.thread_tag).level


def unbound_blocks(func) -> list:
    """Names of the outermost blocks not under both a ``blockIdx`` and a
    ``threadIdx`` loop (the root block aside)."""
    found = []

    def walk(s, grid, thread):
        if isinstance(s, For):
            lv = _level(s)
            g, t = grid + (lv == "grid"), thread + (lv == "thread")
            if g == 0 or t == 0:
                walk(s.body, g, t)
        elif isinstance(s, BlockRealize):
            found.append(s.block.name)
        elif isinstance(s, SeqStmt):
            for c in s.seq:
                walk(c, grid, thread)
        elif hasattr(s, "body"):
            walk(s.body, grid, thread)
    root = func.body.block.body if isinstance(func.body, BlockRealize) else func.body
    walk(root, 0, 0)
    return found


def _data_parallel(sch, loop, block) -> bool:
    var = sch.get(loop).loop_var
    blk = sch.get(block)
    hit = []
    for br in _realizes(sch.func, blk):
        for iv, value in zip(br.block.iter_vars, br.iter_values):
            if iv.kind != "spatial":
                post_order_visit(value, lambda n: hit.append(1) if n is var else None)
    return not hit


def _realizes(func, blk) -> list:
    out = []
    post_order_visit(func.body, lambda n: out.append(n) if isinstance(n, BlockRealize)
                     and n.block is blk else None)
    inner = []
    for br in out:
        post_order_visit(br, lambda n: inner.append(n) if isinstance(n, BlockRealize)
                         else None)
    return inner


def bind_block(sch, name: str) -> None:
    """TVM's ``BindBlockThreadIdx`` for one unbound block (module docstring)."""
    block = sch.get_block(name)
    loops = sch.get_loops(block)
    i_grid = i_thread = multi = spatial = -1
    for i, lp in enumerate(loops):
        node = sch.get(lp)
        lv = _level(node)
        if lv == "grid" and i_grid == -1:
            i_grid = i
        if lv == "thread" and i_thread == -1:
            i_thread = i
        if node.kind != "serial" and multi == -1:
            multi = i
        if not isinstance(node.body, (For, BlockRealize)) and multi == -1:
            multi = i + 1
        if _data_parallel(sch, lp, block) and spatial == i - 1:
            spatial = i
    multi = len(loops) if multi == -1 else multi
    if i_grid != -1:
        return
    if spatial == -1:
        sch.add_unit_loop(loops[0] if loops else block)
        loops = sch.get_loops(block)
        spatial, i_thread = 0, (i_thread + 1 if i_thread != -1 else -1)
        multi += 1
    if i_thread != -1:
        fused = sch.fuse(*loops[:min(multi, i_thread, spatial + 1)]) \
            if min(multi, i_thread, spatial + 1) > 1 else loops[0]
        sch.bind(fused, "blockIdx.x")
        return
    n = min(multi, spatial + 1)
    fused = sch.fuse(*loops[:n]) if n > 1 else loops[0]
    extent = sch.get(fused).extent
    ext = extent.value if hasattr(extent, "value") else None
    if ext is not None and ext <= MAX_BLOCKS * MAX_THREADS:
        bx, tx = sch.split(fused, [None, min(MAX_THREADS, ext)])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        return
    serial, bx, tx = sch.split(fused, [None, MAX_BLOCKS, MAX_THREADS])
    sch.reorder(bx, tx, serial)
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")


def rewrite_unbound_blocks(func):
    """``func`` with every unbound block bound (module docstring); ``func`` itself
    when there is none."""
    names = unbound_blocks(func)
    if not names:
        return func
    sch = S.Schedule(func)
    for name in names:
        bind_block(sch, name)
    return sch.func


AUTO_TENSORIZE = "meta_schedule.auto_tensorize"
AUTO_TENSORIZE_INIT = "meta_schedule.auto_tensorize_init"


def _tensorize_blocks(func) -> list:
    found = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, Block)
                     and dict(n.annotations).get(AUTO_TENSORIZE) else None)
    return found


def _reduces(sch, loop) -> bool:
    """Whether a block under ``loop`` binds its variable to a reduction iterator
    (TVM's ``GetLoopIterType`` is not data-parallel)."""
    var = sch.get(loop).loop_var
    hit = []

    def look(n):
        if isinstance(n, BlockRealize):
            hit.extend(1 for iv, value in zip(n.block.iter_vars, n.iter_values)
                       if iv.kind != "spatial" and var in used_vars(value))
    post_order_visit(sch.get(loop).body, look)
    return bool(hit)


def rewrite_tensorize(func):
    """MetaSchedule's ``RewriteReductionBlock`` and ``RewriteTensorize`` for the blocks
    annotated ``meta_schedule.auto_tensorize``: a reduction block's init is decomposed
    before its outermost reduction loop and tensorized with the intrinsic of
    ``meta_schedule.auto_tensorize_init``, then every annotated block is tensorized
    with its intrinsic (TVM's names are registered: :mod:`targets.cuda.tvm_wmma`).
    ``func`` itself when no block is annotated.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.parse('''
        ... @T.prim_func
        ... def f(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32")):
        ...     for i in range(16):
        ...         with T.block("B"):
        ...             v = T.axis.spatial(16, i)
        ...             B[v, 0] = A[v, 0]
        ... ''')
        >>> rewrite_tensorize(f) is f
        True
    """
    blocks = _tensorize_blocks(func)
    if not blocks:
        return func
    sch = S.Schedule(func)
    todo = []
    for blk in blocks:
        ann = dict(blk.annotations)
        rv = sch.get_block(blk.name)
        if blk.init is not None:
            point = next((lp for lp in sch.get_loops(rv) if _reduces(sch, lp)), None)
            if point is not None:
                init = sch.decompose_reduction(rv, point)
                if ann.get(AUTO_TENSORIZE_INIT):
                    todo.append((init, ann[AUTO_TENSORIZE_INIT]))
        todo.append((rv, ann[AUTO_TENSORIZE]))
    for rv, intrin in todo:
        sch.tensorize(rv, intrin)
    return sch.func


__all__ = ["rewrite_tensorize", "rewrite_unbound_blocks", "unbound_blocks", "bind_block"]
