"""A Hopper GEMM kernel: tensor copies into a ring of shared stages, a producer
warpgroup and consumer warpgroups synchronised by mbarriers, overlapped ``wgmma``
with register accumulators, the epilogue fused into the store (sm_90a).

:func:`gemm_tma_wgmma` writes the kernel as TIR at the level of tiles (as TileLang's
kernels are written), from the ops of the CUDA target: ``tma_load``
(:mod:`cuvil_tir.ops.tma`), ``mbarrier_*`` (:mod:`cuvil_tir.ops.mbarrier`),
``cuda.wgmma_async`` / ``cuda.wgmma_commit`` / ``cuda.wgmma_wait`` and the fused
epilogue (:mod:`targets.cuda.wgmma_async`).  ``C = act(A @ B.T + bias)`` (A ``[M, K]``,
B ``[N, K]``: K-major, cuBLAS's "TN"), a ``bm x bn`` tile per block:

* ``threadIdx.x`` holds the 128 threads of a warpgroup, ``threadIdx.y`` the
  ``bm / 64`` consumer warpgroups and, last, the producer;
* stage ``s`` of the ring holds a ``bm x bk`` slice of A and a ``bn x bk`` slice of
  B (``bk``: one 128-byte row, 64 fp16/bf16 elements) laid out through the 128-byte
  swizzle that both the tensor copies write and ``wgmma`` reads;
* the producer's first thread waits until stage ``s`` is empty (``EMPTY[s]``, every
  consumer thread arrives once it is done with it), announces the stage's bytes on
  ``FULL[s]`` and issues the two tensor copies;
* each consumer warpgroup waits on ``FULL[s]``, issues its ``64 x bn x bk`` steps
  without waiting, keeps one group in flight (``wgmma_wait(1)``) and releases the
  previous stage, whose steps are then done; after the loop it waits for the last
  group and stores ``act(acc + bias)`` in C's dtype straight from the registers.

Example::

    >>> f = gemm_tma_wgmma(256, 256, 256)
    >>> [p.name for p in f.params], f.attr("buffer_swizzle")
    (['A', 'B', 'C'], (('A_s', 197376), ('B_s', 197376)))
"""

from __future__ import annotations

import cuvil_tir as T
from cuvil_tir import dtype as D
from cuvil_tir.errors import ScheduleArgumentError
from cuvil_tir.swizzle import SWIZZLE_KEY

from ..cuda import shared_capacity, wgmma
from ..cuda.wgmma_async import (ACTIVATIONS, COMMIT_OP, EPILOGUE_DTYPES, WAIT_OP,
                                WGMMA_ASYNC_OP, epilogue_name)

WARPGROUP = 128


def nt_gemm_func(m: int, n: int, k: int, dtype: str = "float16"):
    """The computation :func:`gemm_tma_wgmma` implements without a bias or activation,
    as a compute definition: ``C[i, j] = sum_k A[i, k] * B[j, k]`` in float32 (what
    ``recipes.gemm_wgmma`` schedules).

    Example::

        >>> [p.shape for p in nt_gemm_func(64, 32, 16).params]
        [(64, 16), (32, 16), (64, 32)]
    """
    A = T.placeholder((m, k), dtype, name="A")
    B = T.placeholder((n, k), dtype, name="B")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((m, n), lambda i, j: T.sum(A[i, r].astype("float32")
                                             * B[j, r].astype("float32"), axis=r), name="C")
    return T.create_prim_func([A, B, C])


def _call(op: str, *args):
    return T.Evaluate(T.Call("int32", op, tuple(T.const(a) if isinstance(a, int) else a
                                                for a in args)))


def _check(m, n, k, dtype, bm, bn, stages, out_dtype, activation) -> int:
    if dtype not in ("float16", "bfloat16"):
        raise ScheduleArgumentError(f"gemm_tma_wgmma: the inputs are float16 or bfloat16, "
                                    f"found {dtype}")
    if out_dtype not in EPILOGUE_DTYPES or activation not in ACTIVATIONS:
        raise ScheduleArgumentError(f"gemm_tma_wgmma: the output is one of "
                                    f"{', '.join(EPILOGUE_DTYPES)} and the activation one "
                                    f"of {ACTIVATIONS}; found {out_dtype} and {activation!r}")
    bk = wgmma.row_elements(dtype)
    if bm % 64 or not 64 <= bm <= 256 or bn not in wgmma.WGMMA_N or stages < 2:
        raise ScheduleArgumentError(f"gemm_tma_wgmma: bm must be 64, 128, 192 or 256, bn one "
                                    f"of {wgmma.WGMMA_N} and stages at least 2; found bm="
                                    f"{bm}, bn={bn}, stages={stages}")
    if m % bm or n % bn or k % bk:
        raise ScheduleArgumentError(f"gemm_tma_wgmma: M, N and K must be multiples of bm, "
                                    f"bn and {bk}; found {m}x{n}x{k} with tiles {bm}x{bn}")
    ring = stages * (bm + bn) * bk * D.bits(dtype) // 8
    cap = shared_capacity("sm_90")
    if ring + 1024 + 16 * stages > cap:
        raise ScheduleArgumentError(f"gemm_tma_wgmma: {stages} stages of {bm}x{bk} and "
                                    f"{bn}x{bk} tiles need {ring} bytes of shared memory; "
                                    f"sm_90 offers {cap}: use fewer stages")
    return bk


def gemm_tma_wgmma(m: int, n: int, k: int, dtype: str = "float16", bm: int = 128,
                   bn: int = 128, stages: int = 3, bias: bool = False,
                   activation: str = "none", out_dtype: str = "float32",
                   name: str = "gemm_tma_wgmma"):
    """The kernel of the module doc as a PrimFunc ``(A, B[, bias], C)``; build it for
    ``Target("cuda", arch="sm_90a")``.

    Example::

        >>> gemm_tma_wgmma(128, 128, 64, bias=True, out_dtype="float16").params[2].shape
        (128,)
    """
    bk = _check(m, n, k, dtype, bm, bn, stages, out_dtype, activation)
    groups = bm // 64
    A = T.decl_buffer((m, k), dtype, "A")
    B = T.decl_buffer((n, k), dtype, "B")
    C = T.decl_buffer((m, n), out_dtype, "C")
    Bias = T.decl_buffer((n,), out_dtype, "bias") if bias else None
    A_s = T.decl_buffer((stages, bm, bk), dtype, "A_s", scope="shared")
    B_s = T.decl_buffer((stages, bn, bk), dtype, "B_s", scope="shared")
    full = T.decl_buffer((stages,), "uint64", "FULL", scope="shared")
    empty = T.decl_buffer((stages,), "uint64", "EMPTY", scope="shared")
    acc = T.decl_buffer((64, bn), "float32", "acc", scope=wgmma.WARPGROUP_SCOPE)
    by, bx, ty, tx = (T.var(v) for v in ("by", "bx", "ty", "tx"))
    kp, kc, s = T.var("kp"), T.var("kc"), T.var("s")
    nk = k // bk
    stage_bytes = (bm + bn) * bk * D.bits(dtype) // 8

    init = T.IfThenElse(T.And(ty == 0, tx == 0), T.For(s, T.const(0), T.const(stages),
                        "serial", T.seq(_call("mbarrier_init", full[s], 1),
                                        _call("mbarrier_init", empty[s], groups * WARPGROUP))))
    ps = kp % stages
    producer = T.IfThenElse(tx == 0, T.For(kp, T.const(0), T.const(nk), "serial", T.seq(
        _call("mbarrier_wait", empty[ps], (kp // stages + 1) % 2),
        _call("mbarrier_arrive", full[ps], stage_bytes),
        _call("tma_load", A_s[ps, 0, 0], A[by * bm, kp * bk], full[ps], bm, bk),
        _call("tma_load", B_s[ps, 0, 0], B[bx * bn, kp * bk], full[ps], bn, bk))))
    cs = kc % stages
    mainloop = T.For(kc, T.const(0), T.const(nk), "serial", T.seq(
        _call("mbarrier_wait", full[cs], kc // stages % 2),
        _call(WGMMA_ASYNC_OP, A_s[cs, ty * 64, 0], B_s[cs, 0, 0], acc[0, 0], 64, bn, bk),
        _call(COMMIT_OP, acc[0, 0], bn),
        # the steps of the previous stage are done: it goes back to the producer
        _call(WAIT_OP, acc[0, 0], 1, bn),
        T.IfThenElse(kc > 0, _call("mbarrier_arrive", empty[(kc + stages - 1) % stages], 0))))
    out = [acc[0, 0], C[by * bm + ty * 64, bx * bn], 64, bn]
    consumer = T.seq(_call(wgmma.WGMMA_FILL_OP, acc[0, 0], 64, bn), mainloop,
                     _call(WAIT_OP, acc[0, 0], 0, bn),
                     _call(epilogue_name(bias, activation),
                           *(out + ([Bias[bx * bn]] if bias else []))))
    body = T.seq(init, T.Evaluate(T.Call("int32", "tvm_storage_sync", (T.StringImm("shared"),))),
                 T.IfThenElse(ty == groups, producer, consumer))
    for buf in (acc, empty, full, B_s, A_s):
        body = T.Allocate(buf, body)
    for v, ext, tag in ((tx, WARPGROUP, "threadIdx.x"), (ty, groups + 1, "threadIdx.y"),
                        (bx, n // bn, "blockIdx.x"), (by, m // bm, "blockIdx.y")):
        body = T.For(v, T.const(0), T.const(ext), "thread_binding", body, tag)
    sw = wgmma.swizzle_of(dtype).pack()
    params = [A, B] + ([Bias] if bias else []) + [C]
    return T.PrimFunc(params, body, {"global_symbol": name,
                                     SWIZZLE_KEY: (("A_s", sw), ("B_s", sw))})


__all__ = ["gemm_tma_wgmma", "nt_gemm_func"]
