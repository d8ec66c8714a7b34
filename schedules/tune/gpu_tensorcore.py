"""Tensor-core auto-tensorization for the GPU rules: which registered warp-wide GEMM
intrinsics a reduction block can run on, and the warp-level tiling around one.

A block qualifies when it has two spatial iterators and one reduction (a GEMM
``C[i, j] += A[i, k] * B[k, j]``; a batch axis or a transposed operand is left to
plain tiling).  A *tensor core* here is three registered intrinsics found by their
descriptions,
never by their names: a GEMM step ``C[m, n] += A[m, k] @ B[k, n]`` that the block
computes (:func:`.autotensorize.match_one`), whose ``impl`` calls a warp-collective op
(``collective`` in the op registry: the lanes of a group issue it together), a fill
``C[m, n] = 0`` and a store ``D[m, n] = C[m, n]`` of the same ``m x n`` tile and the
accumulator's dtype, with ``C`` in a memory the kind declares per warp
(``instance="warp"``: the accumulator fragments).  A triple is kept when a one-warp
GEMM scheduled with it builds for the target (:func:`tensor_cores`, once per process),
as the CPU rules keep an intrinsic whose ``impl`` builds.

:func:`tensorcore_tiling` schedules the block as the hand-written tensor-core GEMM of
the cuda recipes does (``gemm_tensorcore``), with its sizes drawn as decisions: each
spatial axis split into grid / warps / fragments per warp (a warp holds 2 x 1, 1 x 2,
2 x 2 ... tiles as CUTLASS's warp tiles do, their accumulators within
:data:`ACC_REGISTERS` registers a lane: :func:`most_fragments`) / the intrinsic's tile (the
warps of the rows on the third thread axis, of the columns on the second, the lanes
of a warp on the first), the reduction into slices of the intrinsic's depth, A and B
staged into ``shared`` memory at each slice (rows padded by 16 bytes, copied 16 bytes
per thread by all threads), the C tiles held in the accumulator memory for the whole
reduction (zeroed by the fill, written back by the store), and 1 to 3 pipeline
stages of the slices (``software_pipeline_stage``).

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((32, 32), "float16", name="A")
    >>> B = T.placeholder((32, 32), "float16", name="B")
    >>> k = T.reduce_axis((0, 32), name="k")
    >>> f = T.create_prim_func([A, B, T.compute((32, 32), lambda i, j: T.sum(
    ...     A[i, k].astype("float32") * B[k, j].astype("float32"), axis=k), name="C")])
    >>> import targets    # registers the cuda kind and its intrinsics
    >>> "cuda.wmma_16x16x16_f16f32" in [tc.gemm for tc in candidates(f, "C", "cuda")]
    True
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import cuvil_tir as T
from cuvil_tir import dtype as D
from cuvil_tir.analysis import tree
from cuvil_tir.expr import Call, FloatImm, IntImm
from cuvil_tir.ops import get_op, has_op
from cuvil_tir.ops.gpu import group_lanes
from cuvil_tir.stmt import BufferStore
from cuvil_tir.target import as_target, build
from cuvil_tir.tensor_intrin import TensorIntrin
from cuvil_tir.visitor import post_order_visit

from ..schedule import Schedule
from .autotensorize import leaf_block, match_one

#: pipeline stages of the staged slices a tensorized candidate draws from
STAGES = (1, 2, 3)
#: most warps along one output axis, and fragments per warp along one axis
MOST_WARPS = 4
MOST_FRAGMENTS = 4
#: the most accumulator registers one lane holds for its warp's tiles: half of the 255
#: a thread can address (operand fragments and addresses need the rest), as CUTLASS's
#: largest fp32 warp tile (64 x 64 on 32 lanes) holds
ACC_REGISTERS = 128
_SUPPORTED: dict = {}


@dataclass(frozen=True)
class TensorCore:
    """A GEMM step ``gemm`` on ``tile = (m, n, k)``, its accumulator memory ``scope``
    zeroed by ``fill`` and written back by ``store``, issued by ``lanes`` threads of
    the first thread axis together, at most ``fragments`` tiles per warp and axis
    (module doc).

    Example::

        >>> TensorCore("g", "f", "s", (16, 16, 16), "acc", 32, 4).label
        'tensor:g'
    """

    gemm: str
    fill: str
    store: str
    tile: tuple
    scope: str
    lanes: int
    fragments: int = MOST_FRAGMENTS

    @property
    def label(self) -> str:
        """The categorical label of this choice in the space's trace."""
        return f"tensor:{self.gemm}"


def _collective(intrin) -> str | None:
    calls = []
    post_order_visit(intrin.impl.body, lambda n: calls.append(n)
                     if isinstance(n, Call) and has_op(n.op) else None)
    found = [get_op(c.op).collective for c in calls]
    return next((c for c in found if c), None)


def _tile_desc(intrin, zero: bool):
    """``(scope, (m, n), dtype)`` of a fill (``zero``) or store description (a 2-D
    copy ``D = C`` out of ``C``), else None."""
    leaf = leaf_block(intrin.desc)
    params = intrin.desc.params
    if leaf is None or len(params) != (1 if zero else 2) or \
            not isinstance(leaf.block.body, BufferStore):
        return None
    body, ivs = leaf.block.body, leaf.block.iter_vars
    if len(ivs) != 2 or any(iv.kind != "spatial" for iv in ivs):
        return None
    value = body.value
    if zero and not (isinstance(value, (FloatImm, IntImm)) and value.value == 0):
        return None
    if not zero and getattr(value, "buffer", None) is not params[0]:
        return None
    tile = tuple(getattr(iv.dom.extent, "value", None) for iv in ivs)
    return params[0].scope, tile, str(body.buffer.dtype)


def _accumulators(kind) -> dict:
    """``(scope, (m, n), dtype) -> (fills, stores)`` over the registered intrinsics,
    for the memories ``kind`` declares per warp."""
    warp = {m.scope for m in kind.memories if m.instance == "warp"}
    out: dict = {}
    for name in TensorIntrin.names():
        intrin = TensorIntrin.get(name)
        for n, zero in ((0, True), (1, False)):
            key = _tile_desc(intrin, zero)
            if key is not None and key[0] in warp:
                out.setdefault(key, ([], []))[n].append(name)
    return out


def candidates(func, block_name: str, target) -> list:
    """Every :class:`TensorCore` whose descriptions fit block ``block_name`` of
    ``func`` and the memories ``target``'s kind declares, before the build check."""
    t = as_target(target)
    node = tree.get(func, tree.find_block(func, block_name)).block
    kinds = [iv.kind for iv in node.iter_vars]
    if kinds.count("reduce") != 1 or len(kinds) != 3 or not node.writes:
        return []
    acc = str(node.writes[0].buffer.dtype)
    accs = _accumulators(t.kind_obj)
    out = []
    for name in TensorIntrin.names():
        intrin = TensorIntrin.get(name)
        m = match_one(node, intrin)
        collective = _collective(intrin) if m is not None else None
        if collective is None or None in m.extents or \
                any(scope != "global" for _, scope in m.scopes):
            continue    # the operands must be plain memory: the rule stages them
        spatial = [e for e, kd in zip(m.extents, kinds) if kd == "spatial"]
        depth = next(e for e, kd in zip(m.extents, kinds) if kd == "reduce")
        for (scope, tile, dtype), (fills, stores) in accs.items():
            if tile == tuple(spatial) and dtype == acc and fills and stores:
                out.append(TensorCore(name, fills[0], stores[0], (*tile, depth), scope,
                                      group_lanes(collective)))
    return out


def tensor_cores(func, block_name: str, target, axes) -> list:
    """The :func:`candidates` of block ``block_name`` that build for ``target``, each
    with the most fragments per warp and axis it builds with (:attr:`TensorCore.
    fragments`: 4, or 1 when only one tile per warp builds); ``axes`` as
    :func:`tensorcore_tiling` takes them.  One GEMM step built per op, tile and
    accumulator (another depth is the same op with another argument), once per
    process and target."""
    t = as_target(target)
    node = tree.get(func, tree.find_block(func, block_name)).block
    dtypes = tuple(str(r.buffer.dtype) for r in node.reads[:2])
    out = []
    for tc in candidates(func, block_name, t):
        if tc.gemm in {o.gemm for o in out}:
            continue    # one accumulator per step suffices
        key = (_op(tc.gemm), tc.fill, tc.store, tc.tile[:2], str(t), dtypes)
        if key not in _SUPPORTED:
            _SUPPORTED[key] = next((f for f in (MOST_FRAGMENTS, 1)
                                    if _builds(tc, node, t, axes, f)), 0)
        if _SUPPORTED[key]:
            out.append(replace(tc, fragments=_SUPPORTED[key]))
    return out


def _op(name: str) -> str | None:
    calls = []
    post_order_visit(TensorIntrin.get(name).impl.body, lambda n: calls.append(n.op)
                     if isinstance(n, Call) else None)
    return calls[0] if calls else None


def _builds(tc, node, target, axes, fragments: int) -> bool:
    m, n, k = tc.tile
    a, b = (str(r.buffer.dtype) for r in node.reads[:2])
    acc = str(node.writes[0].buffer.dtype)
    f = min(fragments, 2)
    A = T.placeholder((2 * m, k), a, name="A")
    B = T.placeholder((k, 2 * n), b, name="B")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((2 * m, 2 * n), lambda i, j: T.sum(
        A[i, r].astype(acc) * B[r, j].astype(acc), axis=r), name="C")
    sch = Schedule(T.create_prim_func([A, B, C]))
    split = (1, 2 // f, f)
    try:
        tensorcore_tiling(replace(tc, fragments=fragments), sch, "C", axes,
                          decisions=(split, split, 1))
        build(sch.func, target)
        return True
    except Exception:  # noqa: BLE001 - any failure: this target cannot run it so
        return False


def most_fragments(tc: TensorCore, other: int = 1) -> int:
    """The most tiles of ``tc`` a warp may hold along one axis when it holds ``other``
    along the other: at most :attr:`TensorCore.fragments`, and their accumulators
    within :data:`ACC_REGISTERS` registers per lane (32-bit accumulators).

    Example::

        >>> tc = TensorCore("g", "f", "s", (32, 32, 16), "warp", 32)
        >>> most_fragments(tc), most_fragments(tc, 4), most_fragments(tc, 8)
        (4, 1, 1)
    """
    per_tile = max(1, tc.tile[0] * tc.tile[1] // tc.lanes)
    return max(1, min(tc.fragments, ACC_REGISTERS // (per_tile * other)))


def _warp_split(sch, loop, outer: int, most: int, fixed):
    """``[grid, warps, fragments]`` of ``loop`` (``outer`` iterations of the tile):
    drawn (fragments, at most ``most``, then warps, at most 4) unless ``fixed``."""
    if fixed is not None:
        return list(fixed)
    _, frags = sch.sample_perfect_tile(loop, 2, max_innermost_factor=most)
    grid, warps = _split_of(sch, outer // int(frags))
    return [grid, warps, int(frags)]


def _split_of(sch, n: int) -> tuple:
    """Grid and warps of ``n`` (warps a categorical among the divisors up to 4)."""
    ways = [w for w in range(1, MOST_WARPS + 1) if n % w == 0]
    w = int(sch.sample_categorical(ways, [1] * len(ways)))
    return n // w, w


def tensorcore_tiling(tc: TensorCore, sch, name: str, axes, decisions=None) -> None:
    """Schedule block ``name`` of ``sch`` on the tensor core ``tc`` (module doc).
    ``axes``: the grid axis, the thread axes by dimension (x, y, z) and the shared
    capacity in bytes; ``decisions`` (the build check): fixed ``(rows, cols,
    stages)`` instead of drawn ones.

    Example::

        >>> import cuvil_tir as T, targets
        >>> from schedules.tune.gpu_rules import gpu_axes
        >>> A = T.placeholder((64, 64), "float16", name="A")
        >>> B = T.placeholder((64, 64), "float16", name="B")
        >>> k = T.reduce_axis((0, 64), name="k")
        >>> f = T.create_prim_func([A, B, T.compute((64, 64), lambda i, j: T.sum(
        ...     A[i, k].astype("float32") * B[k, j].astype("float32"), axis=k), name="C")])
        >>> tc = next(t for t in candidates(f, "C", "cuda") if t.tile == (16, 16, 16))
        >>> sch = Schedule(f, seed=0)
        >>> tensorcore_tiling(tc, sch, "C", gpu_axes("cuda").tensor_axes)
        >>> text = str(sch.func)
        >>> 'scope="warp"' in text and 'scope="shared"' in text and "threadIdx" in text
        True
    """
    grid, threads, _ = axes
    m, n, k = tc.tile
    blk = sch.get_block(name)
    node = tree.get(sch.func, tree.find_block(sch.func, name)).block
    dtype = str(node.reads[0].buffer.dtype)
    i, j, r = sch.get_loops(blk)
    io, ii = sch.split(i, [None, m])
    jo, jj = sch.split(j, [None, n])
    rows = _warp_split(sch, io, sch.get(io).extent.value, most_fragments(tc),
                       decisions and decisions[0])
    cols = _warp_split(sch, jo, sch.get(jo).extent.value, most_fragments(tc, rows[2]),
                       decisions and decisions[1])
    by, wz, fi = sch.split(io, rows)
    bx, wy, fj = sch.split(jo, cols)
    ko, ki = sch.split(r, [None, k])
    sch.reorder(by, bx, ko, wz, wy, fi, fj, ii, jj, ki)
    bxy = sch.fuse(by, bx)
    sch.bind(bxy, grid)
    sch.bind(wz, threads[2])
    sch.bind(wy, threads[1])
    lanes = [(threads[2], rows[1]), (threads[1], cols[1]), (threads[0], tc.lanes)]
    acc = sch.cache_write(blk, 0, tc.scope)
    sch.reverse_compute_at(acc, bxy)
    vector = 128 // D.bits(dtype)
    for idx, row in enumerate((k, cols[1] * cols[2] * n)):
        sh = sch.cache_read(blk, idx, "shared")
        sch.compute_at(sh, ko)
        ax0, ax1 = sch.get_loops(sh)[-2:]
        # 16 bytes more per row put the rows of a fragment load in different banks
        sch.storage_align(sh, 0, 0, row, vector)
        ax1, vec = sch.split(ax1, [None, vector])
        sch.vectorize(vec)
        _spread(sch, [ax0, ax1], lanes)
    stages = decisions[2] if decisions else int(sch.sample_categorical(
        list(STAGES), [1] * len(STAGES)))
    if stages > 1 and sch.get(ko).extent.value >= stages:   # the two copies, then the product
        sch.annotate(ko, "software_pipeline_stage", [0, 0, stages - 1])
    init = sch.decompose_reduction(blk, ko)
    for lp in sch.get_loops(init)[-4:-2]:
        sch.unroll(lp)
    sch.tensorize(sch.get_loops(init)[-2], tc.fill)
    r0, r1 = sch.get_loops(acc)[-2:]
    wa, fa, ra = sch.split(r0, [rows[1], rows[2], m])
    wb, fb, rb = sch.split(r1, [cols[1], cols[2], n])
    sch.reorder(wa, wb, fa, fb, ra, rb)
    sch.bind(wa, threads[2])
    sch.bind(wb, threads[1])
    sch.unroll(fa)
    sch.unroll(fb)
    sch.tensorize(ra, tc.store)
    # a warp's fragments are indexed by constants once their loops are unrolled
    sch.unroll(fi)
    sch.unroll(fj)
    sch.tensorize(ii, tc.gemm)


def _spread(sch, loops, lanes) -> None:
    """Fuse ``loops`` and spread them over ``lanes`` (``(tag, count)``, outer first)."""
    fused = sch.fuse(*loops)
    parts = sch.split(fused, [None] + [c for _, c in lanes])
    for loop, (tag, _) in zip(parts[1:], lanes):
        sch.bind(loop, tag)


__all__ = ["ACC_REGISTERS", "STAGES", "TensorCore", "candidates", "most_fragments",
           "tensor_cores", "tensorcore_tiling"]
