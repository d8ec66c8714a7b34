"""CUDA benchmarks for a machine with an NVIDIA GPU, side by side with cuBLAS and cupy.

Run from the repository root:  python benchmarks/cuda.py [--quick] [--only PATTERN]

On a GPU machine (cupy, llvmlite, pytest, hypothesis and torch present; lark is read
from ``benchmarks/wheels/`` when not installed) one run prints everything a note
needs:

1. the machine (GPU, SMs, clocks, memory, driver, cupy/torch/nvcc versions, commit);
2. the CUDA tests (``tests/targets/test_cuda*.py`` and the GPU interpreter tests),
   their summary line;
3. ceilings: the device-to-device copy bandwidth (1 GiB ``cupy`` copy), cuBLAS's
   fp16/bf16 rate at 8192^3, and the tensor-core peak from SMs x clock x the
   architecture's rate (Hopper: 4096 fp16 FLOP per SM per clock, dense);
4. GEMM rows: SGEMM fp32 (TF32 off, ``CUPY_TF32=0``), fp16 and bf16 tensor-core GEMM
   (fp32 accumulation; ``mma.sync`` + ``ldmatrix`` with swizzled tiles, ``cp.async``
   three-stage pipelines (``software_pipeline_async_stages``) first, then ``wmma``
   variants, every variant timed) and fp8 (sm_90) at 4096^3, 8192^3, 1024x4096x4096,
   4096x1024x16384 and 512x3072x768 (M x N x K), each against cuBLAS (``cupy.matmul``;
   bf16 and fp8 through torch, which cupy has no dtype for: ``torch.matmul``,
   ``torch._scaled_mm``): times, the ratio cuBLAS time / ours (above 1: ours is
   faster), TFLOP/s and the share of the tensor-core (or fp32) peak, the max error;
   then the Hopper rows ``gemm_nt:<dtype>:MxNxK`` (fp16/bf16 ``A @ B.T`` on sm_90a: the
   TMA + warp-specialized ``wgmma`` pipeline, the plain ``wgmma`` recipe, its TMA ring
   and its warp-specialized form from the schedule, beside cuBLAS's "TN" GEMM;
   ``benchmarks/cuda_hopper``);
5. fused rows: softmax, layernorm and RMSNorm at 4096x4096 and 16x262144 beside cupy's
   composed expressions, in GB/s and as a share of the copy bandwidth;
6. tuned rows (``benchmarks/cuda_tuned.py``): the fp16 GEMM at 4096^3 and the softmax
   at 4096x4096 tuned by ``S.tune(func, None, target="cuda")`` over the generated GPU
   space (tensor cores, vthreads, pipeline stages) for a few dozen trials, the best
   timed beside cuBLAS / cupy and beside the hand schedule of the rows above (without
   a GPU: a handful of candidates generated and compiled by nvcc, not timed);
7. launch overhead: a cuvil module call (argument checks included) beside a bare
   ``cupy.RawKernel`` launch;
8. a summary: the geomean ratio per family and whether each target of issue 22 is
   met (SGEMM >= 0.9x cuBLAS at 4096^3; fp16/bf16 >= 0.9x at 4096^3 and geomean >=
   0.85x; softmax/layernorm >= 85% of the copy bandwidth).

Each row runs in its own process with a time limit (``--row-timeout``, 120 s): a
kernel that fails, computes wrong (checked against cuBLAS/cupy before timing; a wrong
variant is reported and the next one tried) or hangs costs that row only.  ``--quick``
on a machine without a GPU (CI) builds every row's kernels, compiles them with nvcc
for sm_80 and sm_90, runs each at a small size through the interpreter against numpy,
and says that timings need a GPU (the CUDA tests are left to CI's test step); on a
GPU it times small sizes.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("CUPY_TF32", "0")        # SGEMM with TF32 off, on both sides


def _bring_lark() -> list:
    try:
        import lark  # noqa: F401
        return []
    except ImportError:
        wheels = sorted(glob.glob(os.path.join(ROOT, "benchmarks", "wheels", "lark-*.whl")))
        if not wheels:
            sys.exit("lark is not installed and benchmarks/wheels has no lark wheel; "
                     "pip download lark --no-deps -d benchmarks/wheels (with network)")
        sys.path.insert(0, wheels[-1])
        return [wheels[-1]]


EXTRA_PATH = _bring_lark()
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

import cuvil_tir as T  # noqa: E402
import schedules as S  # noqa: E402
import targets  # noqa: E402
from cuvil_tir.interp.scalar import tile_storage, tile_values  # noqa: E402
from targets.toolkit import cuda_norms as norms  # noqa: E402
from targets.toolkit import cuda_recipes as recipes  # noqa: E402
from benchmarks import cuda_hopper as hopper  # noqa: E402
from benchmarks import cuda_tuned as tuned  # noqa: E402

#: the GEMM shapes, M x N x K
SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (1024, 4096, 4096),
          (4096, 1024, 16384), (512, 3072, 768))
#: the fused rows, rows x columns
NORM_SHAPES = ((4096, 4096), (16, 262144))
GEMM_DTYPES = ("float32", "float16", "bfloat16", "float8_e4m3")
NORMS = ("softmax", "layernorm", "rmsnorm")
#: multiply-adds per SM per clock, dense, by (compute capability major, dtype)
FMA_PER_SM_CLOCK = {(8, "float32"): 64, (9, "float32"): 128, (10, "float32"): 128,
                    (8, "float16"): 1024, (9, "float16"): 2048, (10, "float16"): 4096,
                    (8, "bfloat16"): 1024, (9, "bfloat16"): 2048, (10, "bfloat16"): 4096,
                    (9, "float8_e4m3"): 4096, (10, "float8_e4m3"): 8192}


# ---- rows ---------------------------------------------------------------------------
def row_names() -> list:
    """Every row's name: ``gemm:<dtype>:MxNxK``, ``norm:<kind>:RxC``, ``launch``."""
    out = [f"gemm:{dt}:{m}x{n}x{k}" for dt in GEMM_DTYPES for m, n, k in SHAPES]
    out += hopper.nt_row_names(SHAPES)
    out += [f"norm:{kind}:{r}x{c}" for kind in NORMS for r, c in NORM_SHAPES]
    return out + tuned.tuned_row_names() + ["launch"]


#: the benchmark's dtype names that cuvil spells otherwise
CUVIL_DTYPE = {"float8_e4m3": "float8_e4m3fn"}


def gemm_func(m, n, k, dtype):
    """``C[m, n] = A[m, k] @ B[k, n]`` accumulated in float32."""
    dtype = CUVIL_DTYPE.get(dtype, dtype)
    A = T.placeholder((m, k), dtype, name="A")
    B = T.placeholder((k, n), dtype, name="B")
    r = T.reduce_axis((0, k), name="k")
    cast = (lambda x: x) if dtype == "float32" else (lambda x: x.astype("float32"))
    C = T.compute((m, n), lambda i, j: T.sum(cast(A[i, r]) * cast(B[r, j]), axis=r),
                  name="C")
    return T.create_prim_func([A, B, C])


def gemm_variants(dtype, m, n, k) -> list:
    """``[(variant name, schedule-the-function)]`` for a GEMM, best first."""
    if dtype == "float32":
        tiles = (m // 128) * (n // 128)
        big = tiles >= 264 and m % 128 == 0 and n % 128 == 0
        out = []
        if not big and tiles and k >= 8192 and m % 128 == 0 and n % 128 == 0:
            splits = 2
            while tiles * splits < 264 and splits < 8:
                splits *= 2
            out.append((f"simt 128x128 split-K {splits}", lambda sch: recipes.gemm_split_k(
                sch, splits, bm=128, bn=128, bk=8, tm=8, tn=8, vector=4, double_buffer=True)))
        if big:
            out.append(("simt 128x128, 8x8 per thread, 2 stages", lambda sch: recipes.gemm(
                sch, bm=128, bn=128, bk=8, tm=8, tn=8, vector=4, double_buffer=True)))
        out.append(("simt 64x64, 4x4 per thread, 2 stages", lambda sch: recipes.gemm(
            sch, bm=64, bn=64, bk=8, tm=4, tn=4, vector=4, double_buffer=True)))
        return out
    if dtype in ("float16", "bfloat16"):
        out = []
        for bm, bn, wm, wn in ((128, 128, 64, 64), (64, 64, 32, 32)):
            if m % bm == 0 and n % bn == 0 and k % 32 == 0:
                out.append((f"mma.sync m16n8k16 + ldmatrix {bm}x{bn}x32, {wm}x{wn} per warp "
                            "in registers, swizzled shared tiles, cp.async 3 stages",
                            lambda sch, bm=bm, bn=bn, wm=wm, wn=wn: recipes.gemm_mma(
                                sch, bm=bm, bn=bn, bk=32, warp_m=wm, warp_n=wn, swizzle=True,
                                stages=3, cp_async=True)))
                out.append((f"mma.sync m16n8k16 + ldmatrix {bm}x{bn}x32, {wm}x{wn} per warp "
                            "in registers, swizzled shared tiles, 2 stages",
                            lambda sch, bm=bm, bn=bn, wm=wm, wn=wn: recipes.gemm_mma(
                                sch, bm=bm, bn=bn, bk=32, warp_m=wm, warp_n=wn, swizzle=True,
                                stages=2)))
        for bm, bn, wm, wn in ((128, 128, 32, 64), (64, 64, 32, 32)):
            if m % bm == 0 and n % bn == 0 and k % 32 == 0:
                out.append((f"wmma {bm}x{bn}x32, {wm}x{wn} per warp, accumulators in "
                            "registers, 16-byte copies",
                            lambda sch, bm=bm, bn=bn, wm=wm, wn=wn: recipes.gemm_tensorcore(
                                sch, bm=bm, bn=bn, bk=32, warp_m=wm, warp_n=wn, vector=8)))
        out.append(("wmma 64x64x32, accumulators in shared memory", lambda sch:
                    recipes.gemm_tensorcore(sch, bm=64, bn=64, bk=32, accumulator="shared")))
        return out
    if dtype == "float8_e4m3" and m % 64 == 0 and n % 64 == 0:
        return [(f"mma.sync m16n8k32 fp8 64x64x{bk}, accumulators in shared memory",
                 lambda sch, bk=bk: recipes.gemm_tensorcore(
                     sch, bm=64, bn=64, bk=bk, accumulator="shared", vector=4))
                for bk in (64, 32) if k % bk == 0]
    return []


def gemm_target(dtype):
    """fp8 tensor cores need sm_89+: the build says so (the kernels are compiled for
    the GPU found at the first call)."""
    return targets.Target("cuda", arch="sm_90") if dtype.startswith("float8") else \
        targets.Target("cuda")


def build_gemm(dtype, m, n, k, variant):
    sch = S.Schedule(gemm_func(m, n, k, dtype))
    variant(sch)
    return targets.build(sch, gemm_target(dtype), name=f"gemm_{dtype}_{m}x{n}x{k}")


def norm_func(kind, rows, cols, arch="sm_80", **kw):
    """The fused row reduction for ``arch``: on sm_90+ a long row (16x262144) is one
    kernel over a thread-block cluster, elsewhere two kernels."""
    return {"softmax": norms.softmax, "layernorm": norms.layernorm,
            "rmsnorm": norms.rmsnorm}[kind](rows, cols, name=f"{kind}_{rows}x{cols}",
                                            arch=arch, **kw)


def gpu_arch(cp) -> str:
    """The architecture of the GPU cupy sees (``sm_90`` on an H100)."""
    return f"sm_{cp.cuda.Device().compute_capability}"


def norm_kernels(rows, cols, arch) -> str:
    blocks = norms.cluster_blocks(rows, cols, arch)
    return f"one kernel over clusters of {blocks} blocks" if blocks else \
        f"{2 if norms.splits(rows, cols) else 1} kernel(s)"


def norm_reference(xp, kind, x, g, b):
    """The composed expression (numpy or cupy ``xp``)."""
    if kind == "softmax":
        e = xp.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if kind == "layernorm":
        m = x.mean(axis=1, keepdims=True)
        return (x - m) / xp.sqrt(x.var(axis=1, keepdims=True) + 1e-5) * g + b
    return x / xp.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6) * g


def norm_args(kind, x, g, b):
    return {"softmax": (x,), "layernorm": (x, g, b), "rmsnorm": (x, g)}[kind]


# ---- checking without a GPU -----------------------------------------------------------
def quick_cpu_row(name) -> dict:
    """Build the row's kernels, compile them with nvcc for sm_80 and sm_90, and run
    them at a small size through the interpreter against numpy."""
    from targets.cuda.nvcc import nvcc_available, nvcc_ptx
    kind, _, rest = name.partition(":")
    rng = np.random.default_rng(0)
    if kind == "launch":
        return {"row": name, "status": "ok", "detail": "needs a GPU to mean anything"}
    if kind == "gemm_nt":
        return hopper.quick_nt_row(name, _CHECKED)
    if kind == "tune":
        return tuned.quick_tuned_row(name, gemm_func)
    if kind == "norm":
        what, shape = rest.split(":")
        rows, cols = (int(x) for x in shape.split("x"))
        # sm_80's build (two kernels for a long row) and sm_90's (one, over clusters)
        for arch in ("sm_80", "sm_90"):
            mod = targets.build(norm_func(what, rows, cols, arch),
                                targets.Target("cuda", arch=arch), name=f"{what}_{rows}x{cols}")
            if nvcc_available():
                nvcc_ptx(mod.get_source("cuda"), arch)
        small = norms.splits(rows, cols)
        clustered = norms.cluster_blocks(rows, cols, "sm_90") > 0
        # at a small size through the interpreter: the long-row paths both
        checks = [("sm_80", dict(row_limit=512, chunk=256) if small else {}, 2048 if small
                   else 1024)] + ([("sm_90", dict(cluster=4), 2048)] if clustered else [])
        errs = []
        for arch, kw, n in checks:
            f = norm_func(what, 2, n, arch, **kw)
            x = rng.standard_normal((2, n)).astype("float32")
            g = rng.standard_normal(n).astype("float32")
            b = rng.standard_normal(n).astype("float32")
            y = np.zeros_like(x)
            T.interpret(T.lower(f, targets.Target("cuda", arch=arch)),
                        *norm_args(what, x, g, b), y, check_races=True)
            errs.append(float(np.abs(y - norm_reference(np, what, x, g, b)).max()))
        ok = max(errs) < 1e-4
        return {"row": name, "status": "ok" if ok else "WRONG",
                "detail": f"sm_80: {norm_kernels(rows, cols, 'sm_80')}, sm_90: "
                          f"{norm_kernels(rows, cols, 'sm_90')}; interpreted "
                          f"{'2x2048 in chunks' if small else '2x1024'}"
                          f"{' and in clusters of 4' if clustered else ''}: max err "
                          f"{max(errs):.1e}"}
    dtype, shape = rest.split(":")
    m, n, k = (int(x) for x in shape.split("x"))
    variants = gemm_variants(dtype, m, n, k)
    if not variants:
        return {"row": name, "status": "missing", "detail": _missing(dtype)}
    notes = []
    for label, variant in variants:
        mod = build_gemm(dtype, m, n, k, variant)
        key = (dtype, label)
        if key in _CHECKED:         # the same kernel at another size: built only
            notes.append(f"{label}: built")
            continue
        if nvcc_available():
            for arch in ("sm_89", "sm_90") if dtype.startswith("float8") else \
                    ("sm_80", "sm_90"):
                nvcc_ptx(mod.get_source("cuda"), arch)
        # two blocks a side for the tensor-core tiles; SGEMM is slow to interpret
        sm = sn = 256 if dtype in ("float16", "bfloat16") else 128
        sk = 64
        sch = S.Schedule(gemm_func(sm, sn, sk, dtype))
        variant(sch)
        small = targets.build(sch, gemm_target(dtype), name="small")
        a = rng.standard_normal((sm, sk)).astype("float32")
        b = rng.standard_normal((sk, sn)).astype("float32")
        a_in, b_in = _as_dtype(a, dtype), _as_dtype(b, dtype)
        c = np.zeros((sm, sn), "float32")
        T.interpret(small.lowered, a_in, b_in, c)
        ref = _values(a_in, dtype) @ _values(b_in, dtype)
        err = float(np.abs(c - ref).max() / max(1.0, np.abs(ref).max()))
        _CHECKED.add(key)
        notes.append(f"{label}: built and compiled; interpreted {sm}x{sn}x{sk}: rel err "
                     f"{err:.1e}")
        if err > 1e-3:
            return {"row": name, "status": "WRONG", "detail": "; ".join(notes)}
    return {"row": name, "status": "ok", "detail": "; ".join(notes)}


#: (dtype, variant) compiled by nvcc and interpreted already in this process (--quick)
_CHECKED: set = set()


def _as_dtype(a, dtype):
    dtype = CUVIL_DTYPE.get(dtype, dtype)
    if dtype == "bfloat16" or dtype.startswith("float8"):
        return tile_storage(a, dtype)           # stored as bits
    return a.astype(dtype)


def _values(a, dtype):
    return tile_values(a, CUVIL_DTYPE.get(dtype, dtype)).astype("float64")


def _missing(dtype) -> str:
    if dtype.startswith("float8"):
        return ("no fp8 GEMM variant for this shape (64 x 64 tiles); cuBLAS's fp8 rate is "
                "still measured")
    return "no kernel for this dtype"


# ---- timing on a GPU ------------------------------------------------------------------
def gpu_time(cp, fn, repeat=7, number=3) -> float:
    """Median seconds per call of ``fn`` (CUDA events, after a warm-up)."""
    fn()
    cp.cuda.Device().synchronize()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    out = []
    for _ in range(repeat):
        start.record()
        for _ in range(number):
            fn()
        stop.record()
        stop.synchronize()
        out.append(cp.cuda.get_elapsed_time(start, stop) / 1e3 / number)
    return float(np.median(out))


def timed(cp, fn) -> float:
    """Median seconds per call: one call sizes the batches (about 50 ms each)."""
    fn()
    cp.cuda.Device().synchronize()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    once = cp.cuda.get_elapsed_time(start, stop) / 1e3
    return gpu_time(cp, fn, 5, max(1, min(50, int(0.05 / max(once, 1e-7)))))


def gpu_gemm_row(cp, name, dtype, m, n, k) -> dict:
    """Our best correct variant beside cuBLAS (module doc, step 4)."""
    res = {"row": name, "family": f"gemm:{dtype}", "shape": (m, n, k), "flops": 2.0 * m * n * k}
    theirs, a_ours, b_ours, ref = _cublas(cp, dtype, m, n, k, res)
    if theirs is not None:
        res["cublas_s"] = timed(cp, theirs)
    variants = gemm_variants(dtype, m, n, k)
    if not variants:
        res.update(status="missing", detail=_missing(dtype))
        return res
    tol = 1e-3 if dtype == "float32" else 1e-2
    return time_variants(cp, res, [(label, lambda v=variant: build_gemm(dtype, m, n, k, v))
                                   for label, variant in variants], a_ours, b_ours, ref, tol)


def time_variants(cp, res, tries, a, b, ref, tol) -> dict:
    """Every ``(label, build)`` of ``tries`` built, checked against ``ref`` (relative
    error at most ``tol``) and timed (a GPU run is rare: its note shows them all); the
    fastest correct one is the row's figure."""
    tried = []
    for label, build in tries:
        try:
            mod = build()
            c = cp.zeros(ref.shape, "float32")
            mod(a, b, c)
            cp.cuda.Device().synchronize()
            err = float(cp.abs(c - ref).max() / max(1.0, float(cp.abs(ref).max())))
            if not err <= tol:
                tried.append(f"{label}: WRONG (rel err {err:.1e})")
                continue
            t = timed(cp, lambda m=mod, c=c: m(a, b, c))
            tried.append(f"{label}: {t * 1e3:.3f} ms")
            if t < res.get("ours_s", float("inf")):
                res.update(ours_s=t, status="ok", variant=label, rel_err=err)
        except Exception as e:  # noqa: BLE001 - one variant's failure is reported
            tried.append(f"{label}: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
    if "ours_s" not in res:
        res["status"] = "failed"
    res["tried"] = tried
    return res


def _cublas(cp, dtype, m, n, k, res):
    """``(cuBLAS call, A for us, B for us, the fp32 reference of C)``."""
    rng = cp.random.default_rng(0)
    if dtype == "float32":
        a = rng.standard_normal((m, k), dtype="float32")
        b = rng.standard_normal((k, n), dtype="float32")
        res["baseline"] = "cupy.matmul (cuBLAS, TF32 off)"
        return (lambda: cp.matmul(a, b)), a, b, cp.matmul(a, b)
    if dtype == "float16":
        a = rng.standard_normal((m, k), dtype="float32").astype("float16")
        b = rng.standard_normal((k, n), dtype="float32").astype("float16")
        res["baseline"] = "cupy.matmul fp16 (cuBLAS)"
        ref = cp.matmul(a.astype("float32"), b.astype("float32"))
        return (lambda: cp.matmul(a, b)), a, b, ref
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    g = torch.Generator(device="cuda").manual_seed(0)
    if dtype == "bfloat16":
        a = torch.randn((m, k), device="cuda", generator=g).to(torch.bfloat16)
        b = torch.randn((k, n), device="cuda", generator=g).to(torch.bfloat16)
        res["baseline"] = "torch.matmul bf16 (cuBLAS)"
        ref = cp.from_dlpack(torch.matmul(a.float(), b.float()))
        # ours takes bfloat16 as its uint16 bits
        a16 = cp.from_dlpack(a.view(torch.int16)).view(cp.uint16)
        b16 = cp.from_dlpack(b.view(torch.int16)).view(cp.uint16)
        return (lambda: torch.matmul(a, b)), a16, b16, ref
    a = torch.randn((m, k), device="cuda", generator=g).to(torch.float8_e4m3fn)
    bt = torch.randn((n, k), device="cuda", generator=g).to(torch.float8_e4m3fn)
    one = torch.tensor(1.0, device="cuda")
    res["baseline"] = "torch._scaled_mm e4m3 -> bf16 (cuBLASLt)"
    ref = cp.from_dlpack(torch.matmul(a.float(), bt.float().t()).contiguous())

    def scaled():
        return torch._scaled_mm(a, bt.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    # ours takes fp8 as its uint8 bits, B row-major (K x N)
    a8 = cp.from_dlpack(a.view(torch.uint8))
    b8 = cp.from_dlpack(bt.t().contiguous().view(torch.uint8))
    return scaled, a8, b8, ref


def gpu_norm_row(cp, name, kind, rows, cols) -> dict:
    res = {"row": name, "family": f"norm:{kind}", "shape": (rows, cols),
           "bytes": 2.0 * rows * cols * 4}
    rng = cp.random.default_rng(0)
    x = rng.standard_normal((rows, cols), dtype="float32")
    g = rng.standard_normal(cols, dtype="float32")
    b = rng.standard_normal(cols, dtype="float32")
    y = cp.zeros_like(x)
    arch = gpu_arch(cp)
    mod = targets.build(norm_func(kind, rows, cols, arch), targets.Target("cuda", arch=arch),
                        name=f"{kind}_{rows}x{cols}")
    args = norm_args(kind, x, g, b)
    mod(*args, y)
    err = float(cp.abs(y - norm_reference(cp, kind, x, g, b)).max())
    res["max_err"] = err
    if not err < 1e-3:
        res.update(status="WRONG", detail=f"max err {err:.1e}")
        return res
    res["ours_s"] = timed(cp, lambda: mod(*args, y))
    res["cupy_s"] = timed(cp, lambda: norm_reference(cp, kind, x, g, b))
    src = cp.empty_like(x)
    res["copy_same_size_s"] = timed(cp, lambda: cp.copyto(src, x))
    res["kernels"] = norm_kernels(rows, cols, arch)
    res["status"] = "ok"
    return res


def gpu_launch_row(cp, name) -> dict:
    A = T.placeholder((1,), name="A")
    B = T.compute((1,), lambda i: A[i], name="B")
    sch = S.Schedule(T.create_prim_func([A, B]))
    sch.bind(sch.get_loops(sch.get_block("B"))[0], "threadIdx.x")
    mod = targets.build(sch, "cuda", name="tiny")
    a, b = cp.zeros(1, "float32"), cp.zeros(1, "float32")
    empty = cp.RawKernel('extern "C" __global__ void empty(float* a, float* b) {}', "empty")

    def host_time(fn, count=2000):
        fn()
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(count):
            fn()
        cp.cuda.Device().synchronize()
        return (time.perf_counter() - t0) / count
    stream = cp.cuda.Stream(non_blocking=True)
    return {"row": name, "family": "launch", "status": "ok",
            "ours_s": min(host_time(lambda: mod(a, b)) for _ in range(5)),
            "ours_stream_s": min(host_time(lambda: mod(a, b, stream=stream))
                                 for _ in range(5)),
            "cupy_s": min(host_time(lambda: empty((1,), (1,), (a, b))) for _ in range(5))}


def run_row(name, quick) -> dict:
    """One row in this process (``--row``): a dict of figures, never an exception."""
    try:
        cp = _gpu()
        if cp is None:
            return quick_cpu_row(name)
        kind, _, rest = name.partition(":")
        if kind == "launch":
            return gpu_launch_row(cp, name)
        if kind == "tune":
            return tuned.gpu_tuned_row(cp, name, quick, gemm_func, timed, hand_schedule)
        if kind == "norm":
            what, shape = rest.split(":")
            rows, cols = (int(x) for x in shape.split("x"))
            if quick:
                rows = min(rows, 256)
            return gpu_norm_row(cp, name, what, rows, cols)
        dtype, shape = rest.split(":")
        m, n, k = (int(x) for x in shape.split("x"))
        if quick:
            m, n, k = min(m, 1024), min(n, 1024), min(k, 1024)
        if kind == "gemm_nt":
            return hopper.gpu_nt_row(cp, name, dtype, m, n, k, timed, time_variants)
        return gpu_gemm_row(cp, name, dtype, m, n, k)
    except Exception as e:  # noqa: BLE001 - a row reports its failure, the run goes on
        return {"row": name, "status": "failed",
                "detail": f"{type(e).__name__}: {e}"[:400],
                "trace": traceback.format_exc()[-1500:]}


def hand_schedule(func, target):
    """The hand-scheduled module a tuned row is compared with: the first (fastest
    expected) GEMM variant, or the fused softmax."""
    shape = [int(s) for s in func.params[0].shape]
    if len(func.params) == 2:      # softmax: A, out
        return targets.build(norm_func("softmax", *shape, target.options.get("arch")),
                             target, name="hand")
    m, k = shape
    n = int(func.params[1].shape[1])
    variants = gemm_variants("float16", m, n, k)
    if not variants:
        return None
    sch = S.Schedule(func)
    variants[0][1](sch)
    return targets.build(sch, target, name="hand")


def _gpu():
    try:
        import cupy as cp
        if cp.cuda.runtime.getDeviceCount() == 0:
            return None
        return cp
    except Exception:  # noqa: BLE001 - no cupy or no driver: no GPU
        return None


def run_row_isolated(name, quick, timeout) -> dict:
    """The row in a child process with a time limit (a hang or crash costs one row)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--row", name] + (["--quick"] if quick else [])
    if name.startswith("tune:"):
        timeout = max(timeout, tuned.ROW_TIMEOUT)     # tuning, then timing
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              cwd=ROOT, check=False)
    except subprocess.TimeoutExpired:
        return {"row": name, "status": "failed", "detail": f"timed out after {timeout} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                break
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {"row": name, "status": "failed",
            "detail": f"exit {proc.returncode}: {' | '.join(tail)}"[:400]}


# ---- the machine and its ceilings -------------------------------------------------------
def machine(cp) -> dict:
    info = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "python": platform.python_version(), "host": platform.node()}
    try:
        info["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                        capture_output=True, text=True).stdout.strip()
    except OSError:
        info["commit"] = "?"
    try:
        out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
        info["nvcc"] = out.strip().splitlines()[-1] if out else "?"
    except OSError:
        info["nvcc"] = "not found"
    if cp is None:
        return info
    rt = cp.cuda.runtime
    p = rt.getDeviceProperties(0)
    khz = p.get("clockRate")
    if not khz:                 # CUDA 13 dropped the field; the attribute remains
        try:
            khz = rt.deviceGetAttribute(13, 0)          # cudaDevAttrClockRate
        except Exception:  # noqa: BLE001
            khz = None
    name = p.get("name", b"?")
    info.update(gpu=name.decode() if isinstance(name, bytes) else str(name),
                cc=(p.get("major"), p.get("minor")), sms=p.get("multiProcessorCount"),
                clock_ghz=khz / 1e6 if khz else None,
                memory_gib=round(p.get("totalGlobalMem", 0) / 2 ** 30, 1),
                l2_mib=p.get("l2CacheSize", 0) / 2 ** 20,
                shared_optin_kib=p.get("sharedMemPerBlockOptin", 0) / 1024,
                driver=rt.driverGetVersion(), runtime=rt.runtimeGetVersion(),
                cupy=cp.__version__)
    try:
        import torch
        info["torch"] = torch.__version__
    except Exception:  # noqa: BLE001
        info["torch"] = "not installed"
    return info


#: dense datasheet peaks (TFLOP/s) of the SXM parts, used when the name matches
DATASHEET = {"H100": {"float32": 67.0, "float16": 989.4, "bfloat16": 989.4,
                      "float8_e4m3": 1978.9},
             "H200": {"float32": 67.0, "float16": 989.4, "bfloat16": 989.4,
                      "float8_e4m3": 1978.9}}


def peak_tflops(info, dtype) -> float | None:
    """The dense peak: the datasheet's for an H100/H200, else SMs x clock x the
    architecture's multiply-adds per SM per clock."""
    for part, peaks in DATASHEET.items():
        if part in str(info.get("gpu", "")):
            return peaks.get(dtype)
    rate = FMA_PER_SM_CLOCK.get(((info.get("cc") or (0,))[0], dtype))
    if rate is None or not info.get("clock_ghz") or not info.get("sms"):
        return None
    return 2 * rate * info["sms"] * info["clock_ghz"] * 1e9 / 1e12


def copy_bandwidth(cp) -> float:
    """Device-to-device copy bandwidth in GB/s (read + write of 1 GiB)."""
    n = 1 << 28
    src, dst = cp.ones(n, "float32"), cp.empty(n, "float32")
    t = gpu_time(cp, lambda: cp.copyto(dst, src), 5, 5)
    return 2 * n * 4 / t / 1e9


def cublas_rate(cp, dtype, n=8192) -> float:
    a = cp.random.standard_normal((n, n), dtype="float32").astype(dtype)
    b = cp.random.standard_normal((n, n), dtype="float32").astype(dtype)
    t = gpu_time(cp, lambda: cp.matmul(a, b), 5, 3)
    return 2 * n ** 3 / t / 1e12


# ---- printing -----------------------------------------------------------------------------
def show(res, info, copy_gbs):
    st = res.get("status")
    name = res["row"]
    if st != "ok":
        extra = res.get("detail") or "; ".join(res.get("tried", []))
        print(f"{name:36s} {st.upper():8s} {extra}", flush=True)
        if res.get("cublas_s"):
            print(f"{'':36s}          cuBLAS {res['cublas_s'] * 1e3:9.3f} ms "
                  f"({res['flops'] / res['cublas_s'] / 1e12:7.1f} TFLOP/s, {res.get('baseline')})")
        return
    if "ours_s" not in res:          # quick mode without a GPU
        print(f"{name:36s} ok       {res.get('detail', '')}", flush=True)
        return
    if res.get("family", "").startswith("tune:"):
        print(tuned.show_tuned(res), flush=True)
        return
    if res.get("family") == "launch":
        print(f"{name:36s} cuvil call {res['ours_s'] * 1e6:7.2f} us (stream= "
              f"{res['ours_stream_s'] * 1e6:.2f} us), bare cupy.RawKernel "
              f"{res['cupy_s'] * 1e6:7.2f} us, ratio {res['cupy_s'] / res['ours_s']:.2f}",
              flush=True)
        return
    if res["family"].startswith("gemm"):
        ours = res["ours_s"]
        rate = res["flops"] / ours / 1e12
        dtype = res["family"].split(":")[1]
        peak = peak_tflops(info, dtype) if info.get("cc") else None
        line = f"{name:36s} cuvil {ours * 1e3:9.3f} ms {rate:7.1f} TFLOP/s"
        if res.get("cublas_s"):
            their = res["cublas_s"]
            line += (f" | cuBLAS {their * 1e3:9.3f} ms {res['flops'] / their / 1e12:7.1f} "
                     f"TFLOP/s | ratio {their / ours:5.2f}")
        if peak:
            line += f" | {100 * rate / peak:5.1f}% of peak {peak:.0f}"
        print(line + f" | rel err {res['rel_err']:.1e} | {res['variant']}", flush=True)
        return
    ours, theirs = res["ours_s"], res["cupy_s"]
    gbs = res["bytes"] / ours / 1e9
    share = f"{100 * gbs / copy_gbs:5.1f}% of copy" if copy_gbs else ""
    same = res["bytes"] / res["copy_same_size_s"] / 1e9
    print(f"{name:36s} cuvil {ours * 1e6:9.1f} us {gbs:7.0f} GB/s {share} "
          f"({100 * gbs / same:.0f}% of a same-size copy) | cupy {theirs * 1e6:9.1f} us "
          f"{res['bytes'] / theirs / 1e9:7.0f} GB/s | ratio {theirs / ours:5.2f} | "
          f"{res['kernels']}, max err {res['max_err']:.1e}", flush=True)


def summary(results, copy_gbs):
    print("\n== summary", flush=True)
    fams: dict = {}
    for r in results:
        if r.get("status") == "ok" and "ours_s" in r and r.get("family", "").startswith("gemm") \
                and r.get("cublas_s"):
            fams.setdefault(r["family"], []).append(r["cublas_s"] / r["ours_s"])
    for fam, ratios in fams.items():
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        print(f"{fam:20s} geomean ratio {geo:5.2f} over {len(ratios)} shapes")
    by = {r["row"]: r for r in results}

    def ratio(name):
        r = by.get(name, {})
        return r["cublas_s"] / r["ours_s"] if r.get("ours_s") and r.get("cublas_s") else None

    def show_target(text, value, goal):
        verdict = "n/a" if value is None else ("MET" if value >= goal else "not met")
        shown = "-" if value is None else f"{value:.2f}"
        print(f"target {text:52s} {shown:>6s}  (goal {goal})  {verdict}")
    show_target("SGEMM 4096^3 vs cuBLAS", ratio("gemm:float32:4096x4096x4096"), 0.9)
    for dt in ("float16", "bfloat16"):
        show_target(f"{dt} GEMM 4096^3 vs cuBLAS", ratio(f"gemm:{dt}:4096x4096x4096"), 0.9)
        rs = fams.get(f"gemm:{dt}")
        geo = math.exp(sum(math.log(x) for x in rs) / len(rs)) if rs else None
        show_target(f"{dt} GEMM geomean vs cuBLAS", geo, 0.85)
    for kind in ("softmax", "layernorm"):
        for r, c in NORM_SHAPES:
            res = by.get(f"norm:{kind}:{r}x{c}", {})
            share = (res["bytes"] / res["ours_s"] / 1e9 / copy_gbs
                     if res.get("ours_s") and copy_gbs else None)
            show_target(f"{kind} {r}x{c}: share of copy bandwidth", share, 0.85)


def run_tests(timeout) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + EXTRA_PATH + [env.get("PYTHONPATH", "")])
    files = sorted(glob.glob(os.path.join(ROOT, "tests", "targets", "test_cuda*.py")))
    files += sorted(glob.glob(os.path.join(ROOT, "tests", "cuvil_tir", "test_gpu*.py")))
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p",
                               "no:cacheprovider", *files], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return f"TIMED OUT after {timeout} s"
    lines = [x for x in proc.stdout.splitlines() if x.strip()]
    failed = [x for x in lines if x.startswith(("FAILED", "ERROR"))]
    last = lines[-1] if lines else f"exit {proc.returncode}"
    return "\n".join(failed[:20] + [last])


def main(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (CI: no GPU needed)")
    ap.add_argument("--only", default="", help="run the rows whose name matches this regex")
    ap.add_argument("--skip-tests", action="store_true", help="do not run the CUDA tests")
    ap.add_argument("--row", help=argparse.SUPPRESS)
    ap.add_argument("--row-timeout", type=float, default=120.0)
    ap.add_argument("--test-timeout", type=float, default=300.0)
    args = ap.parse_args(argv)
    if args.row:
        print(json.dumps(run_row(args.row, args.quick), default=str), flush=True)
        return 0
    cp = _gpu()
    info = machine(cp)
    print("== machine: " + ", ".join(f"{k}={v}" for k, v in info.items()), flush=True)
    # CI (--quick, no GPU) runs the CUDA tests in its own test step
    if not args.skip_tests and not (args.quick and cp is None):
        print("== CUDA tests:", run_tests(args.test_timeout), flush=True)
    rows = [r for r in row_names() if re.search(args.only, r)]
    copy_gbs = None
    if cp is None:
        print("== no GPU here: building every row's kernels, compiling them with nvcc for "
              "sm_80 and sm_90 and running them at small sizes through the interpreter; "
              "timings need a GPU", flush=True)
        results = []
        for name in rows:
            res = run_row(name, True)
            results.append(res)
            show(res, info, None)
        bad = [r for r in results if r.get("status") in ("failed", "WRONG")]
        print(f"== {len(results) - len(bad)} of {len(results)} rows checked, "
              f"{len(bad)} failed; timings need a GPU", flush=True)
        return 1 if bad else 0
    copy_gbs = copy_bandwidth(cp)
    print(f"== ceilings: copy {copy_gbs:.0f} GB/s (1 GiB device-to-device, read + write)",
          flush=True)
    for dt in ("float16", "float32"):
        try:
            peak = peak_tflops(info, dt)
            print(f"   cuBLAS {dt} 8192^3: {cublas_rate(cp, dt):.1f} TFLOP/s; "
                  f"peak from SMs x clock: {peak:.0f} TFLOP/s" if peak else "", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"   cuBLAS {dt} rate: {type(e).__name__}: {e}", flush=True)
    print("== rows: ratio = cuBLAS (or cupy) time / cuvil time; above 1 cuvil is faster",
          flush=True)
    results = []
    for name in rows:
        res = run_row_isolated(name, args.quick, args.row_timeout)
        results.append(res)
        show(res, info, copy_gbs)
    summary(results, copy_gbs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
