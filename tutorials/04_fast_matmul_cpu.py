"""Tutorial 04: an fp32 GEMM that runs at the speed of a BLAS, built from schedule steps.

Run:  python tutorials/04_fast_matmul_cpu.py

The recipe is the one every hand-tuned BLAS follows (GotoBLAS / BLIS):

1. **Pack B into panels** ``Bp[jo, k, ji] = B[k, jo*NR + ji]``: the NR columns a
   micro-kernel reads become one contiguous stream (zero padded when N is not a
   multiple of NR), so every B access is an aligned full-width vector load.  A is
   packed the same way, ``Ap[io, k, ii] = A[io*MR + ii, k]``: the MR values
   broadcast per k step are adjacent (and zero padded when M is not a multiple of MR).
2. **A register-blocked micro-kernel**: an MR x NR tile of C (6 x 16 on AVX2, 12 x 32
   on AVX-512: sized from the target's vector width and register count) lives in
   vector accumulators for the whole k loop.  ``set_scope(Cp, "local")`` plus
   ``reverse_compute_at`` makes the tile a ``local`` buffer that the memory planner
   (``plan_buffer_allocation``) shrinks to MR x NR per tile; ``decompose_reduction``
   zeroes it before the k loop; ``unroll`` of the MR rows and ``vectorize`` of the NR
   columns (two full-width halves) turn it into registers and FMA instructions
   (``fmul`` + ``fadd`` contract into ``vfmadd231ps``: the llvm target's default
   ``fast_math="contract"``).
3. **Blocks of B panels share each A panel**: the panel loop is split into blocks of
   ``panel_block(N, K)`` panels (as many as twice the target's L2 holds, from
   ``cpu_info``), and the row panels run inside a block, so each packed A panel is
   fetched from memory once per block instead of once per panel (at 2048^3 A is
   16 MB: streamed 16 times instead of 128).  A block's B panels are packed inside
   the block's iteration (``compute_at``), just before the row panels read them, so
   they are still in the cache, not written to memory and read back.
4. **Parallel outer loops**: the blocks of panels of C (with their B packing) and the
   packing of A are split over the native thread pool.  The packed operands are large
   internal buffers: the llvm runtime keeps them between calls and places them on huge
   pages (``docs/platform.md``), so streaming them does not miss the TLB every 4 KB.
5. **Non-multiple sizes**: C is computed on the padded NR-column grid (``Cp``) and
   copied out with a tail guard, which the vectorizer turns into a vector fast path
   plus an unrolled scalar tail for the last panel only.

Each size is checked against numpy, and timed side by side with ``numpy.matmul`` in
the same process (median of repeats).
"""

import textwrap
import time

import numpy as np

import cuvil_tir as T
import schedules as S
import targets

from targets.llvm import cpu_info

# The micro-kernel is sized for the CPU the target names (here: this machine), never
# for a CPU assumed: two vectors of columns, and as many rows as the vector registers
# allow (two accumulators per row, plus B's two vectors and A's broadcast): 6 x 16
# with AVX2's sixteen 256-bit registers, 12 x 32 with AVX-512's thirty-two.
TARGET = targets.Target("llvm")
INFO = cpu_info(TARGET)
LANES = INFO.lanes("float32")
NR = 2 * LANES
MR = max(1, min(12, (INFO.vector_registers - 4) // 2))


def panel_block(N: int, K: int, nr: int = NR, info=INFO) -> int:
    """How many B panels (``K x nr`` floats each) one pass over the packed A serves:
    as many as twice the target's L2 cache holds, keeping at least two blocks of panels
    per core for the parallel loop.  Each A panel (``MR x K``) is then read from memory
    once per block instead of once per panel.  Why twice: each panel of a block is read
    again for the next A panel, after all the others, so once the block and an A panel
    outgrow the L2 its B panels come from the next cache level whatever the block's
    size; a larger block still cuts A's traffic.  On Zen 3 (512 KB L2) at 2048^3 on
    one thread, blocks of 4 panels (one L2) ran at about 0.97x numpy, blocks of 8, 16
    and 32 at about 1.0x.  The number of blocks is rounded up to a multiple of the
    cores, since the thread pool gives each thread a contiguous share of them: 63
    panels (N = 1000) in 5 blocks of 15 would be 45 panels on one core and 18 on the
    other; 6 blocks of 11 are 33 and 30."""
    panels = -(-N // nr)
    fit = 2 * info.l2_bytes // (K * nr * 4)
    most = max(1, min(fit, panels // (2 * info.cores)))
    blocks = -(-panels // most)
    blocks = -(-blocks // info.cores) * info.cores
    return -(-panels // blocks)


def gemm_schedule(M: int, N: int, K: int, mr: int = MR, nr: int = NR,
                  jb: int | None = None) -> S.Schedule:
    """The scheduled GEMM ``C = A @ B`` for fp32 (M, K) x (K, N); ``jb`` B panels per
    block (default :func:`panel_block`)."""
    jb = panel_block(N, K, nr) if jb is None else jb
    Np = -(-N // nr) * nr
    Mp = -(-M // mr) * mr
    A = T.placeholder((M, K), "float32", name="A")
    B = T.placeholder((K, N), "float32", name="B")
    if Np == N:
        Bp = T.compute((Np // nr, K, nr), lambda jo, k, ji: B[k, jo * nr + ji], name="Bp")
    else:
        Bp = T.compute((Np // nr, K, nr), lambda jo, k, ji: T.if_then_else(
            jo * nr + ji < N, B[k, jo * nr + ji], T.const(0.0)), name="Bp")

    if Mp == M:
        Ap = T.compute((Mp // mr, K, mr), lambda io, k, ii: A[io * mr + ii, k], name="Ap")
    else:
        Ap = T.compute((Mp // mr, K, mr), lambda io, k, ii: T.if_then_else(
            io * mr + ii < M, A[io * mr + ii, k], T.const(0.0)), name="Ap")
    k = T.reduce_axis((0, K), name="k")
    Cp = T.compute((Mp, Np), lambda i, j: T.sum(
        Ap[i // mr, k, i % mr] * Bp[j // nr, k, j % nr], axis=k), name="Cp")
    C = T.compute((M, N), lambda i, j: Cp[i, j], name="C")
    sch = S.Schedule(T.create_prim_func([A, B, C]))

    cp = sch.get_block("Cp")
    i, j, kk = sch.get_loops(cp)
    io, ii = sch.split(i, [None, mr])
    jo, ji = sch.split(j, [None, nr])
    tile = io
    if jb > 1:                                # blocks of jb panels share each A panel
        jo, tile = sch.split(jo, [None, jb])
        sch.reorder(jo, io, tile, kk, ii, ji)
    else:
        sch.reorder(jo, io, kk, ii, ji)        # k innermost-but-two: the tile stays put
    sch.set_scope(cp, 0, "local")             # the tile of C is a local buffer ...
    sch.reverse_compute_at(sch.get_block("C"), tile)   # ... copied out per tile
    sch.decompose_reduction(cp, kk)           # zero the tile before the k loop
    for name in ("Cp_init", "Cp", "C"):
        rows, cols = sch.get_loops(sch.get_block(name))[-2:]
        sch.unroll(rows)
        sch.vectorize(cols)
    bp = sch.get_block("Bp")
    sch.compute_at(bp, jo)                    # pack a block's B panels right before use
    inner = sch.get_loops(bp)[1:]             # under jo: [panels of the block,] k, columns
    if len(inner) == 3:
        sch.reorder(inner[1], inner[0])       # row by row of B: contiguous reads
    sch.vectorize(inner[-1])
    sch.parallel(sch.get_loops(sch.get_block("Ap"))[0])
    sch.parallel(jo)                          # ... by the thread that uses them
    return sch


def numpy_time(a, b, repeat):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        np.matmul(a, b)
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def measure(M, N, K, repeat=5):
    sch = gemm_schedule(M, N, K)
    t0 = time.perf_counter()
    mod = targets.build(sch, TARGET, name=f"gemm_{M}_{N}_{K}")
    build_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype("float32")
    b = rng.standard_normal((K, N)).astype("float32")
    c = np.zeros((M, N), "float32")
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=2e-4, atol=2e-3 * np.sqrt(K / 512))
    # interleave ours and numpy's repeats so both see the same machine load; pause
    # first, since OpenBLAS threads busy-wait ~0.1 s after each call and would take
    # a core from our next call on a small machine (see benchmarks/README.md)
    ours, theirs = [], []
    for _ in range(repeat):
        time.sleep(0.15)
        ours.append(mod.benchmark(a, b, c, repeat=1, number=1).median)
        time.sleep(0.15)
        theirs.append(numpy_time(a, b, 1))
    ours, theirs = float(np.median(ours)), float(np.median(theirs))
    flops = 2.0 * M * N * K
    print(f"{M:5d}x{N}x{K}: cuvil {flops / ours / 1e9:7.1f} GFLOP/s   numpy "
          f"{flops / theirs / 1e9:7.1f} GFLOP/s   ratio {theirs / ours:5.2f}x   "
          f"build {build_s:.2f} s   (result matches numpy)")
    return mod


if __name__ == "__main__":
    print(f"== target: {INFO.name}, {INFO.vector_bits}-bit vectors ({LANES} float32 lanes), "
          f"{INFO.vector_registers} vector registers -> micro-kernel {MR}x{NR}")
    print(f"== the schedule of a 64x64x64 GEMM (micro-kernel {MR}x{NR}, A and B packed)")
    small = gemm_schedule(64, 64, 64)
    print(small.func)
    print("== the lowered inner kernel (after compaction, vectorization, unrolling)")
    text = str(T.lower(small.func, TARGET))
    lines = text.splitlines()
    start = next((n - 1 for n, line in enumerate(lines)
                  if f"Cp[T.Ramp(0, 1, {LANES})] = Cp[" in line), 0)
    print(textwrap.dedent("\n".join(lines[start:start + 14])))
    sizes = [(512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048), (1000, 1000, 1000)]
    print("== fp32 GEMM, median of 5 interleaved runs, same process as numpy")
    for size in sizes:
        mod = measure(*size)
    asm = mod.get_source("asm")
    print(f"== the last kernel's assembly has {asm.count('vfmadd')} vfmadd instructions "
          f"and {asm.count('vbroadcastss')} broadcasts")
