"""The Hopper rows of ``benchmarks/cuda.py``: ``gemm_nt:<dtype>:MxNxK``, fp16 and bf16
GEMMs ``C = A @ B.T`` (B ``[N, K]``, K-major: cuBLAS's "TN") on the warpgroup tensor
cores, sm_90a.

Variants, best first: the tensor-copy pipeline (``recipes.gemm_tma_wgmma``: a
producer warpgroup filling a ring of stages through TMA, two consumer warpgroups
with overlapped ``wgmma``), then ``recipes.gemm_wgmma`` (every thread copies the
tiles, one ``wgmma`` group at a time; then the same schedule with its copies annotated
``"cuda.tma"``: the tensor engine copies the tiles; then with its K loop pipelined
over a ring of 4 stages, ``stages=4``; then warp-specialized from the schedule,
``warp_specialize=True``: a producer warpgroup and two consumers keeping one ``wgmma``
group in flight, as the hand-written kernel but without its fused epilogue).  Without a
GPU (``--quick``) each variant is built at the row's size, compiled by nvcc for sm_90a
and interpreted at a small size
against numpy; on a GPU each is timed beside cuBLAS (``cupy.matmul(a, b.T)``; bf16
through ``torch.matmul``).

Example::

    >>> [label for label, _, _ in nt_variants("float16", 4096, 4096, 4096)][0][:16]
    'TMA + wgmma 128x'
"""

from __future__ import annotations

import numpy as np

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir import dtype as D
from cuvil_tir.interp.scalar import tile_storage, tile_values
from targets.toolkit import cuda_recipes as recipes
from targets.toolkit.cuda_tma_gemm import nt_gemm_func

SM90A = targets.Target("cuda", arch="sm_90a")
NT_DTYPES = ("float16", "bfloat16")
#: the small size each variant is interpreted at (M, N, K)
SMALL = {"tma": (128, 128, 256), "wgmma": (256, 256, 128)}


def _wgmma(m, n, k, dtype, name, tma=False, stages=1, warp_specialize=False):
    sch = S.Schedule(nt_gemm_func(m, n, k, dtype))
    recipes.gemm_wgmma(sch, bm=128, bn=128, tma=tma, stages=stages,
                       warp_specialize=warp_specialize)
    return targets.build(sch, SM90A, name=name)


def nt_variants(dtype, m, n, k) -> list:
    """``[(label, small-size key, build(m, n, k, name) -> module)]``, best first."""
    out = []
    if m % 128 == 0 and n % 128 == 0 and k % 64 == 0:
        for stages in (4, 3):
            out.append((f"TMA + wgmma 128x128x64, producer + 2 consumer warpgroups, "
                        f"{stages} stages, wait_group 1", "tma",
                        lambda m, n, k, name, s=stages: targets.build(
                            recipes.gemm_tma_wgmma(m, n, k, dtype, 128, 128, s), SM90A,
                            name=name)))
        out.append(("wgmma 128x128x64, threads copy, one group at a time", "wgmma",
                    lambda m, n, k, name: _wgmma(m, n, k, dtype, name)))
        out.append(("wgmma 128x128x64, tensor copies from the schedule ('cuda.tma'), "
                    "one group at a time", "wgmma",
                    lambda m, n, k, name: _wgmma(m, n, k, dtype, name, tma=True)))
        out.append(("wgmma 128x128x64, a ring of tensor copies from the schedule "
                    "(software_pipeline_stage, 4 stages), one group at a time", "tma",
                    lambda m, n, k, name: _wgmma(m, n, k, dtype, name, tma=True,
                                                 stages=4)))
        out.append(("wgmma 128x128x64, warp-specialized from the schedule "
                    "('cuda.warp_specialize': producer + 2 consumer warpgroups, 4 stages), "
                    "wait_group 1", "tma",
                    lambda m, n, k, name: _wgmma(m, n, k, dtype, name, tma=True, stages=4,
                                                 warp_specialize=True)))
    return out


def nt_row_names(shapes) -> list:
    """The rows' names over ``shapes`` (M x N x K)."""
    return [f"gemm_nt:{dt}:{m}x{n}x{k}" for dt in NT_DTYPES for m, n, k in shapes]


def quick_nt_row(name, checked: set) -> dict:
    """Build, compile (nvcc, sm_90a) and interpret each variant (``checked``: the
    (dtype, label) pairs interpreted already in this process)."""
    from targets.cuda.nvcc import nvcc_available, nvcc_ptx
    _, dtype, shape = name.split(":")
    m, n, k = (int(x) for x in shape.split("x"))
    notes = []
    rng = np.random.default_rng(0)
    for label, small, build in nt_variants(dtype, m, n, k):
        mod = build(m, n, k, f"gemm_nt_{dtype}_{m}x{n}x{k}")
        if (dtype, label) in checked:
            notes.append(f"{label}: built")
            continue
        if nvcc_available():
            nvcc_ptx(mod.get_source("cuda"), "sm_90a")
        sm, sn, sk = SMALL[small]
        tiny = build(sm, sn, sk, "small")
        a = np.asarray(tile_storage(rng.standard_normal((sm, sk)), dtype))
        b = np.asarray(tile_storage(rng.standard_normal((sn, sk)), dtype))
        a, b = a.astype(D.to_numpy(dtype)), b.astype(D.to_numpy(dtype))
        c = np.zeros((sm, sn), "float32")
        T.interpret(tiny.lowered, a, b, c, check_races=True)
        ref = tile_values(a, dtype).astype(np.float64) @ tile_values(b, dtype).T
        err = float(np.abs(c - ref).max() / max(1.0, np.abs(ref).max()))
        checked.add((dtype, label))
        notes.append(f"{label}: built and compiled for sm_90a; interpreted {sm}x{sn}x{sk} "
                     f"race-checked: rel err {err:.1e}")
        if err > 1e-3:
            return {"row": name, "status": "WRONG", "detail": "; ".join(notes)}
    if not notes:
        return {"row": name, "status": "missing", "detail": "no variant for this shape"}
    return {"row": name, "status": "ok", "detail": "; ".join(notes)}


def _cublas_nt(cp, dtype, m, n, k, res):
    """``(cuBLAS call, A, B for us, the fp32 reference of C)``."""
    rng = cp.random.default_rng(0)
    if dtype == "float16":
        a = rng.standard_normal((m, k), dtype="float32").astype("float16")
        b = rng.standard_normal((n, k), dtype="float32").astype("float16")
        res["baseline"] = "cupy.matmul(a, b.T) fp16 (cuBLAS)"
        ref = cp.matmul(a.astype("float32"), b.astype("float32").T)
        return (lambda: cp.matmul(a, b.T)), a, b, ref
    import torch
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn((m, k), device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn((n, k), device="cuda", generator=g).to(torch.bfloat16)
    res["baseline"] = "torch.matmul(a, b.t()) bf16 (cuBLAS)"
    ref = cp.from_dlpack(torch.matmul(a.float(), b.float().t()).contiguous())
    a16 = cp.from_dlpack(a.view(torch.int16)).view(cp.uint16)
    b16 = cp.from_dlpack(b.view(torch.int16)).view(cp.uint16)
    return (lambda: torch.matmul(a, b.t())), a16, b16, ref


def gpu_nt_row(cp, name, dtype, m, n, k, timed, time_variants) -> dict:
    """Every variant timed beside cuBLAS (``timed(cp, fn)``: seconds per call;
    ``time_variants``: ``benchmarks/cuda.py``'s, which checks and times them)."""
    res = {"row": name, "family": f"gemm_nt:{dtype}", "shape": (m, n, k),
           "flops": 2.0 * m * n * k}
    theirs, a, b, ref = _cublas_nt(cp, dtype, m, n, k, res)
    res["cublas_s"] = timed(cp, theirs)
    tries = [(label, lambda build=build: build(m, n, k, f"gemm_nt_{dtype}_{m}x{n}x{k}"))
             for label, _, build in nt_variants(dtype, m, n, k)]
    return time_variants(cp, res, tries, a, b, ref, 1e-2)


__all__ = ["NT_DTYPES", "gpu_nt_row", "nt_row_names", "nt_variants", "quick_nt_row"]
