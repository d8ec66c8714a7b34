"""Tutorial 02: schedule a matmul step by step, printing the IR and the speed of each.

Run:  python tutorials/02_schedule_matmul.py

Each step is one schedule primitive (or a few), checked before it acts and recorded in
the trace. After each step we print the IR, build it for the CPU, check the result
against numpy and measure GFLOP/s next to numpy's, all in the same run.
"""

import time

import numpy as np

import cuvil_tir as T
import schedules as S
import targets

N = 256
FLOPS = 2.0 * N ** 3

A = T.placeholder((N, N), name="A")
B = T.placeholder((N, N), name="B")
k = T.reduce_axis((0, N), name="k")
C = T.compute((N, N), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
func = T.create_prim_func([A, B, C])

rng = np.random.default_rng(0)
a = rng.standard_normal((N, N)).astype("float32")
b = rng.standard_normal((N, N)).astype("float32")
expected = a @ b


def numpy_time() -> float:
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        np.matmul(a, b)
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def measure(step: str, sch: S.Schedule, show_ir: bool = True) -> None:
    if show_ir:
        print(f"\n== {step}: IR")
        print(sch.func)
    t0 = time.perf_counter()
    mod = targets.build(sch, "llvm")
    build_ms = (time.perf_counter() - t0) * 1e3
    c = np.zeros((N, N), "float32")
    mod(a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-3, atol=1e-3)
    ours = mod.benchmark(a, b, c, repeat=5, number=1).median
    theirs = numpy_time()
    print(f"== {step}: {FLOPS / ours / 1e9:7.2f} GFLOP/s   numpy {FLOPS / theirs / 1e9:7.2f} "
          f"GFLOP/s   ratio {theirs / ours:5.3f}x   (build {build_ms:.0f} ms, result ok)")


# step 0: the naive loop nest i, j, k
sch = S.Schedule(func)
measure("step 0 naive", sch)

# step 1: tile i and j by 32 so a block of C stays in cache; split k by 4
blk = sch.get_block("C")
i, j, kk = sch.get_loops(blk)
io, jo, ii, ji = sch.tile(i, j, 32, 32)
ko, ki = sch.split(kk, [None, 4])
sch.reorder(io, jo, ko, ii, ki, ji)
measure("step 1 tiled 32x32, k split by 4", sch)

# step 2: accumulate a C tile in a local buffer, written back after the k loop
cc = sch.cache_write(blk, 0, "local")
sch.reverse_compute_at(cc, jo)
measure("step 2 cache_write(C, local) at the tile", sch)

# step 3: separate the reduction's init from the update
sch.decompose_reduction(blk, ko)
measure("step 3 decompose_reduction", sch)

# step 4: vectorise the innermost j loop and unroll the k_1 loop
sch.vectorize(ji)
sch.unroll(ki)
measure("step 4 vectorize j_1, unroll k_1", sch)

# step 5: run the outer tiles in parallel on the thread pool
fused = sch.fuse(io, jo)
sch.parallel(fused)
measure("step 5 parallel outer tiles", sch)

print("\n== the trace of the final schedule (replayable with S.Trace.from_json)")
print(sch.trace)
