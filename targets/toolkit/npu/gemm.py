"""An int8 GEMM and its schedule for an accelerator: stage A, B into the input and
weight memories and C into the accumulator, pad the computation to whole tiles when a
size is not a multiple of the tile (``pad_einsum``: the DMA zero-fills the edge tiles
on load and writes back only their valid part), tile, tensorize the inner 16x16x16
(or ``t``) block and the accumulator's zeroing, and optionally double-buffer the
staged tiles (TVM's ``software_pipeline_stage`` on the k-tile loop, whose copies run a
step ahead of the product, and on the output-tile loop, whose copy-out runs a step
behind).

Example::

    >>> import targets
    >>> from targets.accel.examples.toy_npu import toy_npu
    >>> _ = targets.register_target(toy_npu, replace=True)
    >>> sch = schedule_gemm(gemm(64), double=True)
    >>> mod = targets.build(sch, "toy-npu", name="gemm64")
    >>> "toy_npu_gemm_16x16x16(" in mod.get_source("c")
    True
"""

import numpy as np

import cuvil_tir as T
import schedules as S
from cuvil_tir.errors import ShapeError
from targets.accel.examples.gemmini_like import decode_e4m3
from targets.accel.examples.toy_npu import unpack_int4


def gemm(n, m=None, k=None, in_dtype="int8", acc_dtype="int32"):
    """``C[n, m] = sum_k A[n, k] * B[k, m]`` with products in ``acc_dtype``."""
    m, k = m or n, k or n
    A = T.placeholder((n, k), in_dtype, name="A")
    B = T.placeholder((k, m), in_dtype, name="B")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((n, m), lambda i, j: T.sum(T.cast(A[i, r], acc_dtype) *
                                             T.cast(B[r, j], acc_dtype), axis=r), name="C")
    return T.create_prim_func([A, B, C])


def gemm_int4(n, m=None, k=None):
    """``C[n, m] = sum_k A[n, k] * int4(B)[k, m]`` with int8 ``A`` and the int4 weights
    packed two per int8 byte, ``Bp[k // 2, m]`` low nibble first (:func:`pack_int4`);
    products in int32.  ``k`` is even.

    Example::

        >>> gemm_int4(16, 16, 15)
        Traceback (most recent call last):
          ...
        cuvil_tir.errors.ShapeError: [CVL-E102] gemm_int4: k=15 is odd, but two int4 weights share each byte of B; use an even k (pad with a zero row)
    """
    m, k = m or n, k or n
    if k % 2:
        raise ShapeError(f"gemm_int4: k={k} is odd, but two int4 weights share each byte "
                         "of B; use an even k (pad with a zero row)")
    A = T.placeholder((n, k), "int8", name="A")
    Bp = T.placeholder((k // 2, m), "int8", name="B")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((n, m), lambda i, j: T.sum(
        T.cast(A[i, r], "int32") * unpack_int4(Bp[r // 2, j], r % 2), axis=r), name="C")
    return T.create_prim_func([A, Bp, C])


def gemm_fp8(n, m=None, k=None):
    """``C[n, m] = sum_k e4m3(A[n, k]) * e4m3(B[k, m])`` with fp8 (e4m3) operands stored
    as uint8 bytes (:func:`~targets.accel.examples.gemmini_like.decode_e4m3`), products
    and sums in float32."""
    m, k = m or n, k or n
    A = T.placeholder((n, k), "uint8", name="A")
    B = T.placeholder((k, m), "uint8", name="B")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((n, m), lambda i, j: T.sum(decode_e4m3(A[i, r]) * decode_e4m3(B[r, j]),
                                             axis=r), name="C")
    return T.create_prim_func([A, B, C])


def pack_int4(w):
    """Pack an int array of values in [-8, 7], shape ``(k, m)`` with ``k`` even, into
    the ``(k // 2, m)`` int8 bytes :func:`gemm_int4` reads (numpy).

    Example::

        >>> import numpy as np
        >>> pack_int4(np.array([[1], [-2]])).tolist()
        [[-31]]
    """
    w = np.asarray(w).astype(np.int32) & 15
    return (w[0::2] | (w[1::2] << 4)).astype(np.uint8).view(np.int8)


def tile_gemm_loops(sch, blk, tiles, t):
    """Split the GEMM block's ``i, j, k`` loops into staged tiles of ``tiles`` and
    ``t``-sized intrinsic tiles, ordered ``io jo ko | i2 j2 k2 | ii ji ki``; returns
    ``(jo, ko, ii)``: the output-tile loop, the reduction-tile loop (where staged
    inputs are computed) and the first loop of the intrinsic's tile.

    Example::

        >>> import schedules as S
        >>> sch = S.Schedule(gemm(64))
        >>> jo, ko, ii = tile_gemm_loops(sch, sch.get_block("C"), (32, 32, 32), 16)
        >>> len(sch.get_loops(sch.get_block("C")))
        9
    """
    (i, j, k), (ti, tj, tk) = sch.get_loops(blk), tiles
    io, i1 = sch.split(i, [None, ti])
    i2, ii = sch.split(i1, [None, t])
    jo, j1 = sch.split(j, [None, tj])
    j2, ji = sch.split(j1, [None, t])
    ko, k1 = sch.split(k, [None, tk])
    k2, ki = sch.split(k1, [None, t])
    sch.reorder(io, jo, ko, i2, j2, k2, ii, ji, ki)
    return jo, ko, ii


def whole_tile(sch, init):
    """Fuse the accumulator initialisation's ``i2 j2 ii ji`` loops back into the rows
    and columns of its tile, so that a DMA fill (or a bias preload) is one transfer
    of the whole tile instead of one per intrinsic tile.

    Example::

        >>> import schedules as S
        >>> sch = S.Schedule(gemm(64))
        >>> blk = sch.get_block("C")
        >>> _ = tile_gemm_loops(sch, blk, (32, 32, 32), 16)
        >>> init = sch.decompose_reduction(blk, sch.get_loops(blk)[2])
        >>> whole_tile(sch, init)
        >>> [int(sch.get(lp).extent) for lp in sch.get_loops(init)[2:]]
        [32, 32]
    """
    i2, j2, ii, ji = sch.get_loops(init)[-4:]
    sch.reorder(i2, ii, j2, ji)
    sch.fuse(i2, ii)
    sch.fuse(j2, ji)


def schedule_gemm(func, tile=64, t=16, gemm="toy.gemm_16x16x16_i8",
                  zero="toy.zero_16x16_i32", scopes=("npu.inp", "npu.wgt", "npu.acc"),
                  double=False):
    """The schedule of the module doc (``tile``: the staged tile, ``t``: the intrinsic's).

    ``func`` may be a fresh ``S.Schedule`` (a tuning space passes its own, with a
    sampled ``tile``)."""
    sch = func if isinstance(func, S.Schedule) else S.Schedule(func)
    func = sch.func
    blk = sch.get_block("C")
    a = sch.cache_read(blk, 0, scopes[0])
    b = sch.cache_read(blk, 1, scopes[1])
    c = sch.cache_write(blk, 0, scopes[2])
    # the sizes n, k (A) and m (C): a packed operand's shape is not one of them
    a_shape, c_shape = (tuple(int(d.value) for d in func.params[p].shape) for p in (0, 2))
    if any(n % tile for n in a_shape + c_shape):
        sch.pad_einsum(blk, [tile, tile, tile])
    jo, ko, ii = tile_gemm_loops(sch, blk, (tile, tile, tile), t)
    sch.compute_at(a, ko)
    sch.compute_at(b, ko)
    sch.reverse_compute_at(c, jo)
    init = sch.decompose_reduction(blk, ko)
    sch.tensorize(ii, gemm)
    if zero:
        sch.tensorize(sch.get_loops(init)[-2], zero)
    else:
        whole_tile(sch, init)
    if double:
        sch.annotate(ko, "software_pipeline_stage", [0, 0, 1])     # copy A, copy B | GEMM
        sch.annotate(jo, "software_pipeline_stage", [0, 0, 1])     # zero, k loop | copy out
    return sch
