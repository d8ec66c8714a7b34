"""Tutorial 01: define a matmul, print its IR, build it for the CPU, run it.

Run:  python tutorials/01_matmul_cpu.py

This is the whole data flow of Cuvil in one page: a te-style definition becomes a
PrimFunc (one TensorIR block per stage), `targets.build` lowers it and JIT-compiles it
through LLVM for this CPU, and the module runs on numpy arrays. No schedule is applied
here, so the loop nest is the naive one; tutorial 02 schedules it.
"""

import time

import numpy as np

import cuvil_tir as T
import targets

N = 256

# 1. What to compute: C[i, j] = sum_k A[i, k] * B[k, j]
A = T.placeholder((N, N), "float32", name="A")
B = T.placeholder((N, N), "float32", name="B")
k = T.reduce_axis((0, N), name="k")
C = T.compute((N, N), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
func = T.create_prim_func([A, B, C])

print("== the PrimFunc (TensorIR)")
print(func)

# 2. Build it for the host CPU.
t0 = time.perf_counter()
mod = targets.build(func, "llvm")
build_s = time.perf_counter() - t0
print(f"== targets.build(func, 'llvm') took {build_s * 1e3:.1f} ms")
print("== lowered IR")
print(mod.get_source("tir"))

# 3. Run it on numpy arrays and check against numpy.
rng = np.random.default_rng(0)
a = rng.standard_normal((N, N)).astype("float32")
b = rng.standard_normal((N, N)).astype("float32")
c = np.zeros((N, N), "float32")
mod(a, b, c)
np.matmul(a, b)  # warm numpy up too (BLAS threads start on first use)
np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-3)
print("== result matches numpy")

# 4. Measure: medians of repeats, side by side with numpy in the same run.
flops = 2.0 * N * N * N
ours = mod.benchmark(a, b, c, repeat=5, number=1).median
ts = []
for _ in range(5):
    t0 = time.perf_counter()
    np.matmul(a, b)
    ts.append(time.perf_counter() - t0)
theirs = float(np.median(ts))
print(f"== {N}x{N}x{N} fp32 matmul, naive loop nest (no schedule)")
print(f"   cuvil : {flops / ours / 1e9:8.2f} GFLOP/s  ({ours * 1e3:.2f} ms)")
print(f"   numpy : {flops / theirs / 1e9:8.2f} GFLOP/s  ({theirs * 1e3:.2f} ms)")
print(f"   ratio : {theirs / ours:.3f}x numpy (schedule it in tutorial 02)")
