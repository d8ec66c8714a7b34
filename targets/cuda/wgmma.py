"""Hopper's warpgroup tensor cores: ``wgmma.mma_async`` on operands in shared memory
(sm_90a).

A warpgroup (128 threads: ``threadIdx.x``) computes a 64 x ``N`` tile of ``C += A @
B.T`` (``N`` in 64, 128, 256):

* ``cuda.wgmma_64x{N}x64_{f16,bf16}f32``: A ``[64, 64]`` and B ``[N, 64]`` (its rows
  hold K: K-major, as cuBLAS's "TN") float16 or bfloat16 in ``shared`` memory
  (``cuda.wgmma_64x{N}x128_{e4m3,e5m2}f32``: fp8, 128 deep), laid
  out through the 128-byte swizzle (``transform_layout`` with ``Swizzle(3, 3, 0)``:
  each 128-byte row's 16-byte chunks XORed by the row's index mod 8, which is the
  layout ``wgmma`` reads), C float32 in TVM-style ``warpgroup`` registers; each call
  issues four ``m64nNk16`` steps through shared-memory matrix descriptors (start
  address, 1024-byte stride between 8-row groups, 128-byte swizzle), then commits and
  waits for them (``wgmma.wait_group 0``): the result is in C when the call returns;
* ``cuda.wgmma_fill_64x{N}_f32`` and ``cuda.wgmma_store_64x{N}_f32`` zero C and write it
  to memory (warp ``w`` of the group holds rows ``16w .. 16w + 15`` in the layout of
  ``mma.sync``'s accumulators).

Shared tiles that ``wgmma`` reads start at a 1024-byte boundary (the swizzle is
computed on address bits); the threads' writes are made visible to the tensor cores
(``fence.proxy.async``) and the group synchronised before the first step.  The
interpreter computes each call once per warpgroup, exactly (float32 sums of the
inputs' values).

Example::

    >>> import schedules as S
    >>> wgmma_name(128, "bfloat16") in S.TensorIntrin.names()
    True
"""

from __future__ import annotations

import numpy as np

from cuvil_tir import dtype as D
from cuvil_tir.errors import CodegenError, ScheduleArgumentError
from cuvil_tir.expr import FloatImm, IntImm
from cuvil_tir.ops import OpDef, register_op
from cuvil_tir.ops.gpu import Tile
from cuvil_tir.swizzle import Swizzle, register_swizzled_op
from cuvil_tir.tensor_intrin import TensorIntrin
from cuvil_tir.visitor import post_order_visit

from .fragments import tile_func
from .mma import constant_offset, fill_tiles, store_tiles
from .tensorcore import register_tile_op, tile_gemm_intrin

WGMMA_OP, WGMMA_FILL_OP, WGMMA_STORE_OP = "cuda.wgmma_sync", "cuda.wgmma_fill", \
    "cuda.wgmma_store"
#: the per-warpgroup register scope of the accumulators
WARPGROUP_SCOPE = "warpgroup"
WGMMA_N = (64, 128, 256)
WGMMA_K = 64
#: the input dtypes, their PTX type, the step kind of the generated code
WGMMA_INPUTS = {"float16": "f16", "bfloat16": "bf16", "float8_e4m3fn": "e4m3",
                "float8_e5m2": "e5m2"}
#: the layout of A and B: 16-byte chunks of each 128-byte row XORed by row mod 8
SWIZZLE_128B = Swizzle(3, 3, 0)


def row_elements(dtype: str) -> int:
    """Elements in one 128-byte row of a swizzled tile: the K of one call (64 for
    16-bit inputs, 128 for fp8).

    Example::

        >>> row_elements("float8_e5m2")
        128
    """
    return 1024 // D.bits(dtype)


def swizzle_of(dtype: str) -> Swizzle:
    """The 128-byte swizzle of a tile of ``dtype`` (16-byte chunks).

    Example::

        >>> swizzle_of("float8_e4m3fn")
        Swizzle(bits=3, base=4, shift=0)
    """
    return Swizzle(3, (128 // D.bits(dtype)).bit_length() - 1, 0)


def _tiles(args) -> tuple:
    m, n, k = (a.value for a in args[3:6])
    lds = (6, 7, 8) if len(args) > 6 else (None, None, None)
    swz = (9, 10) if len(args) > 9 else (None, None)
    return (Tile(0, m, k, lds[0], swizzle_arg=swz[0]),
            Tile(1, n, k, lds[1], swizzle_arg=swz[1]),
            Tile(2, m, n, lds[2], "readwrite"))


register_op(OpDef(WGMMA_OP, -1, "any", effect="opaque", collective="warpgroup", tiles=_tiles,
                  reference=lambda t: lambda a, b, c: (c + a.astype("float32")
                                                       @ b.astype("float32").T,),
                  doc="C[64, N] += A[64, K] @ B[N, K].T by the 128 threads of a warpgroup "
                      "(wgmma.mma_async)"), replace=True)
register_op(OpDef(WGMMA_FILL_OP, -1, "any", effect="opaque", collective="warpgroup",
                  tiles=fill_tiles, reference=lambda t: lambda c: (np.zeros_like(c),),
                  doc="C[64, N] = 0 in warpgroup registers"), replace=True)
register_op(OpDef(WGMMA_STORE_OP, -1, "any", effect="opaque", collective="warpgroup",
                  tiles=store_tiles, reference=lambda t: lambda c, d: (c,),
                  doc="D[64, N] = C[64, N] from warpgroup registers to memory"), replace=True)
register_tile_op(WGMMA_OP, 6, (("shared",), ("shared",), (WARPGROUP_SCOPE,)), min_arch=90)
register_swizzled_op(WGMMA_OP, (0, 1))
register_tile_op(WGMMA_FILL_OP, 3, ((WARPGROUP_SCOPE,),))
register_tile_op(WGMMA_STORE_OP, 4, ((WARPGROUP_SCOPE,), ("global", "shared")))


def wgmma_name(n: int, dtype: str) -> str:
    """The registered name of the ``64 x n x 64`` warpgroup step on ``dtype`` inputs.

    Example::

        >>> wgmma_name(256, "float16")
        'cuda.wgmma_64x256x64_f16f32'
    """
    if n not in WGMMA_N or dtype not in WGMMA_INPUTS:
        raise ScheduleArgumentError(f"wgmma: N must be one of {WGMMA_N} and the inputs one "
                                    f"of {', '.join(WGMMA_INPUTS)}; found {n} and {dtype}")
    return f"cuda.wgmma_64x{n}x{row_elements(dtype)}_{WGMMA_INPUTS[dtype]}f32"


def _register() -> None:
    for n in WGMMA_N:
        for dt, tag in WGMMA_INPUTS.items():
            k = row_elements(dt)
            TensorIntrin.register(wgmma_name(n, dt), *tile_gemm_intrin(
                k, dt, WGMMA_OP, f"wgmma_64x{n}x{k}_{tag}f32", 64, n,
                "float32", True, sized=True), override=True)
        TensorIntrin.register(f"cuda.wgmma_fill_64x{n}_f32", *tile_func(
            f"wgmma_fill_64x{n}_f32", WGMMA_FILL_OP, lambda s, i, j: FloatImm(0.0, "float32"),
            True, 64, n, WARPGROUP_SCOPE, sized=True), override=True)
        TensorIntrin.register(f"cuda.wgmma_store_64x{n}_f32", *tile_func(
            f"wgmma_store_64x{n}_f32", WGMMA_STORE_OP, lambda s, i, j: s[i, j], False, 64, n,
            WARPGROUP_SCOPE, sized=True), override=True)


_register()

_HELPER = r"""__device__ __forceinline__ uint64_t cvl_wgmma_desc(const void* p) {
  // K-major operand, 128-byte swizzle: start address, 8-row groups 1024 bytes apart
  uint64_t a = (uint64_t)((unsigned)__cvta_generic_to_shared(p) & 0x3FFFF) >> 4;
  return a | (1ull << 16) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}
template <int N, int KIND> __device__ __forceinline__ void cvl_wgmma_step(
    float* d, uint64_t da, uint64_t db);
template <int N, int KIND, typename T> __device__ __forceinline__ void cvl_wgmma(
    const T* a, const T* b, float* d) {
  // the threads' stores into the tiles, seen by the tensor cores' (async) proxy
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  const uint64_t da = cvl_wgmma_desc(a), db = cvl_wgmma_desc(b);
#pragma unroll
  for (int k = 0; k < 4; ++k)   // 16 elements (32 bytes, 2 descriptor units) a step
    cvl_wgmma_step<N, KIND>(d, da + 2 * k, db + 2 * k);
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void cvl_wgmma_fill(float* d) {
#pragma unroll
  for (int i = 0; i < N / 2; ++i) d[i] = 0.0f;
}
template <int N> __device__ __forceinline__ void cvl_wgmma_store(const float* d, float* c,
                                                                 int ldc) {
  const int t = threadIdx.x & 127, g = (t & 31) >> 2, q = t & 3;
  float* row = c + (16 * (t >> 5) + g) * ldc + 2 * q;
#pragma unroll
  for (int j = 0; j < N / 8; ++j) {
    *(float2*)(row + 8 * j) = make_float2(d[4 * j], d[4 * j + 1]);
    *(float2*)(row + 8 * ldc + 8 * j) = make_float2(d[4 * j + 2], d[4 * j + 3]);
  }
}
"""


def _step(n: int, kind: int, tag: str) -> str:
    """The one ``wgmma.mma_async`` of a ``64 x n x 16`` step: ``n / 2`` accumulators
    per thread, each an operand of the instruction."""
    regs = ", ".join(f"%{i}" for i in range(n // 2))
    # 16-bit inputs take (no) transposes; fp8 steps are 32 deep and take none
    fp8 = tag not in ("f16", "bf16")
    shape, trans = (f"m64n{n}k32", "") if fp8 else (f"m64n{n}k16", ", 0, 0")
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(n // 2))
    return (f"template <> __device__ __forceinline__ void cvl_wgmma_step<{n}, {kind}>(\n"
            f"    float* d, uint64_t da, uint64_t db) {{\n"
            f'  asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, 1, 0;\\n"\n'
            f'               "wgmma.mma_async.sync.aligned.{shape}.f32.{tag}.{tag} "\n'
            f'               "{{{regs}}}, %{n // 2}, %{n // 2 + 1}, p, 1, 1{trans};\\n}}\\n"\n'
            f"               : {outs}\n"
            f'               : "l"(da), "l"(db));\n}}\n')


def registers(p, load, what: str) -> str:
    """The C name of a warpgroup's accumulator array, which ``load`` must pass whole.

    Example::

        >>> registers.__name__
        'registers'
    """
    off = constant_offset(p, load.indices[0])
    if not (isinstance(off, IntImm) and off.value == 0):
        raise CodegenError(f"cuda codegen: {what} takes a warpgroup's whole accumulator "
                           f"buffer {load.buffer.name} (64 x N, from element 0); found "
                           f"element {p.bare(off)}")
    return p.name_of(load.buffer)


def wgmma_helper(p) -> None:
    """Give the printer ``p`` the ``wgmma`` helpers (descriptors, steps, stores).

    Example::

        >>> wgmma_helper.__name__
        'wgmma_helper'
    """
    p.use_helper("cvl_wgmma", _HELPER)


def mma_text(p, e, fn: str = "cvl_wgmma") -> str:
    """A ``wgmma`` call on the tiles of ``e`` through the helper ``fn`` (waiting for
    its steps: ``cvl_wgmma``; issuing them: ``cvl_wgmma_async``).

    Example::

        >>> mma_text.__name__
        'mma_text'
    """
    a, b, c = e.args[:3]
    n, k, lda, ldb = (x.value for x in (e.args[4], e.args[5], e.args[6], e.args[7]))
    swz = tuple(x.value for x in e.args[9:11]) if len(e.args) > 9 else (0, 0)
    row, sw = row_elements(a.buffer.dtype), swizzle_of(a.buffer.dtype)
    if k != row or lda != row or ldb != row or swz != (sw.pack(),) * 2:
        raise CodegenError(f"cuda codegen: wgmma reads A and B as whole 128-byte rows of "
                           f"{row} elements laid out through {sw} "
                           f"(transform_layout); found rows of {lda} and {ldb} elements, "
                           f"swizzles {[str(Swizzle.unpack(x)) for x in swz]}")
    kind = list(WGMMA_INPUTS).index(a.buffer.dtype)
    p.use_helper("cvl_wgmma", _HELPER)
    p.use_helper(f"cvl_wgmma_{n}_{kind}", _step(n, kind, WGMMA_INPUTS[a.buffer.dtype]))
    (ao,), (bo,) = a.indices, b.indices
    return (f"{fn}<{n}, {kind}>(&{p.name_of(a.buffer)}[{p.bare(ao)}], "
            f"&{p.name_of(b.buffer)}[{p.bare(bo)}], {registers(p, c, 'wgmma')})")


def _fill_text(p, e) -> str:
    p.use_helper("cvl_wgmma", _HELPER)
    return f"cvl_wgmma_fill<{e.args[2].value}>({registers(p, e.args[0], 'wgmma_fill')})"


def _store_text(p, e) -> str:
    p.use_helper("cvl_wgmma", _HELPER)
    c, d = e.args[:2]
    if d.buffer.dtype != "float32":
        raise CodegenError(f"cuda codegen: wgmma_store writes float32; {d.buffer.name} is "
                           f"{d.buffer.dtype}")
    if d.buffer.scope == "global":
        p.alignment[d.buffer.name] = max(p.alignment.get(d.buffer.name, 0), 8)
    return (f"cvl_wgmma_store<{e.args[3].value}>({registers(p, c, 'wgmma_store')}, "
            f"&{p.access(d.buffer, d.indices)}, {p.bare(e.args[5])})")


def shared_alignment(buf, body) -> int:
    """The alignment in bytes the shared buffer ``buf`` needs in ``body``: 1024 when
    ``wgmma`` reads it (its swizzle is computed on address bits), else 32.

    Example::

        >>> shared_alignment(None, None)
        32
    """
    hit = []
    if body is not None:
        post_order_visit(body, lambda n: hit.append(1) if getattr(n, "op", None) in
                         (WGMMA_OP, "cuda.wgmma_async")
                         and any(getattr(a, "buffer", None) is buf for a in n.args[:2])
                         else None)
    return 1024 if hit else 32


#: the ``cuda`` spellings of the ops (registered by the codegen)
SPELLINGS = {WGMMA_OP: mma_text, WGMMA_FILL_OP: _fill_text, WGMMA_STORE_OP: _store_text}

__all__ = ["row_elements", "swizzle_of", "SPELLINGS", "SWIZZLE_128B", "WARPGROUP_SCOPE",
           "WGMMA_FILL_OP", "WGMMA_N", "WGMMA_OP", "WGMMA_STORE_OP", "mma_text", "registers",
           "shared_alignment", "wgmma_helper", "wgmma_name"]
