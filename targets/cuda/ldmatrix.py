"""``ldmatrix``: the warp-wide load of 8 x 8 matrices of 16-bit elements from shared
memory into the register fragments of ``mma.sync`` (sm_75+).

``ldmatrix.sync.aligned.m8n8.x4.shared.b16`` loads four 8 x 8 matrices: lane ``l``
gives the address of row ``l % 8`` of matrix ``l // 8`` (16 contiguous bytes), and
lane ``4 * g + t`` receives, in its register ``i``, the 32-bit word ``t`` of row ``g``
of matrix ``i`` (``.trans``: the two 16-bit elements of column ``g`` at rows ``2t``
and ``2t + 1``).  :func:`lane_rows` says which row (and which 16-byte column)
each lane points at for the three fragments ``mma.sync`` reads; :func:`ldmatrix_x4`
models the instruction on a numpy array, so the tests check those addresses against
the fragment layouts of the PTX ISA without a GPU.

The rows may be laid out through an XOR swizzle (:mod:`targets.cuda.swizzle`): the
helper ``cvl_swz<S, LD>`` maps a logical element offset (rows of ``LD``) to its place.

Example::

    >>> lane_rows("a", 0), lane_rows("a", 17)
    ((0, 0), (1, 1))
"""

from __future__ import annotations

import numpy as np

from cuvil_tir.errors import CodegenError

LDSM_HELPER = r"""template <bool TRANS> __device__ __forceinline__ void cvl_ldsm_x4(
    uint32_t* r, const void* p) {
  unsigned s = (unsigned)__cvta_generic_to_shared(p);
  if constexpr (TRANS) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
  }
}
template <int S, int LD> __device__ __forceinline__ int cvl_swz(int o) {
  // S packs an XOR swizzle of each row's chunks (cuvil_tir.swizzle) as (bits << 16) |
  // (base << 8) | shift; 0 is the identity.  o: an element offset in rows of LD
  constexpr int bits = S >> 16, base = (S >> 8) & 255, shift = S & 255;
  if constexpr (S == 0) {
    return o;
  } else {
    return o ^ ((((o / LD) >> shift) & ((1 << bits) - 1)) << base);
  }
}
"""

#: the three ways ``mma.sync`` fragments are read: A ``[16, 32 bytes]`` row-major, B
#: ``[16 k, 16 n]`` row-major (``.trans``), B ``[16 n, 32 bytes]`` (k contiguous)
FRAGMENTS = ("a", "b", "b_nt")


def lane_rows(fragment: str, lane: int) -> tuple:
    """``(row, chunk)``: the row of the 16-row block and the 16-byte column chunk (0
    or 1) whose address ``lane`` gives to ``ldmatrix.x4`` for ``fragment`` (one of
    :data:`FRAGMENTS`).

    Example::

        >>> [lane_rows("b_nt", lane) for lane in (0, 8, 16)]
        [(0, 0), (0, 1), (8, 0)]
    """
    if fragment not in FRAGMENTS or not 0 <= lane < 32:
        raise CodegenError(f"lane_rows: fragment must be one of {FRAGMENTS} and the lane in "
                           f"0..31; found {fragment!r}, {lane}")
    if fragment == "b_nt":
        return (lane >> 4) * 8 + (lane & 7), (lane >> 3) & 1
    return lane & 15, lane >> 4


def ldmatrix_x4(rows, trans: bool = False) -> np.ndarray:
    """What ``ldmatrix.x4`` gives each lane: ``rows[l]`` is the 8 16-bit elements lane
    ``l`` points at; the result ``[32 lanes, 4 registers, 2 elements]``.

    Example::

        >>> rows = np.arange(256).reshape(32, 8)
        >>> ldmatrix_x4(rows)[5].tolist()      # lane 5 = (g 1, t 1): word 1 of row 1
        [[10, 11], [74, 75], [138, 139], [202, 203]]
    """
    mats = np.asarray(rows).reshape(4, 8, 8)
    if trans:
        mats = mats.transpose(0, 2, 1)
    out = np.empty((32, 4, 2), mats.dtype)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        out[lane] = mats[:, g, 2 * t: 2 * t + 2]
    return out


__all__ = ["FRAGMENTS", "LDSM_HELPER", "lane_rows", "ldmatrix_x4"]
