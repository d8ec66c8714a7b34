"""int8 and bfloat16 GEMMs on the x86 dot-product intrinsics, beside the fp32 GEMM
and numpy.

Run:  python benchmarks/gemm_lowp.py [--sizes 512 1024 2048] [--repeat 7] [--quick]
                                     [--mcpu native]

Per size n (C = A @ B, n^3): the fp32 GEMM of tutorial 04 (the fp32 recipe), the int8
GEMMs of :mod:`targets.toolkit.cpu_recipes` on ``vpdpbusd`` (int8 x int8 -> int32
through the +128 offset and its compensation, and uint8 x int8 -> int32, the
instruction's own signedness), the bfloat16 GEMM on ``vdpbf16ps`` (float32
accumulation) and numpy's fp32 ``a @ b`` (OpenBLAS).  numpy has no int8 or bfloat16
GEMM fast path: its integer ``a @ b`` (int32 here, as int8 would overflow) runs a
generic loop, timed up to ``--int-max`` (1024) only; so every row is compared with
numpy's *fp32* GEMM of the same shape (``x numpy``), and with our fp32 recipe.

All of them run interleaved, ``--repeat`` rounds, in one process, each row's rate from
its fastest round, so every ratio is taken under the same load (the load average is
printed before and after).
Each result is checked first: int8 exactly against numpy's int64 product; bfloat16
against a float64 product of the bfloat16-rounded inputs (relative error).

Peaks are measured on this machine with kernels built by our own backend
(``benchmarks/run.py``'s :func:`peak_kernel`: independent chains of FMAs,
``vpdpbusd`` or ``vdpbf16ps`` as wide as the target's vectors, on every pool thread),
timed in the same interleaved rounds as the GEMMs, so a share of peak is taken under
the same load (on a shared machine a peak measured apart is not comparable): a
``vpdpbusd`` does 4 int8 multiply-adds per 32-bit lane (64 per 512-bit instruction),
``vdpbf16ps`` 2 and an FMA 1, so at one instruction per cycle each the int8 peak is 4x
and the bf16 peak 2x the fp32 peak.  Without VNNI / BF16 on the target (``--mcpu``)
those rows say what is missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import pathlib
import sys

import numpy as np

import targets
from targets.toolkit.cpu_recipes import bf16_gemm, int8_gemm

ROOT = pathlib.Path(__file__).resolve().parent


def _load(name: str, path: pathlib.Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def bf16_bits(x):
    """float32 array -> bfloat16 bits (uint16), rounded to nearest even.

    >>> bf16_bits(np.float32([1.0, -2.5])).tolist()
    [16256, 49184]
    """
    u = np.ascontiguousarray(x, "float32").view("uint32").astype("uint64")
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("uint16")


def bf16_value(bits):
    """bfloat16 bits -> float64 values.

    >>> bf16_value(np.uint16([16256])).tolist()
    [1.0]
    """
    return (bits.astype("uint32") << 16).view("float32").astype("float64")


def _loadavg() -> str:
    return f"{os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "?"


def cases(n: int, target, rng, int_max: int = 1024):
    """``[(label, kind, call, check)]`` for size ``n``: each ``call`` runs one GEMM;
    ``check()`` raises when its result is wrong; kind selects the peak."""
    t04 = _load("tutorial04", ROOT.parent / "tutorials" / "04_fast_matmul_cpu.py")
    a32 = rng.standard_normal((n, n)).astype("float32")
    b32 = rng.standard_normal((n, n)).astype("float32")
    out = []
    fp32 = targets.build(t04.gemm_schedule(n, n, n), t04.TARGET, name=f"gemm_f32_{n}")
    c32 = np.zeros((n, n), "float32")
    out.append(("fp32 recipe", "fp32", lambda: fp32(a32, b32, c32),
                lambda: np.testing.assert_allclose(c32, a32 @ b32, rtol=1e-3, atol=1e-2)))
    b8 = rng.integers(-128, 128, (n, n), dtype="int8")
    for label, signed in (("int8 s8s8", True), ("int8 u8s8", False)):
        a8 = rng.integers(-128, 128, (n, n), dtype="int8") if signed else \
            rng.integers(0, 256, (n, n), dtype="uint8")
        c8 = np.zeros((n, n), "int32")
        try:
            mod = targets.build(int8_gemm(n, n, n, target, signed), target,
                                name=f"gemm_{label[-4:]}_{n}")
        except targets.TargetError as err:
            out.append((label, "int8", None, str(err)))
            continue
        # exact in float64 BLAS: every partial sum is below 2**53
        want = (a8.astype("float64") @ b8.astype("float64")).astype("int64")
        out.append((label, "int8", lambda mod=mod, a8=a8, c8=c8: mod(a8, b8, c8),
                    lambda c8=c8, want=want: np.testing.assert_array_equal(c8, want)))
    ab, bb = bf16_bits(a32), bf16_bits(b32)
    cb = np.zeros((n, n), "float32")
    try:
        modb = targets.build(bf16_gemm(n, n, n, target), target, name=f"gemm_bf16_{n}")
        want_b = bf16_value(ab) @ bf16_value(bb)
        scale = np.abs(bf16_value(ab)) @ np.abs(bf16_value(bb))
        out.append(("bf16", "bf16", lambda: modb(ab, bb, cb),
                    lambda: _check_bf16(cb, want_b, scale, n)))
    except targets.TargetError as err:
        out.append(("bf16", "bf16", None, str(err)))
    out.append(("numpy fp32", "fp32", lambda: a32 @ b32, lambda: None))
    if n <= int_max:
        b_i = b8.astype("int32")
        out.append(("numpy int32", "int8", lambda: b_i @ b_i, lambda: None))
    return out


def peak_calls(run, target, ops: float) -> dict:
    """``{kind: (call, operations)}`` of the peak kernels (``run.peak_kernel``: chains
    of FMAs, ``vpdpbusd``, ``vdpbf16ps`` on every pool thread) the target can build,
    each sized to about ``ops`` operations, to time interleaved with the GEMMs: on a
    shared machine a peak taken apart from them would be taken under another load."""
    from targets.llvm import cpu_info, threadpool
    info = cpu_info(target)
    w, threads = info.lanes("float32"), threadpool.get_num_threads()
    chains = max(4, min(12, info.vector_registers - 4))
    out = {}
    for kind, (acc_t, _, b_t, per) in run.PEAK_KINDS.items():
        reps = max(1000, int(ops / (2 * threads * chains * w * per)))
        func, flops = run.peak_kernel(threads, w, chains, reps=reps, kind=kind)
        try:
            mod = targets.build(func, target, name=f"peak_{kind}")
        except targets.TargetError:
            continue
        x = np.ones(w * per, "uint16" if b_t == "bfloat16" else b_t)
        o = np.zeros(threads * chains * w, acc_t)
        out[kind] = (lambda mod=mod, x=x, o=o: mod(x, o)), flops
    return out


def _check_bf16(got, want, scale, k):
    """float32 accumulation of k exact products: error within k * 2**-24 of the sum of
    magnitudes (the standard bound), with room for the pair order."""
    err = np.max(np.abs(got - want) / scale)
    if err > 2 * k * 2.0 ** -24:
        raise AssertionError(f"bf16 GEMM relative error {err:.2e} over the bound")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=None)
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--quick", action="store_true", help="512^3 only, 3 repeats")
    ap.add_argument("--mcpu", default="native")
    ap.add_argument("--int-max", type=int, default=1024,
                    help="largest n at which numpy's integer GEMM is timed (it is slow)")
    args = ap.parse_args(argv)
    run = _load("bench_run", ROOT / "run.py")
    rc = run.bench_env.rerun_without_blas_overrides(__file__, argv)
    if rc is not None:
        return rc
    sizes = args.sizes or ([512] if args.quick else [512, 1024, 2048])
    repeat = args.repeat or (3 if args.quick else 7)
    target = targets.Target("llvm", mcpu=args.mcpu)
    print(f"target {target}; load average {_loadavg()} on {os.cpu_count()} cores; "
          f"numpy BLAS: {run.blas_info()}")
    rng = np.random.default_rng(0)
    print(f"{'n':>5s}  {'kernel':12s} {'GOP/s':>8s} {'of peak':>8s} {'x fp32':>7s} "
          f"{'x numpy':>8s}")
    for n in sizes:
        rows = cases(n, target, rng, args.int_max)
        runnable = [r for r in rows if r[2] is not None]
        for _, _, call, check in runnable:
            call()
            check()
        peaks = peak_calls(run, target, 2.0 * n ** 3)
        calls = [r[2] for r in runnable] + [c for c, _ in peaks.values()]
        stats = run.interleaved_all(calls, repeat)
        # the fastest round of each: on a shared machine a slower one is a call the
        # scheduler interrupted, and a peak is a best case by definition
        rate = {r[0]: 2.0 * n ** 3 / s["min"] / 1e9 for r, s in zip(runnable, stats)}
        peak = {k: ops / s["min"] / 1e9
                for (k, (_, ops)), s in zip(peaks.items(), stats[len(runnable):])}
        print(f"{n:5d}  peaks (G ops/s, all threads, timed with the rows): " + ", ".join(
            f"{k} {peak[k]:.0f}" if k in peak else f"{k} -" for k in run.PEAK_KINDS))
        for label, kind, call, why in rows:
            if call is None:
                print(f"{n:5d}  {label:12s} not built: {why}")
                continue
            share = f"{rate[label] / peak[kind]:8.1%}" if kind in peak and \
                not label.startswith("numpy") else f"{'':8s}"
            print(f"{n:5d}  {label:12s} {rate[label]:8.1f} {share} "
                  f"{rate[label] / rate['fp32 recipe']:7.2f} "
                  f"{rate[label] / rate['numpy fp32']:8.2f}")
    print(f"load average after: {_loadavg()}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT.parent))
    sys.exit(main())
