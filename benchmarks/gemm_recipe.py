"""The register-tiled GEMM recipe as TVM users write it, beside numpy.

Run:  python benchmarks/gemm_recipe.py [--sizes 1024 1025 2048] [--repeat 5]
                                       [--mcpu native] [--vectors 2] [--quick]

``--quick`` (what CI runs): one size, 97 (no tile divides it), one round.

The recipe (the one TVM's CPU GEMM how-to and issue 10 compare): a ``6 x W`` tile of C
with ``W`` = 2 vectors of the target's float32 lanes (6 x 16 with AVX2, 6 x 32 with
AVX-512; from ``targets.llvm.cpu_info`` of the target, never the host silently):

* B packed through a layout-transforming cache: ``cache_read(C, B, "global")`` then
  ``transform_layout`` to ``(N / W, K, W)`` panels, so a k step reads W contiguous
  floats; the packing runs in parallel over the rows of B;
* a ``local`` accumulator (``cache_write(C, "local")``, copied out per tile), zeroed
  by ``decompose_reduction`` before the k loop;
* the 6 rows unrolled, the ``W`` columns vectorized, the row-panel loop parallel.

The 6-row split does not divide 1024 (nor 1025, nor 2048): every k step of the
micro-kernel sits under the split's guard ``io * 6 + ii < M``.  The llvm pipeline's
``loop_partition`` pass gives the hot loop a guard-free main range; the script prints,
for every loop of the assembly that runs packed FMAs (the micro-kernel and its tail
copies), its FMAs, compares and branches, so a reader sees it: ``12/0/1`` or
``12/1/1`` is the 6 x 2-vector kernel with only its loop-closing branch.  Each size is checked against numpy and timed beside ``a @ b`` in the
same process (median of ``--repeat`` interleaved runs, ``benchmarks/run.py``'s
``interleaved``), with the fraction of the peak measured by ``run.py``'s FMA kernel.
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import re
import sys

import numpy as np

import cuvil_tir as T
import schedules as S
import targets
from targets.llvm import cpu_info

ROOT = pathlib.Path(__file__).resolve().parent
ROWS = 6


def _run_py():
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tile_width(target, vectors: int = 2) -> int:
    """Columns of the register tile: ``vectors`` vectors of the target's float32 lanes,
    refused when ``ROWS * vectors`` accumulators plus the B vectors and A's broadcast
    do not fit the target's vector registers.

    >>> tile_width(targets.Target("llvm", mcpu="haswell")), \\
    ...     tile_width(targets.Target("llvm", mcpu="skylake-avx512"))
    (16, 32)
    """
    info = cpu_info(target)
    need = ROWS * vectors + vectors + 1
    if need > info.vector_registers:
        raise targets.TargetError(f"gemm_recipe: a {ROWS}x{vectors}-vector tile needs "
                                  f"{need} vector registers, {info.name} has "
                                  f"{info.vector_registers}; use fewer vectors")
    return vectors * info.lanes("float32")


def recipe(M: int, N: int, K: int, width: int) -> S.Schedule:
    """The scheduled ``C = A @ B`` (fp32, (M, K) x (K, N)) with a ``6 x width`` tile.

    >>> sch = recipe(13, 20, 7, 16)
    >>> [b.name for b in sch.func.body.block.alloc_buffers]
    ['C_local', 'B_global']
    """
    A = T.placeholder((M, K), "float32", name="A")
    B = T.placeholder((K, N), "float32", name="B")
    k = T.reduce_axis((0, K), name="k")
    C = T.compute((M, N), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = S.Schedule(T.create_prim_func([A, B, C]))
    c = sch.get_block("C")
    i, j, kk = sch.get_loops(c)
    io, ii = sch.split(i, [None, ROWS])
    jo, ji = sch.split(j, [None, width])
    sch.reorder(io, jo, kk, ii, ji)
    acc = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(acc, jo)
    pack = sch.cache_read(c, 1, "global")
    sch.transform_layout(pack, 0, lambda kr, jc: (jc // width, kr, jc % width), pad_value=0.0)
    sch.parallel(sch.get_loops(pack)[0])
    sch.decompose_reduction(c, kk)
    sch.unroll(ii)
    sch.vectorize(ji)
    sch.parallel(io)
    return sch


def _asm_blocks(asm: str) -> list:
    """``[(label, instructions)]``: the basic blocks of an assembly listing."""
    blocks, name, cur = [], None, []
    for line in asm.splitlines():
        m = re.match(r"^([.\w$]+):", line)
        if m:
            blocks.append((name, cur))
            name, cur = m.group(1), []
        elif line.startswith("\t") and not line.strip().startswith((".", "#")):
            cur.append(line.strip())
            if line.strip().startswith("j"):        # a branch ends the basic block
                blocks.append((name, cur))
                name, cur = None, []
    blocks.append((name, cur))
    return blocks


def fma_loops(asm: str) -> list:
    """The loops of ``asm`` that compute with packed FMAs: basic blocks that branch back
    to themselves, each as a dict of its FMA, compare and branch counts (the
    micro-kernel's k loop and the tails' copies of it).

    >>> fma_loops(".LBB0_1:\\n\\tvfmadd231ps %ymm1, %ymm2, %ymm3\\n\\tcmpq $4, %rax\\n"
    ...           "\\tjne .LBB0_1\\n")
    [{'label': '.LBB0_1', 'fma': 1, 'compares': 1, 'branches': 1, 'instructions': 3}]
    """
    out = []
    for name, body in _asm_blocks(asm):
        ops = [i.split()[0] for i in body]
        if not body or body[-1].split()[-1] != name or \
                not any(o.startswith("vfmadd") and o.endswith("ps") for o in ops):
            continue
        out.append({"label": name, "fma": sum(o.startswith("vfmadd") for o in ops),
                    "compares": sum(o.startswith(("cmp", "test")) for o in ops),
                    "branches": sum(o.startswith("j") for o in ops),
                    "instructions": len(ops)})
    return out


def bench_size(run, n: int, width: int, target, repeat: int, rng, peak: float) -> str:
    """One row of the report: GEMM ``n^3`` built, checked, timed beside numpy."""
    mod, build_s = run.timed_build(recipe(n, n, n, width), f"gemm_recipe{n}", target)
    a = rng.standard_normal((n, n)).astype("float32")
    b = rng.standard_normal((n, n)).astype("float32")
    c = np.zeros((n, n), "float32")
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=2e-4, atol=5e-3)
    ours, theirs = run.interleaved(lambda: mod(a, b, c), lambda: a @ b, repeat)
    flops = 2.0 * n ** 3
    g_ours, g_np = flops / ours["median"] / 1e9, flops / theirs["median"] / 1e9
    loops = ", ".join(f"{lp['fma']}/{lp['compares']}/{lp['branches']}"
                      for lp in fma_loops(mod.get_source("asm")))
    return (f"{n:6d} {g_ours:14.1f} {g_np:14.1f} {g_ours / g_np:6.2f} "
            f"{100 * g_ours / peak:5.1f}%  {build_s:6.2f} s   {loops}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 1025, 2048])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--mcpu", default="native")
    ap.add_argument("--vectors", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="size 97, one round (CI)")
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.repeat = [97], 1
    rc = _run_py().bench_env.rerun_without_blas_overrides(__file__, argv)
    if rc is not None:
        return rc
    run = _run_py()
    target = targets.Target("llvm", mcpu=args.mcpu)
    info = cpu_info(target)
    width = tile_width(target, args.vectors)
    print(f"target {info.name}: {info.vector_bits}-bit vectors, {info.vector_registers} "
          f"registers -> {ROWS}x{width} tile ({args.vectors} vectors of "
          f"{info.lanes('float32')} lanes)")
    peak = run.measure_peak(args.repeat, target,
                            reps=100_000 if args.quick else None)["all threads"]
    print(f"fp32 peak (run.py's {info.lanes('float32')}-lane FMA kernel, all threads): "
          f"{peak:.1f} GFLOP/s")
    print(f"{'size':>6s} {'cuvil GFLOP/s':>14s} {'numpy GFLOP/s':>14s} {'ratio':>6s} "
          f"{'peak%':>6s}  {'build':>7s}   FMA loops in the assembly: FMAs/compares/branches")
    rng = np.random.default_rng(0)
    for n in args.sizes:
        print(bench_size(run, n, width, target, args.repeat, rng, peak))
    return 0


if __name__ == "__main__":
    sys.exit(main())
