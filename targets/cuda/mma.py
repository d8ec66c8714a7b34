"""``mma.sync`` tensor cores fed by ``ldmatrix``, accumulators in registers (sm_80+).

A warp computes an ``M x N`` tile (``M``, ``N`` in 16, 32, 64) of ``C += A @ B``:

* ``cuda.mma_{M}x{N}x{K}_f16f32`` / ``_bf16f32``: A ``[M, K]`` and B ``[K, N]``
  float16 or bfloat16 in ``shared`` memory (row-major), C float32; each 16-deep
  step is ``ldmatrix.x4`` of A, ``ldmatrix.x4.trans`` of B and ``mma.sync.m16n8k16``;
* ``cuda.mma_{M}x{N}x{K}_s8s32``: A ``[M, K]`` and B ``[N, K]`` int8 (B's rows hold
  K: ``C[i, j] += A[i, k] * B[j, k]``), C int32 (wrapping), steps of 32 with
  ``ldmatrix.x4`` and ``mma.sync.m16n8k32``;
* ``cuda.mma_fill_{M}x{N}_{f32,s32}`` zeroes C, ``cuda.mma_store_{M}x{N}_{f32,s32}``
  writes it to ``global`` or ``shared`` memory.

C lives in TVM's ``warp`` scope: one allocation per warp, held in the registers of
its 32 lanes in the layout of the ``m16n8`` accumulators (lane ``4g + t`` holds rows
``g`` and ``g + 8``, columns ``2t`` and ``2t + 1`` of each 16 x 8 tile), declared as
a per-lane array that never reaches memory.  These ops alone touch it.  The
interpreter computes each op once per warp from its tiles, exactly (float32 sums of
the inputs' values; int32 wraps), and logs the shared tiles for the race checker;
:mod:`.ldmatrix` models the lanes' addresses for the tests.  A and B may be laid out
through an XOR swizzle (``transform_layout``, :mod:`.swizzle`).

Example::

    >>> import schedules as S
    >>> mma_name(64, 32, 32, "bfloat16") in S.TensorIntrin.names()
    True
"""

from __future__ import annotations

import numpy as np

from cuvil_tir import dtype as D
from cuvil_tir.errors import CodegenError, ScheduleArgumentError
from cuvil_tir.expr import FloatImm, IntImm
from cuvil_tir.ops import OpDef, register_op
from cuvil_tir.ops.gpu import Tile, group_lanes
from cuvil_tir.swizzle import Swizzle, register_swizzled_op
from cuvil_tir.tensor_intrin import TensorIntrin

from .fragments import tile_func
from .ldmatrix import LDSM_HELPER
from .tensorcore import register_tile_op, tile_gemm_intrin

MMA_OP = "cuda.mma_sync"
MMA_FILL_OP = "cuda.mma_fill"
MMA_STORE_OP = "cuda.mma_store"
#: the per-warp register scope of the accumulators (TVM's ``warp``)
WARP_SCOPE = "warp"
WARP_TILES = (16, 32, 64)
#: per input dtype: (name tag, accumulator dtype, its tag, step depth, depths)
MMA_INPUTS = {"float16": ("f16", "float32", "f32", 16, (16, 32, 64)),
              "bfloat16": ("bf16", "float32", "f32", 16, (16, 32, 64)),
              "int8": ("s8", "int32", "s32", 32, (32, 64))}
_KIND = {"float16": 0, "bfloat16": 1, "int8": 2}
#: the arguments of each op before lowering appends leading dimensions and swizzles
_NARGS = {MMA_OP: 6, MMA_FILL_OP: 3, MMA_STORE_OP: 4}


def _mma_tiles(args) -> tuple:
    m, n, k = (a.value for a in args[3:6])
    lds = (6, 7, 8) if len(args) > 6 else (None, None, None)
    swz = (9, 10) if len(args) > 9 else (None, None)
    nt = args[1].buffer.dtype == "int8"
    return (Tile(0, m, k, lds[0], swizzle_arg=swz[0]),
            Tile(1, n, k, lds[1], swizzle_arg=swz[1]) if nt
            else Tile(1, k, n, lds[1], swizzle_arg=swz[1]),
            Tile(2, m, n, lds[2], "readwrite"))


def _mma_reference(t):
    def run(a, b, c):
        if c.dtype.kind == "i":      # int8 x int8 summed in int32, wrapping as PTX does
            s = c.astype(np.int64) + a.astype(np.int64) @ b.astype(np.int64).T
            return (((s + 2**31) % 2**32 - 2**31).astype(np.int32),)
        return (c + a.astype("float32") @ b.astype("float32"),)
    return run


register_op(OpDef(MMA_OP, -1, "any", effect="opaque", collective="warp", tiles=_mma_tiles,
                  reference=_mma_reference,
                  doc="C[M, N] += A[M, K] @ B by the 32 lanes of a warp (ldmatrix + "
                      "mma.sync; int8: B is [N, K])"), replace=True)
def fill_tiles(a) -> tuple:
    """The tile of ``fill(C[0, 0], M, N)`` (then its leading dimension).

    Example::

        >>> fill_tiles((None, IntImm(16, "int32"), IntImm(32, "int32")))[0].cols
        32
    """
    return (Tile(0, a[1].value, a[2].value, 3 if len(a) > 3 else None, "write"),)


def store_tiles(a) -> tuple:
    """The tiles of ``store(C[0, 0], D[i, j], M, N)`` (then their leading dimensions).

    Example::

        >>> store_tiles((None, None, IntImm(16, "int32"), IntImm(8, "int32")))[1].access
        'write'
    """
    lds = (4, 5) if len(a) > 4 else (None, None)
    return (Tile(0, a[2].value, a[3].value, lds[0]),
            Tile(1, a[2].value, a[3].value, lds[1], "write"))


register_op(OpDef(MMA_FILL_OP, -1, "any", effect="opaque", collective="warp",
                  tiles=fill_tiles, reference=lambda t: lambda c: (np.zeros_like(c),),
                  doc="C[M, N] = 0 in warp registers"), replace=True)
register_op(OpDef(MMA_STORE_OP, -1, "any", effect="opaque", collective="warp",
                  tiles=store_tiles, reference=lambda t: lambda c, d: (c,),
                  doc="D[M, N] = C[M, N] from warp registers to memory"), replace=True)
register_tile_op(MMA_OP, _NARGS[MMA_OP], (("shared",), ("shared",), (WARP_SCOPE,)),
                 min_arch=80)
# A and B may be laid out through an XOR swizzle (appended after the leading dims)
register_swizzled_op(MMA_OP, (0, 1))
register_tile_op(MMA_FILL_OP, _NARGS[MMA_FILL_OP], ((WARP_SCOPE,),))
register_tile_op(MMA_STORE_OP, _NARGS[MMA_STORE_OP], ((WARP_SCOPE,), ("global", "shared")))


def _acc(dtype: str) -> tuple:
    if dtype not in MMA_INPUTS:
        raise ScheduleArgumentError(f"mma.sync: the inputs must be one of "
                                    f"{', '.join(MMA_INPUTS)}; found {dtype}")
    return MMA_INPUTS[dtype][1:3]


def _check_tile(m: int, n: int) -> None:
    if m not in WARP_TILES or n not in WARP_TILES:
        raise ScheduleArgumentError(f"mma.sync: a warp's tile is M x N with M and N in "
                                    f"{WARP_TILES}; found {m} x {n}")


def mma_name(m: int, n: int, k: int, dtype: str) -> str:
    """The registered name of the ``m x n x k`` warp tile on ``dtype`` inputs.

    Example::

        >>> mma_name(32, 64, 64, "int8")
        'cuda.mma_32x64x64_s8s32'
    """
    _check_tile(m, n)
    tag, _, acc_tag, _, depths = MMA_INPUTS.get(dtype, (None,) * 5)
    if tag is None or k not in depths:
        raise ScheduleArgumentError(f"mma.sync: the inputs must be one of "
                                    f"{', '.join(MMA_INPUTS)} with a depth in "
                                    f"{MMA_INPUTS.get(dtype, MMA_INPUTS['float16'])[4]}; "
                                    f"found {dtype} and {k}")
    return f"cuda.mma_{m}x{n}x{k}_{tag}{acc_tag}"


def fill_name(m: int, n: int, dtype: str) -> str:
    """The registered name of zeroing an ``m x n`` accumulator for ``dtype`` inputs.

    Example::

        >>> fill_name(64, 64, "float16")
        'cuda.mma_fill_64x64_f32'
    """
    return _acc_name("fill", m, n, dtype)


def store_name(m: int, n: int, dtype: str) -> str:
    """The registered name of storing an ``m x n`` accumulator for ``dtype`` inputs
    (``store_name(16, 32, "int8")`` is ``'cuda.mma_store_16x32_s32'``)."""
    return _acc_name("store", m, n, dtype)


def _acc_name(what: str, m: int, n: int, dtype: str) -> str:
    _check_tile(m, n)
    return f"cuda.mma_{what}_{m}x{n}_{_acc(dtype)[1]}"


def _register() -> None:
    for m in WARP_TILES:
        for n in WARP_TILES:
            for dt, (tag, acc, acc_tag, _, depths) in MMA_INPUTS.items():
                for k in depths:
                    TensorIntrin.register(mma_name(m, n, k, dt), *tile_gemm_intrin(
                        k, dt, MMA_OP, f"mma_{m}x{n}x{k}_{tag}{acc_tag}", m, n, acc,
                        dt == "int8", sized=True), override=True)
            for acc, tag in (("float32", "f32"), ("int32", "s32")):
                zero = FloatImm(0.0, acc) if acc == "float32" else IntImm(0, acc)
                TensorIntrin.register(f"cuda.mma_fill_{m}x{n}_{tag}", *tile_func(
                    f"mma_fill_{m}x{n}_{tag}", MMA_FILL_OP, lambda s, i, j, z=zero: z, True,
                    m, n, WARP_SCOPE, acc, sized=True), override=True)
                TensorIntrin.register(f"cuda.mma_store_{m}x{n}_{tag}", *tile_func(
                    f"mma_store_{m}x{n}_{tag}", MMA_STORE_OP, lambda s, i, j: s[i, j], False,
                    m, n, WARP_SCOPE, acc, sized=True), override=True)


_register()

_STEP = r"""template <> __device__ __forceinline__ void cvl_mma_step<KIND>(
    float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.DT.DT.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
"""
# one step per 16-bit input type: the PTX type is part of the instruction's text
MMA_HELPER = ("template <int KIND> __device__ __forceinline__ void cvl_mma_step(\n"
              "    float* c, const uint32_t* a, uint32_t b0, uint32_t b1);\n"
              + "".join(_STEP.replace("KIND", str(_KIND[dt])).replace("DT", tag)
                        for dt, (tag, *_) in MMA_INPUTS.items() if dt != "int8")
              + r"""template <int KIND> __device__ __forceinline__ void cvl_mma_step(
    int* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// C[M, N] += A[M, K] @ B: A at element ao of a (rows of LDA), B at bo of b (rows of
// LDB; [K, N] for 16-bit inputs, [N, K] for int8); c: the lane's accumulators of the
// tile, CT 16 x 8 tiles per row of the warp's accumulator buffer
template <int KIND, int M, int N, int K, int LDA, int LDB, int CT, int SWA, int SWB,
          typename T, typename Acc>
__device__ __forceinline__ void cvl_mma_ldsm(const T* a, int ao, const T* b, int bo, Acc* c) {
  constexpr int E = KIND == 2 ? 16 : 8;  // elements in 16 bytes
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int k = 0; k < K; k += 2 * E) {
    uint32_t fa[M / 16][4], fb[N / 16][4];
#pragma unroll
    for (int i = 0; i < M / 16; ++i)
      cvl_ldsm_x4<false>(fa[i], a + cvl_swz<SWA, LDA>(ao + (16 * i + (lane & 15)) * LDA + k
                                                 + (lane >> 4) * E));
#pragma unroll
    for (int j = 0; j < N / 16; ++j) {
      if constexpr (KIND == 2) {
        cvl_ldsm_x4<false>(fb[j], b + cvl_swz<SWB, LDB>(
            bo + (16 * j + (lane >> 4) * 8 + (lane & 7)) * LDB + k + ((lane >> 3) & 1) * E));
      } else {
        cvl_ldsm_x4<true>(fb[j], b + cvl_swz<SWB, LDB>(bo + (k + (lane & 15)) * LDB + 16 * j
                                                  + (lane >> 4) * 8));
      }
    }
#pragma unroll
    for (int i = 0; i < M / 16; ++i)
#pragma unroll
      for (int j = 0; j < N / 8; ++j)
        cvl_mma_step<KIND>(c + (i * CT + j) * 4, fa[i], fb[j / 2][2 * (j % 2)],
                           fb[j / 2][2 * (j % 2) + 1]);
  }
}
template <int M, int N, int CT, typename Acc> __device__ __forceinline__ void cvl_mma_fill(
    Acc* c) {
#pragma unroll
  for (int i = 0; i < M / 16; ++i)
#pragma unroll
    for (int j = 0; j < N / 8 * 4; ++j) c[i * CT * 4 + j] = 0;
}
__device__ __forceinline__ void cvl_store2(float* p, float x, float y) {
  *(float2*)p = make_float2(x, y);
}
__device__ __forceinline__ void cvl_store2(int* p, int x, int y) {
  *(int2*)p = make_int2(x, y);
}
template <int M, int N, int CT, typename Acc> __device__ __forceinline__ void cvl_mma_store(
    const Acc* c, Acc* d, int ldd) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int i = 0; i < M / 16; ++i)
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
      const Acc* r = c + (i * CT + j) * 4;
      Acc* p = d + (16 * i + g) * ldd + 8 * j + 2 * t;
      cvl_store2(p, r[0], r[1]);
      cvl_store2(p + 8 * ldd, r[2], r[3]);
    }
}
""")


def declare_registers(printer, buf, name: str, n: int) -> None:
    """Declare the ``warp`` (or ``warpgroup``) buffer ``buf`` (``n`` elements per
    group, called ``name``) as the per-lane array of its accumulators.

    Example::

        >>> declare_registers.__name__
        'declare_registers'
    """
    lanes = group_lanes(buf.scope)
    # TVM's ldmatrix fills warp buffers of operands too (targets/cuda/tvm_mma.py), read
    # as 32-bit registers
    operand = buf.scope == WARP_SCOPE and buf.dtype in ("float16", "int8") \
        and n % (lanes * 32 // D.bits(buf.dtype)) == 0
    if not operand and (buf.dtype not in ("float32", "int32") or n % (4 * lanes)):
        raise CodegenError(f"cuda codegen: {buf.scope} buffer {buf.name} holds tensor-core "
                           f"accumulators: whole 16 x 8 tiles per warp of float32 or "
                           f"int32 (or TVM's ldmatrix operands: float16 or int8 tiles); "
                           f"found {n} elements of {buf.dtype}")
    align = "__align__(16) " if operand else ""
    printer.emit(f"{align}{printer.mem_type(buf.dtype)} {name}[{n // lanes}];")


def constant_offset(printer, e):
    """``e`` simplified, as a constant where its bounds pin it (the index of a thread
    axis of extent 1 is still a variable here).

    Example::

        >>> constant_offset.__name__
        'constant_offset'
    """
    e = printer.ana.simplify(e)
    if not isinstance(e, IntImm):
        lo, hi = printer.ana.const_int_bound(e)
        if lo == hi:
            return IntImm(lo, e.dtype)
    return e


def _registers(printer, load, ld) -> str:
    """``name + i``: the lane's first accumulator of the tile at ``load`` of a warp
    buffer whose rows hold ``ld`` elements."""
    off = constant_offset(printer, load.indices[0])
    if not isinstance(off, IntImm) or not isinstance(ld, IntImm) or ld.value % 8:
        raise CodegenError(f"cuda codegen: an mma.sync accumulator tile must start at a "
                           f"constant offset (unroll the loops over the warp's tiles); "
                           f"found {printer.bare(off)} in {load.buffer.name}")
    row, col, w = off.value // ld.value, off.value % ld.value, ld.value // 8
    if row % 16 or col % 8:
        raise CodegenError(f"cuda codegen: an mma.sync accumulator tile starts at a "
                           f"multiple of 16 rows and 8 columns; found ({row}, {col}) in "
                           f"{load.buffer.name}")
    return f"{printer.name_of(load.buffer)} + {(row // 16 * w + col // 8) * 4}"


def _ct(ld) -> int:
    return ld.value // 8


def _helpers(p) -> None:
    # the mma helper calls ldmatrix's: it comes first whichever op is printed first
    p.use_helper("cvl_ldsm", LDSM_HELPER)
    p.use_helper("cvl_mma", MMA_HELPER)


def _mma_text(p, e) -> str:
    _helpers(p)
    a, b, c = e.args[:3]
    m, n, k, lda, ldb, ldc = (x.value for x in e.args[3:9])
    swa, swb = (x.value for x in e.args[9:11]) if len(e.args) > 9 else (0, 0)
    for x, sw in ((a, swa), (b, swb)):
        s = Swizzle.unpack(sw)
        if s is not None and (1 << s.base) * D.bits(x.buffer.dtype) < 128:
            raise CodegenError(f"cuda codegen: ldmatrix reads rows of 16 bytes; the swizzle "
                               f"of {x.buffer.name} ({s}) moves pieces of "
                               f"{1 << s.base} {x.buffer.dtype} elements: use a base of at "
                               f"least {16 * 8 // D.bits(x.buffer.dtype)} elements")
    kind = _KIND[a.buffer.dtype]
    (ao,), (bo,) = a.indices, b.indices
    return (f"cvl_mma_ldsm<{kind}, {m}, {n}, {k}, {lda}, {ldb}, {ldc // 8}, {swa}, {swb}>("
            f"{p.name_of(a.buffer)}, {p.bare(ao)}, {p.name_of(b.buffer)}, {p.bare(bo)}, "
            f"{_registers(p, c, e.args[8])})")


def _fill_text(p, e) -> str:
    _helpers(p)
    m, n = e.args[1].value, e.args[2].value
    return f"cvl_mma_fill<{m}, {n}, {_ct(e.args[3])}>({_registers(p, e.args[0], e.args[3])})"


def _store_text(p, e) -> str:
    _helpers(p)
    c, d = e.args[:2]
    m, n = e.args[2].value, e.args[3].value
    if d.buffer.scope == "global":
        p.alignment[d.buffer.name] = max(p.alignment.get(d.buffer.name, 0), 8)
    return (f"cvl_mma_store<{m}, {n}, {_ct(e.args[4])}>({_registers(p, c, e.args[4])}, "
            f"&{p.access(d.buffer, d.indices)}, {p.bare(e.args[5])})")


#: the ``cuda`` spellings of the ops (registered by the codegen)
SPELLINGS = {MMA_OP: _mma_text, MMA_FILL_OP: _fill_text, MMA_STORE_OP: _store_text}

__all__ = ["constant_offset", "fill_tiles", "store_tiles", "MMA_FILL_OP", "MMA_INPUTS", "MMA_OP", "MMA_STORE_OP", "SPELLINGS", "WARP_SCOPE",
           "WARP_TILES", "declare_registers", "fill_name", "mma_name", "store_name"]
