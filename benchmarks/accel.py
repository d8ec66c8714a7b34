"""The example NPUs' workloads on the built-in simulator: single versus double
buffering, per NPU (the toy NPU, the Gemmini-like NPU); then the Ascend-like NPU's
(4 cores, a shared L2) on all its cores, and GEMM 512^3 on 1, 2 and 4 cores (the
speed-up; ``--quick``: 128^3).

For int8 GEMM 256^3 and 512^3, a GEMM whose sizes are not multiples of 16 (padded
tiles), a GEMM with int4 weights packed two per byte (where the NPU has the
intrinsic), an int8 conv2d 3x3 (per-tap GEMMs; on a DMA with im2col also as one GEMM over
the patches the DMA gathers) and a fused GEMM + bias + ReLU + requantize: simulated
cycles, matrix-unit utilisation, stalls by cause (bank conflicts; the matrix unit's
cycles waiting to pop a token, its data not yet loaded or its output not yet stored;
cycles any engine waited to push into a full queue),
DMA bytes against the minimum the data sizes require (each input read once, each
output written once), compile time and simulator wall time (median of repeats).

Run: ``PYTHONPATH=. python benchmarks/accel.py [--sizes 256 512] [--repeat 5] [--quick]``;
``--quick`` (what CI runs) takes one small size of each workload and one repeat, the
conv2d rows kept at their full size (they are small).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import targets
from targets.toolkit.npu.conv2d import (conv2d, conv2d_im2col, schedule_conv2d,
                                        schedule_conv2d_im2col)
from targets.toolkit.npu.fused import (fused_gemm, fused_gemm_bias_init, schedule_fused,
                                       schedule_fused_readout)
from targets.toolkit.npu.gemm import gemm, gemm_int4, pack_int4, schedule_gemm
from targets.toolkit.npu.multicore import (schedule_conv2d_cores, schedule_fused_cores,
                                           schedule_gemm_cores)
from targets.accel.examples.ascend_like import ascend
from targets.accel.examples.gemmini_like import gemmini
from targets.accel.examples.toy_npu import toy_npu

GEMMINI = dict(gemm="gemmini.matmul_16x16x16_i8", zero=None,
               scopes=("gem.spad", "gem.spad", "gem.acc"))
# per NPU: its matrix unit, and how each workload is scheduled on it
NPUS = {
    "toy-npu": {"unit": "gemm", "gemm": {}, "conv": {}, "int4": "toy.gemm_16x16x16_i8xi4",
                "fused": lambda n, d: schedule_fused(fused_gemm(n, n, n), double=d)},
    "gemmini-like": {"unit": "matrix", "gemm": GEMMINI, "conv": GEMMINI, "im2col": True,
                     "fused": lambda n, d: schedule_fused_readout(
                         fused_gemm_bias_init(n, n, n), double=d)},
}


def _ints(rng, shape, dtype, lo=-128, hi=128):
    return rng.integers(lo, hi, shape).astype(dtype)


def run(npu: str, label: str, double: bool, sch, args, check, repeat: int) -> dict:
    """Build ``sch`` for ``npu``, run it ``repeat`` times on ``args``, check, read the
    counters."""
    t0 = time.perf_counter()
    mod = targets.build(sch, npu, name=f"bench_{'db' if double else 'sb'}")
    compile_s = time.perf_counter() - t0
    walls = []
    for _ in range(repeat):
        t = time.perf_counter()
        mod(*args)
        walls.append(time.perf_counter() - t)
    assert check(*args), f"{label}: the simulator result differs from numpy"
    s = mod.stats
    *ins, out = args
    unit = NPUS[npu]["unit"]
    return {"npu": npu, "label": label, "buffering": "double" if double else "single",
            "cycles": s["cycles"], "gemm_util": s["utilisation"][unit],
            "stalls": s["bank_conflict_stalls"], "waits": s["dependency_stalls"][unit],
            "qfull": sum(s["queue_full_stalls"].values()),
            "dma_in": s["dma_bytes_in"],
            "dma_out": s["dma_bytes_out"], "min_in": sum(a.nbytes for a in ins),
            "min_out": out.nbytes, "compile_s": compile_s, "sim_s": statistics.median(walls),
            "cores": s["cores_used"], "bw_stalls": s["bandwidth_stalls"],
            "l2bank": s["shared_bank_stalls"],
            "bound": _bound(s, unit, NPUS[npu].get("latency", 0))}


def _bound(s, unit, latency):
    """The matrix-unit utilisation no schedule can beat on the cores used: the busiest
    core's matrix-unit cycles plus one DMA latency before its first operand can arrive
    and one after its last result leaves (cycles >= that, for every core)."""
    per = [b[unit] for b in s["core_busy"].values()]
    return sum(per) / (len(per) * (max(per) + 2 * latency))


def gemm_rows(npu, n, m, k, repeat):
    rng = np.random.default_rng(0)
    a, b = _ints(rng, (n, k), "int8"), _ints(rng, (k, m), "int8")

    def check(a, b, c):
        return np.array_equal(c, a.astype("int32") @ b.astype("int32"))

    label = f"gemm {n}" if n == m == k else f"gemm {n}x{m}x{k}"
    return [run(npu, label, d, schedule_gemm(gemm(n, m, k), double=d, **NPUS[npu]["gemm"]),
                [a, b, np.zeros((n, m), "int32")], check, repeat) for d in (False, True)]


def int4_rows(npu, n, repeat):
    """GEMM with int4 weights packed two per byte (half the weight bytes)."""
    rng = np.random.default_rng(3)
    a, w = _ints(rng, (n, n), "int8"), rng.integers(-8, 8, (n, n))

    def check(a, b, c):
        return np.array_equal(c, a.astype("int32") @ w.astype("int32"))

    return [run(npu, f"gemm {n} int4", d, schedule_gemm(gemm_int4(n), double=d,
                                                       gemm=NPUS[npu]["int4"]),
                [a, pack_int4(w), np.zeros((n, n), "int32")], check, repeat)
            for d in (False, True)]


def conv_rows(npu, h, c, k, repeat, im2col=False):
    """Per-tap GEMMs, or (``im2col``) one GEMM over the patches the DMA gathers."""
    rng = np.random.default_rng(1)
    x, w = _ints(rng, (1, h, h, c), "int8"), _ints(rng, (3, 3, c, k), "int8")

    def check(x, w, y):
        o = h - 2
        return np.array_equal(y, sum(np.einsum(
            "nyxc,ck->nyxk", x[:, r:r + o, s:s + o].astype("int32"), w[r, s].astype("int32"))
            for r in range(3) for s in range(3)))

    if im2col:
        def check_flat(x, w2, y):
            return check(x, w2.reshape(3, 3, c, k), y)
        return [run(npu, f"im2col {h}x{h} {c}->{k}", d, schedule_conv2d_im2col(
                    conv2d_im2col(1, h, h, c, k), double=d, **NPUS[npu]["conv"]),
                    [x, w.reshape(-1, k), np.zeros((1, h - 2, h - 2, k), "int32")],
                    check_flat, repeat) for d in (False, True)]
    return [run(npu, f"conv {h}x{h} {c}->{k}", d,
                schedule_conv2d(conv2d(1, h, h, c, k), double=d, **NPUS[npu]["conv"]),
                [x, w, np.zeros((1, h - 2, h - 2, k), "int32")], check, repeat)
            for d in (False, True)]


def fused_rows(npu, n, repeat):
    rng = np.random.default_rng(2)
    a, b = _ints(rng, (n, n), "int8"), _ints(rng, (n, n), "int8")
    bias = _ints(rng, (n,), "int32", -60000, 60000)

    def check(a, b, bias, q):
        acc = np.maximum(a.astype("int32") @ b.astype("int32") + bias, 0)
        return np.array_equal(q, np.clip(acc >> 8, -128, 127).astype("int8"))

    return [run(npu, f"fused {n}", d, NPUS[npu]["fused"](n, d),
                [a, b, bias, np.zeros((n, n), "int8")], check, repeat) for d in (False, True)]


def _gemm_case(n, m, k):
    rng = np.random.default_rng(0)
    a, b = _ints(rng, (n, k), "int8"), _ints(rng, (k, m), "int8")
    return [a, b, np.zeros((n, m), "int32")], \
        lambda a, b, c: np.array_equal(c, a.astype("int32") @ b.astype("int32"))


def cores_rows(quick: bool, repeat: int) -> list:
    """The Ascend-like NPU (4 cores, shared L2): every workload double-buffered on all
    cores, then GEMM on 1, 2 and 4 cores (``speedup``: cycles on 1 core over these)."""
    targets.register_target(ascend, replace=True)
    NPUS["ascend-like"] = {"unit": "cube", "latency": ascend.dma.latency_cycles}
    big = 128 if quick else 512
    rows = []
    for n, m, k in [(big, big, big)] + ([(136, 72, 40)] if quick else [(256, 256, 256),
                                                                        (256, 200, 130)]):
        args, check = _gemm_case(n, m, k)
        label = f"gemm {n}" if n == m == k else f"gemm {n}x{m}x{k}"
        rows.append(run("ascend-like", label, True, schedule_gemm_cores(gemm(n, m, k)), args,
                        check, repeat))
    # the small conv also on one core: the three others free for other work
    for conv in ([(18, 8, 24, 4), (18, 8, 24, 1)] if quick else [
            (34, 32, 64, 4), (18, 8, 24, 4), (18, 8, 24, 1), (66, 64, 64, 4)]):
        h, c, k, cores = conv
        rng = np.random.default_rng(1)
        x, w = _ints(rng, (1, h, h, c), "int8"), _ints(rng, (3, 3, c, k), "int8")
        rows.append(run("ascend-like", f"conv {h}x{h} {c}->{k}", True,
                        schedule_conv2d_cores(conv2d(1, h, h, c, k), cores=cores),
                        [x, w, np.zeros((1, h - 2, h - 2, k), "int32")],
                        lambda x, w, y: np.array_equal(y, _conv_ref(x, w)), repeat))
    n = 128 if quick else 512
    rng = np.random.default_rng(2)
    a, b = _ints(rng, (n, n), "int8"), _ints(rng, (n, n), "int8")
    bias = _ints(rng, (n,), "int32", -60000, 60000)
    rows.append(run("ascend-like", f"fused {n}", True, schedule_fused_cores(fused_gemm(n, n, n)),
                    [a, b, bias, np.zeros((n, n), "int8")], _fused_ok, repeat))
    one = None
    for cores in (1, 2, 4):
        args, check = _gemm_case(big, big, big)
        r = run("ascend-like", f"gemm {big} speed-up", True,
                schedule_gemm_cores(gemm(big), cores=cores), args, check, repeat)
        one = one or r["cycles"]
        r["speedup"] = one / r["cycles"]
        rows.append(r)
    return rows


def _conv_ref(x, w):
    o = x.shape[1] - 2
    return sum(np.einsum("nyxc,ck->nyxk", x[:, r:r + o, s:s + o].astype("int32"),
                         w[r, s].astype("int32")) for r in range(3) for s in range(3))


def _fused_ok(a, b, bias, q):
    acc = np.maximum(a.astype("int32") @ b.astype("int32") + bias, 0)
    return np.array_equal(q, np.clip(acc >> 8, -128, 127).astype("int8"))


def print_cores(rows) -> list:
    """Print the multi-core rows (cores used, shared-link stalls, speed-up); returns
    them."""
    print(f"\n{'npu':>12} {'workload':>18} {'cores':>5} {'cycles':>9} {'mat%':>6} {'bound':>6} "
          f"{'bank':>6} {'l2bank':>6} {'wait':>7} {'link':>7} {'dma in/min':>17} {'dma out/min':>17} "
          f"{'compile s':>9} {'sim s':>7} {'speed-up':>8}")
    for r in rows:
        sp = f"{r['speedup']:.2f}x" if "speedup" in r else ""
        print(f"{r['npu']:>12} {r['label']:>18} {r['cores']:>5} {r['cycles']:>9} "
              f"{100 * r['gemm_util']:>6.1f} {100 * r['bound']:>6.1f} {r['stalls']:>6} {r['l2bank']:>6} {r['waits']:>7} "
              f"{r['bw_stalls']:>7} {r['dma_in']:>8}/{r['min_in']:<8} "
              f"{r['dma_out']:>8}/{r['min_out']:<8} {r['compile_s']:>9.2f} "
              f"{r['sim_s']:>7.3f} {sp:>8}")
    print("ascend-like: double-buffered, tiles bound to its cores; mat%: cube busy over "
          "cycles x cores used (a core the schedule leaves idle is free for other work "
          "and not counted); bound: the mat% no schedule can beat on those cores (the "
          "busiest core's cube cycles plus one DMA latency before its first operand and "
          "one after its last result); l2bank: cycles instructions waited for an L2 bank "
          "another core held; wait: cube cycles waiting on a token (all cores); "
          "link: cycles transfers waited for the shared DDR/L2 links")
    return rows


def main(argv=None) -> list:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[256, 512])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="small sizes, one repeat (CI)")
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.repeat = [128], 1
    rows = []
    for npu, acc in (("toy-npu", toy_npu), ("gemmini-like", gemmini)):
        targets.register_target(acc, replace=True)
        rows += [r for n in args.sizes for r in gemm_rows(npu, n, n, n, args.repeat)]
        rows += gemm_rows(npu, *((136, 72, 40) if args.quick else (256, 200, 130)),
                          args.repeat)
        if NPUS[npu].get("int4"):
            rows += int4_rows(npu, args.sizes[-1], args.repeat)
        rows += conv_rows(npu, 34, 32, 64, args.repeat)
        rows += conv_rows(npu, 18, 8, 24, args.repeat)
        if NPUS[npu].get("im2col"):
            rows += conv_rows(npu, 34, 32, 64, args.repeat, im2col=True)
            rows += conv_rows(npu, 18, 8, 24, args.repeat, im2col=True)
        rows += fused_rows(npu, 128 if args.quick else 256, args.repeat)
    print(f"{'npu':>12} {'workload':>20} {'buffer':>7} {'cycles':>9} {'mat%':>6} "
          f"{'bank':>6} {'wait':>7} {'qfull':>6} {'dma in/min':>17} {'dma out/min':>17} "
          f"{'compile s':>9} {'sim s':>7}")
    for r in rows:
        print(f"{r['npu']:>12} {r['label']:>20} {r['buffering']:>7} {r['cycles']:>9} "
              f"{100 * r['gemm_util']:>6.1f} {r['stalls']:>6} {r['waits']:>7} {r['qfull']:>6} "
              f"{r['dma_in']:>8}/{r['min_in']:<8} {r['dma_out']:>8}/{r['min_out']:<8} "
              f"{r['compile_s']:>9.2f} {r['sim_s']:>7.3f}")
    print("mat%: matrix-unit utilisation; stalls by cause: bank = bank-conflict cycles, "
          "wait = cycles the matrix unit waited to pop a token (data not loaded, or its "
          "output tile not yet stored), qfull = cycles engines waited to push into a "
          "full queue")
    return rows + print_cores(cores_rows(args.quick, args.repeat))


if __name__ == "__main__":
    main()
