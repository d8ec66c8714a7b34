"""Which space the tuner searches for a target: chosen from what the target kind
declares through the backend contract (:mod:`cuvil_tir.target`), never from its name.

1. The kind's own ``tuning_space(func, target)`` when it gives one (an accelerator's
   tiling over its memories, scored by simulated cycles);
2. thread axes (an axis of level ``thread`` among the kind's ``axes``) and a
   ``shared`` memory: the GPU rules of :func:`gpu_space`
   (MetaSchedule's multi-level tiling shape: a grid level bound to the first
   block-level axis, a thread level bound to the first thread axis, per-thread register
   tiles accumulated in ``local`` memory, operands fetched cooperatively into
   ``shared`` memory at the outer reduction loop);
3. memories of its own (beyond the host's) that a registered tensor intrinsic takes
   its operands from, and a reduction block that intrinsic computes: the staged rule
   of :mod:`.staged` (tiles staged into those memories, sized to fit them, buffering
   depth 1 or 2 when the kind declares a ``buffering`` annotation), measured by the
   kind (an accelerator's simulated cycles);
4. a machine (``machine(target)``: vector lanes, registers, caches, cores): the CPU
   rules of :func:`.space.generated_space`, with every registered tensor intrinsic
   that a reduction block computes and the target builds offered beside the register
   tile (:mod:`.autotensorize`), for a GEMM of int8 or bfloat16 operands on a
   target with the x86 dot-product instructions, B packed for them (:mod:`.dot_rule`),
   and for a GEMV-like block the reduction swept outside its columns
   (:mod:`.stream_rule`);
5. otherwise a :class:`.errors.TuneError` that says what the kind would need to
   declare.

A function with symbolic sizes is refused first: a space is sized for concrete
extents.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((64,), name="A")
    >>> f = T.create_prim_func([A, T.compute((64,), lambda i: A[i] * 2.0, name="B")])
    >>> callable(space_for(f, "llvm")), rule_for("cuda")
    (True, 'gpu')
"""

from __future__ import annotations

from cuvil_tir import dtype as D
from cuvil_tir.errors import CuvilError
from cuvil_tir.target import SCALAR_MACHINE, as_target, TargetKind
from cuvil_tir.analysis import tree
from cuvil_tir.stmt import BlockRealize, Block, For
from cuvil_tir.visitor import post_order_visit

from .autotensorize import matches
from .dot_rule import dot_choices
from .errors import TuneError
from .space import generated_space, inlinable, reductions_of
from .staged import staged_match, staged_space
from .stream_rule import stream_choices

#: thread counts a GPU thread block may take (capped by the declared limits)
THREADS = (32, 64, 128, 256, 512, 1024)


def _axes(kind) -> list:
    """``(tag, level, limit)`` of every parallel axis the kind declares (its ``axes``:
    :class:`~cuvil_tir.thread_axes.ThreadAxis` declarations)."""
    return [(a.tag, a.level, a.limit) for a in kind.axes]


def rule_for(target) -> str:
    """Which rule family the target's declarations select: ``"kind"`` (its own
    ``tuning_space``), ``"gpu"``, ``"cpu"``, or ``"none"``.

    Example::

        >>> rule_for("llvm"), rule_for("c")
        ('cpu', 'cpu')
    """
    t = as_target(target)
    kind = t.kind_obj
    if type(kind).tuning_space is not _base_tuning_space():
        return "kind"
    levels = {level for _, level, _ in _axes(kind)}
    scopes = {m.scope for m in kind.memories}
    if "thread" in levels and "shared" in scopes:
        return "gpu"
    if kind.machine(t) != SCALAR_MACHINE:
        return "cpu"
    return "none"


def _base_tuning_space():
    return TargetKind.tuning_space


def check_sizes(func) -> None:
    """Refuse a function whose parameters have symbolic sizes (a :class:`TuneError`
    naming the first).

    Example::

        >>> import cuvil_tir as T
        >>> n = T.size_var("n")
        >>> check_sizes(T.create_prim_func([T.placeholder((n,), name="A")]))
        Traceback (most recent call last):
        ...
        schedules.tune.errors.TuneError: [CVL-E198] tune: parameter 'A' has the symbolic shape (n,): a space is sized for concrete extents; create the function with constant sizes (one per shape you want tuned)
    """
    for p in func.params:
        shape = getattr(p, "shape", ())
        if not all(isinstance(getattr(s, "value", None), int) for s in shape):
            dims = ", ".join(str(s) for s in shape)
            raise TuneError(f"tune: parameter {p.name!r} has the symbolic shape "
                            f"({dims}{',' if len(shape) == 1 else ''}): a space is sized "
                            "for concrete extents; create the function with constant "
                            "sizes (one per shape you want tuned)")


def space_for(func, target):
    """The space the tuner searches for ``func`` on ``target`` (module doc)."""
    check_sizes(func)
    t = as_target(target)
    kind = t.kind_obj
    rule = rule_for(t)
    if rule == "kind":
        own = kind.tuning_space(func, t)
        if own is not None:
            return own
        rule = "gpu" if "thread" in {lv for _, lv, _ in _axes(kind)} else \
            "cpu" if kind.machine(t) != SCALAR_MACHINE else "none"
    if rule == "gpu":
        return gpu_space(func, t)
    staged = staged_match(func, t)
    if staged is not None:
        return staged_space(func, t, *staged)
    if rule == "cpu":
        blocks = reductions_of(func)
        return generated_space(func, kind.machine(t),
                               {name: matches(func, name, t) for name in blocks},
                               {name: dot_choices(func, name, t) +
                                stream_choices(func, name, kind.machine(t)) for name in blocks})
    raise TuneError(
        f"tune: target kind {kind.name!r} declares nothing a space can be generated "
        "from: no tuning_space(func, target), no thread axes with a 'shared' memory, "
        "and machine(target) is the scalar default (no vector lanes, registers or "
        "caches), and no memories of its own that a registered tensor intrinsic of "
        "one of the function's reduction blocks takes its operands from.  Pass "
        "space=your_schedule_function, or declare one of these in the kind")


def _limits(target):
    """(grid axis, thread axis, most threads per block, shared bytes or None)."""
    kind = target.kind_obj
    axes = _axes(kind)
    grid = next(((n, m) for n, lv, m in axes if lv == "grid"), None)
    thread = next(((n, m) for n, lv, m in axes if lv == "thread"), None)
    if grid is None or thread is None:
        raise TuneError(f"tune: target kind {kind.name!r} declares thread axes but no "
                        "block-level (grid) axis to spread thread blocks over")
    most = min(thread[1] or THREADS[-1], kind.max_threads or THREADS[-1])
    shared = next((m.capacity_bytes for m in kind.memories if m.scope == "shared"), None)
    return grid[0], thread[0], most, shared


def gpu_space(func, target):
    """GPU rules (module doc) for ``func`` on ``target``, sized by its declared thread
    axes and shared memory.

    Example::

        >>> import cuvil_tir as T, schedules as S
        >>> A = T.placeholder((1024,), name="A")
        >>> f = T.create_prim_func([A, T.compute((1024,), lambda i: A[i] + 1.0, name="B")])
        >>> sch = S.Schedule(f, seed=0); gpu_space(f, "cuda")(sch)
        >>> "blockIdx.x" in str(sch.func) and "threadIdx.x" in str(sch.func)
        True
    """
    target = as_target(target)
    grid, thread, most, _ = _limits(target)
    reductions = reductions_of(func)
    inlined = inlinable(func, reductions)
    counts = [t for t in THREADS if t <= most] or [most]

    def space(sch):
        for name in inlined:
            _try(sch.compute_inline, sch.get_block(name))
        done = set()
        for name in reductions:   # every block the rule makes is its
            before = set(_block_names(sch)) - {name}
            _gpu_reduction(sch, name, grid, thread, most)
            done |= set(_block_names(sch)) - before
        for name in [b for b in _block_names(sch) if b not in done]:
            loops = sch.get_loops(sch.get_block(name))
            if not loops:
                continue
            fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
            bx, tx = sch.split(fused, [None, sch.sample_categorical(counts, [1] * len(
                counts))])
            sch.bind(bx, grid)
            sch.bind(tx, thread)

    return space


def _gpu_reduction(sch, name, grid, thread, most) -> None:
    """Grid / thread / register tiling of one reduction block (module doc)."""
    node = tree.get(sch.func, tree.find_block(sch.func, name))
    kinds = [iv.kind for iv in node.block.iter_vars]
    block = sch.get_block(name)
    loops = sch.get_loops(block)
    if len(loops) != len(kinds) or "spatial" not in kinds:
        return
    grids, threads, inner, red_o, red_i, tiles = [], [], [], [], [], []
    for lp, kind in zip(loops, kinds):
        if kind == "spatial":
            tile = sch.sample_perfect_tile(lp, 3, max_innermost_factor=4)
            g, t, i = sch.split(lp, tile)
            grids.append(g)
            threads.append(t)
            inner.append(i)
            tiles.append(tile)
        else:
            o, i = sch.split(lp, sch.sample_perfect_tile(lp, 2, max_innermost_factor=8))
            red_o.append(o)
            red_i.append(i)
    # the outer reduction loop sits above the threads, so that all threads of a block
    # fetch each slice of the operands together and then all use it
    sch.reorder(*grids, *red_o, *threads, *red_i, *inner)
    bx = sch.fuse(*grids) if len(grids) > 1 else grids[0]
    tx = sch.fuse(*threads) if len(threads) > 1 else threads[0]
    sch.bind(bx, grid)
    sch.bind(tx, thread)
    nthreads = 1
    for tile in tiles:
        nthreads *= int(tile[1])
    acc = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(acc, bx)
    out = sch.get_loops(acc)[-len(tiles):]   # the copy-out, one thread per register tile
    parts = [sch.split(lp, [int(t[1]), int(t[2])]) for lp, t in zip(out, tiles)]
    sch.reorder(*[p[0] for p in parts], *[p[1] for p in parts])
    ct = [p[0] for p in parts]
    sch.bind(sch.fuse(*ct) if len(ct) > 1 else ct[0], thread)
    for idx in range(len(node.block.reads)):   # cooperative fetch into shared memory
        sh = _try(sch.cache_read, block, idx, "shared")
        if sh is None:
            continue
        if _try(sch.compute_at, sh, red_o[-1]) is None and \
                not _under(sch, sh, red_o[-1]):
            continue
        above = [lp.var for lp in sch.get_loops(sh)]
        copy = sch.get_loops(sh)[above.index(red_o[-1].var) + 1:]
        if copy:
            fused = sch.fuse(*copy) if len(copy) > 1 else copy[0]
            split = _try(sch.split, fused, [None, nthreads])
            if split is not None:
                sch.bind(split[1], thread)
    for lp in [*red_i, *inner]:
        _try(sch.unroll, lp)
    _try(sch.decompose_reduction, block, red_o[0])



def _under(sch, block, loop) -> bool:
    return any(lp.var is loop.var for lp in sch.get_loops(block))


def _extent(sch, loop) -> int:
    return tree.get(sch.func, tree.find_loop(sch.func, loop.var)).extent.value


def _block_names(sch) -> list:
    return [s.block.name for _, s in tree.walk(sch.func)
            if isinstance(s, BlockRealize) and s.block.name != "root"]


def _try(fn, *args):
    try:
        return fn(*args)
    except CuvilError:
        return None


def gpu_prune(func, target):
    """Why a scheduled ``func`` cannot run on the GPU ``target`` (threads per block or
    shared memory beyond the declared limits), or None.

    Example::

        >>> import cuvil_tir as T
        >>> gpu_prune(T.create_prim_func([T.placeholder((4,), name="A")]), "cuda")
    """
    t = as_target(target)
    _, _, most, shared = _limits(t)
    tags = {tag for tag, level, _ in _axes(t.kind_obj) if level == "thread"}
    extents: dict = {}   # thread tag -> the widest loop bound to it
    worst = [0]

    def visit(s):
        if isinstance(s, For) and s.kind == "thread_binding" and s.thread_tag in tags:
            extents[s.thread_tag] = max(extents.get(s.thread_tag, 1),
                                        getattr(s.extent, "value", 1))
        if isinstance(s, Block):
            for b in s.alloc_buffers:
                if b.scope == "shared":
                    n = 1
                    for e in b.shape:
                        n *= getattr(e, "value", 1)
                    worst[0] += n * max(1, D.bits(D.element(str(b.dtype))) // 8)
    post_order_visit(func.body, visit)
    threads = 1
    for n in extents.values():
        threads *= n
    if threads > most:
        return f"{threads} threads per block, at most {most}"
    if shared is not None and worst[0] > shared:
        return f"{worst[0]} bytes of shared memory, {shared} per block"
    return None


__all__ = ["THREADS", "check_sizes", "gpu_prune", "gpu_space", "rule_for", "space_for"]
