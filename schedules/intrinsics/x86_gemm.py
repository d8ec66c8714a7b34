"""GEMM schedules on the x86 dot-product intrinsics (:mod:`.x86`): int8 GEMMs on
AVX512-VNNI / AVX-VNNI ``vpdpbusd`` and bfloat16 GEMMs on AVX512-BF16 ``vdpbf16ps``,
register-blocked like the fp32 recipe of tutorial 04.  Here, in the schedules layer, so
that the tuner's generated space offers them (:mod:`schedules.tune.dot_rule`) and the
recipes of :mod:`targets.toolkit.cpu_recipes` call the same code.

:func:`dot_gemm` schedules a GEMM block ``C[i, j] += acc(A[i, k]) * acc(B[k, j])``
(A uint8 or int8 with B int8 and int32 C; A and B bfloat16 with float32 C):

0. for int8 A, **the offset** (:mod:`.x86_offset`): A + 128 as uint8 and the
   compensation ``-128 * sum(B[:, j])`` computed once per column, the sums' init,
   so every step is the plain ``u8s8`` instruction (with ``offset=False`` the
   ``s8s8`` intrinsic recomputes the compensation on every step instead: 1.2-1.3x
   slower on Zen 4);
1. **B packed** for the instruction, ``Bp[j // L, k // G, (j % L) * G + k % G]``
   (:func:`.x86.pack_b`: ``cache_read`` + ``transform_layout``), in parallel over the
   panels, each written in order;
2. **a register tile** of ``rows x vectors`` accumulators of ``L`` lanes (C in a
   ``local`` buffer, initialised by ``decompose_reduction``, copied out per tile), the
   rows and vectors unrolled around the tensorized ``L x (G * groups)`` step, so LLVM
   keeps the tile in registers and shares each B vector between the rows;
3. the row tiles in parallel (the column tiles when M has too few rows for the cores).

``L`` is 16 (512-bit) where the target has the 512-bit instruction and N allows it,
else 8 (256-bit: AVX-VNNI, or AVX-512 with VL); a target with neither is refused with
the intrinsic's ``TargetError`` naming the missing extension.  The tile's size comes
from the target's vector registers (``machine(target)``), never from the host.

Example::

    >>> from schedules import Schedule
    >>> sch = Schedule(gemm_func(64, 64, 64, "int8", "int8", "int32"))
    >>> dot_gemm(sch, "C", "llvm -mcpu=znver4")
    'x86.vnni_16x4_u8s8'
    >>> [inst.name for inst in sch.trace].count("tensorize")
    1
"""

from __future__ import annotations

import cuvil_tir as T
from cuvil_tir.analysis import tree
from cuvil_tir.errors import ShapeError
from cuvil_tir.target import as_target
from cuvil_tir.tensor_intrin import TensorIntrin

from ..analysis import loop_extent
from .x86 import KINDS, intrin_name, pack_b

_KIND_OF = {"uint8": "u8s8", "int8": "s8s8", "bfloat16": "bf16"}


def gemm_kind(sch, block: str) -> str:
    """The intrinsic family (``u8s8``, ``s8s8``, ``bf16``) of a GEMM block, from the
    dtype of its first operand.

    Example::

        >>> from schedules import Schedule
        >>> gemm_kind(Schedule(gemm_func(4, 16, 8, "uint8", "int8", "int32")), "C")
        'u8s8'
    """
    node = tree.get(sch.func, tree.find_block(sch.func, block)).block
    # (an offset block also reads its compensation, in its init: not an operand)
    reads = [r.buffer for r in node.reads if r.buffer not in
             [w.buffer for w in node.writes]][:2]
    kind = _KIND_OF.get(str(reads[0].dtype)) if reads else None
    if kind is None or len(reads) != 2 or str(reads[1].dtype) != KINDS[kind][1]:
        raise ShapeError(f"dot_gemm: block {block!r} reads "
                         f"{[f'{b.name}: {b.dtype}' for b in reads]}; expected A uint8 or "
                         "int8 with B int8, or A and B bfloat16")
    return kind


def lanes_for(kind: str, N: int, target) -> int:
    """The accumulator lanes of the ``kind`` intrinsic for N columns on ``target``: 16
    where the target has the 512-bit form and N allows, else 8; else the intrinsic's
    ``TargetError`` (or a ``ShapeError`` when N is no multiple of 8).

    Example::

        >>> lanes_for("u8s8", 64, "llvm -mcpu=znver4"), lanes_for("u8s8", 40, "llvm -mcpu=znver4")
        (16, 8)
    """
    group = KINDS[kind][3]
    fits = [n for n in (16, 8) if N % n == 0]
    for lanes in fits:
        if TensorIntrin.get(intrin_name(kind, lanes)).available(target):
            return lanes
    if not fits:
        raise ShapeError(f"dot_gemm: N = {N} is not a multiple of 8; the {kind} "
                         f"intrinsics compute 8 or 16 columns at once (pad N)")
    TensorIntrin.get(intrin_name(kind, fits[-1])).check(target)
    raise ShapeError(f"dot_gemm: N = {N} is not a multiple of 16 and the target has "
                     f"no 256-bit form; pad N to a multiple of 16 (group {group})")


def tile_shape(kind: str, lanes: int, registers: int) -> tuple:
    """``(rows, vectors)`` of the register tile: ``vectors`` vectors of ``lanes`` for
    each of ``rows`` rows, plus the B vectors, A's broadcast and (``s8s8``) the
    compensation vectors fit ``registers``.

    Example::

        >>> tile_shape("u8s8", 16, 32), tile_shape("s8s8", 16, 32), tile_shape("u8s8", 8, 16)
        ((6, 4), (5, 4), (6, 2))
    """
    vectors = 4 if registers >= 32 else 2
    extra = vectors + 1 + (vectors + 1 if kind == "s8s8" else 0)
    return max(1, min(8, (registers - extra) // vectors)), vectors


def dot_gemm(sch, block: str = "C", target="llvm", rows: int | None = None,
             vectors: int | None = None, groups: int | None = None,
             offset: bool = True) -> str:
    """Schedule GEMM block ``block`` on the dot-product intrinsic (module doc); returns
    the intrinsic's name.  ``rows`` x ``vectors`` is the register tile (default
    :func:`tile_shape`), ``groups`` the k groups per tensorized step (default 1; 4 for
    int8 x int8 without the ``offset``, when K allows: its per-step compensation is
    subtracted once per step).  ``offset`` (int8 A): shift A to uint8 with the
    compensation computed once (module doc).

    Example::

        >>> from schedules import Schedule
        >>> sch = Schedule(gemm_func(8, 32, 16, "int8", "int8", "int32"))
        >>> dot_gemm(sch, "C", "llvm -mcpu=icelake-server")
        'x86.vnni_16x4_u8s8'
        >>> dot_gemm(Schedule(gemm_func(8, 32, 16, "int8", "int8", "int32")), "C",
        ...          "llvm -mcpu=icelake-server", offset=False)
        'x86.vnni_16x16_s8s8'
    """
    t = as_target(target)
    kind = gemm_kind(sch, block)
    blk = sch.get_block(block)
    offset = kind == "s8s8" and offset
    if offset:
        flip, colsum = sch.offset_to_unsigned(blk)
    i, j, k = sch.get_loops(blk)
    M, N, K = (loop_extent(sch.func, lp) for lp in (i, j, k))
    group = KINDS[kind][3]
    lanes = lanes_for(kind, N, t)
    if K % group:
        raise ShapeError(f"dot_gemm: K = {K} is not a multiple of {group}; the {kind} "
                         f"intrinsic adds groups of {group} products (pad K with zeros)")
    if groups is None:
        groups = 4 if kind == "s8s8" and not offset and K % (4 * group) == 0 else 1
    machine = t.kind_obj.machine(t)
    step = "u8s8" if offset else kind      # what one tensorized step computes
    r0, v0 = tile_shape(step, lanes, machine.vector_registers)
    rows, vectors = rows or min(r0, M), vectors or min(v0, N // lanes)
    # only the GEMM reads the panels (the column sums read B's contiguous rows)
    pack = pack_b(sch, blk, 1, lanes, group, consumers=[blk])
    io, ii = sch.split(i, [None, rows])
    jo, jv, ji = sch.split(j, [None, vectors, lanes])
    ko, ki = sch.split(k, [None, group * groups])
    by_rows = -(-M // rows) >= 2 * machine.cores
    outer = (io, jo) if by_rows else (jo, io)
    sch.reorder(*outer, ko, ii, jv, ji, ki)
    acc = sch.cache_write(blk, 0, "local")
    sch.reverse_compute_at(acc, outer[1])
    init = sch.decompose_reduction(blk, ko)
    name = intrin_name(step, lanes, groups)
    sch.tensorize(ji, name)
    sch.unroll(ii)
    sch.unroll(jv)
    sch.vectorize(sch.get_loops(acc)[-1])
    _pack_stage(sch, pack, lanes, group)
    for lp in outer:         # the first tile loop with more than one iteration
        if loop_extent(sch.func, lp) > 1:
            sch.parallel(lp)
            break
    if offset:
        sch.vectorize(sch.get_loops(init)[-1])   # it loads the compensation
        _offset_stages(sch, flip, colsum, lanes)
    return name


def _pack_stage(sch, pack, lanes: int, group: int) -> None:
    """The packing in parallel panels, each written in order (k groups outside, the
    ``lanes x group`` bytes of one group inside): its stores are contiguous, where
    walking B's rows scatters them ``group`` apart (1.2x on 128x2304x768 int8)."""
    p_k, p_j = sch.get_loops(pack)
    panels, p_ji = sch.split(p_j, [None, lanes])
    kq, kr = sch.split(p_k, [None, group])
    sch.reorder(panels, kq, p_ji, kr)
    sch.parallel(panels)


def _offset_stages(sch, flip, colsum, lanes: int) -> None:
    """Schedule ``offset_to_unsigned``'s stages: A's flip over A as one run of bytes
    (whole vectors of ``4 * lanes`` where they fit), B's column sums as ``lanes``-wide
    panels in parallel, k outside the vector of columns (B's rows are contiguous)."""
    loops = sch.get_loops(flip)
    # the stage has no loop for a unit axis (one row of A: M = 1), so one loop is left
    run = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    if loop_extent(sch.func, run) % (4 * lanes) == 0:
        run, vec = sch.split(run, [None, 4 * lanes])
        sch.vectorize(vec)
    sch.parallel(run)
    j, k = sch.get_loops(colsum)
    panels, jv = sch.split(j, [None, lanes])
    # k in groups of 4 rows: a streaming sum, whose innermost reduction tile (what
    # the tuner's L1 rule weighs) is 4 rows of a panel, not all K of them
    ko, ki = sch.split(k, [None, 4]) if loop_extent(sch.func, k) % 4 == 0 else (k, None)
    sch.reorder(panels, ko, *([ki] if ki is not None else []), jv)
    init = sch.decompose_reduction(colsum, ko)
    sch.parallel(panels)
    sch.vectorize(jv)
    sch.vectorize(sch.get_loops(init)[-1])


def gemm_func(M: int, N: int, K: int, a: str, b: str, acc: str):
    """The function ``C (acc) = A (a) @ B (b)``, the operands cast to ``acc`` before
    they multiply: the GEMM :func:`dot_gemm` schedules.

    Example::

        >>> [str(p.dtype) for p in gemm_func(4, 16, 8, "uint8", "int8", "int32").params]
        ['uint8', 'int8', 'int32']
    """
    A = T.placeholder((M, K), a, name="A")
    B = T.placeholder((K, N), b, name="B")
    k = T.reduce_axis((0, K), name="k")
    C = T.compute((M, N), lambda i, j: T.sum(A[i, k].astype(acc) * B[k, j].astype(acc),
                                             axis=k), name="C")
    return T.create_prim_func([A, B, C])


__all__ = ["dot_gemm", "gemm_func", "gemm_kind", "lanes_for", "tile_shape"]
