"""Tutorial 07: a GPU matrix multiply, checked on any machine, timed on a GPU.

Run:  python tutorials/07_matmul_gpu.py

1. **Bind** loops to the GPU: a 32 x 32 tile of C per thread block
   (``blockIdx.y``/``blockIdx.x``), a 4 x 4 sub-tile per thread (``threadIdx.y``/``x``),
   accumulated in ``local`` registers (``cache_write(..., "local")``).
2. **Stage through shared memory**: each 8-deep slice of A and B is copied into
   ``shared`` memory by all threads together, 16 bytes per copy (``vectorize``),
   in two stages (TVM's ``software_pipeline_stage`` on the slice loop, ``[0, 0, 1]``:
   the copies of slice k + 1 run with the product of slice k), then read by every
   thread.
3. **Build** for ``Target("cuda")``: the lowering places and sizes the shared and
   local buffers, outlines the kernel into a ``device_kernel`` function launched by
   the host function (real IR: its grid and block are expressions) and inserts every
   ``__syncthreads()`` the shared buffers need; print the CUDA C, and the host
   program, C compiled by the system C compiler, run here with a recording launcher.
4. **Check through the interpreter** with GPU semantics (every thread of every block,
   barriers as phase boundaries) and race checking, against numpy; then remove the
   barriers and watch the race checker catch it.
5. **On a GPU** (cupy installed and a device present): run and time it beside
   ``cupy.matmul`` (cuBLAS).  Without one, the tutorial says so and stops there.
"""

import numpy as np

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir.transform.gpu_sync import is_barrier
from targets.toolkit import cuda_recipes as recipes


def matmul(m, n, k):
    A = T.placeholder((m, k), name="A")
    B = T.placeholder((k, n), name="B")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((m, n), lambda i, j: T.sum(A[i, r] * B[r, j], axis=r), name="C")
    return T.create_prim_func([A, B, C])


def schedule(m, n, k):
    sch = S.Schedule(matmul(m, n, k))
    recipes.gemm(sch, bm=32, bn=32, bk=8, tm=4, tn=4, vector=4, double_buffer=True)
    return sch


class DropBarriers(T.Mutator):
    def visit_SeqStmt(self, s):
        s = self.generic_visit(s)
        if not isinstance(s, T.SeqStmt):
            return s
        return T.SeqStmt(tuple(x for x in s.seq if not is_barrier(x)))


def main():
    m = n = k = 64
    sch = schedule(m, n, k)
    mod = targets.build(sch, targets.Target("cuda", arch="sm_80"), name="sgemm")
    src = mod.get_source("cuda")
    kernel = src[src.index('extern "C"'):]
    print("== CUDA C of the kernel\n" + kernel)
    host = mod.get_source("host")
    print("== the host program (C)\n" + host[host.index("int32_t sgemm("):])
    print("launch (kernel, grid, block, dynamic shared bytes):", mod.runtime.launch_plan())

    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype("float32")
    b = rng.standard_normal((k, n)).astype("float32")
    c = np.zeros((m, n), "float32")
    T.interpret(mod.lowered, a, b, c, check_races=True)
    err = np.abs(c - a @ b).max()
    print(f"== interpreter, GPU semantics, race checking on: max |C - A@B| = {err:.2e}")
    assert err < 1e-4

    # every function of the module: the host and its kernel
    broken = mod.lowered.map_functions(lambda f: f.with_body(DropBarriers().visit(f.body)))
    try:
        T.interpret(broken, a, b, np.zeros((m, n), "float32"), check_races=True)
    except T.RaceError as race:
        print("== without its barriers the race checker reports:\n  " + race.message[:240])
    else:
        raise AssertionError("the race checker missed the removed barriers")

    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() == 0:
            raise RuntimeError("cupy sees no GPU")
    except Exception as why:  # noqa: BLE001 - no cupy or no device: skip the GPU part
        print(f"== no GPU run here ({type(why).__name__}: {why}); the numbers above are "
              "the check. benchmarks/cuda.py times it on a GPU machine.")
        return
    size = 2048
    big = targets.build(schedule(size, size, size), "cuda", name="sgemm_big")
    ga = cupy.asarray(rng.standard_normal((size, size)).astype("float32"))
    gb = cupy.asarray(rng.standard_normal((size, size)).astype("float32"))
    gc = cupy.zeros((size, size), "float32")
    big(ga, gb, gc)
    np.testing.assert_allclose(gc.get(), (ga @ gb).get(), rtol=1e-3, atol=1e-2)
    ours = big.benchmark(ga, gb, gc, repeat=5, number=5).median
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(5):
        cupy.matmul(ga, gb)
    stop.record()
    stop.synchronize()
    theirs = cupy.cuda.get_elapsed_time(start, stop) / 1e3 / 5
    flops = 2 * size ** 3
    print(f"== {size}^3 on the GPU: cuvil {flops / ours / 1e9:.0f} GFLOP/s, cupy.matmul "
          f"{flops / theirs / 1e9:.0f} GFLOP/s (ratio {theirs / ours:.2f})")


if __name__ == "__main__":
    main()
