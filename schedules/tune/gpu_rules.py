"""The GPU rules of the tuner: MetaSchedule's multi-level tiling, sized by what a kind
with thread axes and a ``shared`` memory declares (never by its name).

Each reduction block with a spatial axis gets a categorical first decision,
``"tile"`` or one ``"tensor:<intrinsic>"`` per tensor core it computes
(:mod:`.gpu_tensorcore`: warp tiles of a registered warp-wide GEMM intrinsic, the
accumulator in the kind's per-warp memory).  ``"tile"`` is:

* each spatial axis split into grid / virtual-thread / thread / register parts (the
  virtual part only when the kind declares an axis of level ``virtual``, TVM's
  ``vthread``: the threads' register tiles interleaved by that stride), the grid
  parts fused onto the first ``grid`` axis, the virtual parts onto the first
  ``virtual`` axis, the thread parts onto the first ``thread`` axis;
* the reduction split in two, its outer loop above the (virtual) threads, each
  operand fetched cooperatively into ``shared`` memory there (its copy loops fused
  and spread over the same threads), with 1 to 3 pipeline stages of those fetches
  (``software_pipeline_stage`` on the outer reduction loop);
* a ``local`` accumulator per thread, copied out by the threads.

Other blocks are fused and split over grid and threads (the thread count a
categorical within the declared limit).  :func:`gpu_prune` refuses a candidate whose
threads or shared bytes (times its pipeline versions) pass the declared limits.

Example::

    >>> import cuvil_tir as T, schedules as S
    >>> A = T.placeholder((1024,), name="A")
    >>> f = T.create_prim_func([A, T.compute((1024,), lambda i: A[i] + 1.0, name="B")])
    >>> sch = S.Schedule(f, seed=0); gpu_space(f, "cuda")(sch)
    >>> "blockIdx.x" in str(sch.func) and "threadIdx.x" in str(sch.func)
    True
"""

from __future__ import annotations

from dataclasses import dataclass

from cuvil_tir.analysis import tree
from cuvil_tir.errors import CuvilError
from cuvil_tir.stmt import Allocate, Block, BlockRealize, BufferStore, For
from cuvil_tir.target import as_target
from cuvil_tir.transform.pass_manager import PassContext
from cuvil_tir.transform.plan_allocation import plan_buffer_allocation
from cuvil_tir.visitor import post_order_visit

from .errors import TuneError
from .gpu_tensorcore import STAGES, tensor_cores, tensorcore_tiling
from .space import inlinable, reductions_of

#: thread counts a GPU thread block may take (capped by the declared limits)
THREADS = (32, 64, 128, 256, 512, 1024)
#: the loop annotation whose stages give a shared tile its versions
PIPELINE = "software_pipeline_stage"


@dataclass(frozen=True)
class GpuAxes:
    """What the rules read from a kind: the first ``grid`` axis, the ``thread`` axes
    by dimension (x first), the first ``virtual`` axis (None: none declared), the
    most threads per block, the ``shared`` capacity in bytes (None: unbounded) and
    each axis' declared limit.

    Example::

        >>> gpu_axes("cuda").threads
        ('threadIdx.x', 'threadIdx.y', 'threadIdx.z')
    """

    grid: str
    threads: tuple
    virtual: str | None
    most: int
    shared: int | None
    limits: dict

    @property
    def tensor_axes(self) -> tuple:
        """``(grid, threads, shared)`` as :func:`.gpu_tensorcore.tensorcore_tiling`
        takes them."""
        return self.grid, self.threads, self.shared


def gpu_axes(target) -> GpuAxes:
    """The :class:`GpuAxes` ``target``'s kind declares; a kind without a grid axis is
    a :class:`TuneError`.  The shared capacity is the target's
    (:meth:`~cuvil_tir.target.TargetKind.memories_for`: a GPU's depends on its
    architecture), the one lowering checks."""
    target = as_target(target)
    kind = target.kind_obj
    axes = list(kind.axes)
    grid = next((a.tag for a in axes if a.level == "grid"), None)
    threads = sorted((a for a in axes if a.level == "thread"), key=lambda a: a.dim)
    if grid is None or not threads:
        raise TuneError(f"tune: target kind {kind.name!r} declares thread axes but no "
                        "block-level (grid) axis to spread thread blocks over")
    most = min(threads[0].limit or THREADS[-1], kind.max_threads or THREADS[-1])
    shared = next((m.capacity_bytes for m in kind.memories_for(target)
                   if m.scope == "shared"), None)
    virtual = next((a.tag for a in axes if a.level == "virtual"), None)
    return GpuAxes(grid, tuple(a.tag for a in threads), virtual, most, shared,
                   {a.tag: a.limit for a in axes if a.limit is not None})


def gpu_space(func, target):
    """GPU rules (module doc) for ``func`` on ``target``, sized by its declared thread
    axes and shared memory.

    Example::

        >>> import cuvil_tir as T, schedules as S
        >>> A = T.placeholder((1024,), name="A")
        >>> f = T.create_prim_func([A, T.compute((1024,), lambda i: A[i] * 2.0, name="B")])
        >>> sch = S.Schedule(f, seed=1); gpu_space(f, "cuda")(sch)
        >>> "blockIdx.x" in str(sch.func) and "threadIdx.x" in str(sch.func)
        True
    """
    target = as_target(target)
    axes = gpu_axes(target)
    reductions = reductions_of(func)
    inlined = inlinable(func, reductions)
    counts = [t for t in THREADS if t <= axes.most] or [axes.most]
    cores = {name: _tensor_cores(func, name, target, axes) for name in reductions}

    def space(sch):
        for name in inlined:
            _try(sch.compute_inline, sch.get_block(name))
        done = set()
        for name in reductions:   # every block the rule makes is its
            before = set(_block_names(sch)) - {name}
            labels = ["tile"] + [tc.label for tc in cores[name]]
            # plain tiling as likely as all tensor-core choices together
            pick = sch.sample_categorical(labels, [len(labels) - 1] + [1] * (
                len(labels) - 1)) if len(labels) > 1 else "tile"
            if pick == "tile":
                _gpu_reduction(sch, name, axes)
            else:
                tensorcore_tiling(cores[name][labels.index(pick) - 1], sch, name,
                                  axes.tensor_axes)
            done |= set(_block_names(sch)) - before
        for name in [b for b in _block_names(sch) if b not in done]:
            loops = sch.get_loops(sch.get_block(name))
            if not loops:
                continue
            fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
            bx, tx = sch.split(fused, [None, sch.sample_categorical(counts, [1] * len(
                counts))])
            sch.bind(bx, axes.grid)
            sch.bind(tx, axes.threads[0])

    return space


def _tensor_cores(func, name, target, axes) -> list:
    if len(axes.threads) < 3:
        return []     # warps of rows and of columns each need an axis of their own
    return tensor_cores(func, name, target, axes.tensor_axes)


def _gpu_reduction(sch, name, axes) -> None:
    """Grid / virtual / thread / register tiling of one reduction block (module doc)."""
    node = tree.get(sch.func, tree.find_block(sch.func, name))
    kinds = [iv.kind for iv in node.block.iter_vars]
    block = sch.get_block(name)
    loops = sch.get_loops(block)
    if len(loops) != len(kinds) or "spatial" not in kinds:
        return
    parts = 4 if axes.virtual else 3
    levels, red_o, red_i, tiles = [[] for _ in range(parts)], [], [], []
    for lp, kind in zip(loops, kinds):
        if kind == "spatial":
            tile = sch.sample_perfect_tile(lp, parts, max_innermost_factor=4)
            for level, part in zip(levels, sch.split(lp, tile)):
                level.append(part)
            tiles.append(tile)
        else:
            o, i = sch.split(lp, sch.sample_perfect_tile(lp, 2, max_innermost_factor=8))
            red_o.append(o)
            red_i.append(i)
    grids, inner = levels[0], levels[-1]
    bound = list(zip(levels[1:-1], [axes.virtual, axes.threads[0]][-(parts - 2):]))
    # the outer reduction loop sits above the threads, so that all threads of a block
    # fetch each slice of the operands together and then all use it
    sch.reorder(*grids, *red_o, *[lp for level, _ in bound for lp in level], *red_i,
                *inner)
    bx = _fused(sch, grids)
    sch.bind(bx, axes.grid)
    for level, tag in bound:
        sch.bind(_fused(sch, level), tag)
    nthreads = _product(tile[-2] for tile in tiles)
    acc = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(acc, bx)
    # the copy-out, one thread per register tile: a loop per axis whose tile in the
    # block has more than one element (reverse_compute_at leaves out the others)
    above = [lp.var for lp in sch.get_loops(acc)]
    out = sch.get_loops(acc)[above.index(bx.var) + 1:]
    kept = [t for t in tiles if _product(t[1:]) > 1]
    if out and len(out) == len(kept):
        split = [sch.split(lp, [int(f) for f in t[1:]]) for lp, t in zip(out, kept)]
        sch.reorder(*[p[n] for n in range(parts - 1) for p in split])
        for n, (_, tag) in enumerate(bound):
            sch.bind(_fused(sch, [p[n] for p in split]), tag)
    fetched = _fetch(sch, block, len(node.block.reads), red_o[-1], nthreads, axes)
    stages = int(sch.sample_categorical(list(STAGES), [1] * len(STAGES))) \
        if fetched else 1
    if stages > 1 and sch.get(red_o[-1]).extent.value >= stages:
        # the fetches of later slices are issued before this slice's product
        sch.annotate(red_o[-1], PIPELINE, [0] * fetched + [stages - 1])
    for lp in [*red_i, *inner]:
        _try(sch.unroll, lp)
    _try(sch.decompose_reduction, block, red_o[0])


def _fetch(sch, block, nreads, loop, nthreads, axes) -> int:
    """Cache each read of ``block`` in ``shared`` memory at ``loop``, its copy spread
    over the ``nthreads`` threads; how many were fetched."""
    fetched = 0
    for idx in range(nreads):
        # this block's copy only: another reader (a softmax's next reduction) is
        # scheduled in a kernel of its own
        sh = _try(sch.cache_read, block, idx, "shared", [block])
        if sh is None:
            continue
        if _try(sch.compute_at, sh, loop) is None and not _under(sch, sh, loop):
            sch.compute_inline(sh)    # a copy left outside every kernel: read in place
            continue
        above = [lp.var for lp in sch.get_loops(sh)]
        copy = sch.get_loops(sh)[above.index(loop.var) + 1:]
        if copy:
            split = _try(sch.split, _fused(sch, copy), [None, nthreads])
            if split is not None:
                sch.bind(split[1], axes.threads[0])
        fetched += 1
    return fetched


def _product(xs) -> int:
    n = 1
    for x in xs:
        n *= int(x)
    return n


def _fused(sch, loops):
    return sch.fuse(*loops) if len(loops) > 1 else loops[0]


def _under(sch, block, loop) -> bool:
    return any(lp.var is loop.var for lp in sch.get_loops(block))


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
    along one axis, or shared memory, beyond the declared limits: a shared tile
    written in a pipelined loop counts once per version it gets), or None.

    Example::

        >>> import cuvil_tir as T
        >>> gpu_prune(T.create_prim_func([T.placeholder((4,), name="A")]), "cuda")
    """
    t = as_target(target)
    axes = gpu_axes(t)
    extents, used = _usage(func, axes)
    threads = _product(extents.values())
    if threads > axes.most:
        return f"{threads} threads per block, at most {axes.most}"
    for tag, n in extents.items():
        if n > axes.limits.get(tag, n):
            return f"{n} threads along {tag}, at most {axes.limits[tag]}"
    if axes.shared is not None and used > axes.shared:
        # a cache's buffer keeps its whole shape until the planner shrinks it to what
        # each use covers: the bytes as the lowering allocates them (this costs as
        # much as the rest of the rules, so only when the whole shapes do not fit)
        with PassContext(target=t):
            planned = _try(plan_buffer_allocation, func)
        used = _usage(planned, axes)[1] if planned is not None else used
        if used > axes.shared:
            return f"{used} bytes of shared memory, {axes.shared} per block"
    return None


def _usage(func, axes) -> tuple:
    """(thread tag -> the widest loop bound to it, shared bytes: each buffer times
    the versions a pipeline gives it)."""
    extents: dict = {}
    buffers: list = []
    versions: dict = {}   # shared buffer name -> its versions in a pipeline

    def visit(s):
        if isinstance(s, For) and s.kind == "thread_binding" and s.thread_tag in axes.threads:
            extents[s.thread_tag] = max(extents.get(s.thread_tag, 1),
                                        getattr(s.extent, "value", 1))
        if isinstance(s, For) and PIPELINE in dict(s.annotations):
            stages = [int(x) for x in dict(s.annotations)[PIPELINE]]
            for name in _shared_written(s.body):
                versions[name] = max(versions.get(name, 1), max(stages) - min(stages) + 1)
        if isinstance(s, Block):
            buffers.extend(b for b in s.alloc_buffers if b.scope == "shared")
        if isinstance(s, Allocate) and s.buffer.scope == "shared":
            buffers.append(s.buffer)
    post_order_visit(func.body, visit)
    return extents, sum((b.nbytes_const() or 0) * versions.get(b.name, 1) for b in buffers)


def _shared_written(body) -> set:
    out: set = set()
    post_order_visit(body, lambda n: out.add(n.buffer.name) if isinstance(
        n, BufferStore) and n.buffer.scope == "shared" else None)
    return out


__all__ = ["GpuAxes", "PIPELINE", "THREADS", "gpu_axes", "gpu_prune", "gpu_space"]
