"""CUDA benchmarks for a machine with an NVIDIA GPU, side by side with cupy.

Run from the repository root:  python benchmarks/cuda.py [--quick]

1. runs the CUDA test suite (``tests/targets/test_cuda*.py``: nvcc for sm_80/sm_90,
   the interpreter, and the launches that need a GPU);
2. SGEMM 4096^3 fp32, TF32 off, against ``cupy.matmul`` (cuBLAS);
3. fp16 tensor-core GEMM 4096^3 (fp32 accumulation) against ``cupy.matmul`` in fp16;
4. fused row softmax 4096 x 4096 against cupy's composed expression
   ``e = exp(x - x.max(1)); e / e.sum(1)``;
5. the launch overhead of an empty kernel: a cuvil module call (argument checks
   included) against a bare ``cupy.RawKernel`` launch.

Each line prints both times (median of repeats, CUDA events) and the ratio
cupy time / cuvil time (above 1: cuvil is faster).  ``--quick`` uses 1024^3 and
fewer repeats; without a GPU (what CI runs) it builds each kernel at 256 (CUDA C, PTX
through nvcc when installed), runs the fused softmax in the interpreter with GPU
semantics against numpy, and says that the timings need a GPU.

Needs cupy (``pip install 'cuvil[cuda]'``, the cupy-cuda13x wheel), numpy, llvmlite,
pytest and hypothesis.  ``lark`` (the text-form parser) is not needed on the GPU
machine: ``benchmarks/wheels/lark-*.whl`` is put on ``sys.path`` when lark is not
installed (a pure-Python wheel imports from its zip), so no network is needed.  To
refresh that wheel on a machine with network access:
``pip download lark --no-deps -d benchmarks/wheels``.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time

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
from targets.toolkit import cuda_recipes as recipes  # noqa: E402


def run_tests() -> bool:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + EXTRA_PATH + [env.get("PYTHONPATH", "")])
    files = sorted(glob.glob(os.path.join(ROOT, "tests", "targets", "test_cuda*.py")))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", *files], cwd=ROOT,
                          env=env, check=False)
    return proc.returncode == 0


def gpu_time(cp, fn, repeat=7, number=5) -> float:
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


def report(name, ours, theirs, work=None, unit="GFLOP/s"):
    rate = ""
    if work:
        rate = f"  cuvil {work / ours / 1e9:8.1f} {unit}, cupy {work / theirs / 1e9:8.1f} {unit}"
    print(f"{name:34s} cuvil {ours * 1e3:9.3f} ms  cupy {theirs * 1e3:9.3f} ms  "
          f"ratio {theirs / ours:5.2f}{rate}", flush=True)


def gemm_func(n, dtype):
    A = T.placeholder((n, n), dtype, name="A")
    B = T.placeholder((n, n), dtype, name="B")
    r = T.reduce_axis((0, n), name="k")
    C = T.compute((n, n), lambda i, j: T.sum(A[i, r].astype("float32")
                                             * B[r, j].astype("float32"), axis=r), name="C")
    return T.create_prim_func([A, B, C])


def bench_sgemm(cp, n):
    sch = S.Schedule(gemm_func(n, "float32"))
    recipes.gemm(sch, bm=128, bn=128, bk=8, tm=8, tn=8, vector=4, double_buffer=True)
    mod = targets.build(sch, "cuda", name="sgemm")
    a = cp.random.standard_normal((n, n), dtype="float32")
    b = cp.random.standard_normal((n, n), dtype="float32")
    c = cp.zeros((n, n), "float32")
    mod(a, b, c)
    ref = cp.matmul(a, b)
    err = float(cp.abs(c - ref).max())
    ours = mod.benchmark(a, b, c, repeat=7, number=3).median
    theirs = gpu_time(cp, lambda: cp.matmul(a, b))
    report(f"SGEMM {n}^3 fp32 (TF32 off)", ours, theirs, 2 * n ** 3)
    print(f"{'':34s} max |C - cupy| = {err:.2e}")


def bench_hgemm(cp, n):
    sch = S.Schedule(gemm_func(n, "float16"))
    recipes.gemm_tensorcore(sch, bm=64, bn=64, bk=64)
    mod = targets.build(sch, "cuda", name="hgemm")
    a = cp.random.standard_normal((n, n), dtype="float32").astype("float16")
    b = cp.random.standard_normal((n, n), dtype="float32").astype("float16")
    c = cp.zeros((n, n), "float32")
    mod(a, b, c)
    err = float(cp.abs(c - cp.matmul(a.astype("float32"), b.astype("float32"))).max())
    ours = mod.benchmark(a, b, c, repeat=7, number=3).median
    theirs = gpu_time(cp, lambda: cp.matmul(a, b))
    report(f"fp16 tensor-core GEMM {n}^3", ours, theirs, 2 * n ** 3)
    print(f"{'':34s} max |C - fp32 reference| = {err:.2e} (cupy returns fp16)")


def bench_softmax(cp, n):
    sch = S.Schedule(softmax_func(n, n))
    recipes.softmax(sch, threads=256)
    mod = targets.build(sch, "cuda", name="softmax")
    x = cp.random.standard_normal((n, n), dtype="float32")
    y = cp.zeros((n, n), "float32")

    def composed():
        e = cp.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    mod(x, y)
    err = float(cp.abs(y - composed()).max())
    ours = mod.benchmark(x, y, repeat=7, number=10).median
    theirs = gpu_time(cp, composed, number=10)
    report(f"fused row softmax {n}x{n}", ours, theirs, 2 * 4 * n * n, "GB/s")
    print(f"{'':34s} max |y - cupy| = {err:.2e}")


def bench_launch(cp):
    A = T.placeholder((1,), name="A")
    B = T.compute((1,), lambda i: A[i], name="B")
    sch = S.Schedule(T.create_prim_func([A, B]))
    sch.bind(sch.get_loops(sch.get_block("B"))[0], "threadIdx.x")
    mod = targets.build(sch, "cuda", name="tiny")
    a, b = cp.zeros(1, "float32"), cp.zeros(1, "float32")
    empty = cp.RawKernel('extern "C" __global__ void empty(float* a, float* b) {}', "empty")

    def host_time(fn, n=2000):
        fn()
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        cp.cuda.Device().synchronize()
        return (time.perf_counter() - t0) / n
    ours = min(host_time(lambda: mod(a, b)) for _ in range(5))
    theirs = min(host_time(lambda: empty((1,), (1,), (a, b))) for _ in range(5))
    report("launch overhead (host, per call)", ours, theirs)


def softmax_func(rows, n):
    A = T.placeholder((rows, n), name="A")
    k1 = T.reduce_axis((0, n), name="k")
    mx = T.compute((rows,), lambda i: T.max(A[i, k1], axis=k1), name="row_max")
    ex = T.compute((rows, n), lambda i, j: T.exp(A[i, j] - mx[i]), name="exp")
    k2 = T.reduce_axis((0, n), name="k")
    sm = T.compute((rows,), lambda i: T.sum(ex[i, k2], axis=k2), name="row_sum")
    out = T.compute((rows, n), lambda i, j: ex[i, j] / sm[i], name="softmax")
    return T.create_prim_func([A, out])


def check_without_gpu(n=256) -> bool:
    """No GPU: build each kernel of the benchmark at size ``n`` (CUDA C, and PTX
    through nvcc when it is installed), and run the fused softmax on 8 rows in the
    interpreter with GPU semantics and race checks, against numpy.  The GEMMs are too
    large for the interpreter; tests/targets/test_cuda*.py interpret smaller ones."""
    kernels = []
    sch = S.Schedule(gemm_func(n, "float32"))
    recipes.gemm(sch, bm=128, bn=128, bk=8, tm=8, tn=8, vector=4, double_buffer=True)
    kernels.append(("SGEMM", sch))
    sch = S.Schedule(gemm_func(n, "float16"))
    recipes.gemm_tensorcore(sch, bm=64, bn=64, bk=64)
    kernels.append(("fp16 tensor-core GEMM", sch))
    soft = S.Schedule(softmax_func(8, n))
    recipes.softmax(soft, threads=256)
    kernels.append(("fused row softmax", soft))
    for name, sch in kernels:
        t0 = time.perf_counter()
        mod = targets.build(sch, "cuda", name=name.split()[0].replace("-", "_"))
        print(f"{name:34s} built ({', '.join(mod.source_formats)}) in "
              f"{time.perf_counter() - t0:.2f} s", flush=True)
    x = np.random.default_rng(0).standard_normal((8, n)).astype("float32")
    y = np.zeros((8, n), "float32")
    T.interpret(T.lower(soft, "cuda"), x, y, check_races=True)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    err = float(np.abs(y - e / e.sum(axis=1, keepdims=True)).max())
    print(f"{'fused row softmax 8x' + str(n):34s} interpreted (GPU semantics, race "
          f"checks): max |y - numpy| = {err:.2e}")
    return err < 1e-6


def main(argv) -> int:
    quick = "--quick" in argv
    try:
        import cupy as cp
        name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception as err:  # noqa: BLE001 - no cupy or no GPU: nothing to time
        cp, why = None, f"{type(err).__name__}: {err}"
    if cp is None and quick:
        # CI: its test step already runs the CUDA tests; build and interpret here
        print(f"no GPU ({why}): the timings need a GPU; building each kernel and "
              "interpreting what fits", flush=True)
        return 0 if check_without_gpu() else 1
    ok = run_tests()
    print(f"== CUDA test suite: {'passed' if ok else 'FAILED'}", flush=True)
    if cp is None:
        print(f"no GPU to time on ({why})")
        return 0 if ok else 1
    n = 1024 if quick else 4096
    print(f"== {name}, cupy {cp.__version__}; ratio = cupy time / cuvil time", flush=True)
    bench_sgemm(cp, n)
    bench_hgemm(cp, n)
    bench_softmax(cp, n)
    bench_launch(cp)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
