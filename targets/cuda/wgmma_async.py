"""Overlapped warpgroup tensor cores (sm_90a) and the epilogue fused into their store:
the ops of a pipelined ``wgmma`` GEMM (:mod:`targets.toolkit.cuda_tma_gemm`).

* ``cuda.wgmma_async(A, B, C, 64, N, K)``: the tiles and layout of
  ``cuda.wgmma_sync`` (:mod:`targets.cuda.wgmma`), issued without waiting:
  ``wgmma.fence`` then the ``m64nNk16`` steps; the operands come from shared memory
  the threads did not write (a tensor copy brought them: no proxy fence, no block
  barrier);
* ``cuda.wgmma_commit(C, N)``: closes the warpgroup's group of issued steps into the
  accumulators ``C`` (``wgmma.commit_group``);
* ``cuda.wgmma_wait(C, n, N)``: waits until at most ``n`` groups are in flight
  (``wgmma.wait_group n``) and pins the accumulators ``C`` (``64 x N``) in their
  registers across it, so that the compiler neither reads nor moves them while the
  tensor cores write them;
* ``cuda.wgmma_epilogue_<act>(C, D, 64, N)`` and ``cuda.wgmma_epilogue_bias_<act>(C,
  D, 64, N, bias)`` (``act``: ``none`` or ``relu``): ``D = act(C + bias[j])``
  converted to ``D``'s dtype (float32, float16 or bfloat16) straight from the
  registers: the epilogue never passes through memory.

In the interpreter (``OpDef.lands``, :mod:`cuvil_tir.interp.async_mma`) a
``wgmma_async`` lands at the ``wgmma_wait`` that covers its group: with
``check_races=True`` a stage overwritten (or released to a producer that overwrites
it) before that wait, or accumulators read before it, is a race naming both
statements.

Example::

    >>> from cuvil_tir import ops
    >>> ops.get_op(WGMMA_ASYNC_OP).collective, ACTIVATIONS
    ('warpgroup', ('none', 'relu'))
"""

from __future__ import annotations

import numpy as np

from cuvil_tir import ops
from cuvil_tir.errors import CodegenError, ScheduleArgumentError
from cuvil_tir.ops import OpDef, register_op
from cuvil_tir.ops.gpu import Tile
from cuvil_tir.swizzle import register_swizzled_op

from .tensorcore import register_tile_op
from .wgmma import WARPGROUP_SCOPE, WGMMA_OP, mma_text, registers, wgmma_helper

WGMMA_ASYNC_OP, COMMIT_OP, WAIT_OP = "cuda.wgmma_async", "cuda.wgmma_commit", \
    "cuda.wgmma_wait"
#: the activations of the fused epilogue
ACTIVATIONS = ("none", "relu")
#: the dtypes the epilogue writes, as CUDA C spells them
EPILOGUE_DTYPES = {"float32": "float", "float16": "half", "bfloat16": "__nv_bfloat16"}

_sync = ops.get_op(WGMMA_OP)
register_op(OpDef(WGMMA_ASYNC_OP, -1, "any", effect="opaque", collective="warpgroup",
                  tiles=_sync.tiles, reference=_sync.reference, lands="issue",
                  doc="C[64, N] += A[64, K] @ B[N, K].T issued by a warpgroup without "
                      "waiting (wgmma.mma_async)"), replace=True)
register_op(OpDef(COMMIT_OP, -1, "any", effect="opaque", collective="warpgroup",
                  tiles=lambda a: (Tile(0, 64, a[1].value, 2 if len(a) > 2 else None,
                                        "readwrite"),),
                  reference=lambda t: lambda c: (c,), lands="commit",
                  doc="close the warpgroup's group of wgmma steps into C"), replace=True)
register_op(OpDef(WAIT_OP, -1, "any", effect="opaque", collective="warpgroup",
                  tiles=lambda a: (Tile(0, 64, a[2].value, 3 if len(a) > 3 else None,
                                        "readwrite"),),
                  reference=lambda t: lambda c: (c,), lands="wait",
                  doc="wait until at most n groups of wgmma steps are in flight"),
            replace=True)
register_tile_op(WGMMA_ASYNC_OP, 6, (("shared",), ("shared",), (WARPGROUP_SCOPE,)),
                 min_arch=90)
register_swizzled_op(WGMMA_ASYNC_OP, (0, 1))
register_tile_op(WAIT_OP, 3, ((WARPGROUP_SCOPE,),))
register_tile_op(COMMIT_OP, 2, ((WARPGROUP_SCOPE,),))


def epilogue_name(bias: bool, act: str) -> str:
    """The op storing ``act(C + bias)`` from a warpgroup's accumulators.

    Example::

        >>> epilogue_name(True, "relu")
        'cuda.wgmma_epilogue_bias_relu'
    """
    if act not in ACTIVATIONS:
        raise ScheduleArgumentError(f"the fused epilogue's activation must be one of "
                                    f"{ACTIVATIONS}, found {act!r}")
    return f"cuda.wgmma_epilogue_{'bias_' if bias else ''}{act}"


def _epilogue_tiles(args) -> tuple:
    m, n = args[2].value, args[3].value
    base = 5 if len(args) in (5, 7) else 4      # a bias argument, then leading dims
    lds = (base, base + 1) if len(args) > base else (None, None)
    tiles = (Tile(0, m, n, lds[0]), Tile(1, m, n, lds[1], "write"))
    # the bias is a row of N; its "leading dimension" is N itself
    return tiles + ((Tile(4, 1, n, 3),) if base == 5 else ())


def _epilogue_reference(act: str):
    def run(c, d, bias=None):
        out = c + (0.0 if bias is None else bias.astype("float32"))
        return (np.maximum(out, 0.0) if act == "relu" else out,)
    return lambda t: run


def _register_epilogues() -> None:
    for bias in (False, True):
        for act in ACTIVATIONS:
            name = epilogue_name(bias, act)
            register_op(OpDef(name, -1, "any", effect="opaque", collective="warpgroup",
                              tiles=_epilogue_tiles, reference=_epilogue_reference(act),
                              doc=f"D[64, N] = {act}(C{' + bias' if bias else ''}) from "
                                  "warpgroup registers, converted to D's dtype"),
                        replace=True)
            register_tile_op(name, 5 if bias else 4,
                             ((WARPGROUP_SCOPE,), ("global",)))


_register_epilogues()

_HELPER = r"""template <int N, int KIND, typename T> __device__ __forceinline__ void cvl_wgmma_async(
    const T* a, const T* b, float* d) {
  // the operands came through the tensor engine (async proxy): no fence, no barrier
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  const uint64_t da = cvl_wgmma_desc(a), db = cvl_wgmma_desc(b);
#pragma unroll
  for (int k = 0; k < 4; ++k)
    cvl_wgmma_step<N, KIND>(d, da + 2 * k, db + 2 * k);
}
__device__ __forceinline__ void cvl_wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int W, int N> __device__ __forceinline__ void cvl_wgmma_wait(float* d) {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(W) : "memory");
  // the accumulators stay in their registers across the wait
#pragma unroll
  for (int i = 0; i < N / 2; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}
template <int N, int ACT, typename T> __device__ __forceinline__ void cvl_wgmma_epilogue(
    const float* d, T* c, int ldc, const T* bias) {
  const int t = threadIdx.x & 127, g = (t & 31) >> 2, q = t & 3;
  T* row = c + (16 * (t >> 5) + g) * ldc + 2 * q;
#pragma unroll
  for (int j = 0; j < N / 8; ++j) {
    const float b0 = bias ? (float)bias[8 * j + 2 * q] : 0.0f;
    const float b1 = bias ? (float)bias[8 * j + 2 * q + 1] : 0.0f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float v0 = d[4 * j + 2 * h] + b0, v1 = d[4 * j + 2 * h + 1] + b1;
      if (ACT == 1) { v0 = fmaxf(v0, 0.0f); v1 = fmaxf(v1, 0.0f); }
      row[8 * h * ldc + 8 * j] = (T)v0;
      row[8 * h * ldc + 8 * j + 1] = (T)v1;
    }
  }
}
"""


def _async_text(p, e) -> str:
    wgmma_helper(p)
    p.use_helper("cvl_wgmma_async", _HELPER)
    return mma_text(p, e, "cvl_wgmma_async")


def _wait_text(p, e) -> str:
    wgmma_helper(p)
    p.use_helper("cvl_wgmma_async", _HELPER)
    c, n, cols = e.args[:3]
    return f"cvl_wgmma_wait<{n.value}, {cols.value}>({registers(p, c, 'wgmma_wait')})"


def _epilogue_text(p, e) -> str:
    wgmma_helper(p)
    p.use_helper("cvl_wgmma_async", _HELPER)
    c, d = e.args[:2]
    bias = e.args[4] if e.op.startswith("cuda.wgmma_epilogue_bias") else None
    if d.buffer.dtype not in EPILOGUE_DTYPES or (
            bias is not None and bias.buffer.dtype != d.buffer.dtype):
        raise CodegenError(f"cuda codegen: {e.op} writes {', '.join(EPILOGUE_DTYPES)} with a "
                           f"bias of the same dtype; found {d.buffer.name} of "
                           f"{d.buffer.dtype}" + (f" and {bias.buffer.name} of "
                                                  f"{bias.buffer.dtype}" if bias is not None else ""))
    act = ACTIVATIONS.index(e.op.rsplit("_", 1)[1])
    ld = e.args[-1]
    b = f"&{p.access(bias.buffer, bias.indices)}" if bias is not None else "nullptr"
    return (f"cvl_wgmma_epilogue<{e.args[3].value}, {act}, "
            f"{EPILOGUE_DTYPES[d.buffer.dtype]}>({registers(p, c, 'wgmma_epilogue')}, "
            f"&{p.access(d.buffer, d.indices)}, {p.bare(ld)}, {b})")


#: the ``cuda`` spellings of the ops (registered by the codegen)
SPELLINGS = {WGMMA_ASYNC_OP: _async_text, COMMIT_OP: lambda p, e: (
    wgmma_helper(p) or p.use_helper("cvl_wgmma_async", _HELPER) or "cvl_wgmma_commit()"),
    WAIT_OP: _wait_text,
    **{epilogue_name(b, a): _epilogue_text for b in (False, True) for a in ACTIVATIONS}}

__all__ = ["ACTIVATIONS", "COMMIT_OP", "EPILOGUE_DTYPES", "SPELLINGS", "WAIT_OP",
           "WGMMA_ASYNC_OP", "epilogue_name"]
