"""CPU GEMM recipes on the x86 dot-product intrinsics (:mod:`schedules.intrinsics.x86`):
int8 GEMMs on AVX512-VNNI / AVX-VNNI ``vpdpbusd`` and bfloat16 GEMMs on AVX512-BF16
``vdpbf16ps``, scheduled by :func:`dot_gemm` (:mod:`schedules.intrinsics.x86_gemm`,
where the tuner's generated space reaches it too: packed B, a register tile of
accumulators around the tensorized step, the tiles in parallel).

Example::

    >>> import targets
    >>> sch = int8_gemm(64, 64, 64, "llvm -mcpu=znver4")
    >>> [inst.name for inst in sch.trace].count("tensorize")
    1
    >>> try:
    ...     int8_gemm(64, 64, 64, "llvm -mcpu=haswell")
    ... except targets.TargetError as err:
    ...     print(err.code)
    CVL-E106
"""

from __future__ import annotations

import schedules as S
from schedules.intrinsics.x86_gemm import dot_gemm, gemm_func, gemm_kind, tile_shape


def int8_gemm(M: int, N: int, K: int, target="llvm", signed: bool = True,
              **tile) -> S.Schedule:
    """The scheduled ``C (int32) = A @ B`` with int8 B and int8 (``signed``) or uint8
    A, on ``vpdpbusd`` (:func:`dot_gemm`; ``tile``: its ``rows``, ``vectors``,
    ``groups``).

    Example::

        >>> [str(p.dtype) for p in int8_gemm(8, 16, 8, "llvm -mcpu=znver4", False).func.params]
        ['uint8', 'int8', 'int32']
    """
    sch = S.Schedule(gemm_func(M, N, K, "int8" if signed else "uint8", "int8", "int32"))
    dot_gemm(sch, "C", target, **tile)
    return sch


def bf16_gemm(M: int, N: int, K: int, target="llvm", **tile) -> S.Schedule:
    """The scheduled ``C (float32) = A @ B`` with bfloat16 A and B, on ``vdpbf16ps``
    (:func:`dot_gemm`).

    Example::

        >>> bf16_gemm(8, 16, 8, "llvm -mcpu=znver4").func.params[2].dtype
        'float32'
    """
    sch = S.Schedule(gemm_func(M, N, K, "bfloat16", "bfloat16", "float32"))
    dot_gemm(sch, "C", target, **tile)
    return sch


__all__ = ["bf16_gemm", "dot_gemm", "gemm_kind", "int8_gemm", "tile_shape"]
