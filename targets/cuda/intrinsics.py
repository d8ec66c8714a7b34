"""The text every generated CUDA source starts with: fixed-width integer types (NVRTC
has no ``stdint.h``) and the warp-shuffle reductions of cross-thread reductions.

``cvl_warp_sum(v, width)`` (and ``max``/``min``) combine ``v`` over each group of
``width`` lanes (a power of two up to 32) with a ``__shfl_xor_sync`` butterfly, so
every lane of the group ends with the result; the interpreter runs the same
butterfly (:mod:`cuvil_tir.interp.gpu`).

Example::

    >>> "__shfl_xor_sync" in PREAMBLE and "typedef int int32_t;" in PREAMBLE
    True
"""

from __future__ import annotations

PREAMBLE = r"""#if defined(__CUDACC_RTC__)
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#define INT64_C(x) x##LL
#define UINT64_C(x) x##ULL
#define INT64_MIN (-9223372036854775807LL - 1)
#else
#include <stdint.h>
#endif

template <typename T> __device__ __forceinline__ T cvl_warp_sum(T v, int width) {
  for (int o = width / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o, width);
  return v;
}
template <typename T> __device__ __forceinline__ T cvl_warp_max(T v, int width) {
  for (int o = width / 2; o > 0; o /= 2) {
    T w = __shfl_xor_sync(0xffffffffu, v, o, width);
    v = w > v ? w : v;
  }
  return v;
}
template <typename T> __device__ __forceinline__ T cvl_warp_min(T v, int width) {
  for (int o = width / 2; o > 0; o /= 2) {
    T w = __shfl_xor_sync(0xffffffffu, v, o, width);
    v = w < v ? w : v;
  }
  return v;
}
"""

__all__ = ["PREAMBLE"]
