"""fp8 tensor cores: ``mma.sync`` on float8_e4m3fn / float8_e5m2 tiles, fp32
accumulation (sm_89 and newer).

``cuda.mma_16x16x{K}_{e4m3,e5m2}f32`` (K = 32, 64) are tensor intrinsics for
``tensorize``: the ``desc`` is ``C[0:16, 0:16] += float(A[0:16, 0:K]) @
float(B[0:K, 0:16])`` with A and B of one fp8 dtype and C float32, the ``impl`` the
warp-wide call ``cuda.mma_fp8_sync(A[0, 0], B[0, 0], C[0, 0], K)``.  CUDA's ``wmma``
has no fp8 fragments, so the call is PTX's ``mma.sync.aligned.m16n8k32`` written out:
each lane loads its elements of A (four 32-bit words), of B (bytes of four rows) and
of C (as the PTX ISA lays the m16n8k32 fragments over the lanes), runs ``K / 32``
steps on each 8-column half of the tile and stores C back.  The tiles live in global
or shared memory, row-major, rows a multiple of 16 bytes; C is not a
``wmma.accumulator`` fragment (the wmma layout of fp8 is not CUDA's to give).  On
sm_89 the step is ``QMMA.16832.F32.E4M3.E4M3``; sm_90 runs fp8 ``mma.sync`` through
its fp16 tensor cores (``HMMA.16816``: fp8 at Hopper's full rate needs ``wgmma``).
The interpreter computes the tile on the decoded values, in float32.

Example::

    >>> import schedules as S
    >>> mma_name(32, "float8_e4m3fn") in S.TensorIntrin.names()
    True
"""

from __future__ import annotations

from cuvil_tir.errors import ScheduleArgumentError
from cuvil_tir.ops import OpDef, register_op
from cuvil_tir.ops.gpu import Tile
from cuvil_tir.tensor_intrin import TensorIntrin

from .tensorcore import MEMORY, register_tile_op, tile_gemm_intrin

FP8_OP = "cuda.mma_fp8_sync"
FP8_DEPTHS = (32, 64)
#: the fp8 dtypes and their names' spelling (PTX's too)
FP8_INPUTS = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}


def _tiles(args) -> tuple:
    k = args[3].value
    lds = (4, 5, 6) if len(args) == 7 else (None, None, None)
    return (Tile(0, 16, k, lds[0]), Tile(1, k, 16, lds[1]),
            Tile(2, 16, 16, lds[2], "readwrite"))


register_op(OpDef(FP8_OP, -1, "any", effect="opaque", collective="warp", tiles=_tiles,
                  reference=lambda t: lambda a, b, c: (c + a.astype("float32")
                                                       @ b.astype("float32"),),
                  doc="C[16, 16] += A[16, K] @ B[K, 16] on fp8 values in float32 by the 32 "
                      "lanes of a warp (mma.sync m16n8k32)"), replace=True)
register_tile_op(FP8_OP, 4, (MEMORY, MEMORY, MEMORY), min_arch=89)

HELPER = r"""template <int K, bool E5M2> __device__ __forceinline__ void cvl_mma_fp8(
    const uint8_t* a, const uint8_t* b, float* c, int lda, int ldb, int ldc) {
  // the m16n8k32 fragments of the PTX ISA: lane = 4 * g + t
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  float acc[2][4];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    acc[h][0] = c[g * ldc + h * 8 + 2 * t];
    acc[h][1] = c[g * ldc + h * 8 + 2 * t + 1];
    acc[h][2] = c[(g + 8) * ldc + h * 8 + 2 * t];
    acc[h][3] = c[(g + 8) * ldc + h * 8 + 2 * t + 1];
  }
#pragma unroll
  for (int k = 0; k < K; k += 32) {
    uint32_t ra[4];
    ra[0] = *(const uint32_t*)(a + g * lda + k + 4 * t);
    ra[1] = *(const uint32_t*)(a + (g + 8) * lda + k + 4 * t);
    ra[2] = *(const uint32_t*)(a + g * lda + k + 16 + 4 * t);
    ra[3] = *(const uint32_t*)(a + (g + 8) * lda + k + 16 + 4 * t);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint32_t rb[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const uint8_t* p = b + (k + 16 * r + 4 * t) * ldb + h * 8 + g;
        rb[r] = (uint32_t)p[0] | ((uint32_t)p[ldb] << 8) | ((uint32_t)p[2 * ldb] << 16)
                | ((uint32_t)p[3 * ldb] << 24);
      }
      if (E5M2) {
        asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                     : "+f"(acc[h][0]), "+f"(acc[h][1]), "+f"(acc[h][2]), "+f"(acc[h][3])
                     : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]));
      } else {
        asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                     : "+f"(acc[h][0]), "+f"(acc[h][1]), "+f"(acc[h][2]), "+f"(acc[h][3])
                     : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]));
      }
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    c[g * ldc + h * 8 + 2 * t] = acc[h][0];
    c[g * ldc + h * 8 + 2 * t + 1] = acc[h][1];
    c[(g + 8) * ldc + h * 8 + 2 * t] = acc[h][2];
    c[(g + 8) * ldc + h * 8 + 2 * t + 1] = acc[h][3];
  }
}
"""


def mma_name(k: int, dtype: str) -> str:
    """The registered name of the ``16 x 16 x k`` fp8 intrinsic on ``dtype`` inputs.

    Example::

        >>> mma_name(64, "float8_e5m2")
        'cuda.mma_16x16x64_e5m2f32'
    """
    if dtype not in FP8_INPUTS or k not in FP8_DEPTHS:
        raise ScheduleArgumentError(f"fp8 tensor cores: the inputs must be one of "
                                    f"{', '.join(FP8_INPUTS)} and the depth one of "
                                    f"{FP8_DEPTHS}; found {dtype} and {k}")
    return f"cuda.mma_16x16x{k}_{FP8_INPUTS[dtype]}f32"


for _k in FP8_DEPTHS:
    for _dt, _tag in FP8_INPUTS.items():
        TensorIntrin.register(mma_name(_k, _dt), *tile_gemm_intrin(
            _k, _dt, FP8_OP, f"mma_16x16x{_k}_{_tag}"), override=True)


def mma_fp8_text(printer, e) -> str:
    """The CUDA call of a lowered ``cuda.mma_fp8_sync`` (used by the kernel printer).

    Example::

        >>> mma_fp8_text.__name__
        'mma_fp8_text'
    """
    printer.use_helper("cvl_mma_fp8", HELPER)
    a, b = (f"(const uint8_t*)&{printer.access(x.buffer, x.indices)}" for x in e.args[:2])
    c = f"&{printer.access(e.args[2].buffer, e.args[2].indices)}"
    k, lda, ldb, ldc = (printer.bare(x) for x in e.args[3:7])
    e5m2 = "true" if FP8_INPUTS[e.args[0].buffer.dtype] == "e5m2" else "false"
    return f"cvl_mma_fp8<{k}, {e5m2}>({a}, {b}, {c}, {lda}, {ldb}, {ldc})"


__all__ = ["FP8_INPUTS", "FP8_OP", "mma_fp8_text", "mma_name"]
