"""Tuning from the generated space, with no hand schedule, beside numpy (OpenBLAS).

    python benchmarks/tune.py                 # the full suite (<= 200 trials per task)
    python benchmarks/tune.py --quick         # small sizes, 8 trials each (CI)
    python benchmarks/tune.py --only throughput gemm --dtypes float32 --trials 100
    python benchmarks/tune.py --db DIR        # keep the databases; run again to resume

Sections (``--only``):

* ``throughput`` -- candidates measured per second on a kernel under 1 ms (GEMM
  128^3, random search, the default local pool over an empty compile cache: builds in
  parallel, timing serialised per host) and the overhead per candidate: everything a
  candidate costs but the kernel's own timed runs (search, replay, build, load,
  correctness check, timing calibration), by wall time (per slot, under whatever else
  the machine runs) and by CPU with its split (search, build, check + timing), and
  what the CPU makes on idle cores; goals: >= 5 candidates/s on 2 cores, overhead
  < 0.2 s;
* ``gemm`` -- 17 GEMM shapes (BERT-base layers at sequence 128, ResNet-50's 1x1
  convolutions and classifier as GEMMs, square 512-4096, skinny M = 1..64) in the
  ``--dtypes`` (fp32; int8 with int32 accumulation; bf16 with fp32 accumulation): tuned
  time beside numpy's fp32 GEMM of the same shape (numpy has no fast int8 or bf16
  GEMM), GFLOP/s, and the share of the measured peak of the instruction the tuned
  kernel runs on (the FMA, or ``vpdpbusd`` / ``vdpbf16ps`` where the space's dot rule
  won; the header prints each peak).  Goals: fp32 geomean >= 1.0x numpy and no shape
  below 0.8x; int8 >= 2.5x the fp32 operation rate on a CPU with VNNI.  The summary
  says how many int8 / bf16 GEMMs chose their dot product and its peak beside the
  FMA's: a CPU that runs ``vdpbf16ps`` at half the FMA's rate makes bf16 GEMMs faster
  on FMAs, and the tuner then picks those;
* ``conv`` -- 8 ResNet-18 convolutions against numpy's im2col + matmul; goal >= 2x.

numpy runs with the kernel OpenBLAS picks for this CPU: when ``OPENBLAS_CORETYPE`` or
``OPENBLAS_L2_SIZE`` is set (some machines pin an older kernel), the benchmark runs
itself again with both unset, and prints the BLAS in use (threadpoolctl).  Each task's
tuned kernel is checked against numpy and timed interleaved with it (the fastest of
``--repeat`` calls each).  On a machine
shared with other work the figures are noisy: the ratios within one run are what
compare; the 1-minute load average is printed beside each figure.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, ".."), HERE]

import schedules as S  # noqa: E402
import targets  # noqa: E402
from run import blas_thread_setter, bench_env, blas_info, interleaved_all, measure_peak  # noqa: E402,E501

from cuvil_tir.expr import Call  # noqa: E402
from cuvil_tir.ops.dot import DPBF16PS, DPBUSD  # noqa: E402
from cuvil_tir.visitor import post_order_visit  # noqa: E402
from schedules.tune.command import history_of  # noqa: E402
from schedules.tune.database import workload_key  # noqa: E402
from schedules.tune.executor import local_executor, slots  # noqa: E402
from schedules.tune.measure import random_args, timing_lock  # noqa: E402
from schedules.tune.networks import load_tasks, matmul  # noqa: E402
from schedules.tune.report import format_seconds, trials_to_fraction  # noqa: E402

# (name, M, N, K)
GEMMS = [("bert.qkv", 128, 2304, 768), ("bert.attn_out", 128, 768, 768),
         ("bert.ffn1", 128, 3072, 768), ("bert.ffn2", 128, 768, 3072),
         ("r50.1x1a", 3136, 256, 64), ("r50.1x1b", 784, 512, 128),
         ("r50.1x1c", 196, 1024, 256), ("r50.1x1d", 49, 2048, 512), ("r50.fc", 1, 1000, 2048),
         ("sq512", 512, 512, 512), ("sq1024", 1024, 1024, 1024), ("sq2048", 2048, 2048, 2048),
         ("sq4096", 4096, 4096, 4096), ("m1", 1, 1024, 1024), ("m4", 4, 1024, 1024),
         ("m16", 16, 1024, 1024), ("m64", 64, 1024, 1024)]
QUICK_GEMMS = [("sq64", 64, 64, 64), ("m4", 4, 256, 256)]
CONV_NAMES = ["conv1", "layer1.3x3", "layer2.down3x3", "layer2.3x3", "layer3.down3x3",
              "layer3.3x3", "layer4.3x3", "layer2.down1x1"]
DTYPES = {"float32": ("float32", None), "int8": ("int8", "int32"),
          "bfloat16": ("bfloat16", "float32")}


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "?"


#: each dtype's dot-product instruction, the peak kind that times it (run.PEAK_KINDS)
DOT_PATHS = {"int8": ("vpdpbusd", DPBUSD, "int8"), "bfloat16": ("vdpbf16ps", DPBF16PS, "bf16")}


def peaks(target, repeat=3) -> dict:
    """``{kind: run.measure_peak's dict}`` (G operations/s on one thread and on all)
    measured on all the pool's threads
    (``run.measure_peak``: independent chains as wide as the target's vectors) of the
    fp32 FMA (``"fp32"``) and of the dot-product instructions the target has
    (``"int8"``: ``vpdpbusd``, ``"bf16"``: ``vdpbf16ps``).  A figure from the nominal
    clock undercounts a CPU that boosts above it, and the share of peak then reads
    over 100%; and a dot product's peak is the CPU's, not the ISA's: some CPUs run
    ``vdpbf16ps`` at half the FMA's rate, where a bf16 GEMM on FMAs beats one on it.
    """
    out = {}
    for kind in ("fp32", "int8", "bf16"):
        try:
            got = measure_peak(repeat, target, kind=kind)
        except targets.TargetError:     # the CPU lacks the instruction
            continue
        out[kind] = got
    return out


PEAK_NAMES = {"fp32": "fp32 FMA", "int8": "int8 vpdpbusd", "bf16": "bf16 vdpbf16ps"}


def peak_line(measured) -> str:
    """The header's peaks (:func:`peaks`), each on all threads and on one.

    Example::

        >>> peak_line({"fp32": {"threads": 2, "all threads": 450.0, "1 thread": 226.0}})
        'peaks measured on 2 threads (one): fp32 FMA 450 (226) G ops/s'
    """
    if not measured:
        return "no peak measured"
    threads = next(iter(measured.values()))["threads"]
    return (f"peaks measured on {threads} threads (one): " + ", ".join(
        f"{PEAK_NAMES[k]} {m['all threads']:.0f} ({m['1 thread']:.0f})"
        for k, m in measured.items()) + " G ops/s")


def path_of(func) -> str:
    """The instruction a scheduled GEMM's inner product runs on: ``vpdpbusd`` or
    ``vdpbf16ps`` where its IR calls the dot-product op, else ``"fma"`` (the register
    tiling, whose multiply-adds LLVM selects from the element type).

    Example::

        >>> path_of(matmul(4, 4, 4))
        'fma'
    """
    ops = set()
    post_order_visit(func.body, lambda n: ops.add(n.op) if isinstance(n, Call) else None)
    return next((name for name, op, _ in DOT_PATHS.values() if op in ops), "fma")


def share_of_peak(flops_per_s, dtype, path, peak_of) -> str:
    """The share of the peak of the instruction ``path`` runs on (``peak_of``: kind ->
    operations/s, :func:`peaks`): the dot product's for a dot path, the fp32 FMA's for
    a float GEMM on FMAs; ``"-"`` where no measured peak applies (an int8 GEMM off
    ``vpdpbusd``).

    Example::

        >>> share_of_peak(100.0, "bfloat16", "vdpbf16ps", {"fp32": 400.0, "bf16": 200.0})
        ' 50.0% vdpbf16ps'
        >>> share_of_peak(100.0, "int8", "fma", {"fp32": 400.0})
        '     - fma      '
    """
    kind = next((k for name, _, k in DOT_PATHS.values() if name == path),
                None if dtype == "int8" else "fp32")
    peak = peak_of.get(kind)
    share = f"{flops_per_s / peak:6.1%}" if peak else "     -"
    return f"{share} {path:9s}"


def interleaved(fns, repeat):
    """The fastest of ``repeat`` warm samples of each of ``fns``, taken in turn
    (:func:`run.interleaved_all`: after a settle and a warm-up call, the mean of the
    calls that fill 20 ms, as the tuner measures a candidate; on a shared machine a
    slow sample is one the scheduler interrupted, and both sides get the same
    treatment).

    Example::

        >>> [t < 0.02 for t in interleaved([lambda: None, lambda: None], 1)]
        [True, True]
    """
    return [s["min"] for s in interleaved_all(fns, repeat, warm_s=0.02)]


def tune_task(name, func, opts, target, executor):
    """Tune until the task's database holds ``opts.trials`` records or its minutes pass
    (a second run on the same --db resumes); returns (history, seconds spent)."""
    db = os.path.join(opts.db, f"{name}.jsonl")
    key = workload_key(func, target)
    have = len(history_of(S.Database(db).records(key)))
    t0 = time.perf_counter()
    if opts.trials > have:
        S.tune(func, None, target=target, trials=opts.trials - have, database=db,
               executor=executor, timeout_s=opts.timeout, seed=have, progress=False,
               max_seconds=max(1.0, opts.minutes * 60), min_repeat_ms=opts.min_repeat_ms)
    return history_of(S.Database(db).records(key)), time.perf_counter() - t0, db


def as_float(a, dtype):
    if dtype == "bfloat16":
        return (a.astype("uint32") << 16).view("float32")
    return a.astype("float32") if dtype != "float32" else a


def expected_gemm(a, b, elem: str):
    """``a @ b`` of the suite's operands of dtype ``elem`` through numpy's BLAS: float32
    for fp32 and bf16 (its bits widened), float64 for int8, where every product and
    partial sum is an integer below 2**53 (|sum| <= K * 2**14), so the result is the
    exact int32 GEMM's.  numpy's own integer GEMM has no BLAS: 16 s for 1024^3 on this
    project's Xeon, and far longer at 4096^3.

    Example::

        >>> a = np.array([[127, -128]], "int8"); b = np.array([[-128], [-128]], "int8")
        >>> expected_gemm(a, b, "int8")
        array([[128]])
    """
    if elem == "int8":
        return (a.astype("float64") @ b.astype("float64")).astype("int64")
    return as_float(a, elem) @ as_float(b, elem)


def gemm_row(label, m, n, k, dtype, opts, target, executor, peak_of):
    elem, acc = DTYPES[dtype]
    func = matmul(m, n, k, elem, acc)
    hist, spent, db = tune_task(f"gemm-{label}-{dtype}", func, opts, target, executor)
    sch = S.apply_best(db, func, target)
    if sch is None:
        print(f"  {label:14s} {dtype:8s} no candidate succeeded", flush=True)
        return None
    a, b, c = random_args(func, 1)
    mod = targets.build(sch, target)
    mod(a, b, c)
    np.testing.assert_allclose(c, expected_gemm(a, b, elem), rtol=1e-3,
                               atol=1e-3 * math.sqrt(k))
    x32 = np.random.default_rng(0).standard_normal((m, k)).astype("float32")
    y32 = np.random.default_rng(1).standard_normal((k, n)).astype("float32")
    with timing_lock():
        ours, ref = interleaved([lambda: mod(a, b, c), lambda: x32 @ y32], opts.repeat)
    flops = 2.0 * m * n * k
    path = path_of(sch.func)
    share = share_of_peak(flops / ours, dtype, path, peak_of)
    print(f"  {label:14s} {dtype:8s} {m:5d}x{n:5d}x{k:5d} {len(hist):4d} trials "
          f"{spent / 60:5.1f} min  tuned {format_seconds(ours):>9s} "
          f"{flops / ours / 1e9:7.1f} G/s  numpy fp32 {format_seconds(ref):>9s} "
          f"{flops / ref / 1e9:7.1f} G/s  {ref / ours:5.2f}x  peak {share}  "
          f"load {_load()}", flush=True)
    return {"label": label, "dtype": dtype, "ratio": ref / ours, "rate": flops / ours,
            "path": path}


def numpy_conv(x, w, stride, pad):
    """im2col + matmul, numpy's way to a convolution."""
    c, h, wd = x.shape
    k, _, r, s = w.shape
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - r) // stride + 1, (wd + 2 * pad - s) // stride + 1
    cols = np.empty((c, r, s, oh, ow), x.dtype)
    for i in range(r):
        for j in range(s):
            cols[:, i, j] = xp[:, i:i + stride * oh:stride, j:j + stride * ow:stride]
    return (w.reshape(k, -1) @ cols.reshape(c * r * s, -1)).reshape(k, oh, ow)


def conv_row(task, opts, target, executor):
    a = task.args
    hist, spent, db = tune_task(f"conv-{task.name}", task.func, opts, target, executor)
    sch = S.apply_best(db, task.func, target)
    if sch is None:
        print(f"  {task.name:16s} no candidate succeeded", flush=True)
        return None
    x, w, y = random_args(task.func, 1)
    mod = targets.build(sch, target)
    mod(x, w, y)
    want = numpy_conv(x, w, a.get("stride", 1), a.get("pad", 1))
    np.testing.assert_allclose(y, want, rtol=1e-3, atol=1e-3 * math.sqrt(w[0].size))
    with timing_lock():
        ours, ref = interleaved([lambda: mod(x, w, y), lambda: numpy_conv(
            x, w, a.get("stride", 1), a.get("pad", 1))], opts.repeat)
    print(f"  {task.name:16s} {len(hist):4d} trials {spent / 60:5.1f} min  tuned "
          f"{format_seconds(ours):>9s}  numpy im2col {format_seconds(ref):>9s}  "
          f"{ref / ours:5.2f}x  90% of best at trial {trials_to_fraction(hist, 0.9)}  "
          f"load {_load()}", flush=True)
    return {"name": task.name, "ratio": ref / ours}


def throughput(opts, target):
    """The section's own pool, over an empty compile cache: a second run of the same
    seeded candidates otherwise loads every build from the cache (0.01 s instead of
    0.2-0.4 s of CPU) and reads 3x faster than a tuning run of new candidates."""
    saved = os.environ.get("CUVIL_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="cuvil-bench-tune-cache-") as cache_dir:
        os.environ["CUVIL_CACHE_DIR"] = cache_dir   # the pool's processes inherit it
        try:
            with local_executor(opts.cores or None) as executor:
                _throughput(opts, target, executor)
        finally:
            if saved is None:
                os.environ.pop("CUVIL_CACHE_DIR", None)
            else:
                os.environ["CUVIL_CACHE_DIR"] = saved


def _throughput(opts, target, executor):
    func = matmul(128, 128, 128)
    n = 8 if opts.quick else 40
    db = S.Database(os.path.join(opts.db, "throughput.jsonl"))
    # warm the pool first: each slot's server imports Cuvil once, and the untuned
    # reference outputs are computed once per machine; then the steady state is timed
    S.tune(matmul(64, 64, 64), None, target=target, trials=slots(executor),
           executor=executor, guided=False, progress=False, remeasure=0,
           min_repeat_ms=opts.min_repeat_ms)
    from schedules.tune.measure import reference_outputs
    reference_outputs(func, target, 0)
    t0, cpu0 = time.perf_counter(), time.process_time()
    S.tune(func, None, target=target, trials=n, database=db, executor=executor,
           timeout_s=opts.timeout, guided=False, progress=False, remeasure=0,
           min_repeat_ms=opts.min_repeat_ms)
    wall, parent_cpu = time.perf_counter() - t0, time.process_time() - cpu0
    recs = [r for r in db.records(workload_key(func, target)) if not r.get("remeasured")]
    print(f"  GEMM 128^3, random search, min_repeat_ms {opts.min_repeat_ms:g}; load "
          f"{_load()}")
    print(throughput_report(recs, wall, parent_cpu, slots(executor)), flush=True)


def _mean(recs, field) -> float:
    return statistics.mean(r.get(field) or 0.0 for r in recs)


def throughput_report(recs, wall, parent_cpu, width) -> str:
    """The throughput section's lines from the measured records (their ``build_s``,
    ``timed_s``, ``cpu_s``, ... fields), the run's wall time, the tuner's own CPU and
    the pool's slots.

    Overhead is everything a candidate costs but the kernel's own timed runs: the
    search (drawing and replaying the schedule, pruning), sending it, the build
    (lowering, code generation, loading), the correctness check and the timing's
    calibration.  The builds run in parallel, one per slot, while the timed runs are
    serialised per host, so the machine's wall time per candidate is its timed runs
    plus the overhead that did not overlap them.  By wall time it depends on the other
    processes of a shared machine (the timed runs' wall time too); by CPU it does not,
    and CPU / cores is the overhead per candidate that idle cores would see.

    Example::

        >>> r = {"build_s": 0.2, "check_time_s": 0.06, "timed_s": 0.05, "cpu_s": 0.3,
        ...      "build_cpu_s": 0.2, "check_time_cpu_s": 0.06, "timed_cpu_s": 0.05}
        >>> print(throughput_report([r] * 10, 2.0, 0.5, 2))  # doctest: +NORMALIZE_WHITESPACE
          10 candidates on 2 slots in 2.0 s: 5.00 candidates/s (goal >= 5)
          overhead = everything per candidate but the kernel's own timed runs (search, replay, build, load, check, timing calibration)
          wall per candidate: 0.200 s (goal < 0.2 s) = its timed runs 0.050 s (serialised) + overhead 0.150 s beside them; per slot 0.400 s: build 0.200 s, check + timing 0.060 s (under this machine's load)
          CPU per candidate: 0.350 s = search 0.050 s + build 0.200 s + check + timing 0.060 s (timed runs 0.050 s) + rest of the child 0.040 s; overhead 0.300 s CPU, 0.150 s per candidate of 2 idle cores: about 5.7 candidates/s there (goal >= 5, overhead < 0.2 s)
    """
    n = len(recs)
    timed = _mean(recs, "timed_s")
    per_slot = wall * width / n
    lines = [f"  {n} candidates on {width} slots in {wall:.1f} s: {n / wall:.2f} "
             "candidates/s (goal >= 5)",
             "  overhead = everything per candidate but the kernel's own timed runs "
             "(search, replay, build, load, check, timing calibration)",
             f"  wall per candidate: {wall / n:.3f} s (goal < 0.2 s) = its timed runs "
             f"{timed:.3f} s (serialised) + overhead {wall / n - timed:.3f} s beside "
             f"them; per slot {per_slot:.3f} s: build {_mean(recs, 'build_s'):.3f} s, "
             f"check + timing {_mean(recs, 'check_time_s'):.3f} s (under this machine's "
             "load)"]
    child, build = _mean(recs, "cpu_s"), _mean(recs, "build_cpu_s")
    check, timed_cpu = _mean(recs, "check_time_cpu_s"), _mean(recs, "timed_cpu_s")
    search = parent_cpu / n
    per = search + child
    overhead = per - timed_cpu
    # the timing is serialised per host: on idle cores its CPU bounds the rate too
    idle = min(width / per, 1 / check) if per > 0 and check > 0 else float("nan")
    lines.append(f"  CPU per candidate: {per:.3f} s = search {search:.3f} s + build "
                 f"{build:.3f} s + check + timing {check:.3f} s (timed runs {timed_cpu:.3f} s) "
                 f"+ rest of the child {child - build - check:.3f} s; overhead "
                 f"{overhead:.3f} s CPU, {overhead / width:.3f} s per candidate of "
                 f"{width} idle cores: about {idle:.1f} candidates/s there (goal >= 5, "
                 "overhead < 0.2 s)")
    return "\n".join(lines)


def use_cores(cores: int):
    """The llvm target pinned to ``cores`` (0: the host's), with Cuvil's launches and
    numpy's BLAS on as many threads: on a machine shared with other work, a run pinned
    to the cores nobody else uses (``taskset -c 0 ... --cores 1``) measures both sides
    without the others' noise.  The pool's processes inherit ``CUVIL_NUM_THREADS``.

    Example::

        >>> str(use_cores(0))     # the host's cores: nothing pinned
        'llvm'
    """
    if cores < 0:
        raise SystemExit(f"--cores: expected a count of cores >= 1 (0: the host's), "
                         f"found {cores}")
    if not cores:
        return targets.Target("llvm")
    from targets.llvm import threadpool
    os.environ["CUVIL_NUM_THREADS"] = str(cores)
    threadpool.set_num_threads(cores)
    setter = blas_thread_setter()
    if setter is None:
        raise SystemExit("--cores: cannot set numpy's BLAS threads (pip install threadpoolctl)")
    setter(cores)
    return targets.Target("llvm", num_cores=cores)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes, 8 trials each")
    p.add_argument("--trials", type=int, default=None, help="per task (default 200)")
    p.add_argument("--minutes", type=float, default=10.0, help="per task")
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--min-repeat-ms", type=float, default=50.0)
    p.add_argument("--only", nargs="*", default=None,
                   choices=("throughput", "gemm", "conv"))
    p.add_argument("--dtypes", nargs="*", default=list(DTYPES), help=" ".join(DTYPES))
    p.add_argument("--shapes", nargs="*", default=None,
                   help="GEMM labels and conv names to run (default: all)")
    p.add_argument("--db", default=None, help="directory of the databases (kept)")
    p.add_argument("--cores", type=int, default=0,
                   help="measure on this many cores: the target's num_cores, Cuvil's and "
                        "numpy's threads and the pool's slots (default: the host's); pin "
                        "the process to as many CPUs (taskset) to keep other work off them")
    opts = p.parse_args(argv)
    rc = bench_env.rerun_without_blas_overrides(__file__, argv)
    if rc is not None:
        return rc
    opts.trials = opts.trials or (8 if opts.quick else 200)
    if opts.quick:
        opts.repeat, opts.min_repeat_ms = 3, 5.0
    opts.db = opts.db or tempfile.mkdtemp(prefix="cuvil-bench-tune-")
    os.makedirs(opts.db, exist_ok=True)
    target = use_cores(opts.cores)
    from schedules.tune.space import machine_of
    machine = machine_of(target)
    measured = peaks(target)
    peak_of = {k: m["all threads"] * 1e9 for k, m in measured.items()}
    print(f"== {machine.name}: {machine.vector_bits}-bit vectors, {machine.cores} cores; "
          f"{peak_line(measured)}; numpy {np.__version__} on {blas_info()}; load {_load()}",
          flush=True)
    want = set(opts.only or ("throughput", "gemm", "conv"))
    if "throughput" in want:
        print("== throughput (cold compile cache)")
        throughput(opts, target)
    with local_executor(opts.cores or None) as ex:
        rows = []
        if "gemm" in want:
            print(f"== GEMM (<= {opts.trials} trials, <= {opts.minutes} min per task)")
            for label, m, n, k in QUICK_GEMMS if opts.quick else GEMMS:
                if opts.shapes and label not in opts.shapes:
                    continue
                for dtype in opts.dtypes:
                    rows.append(gemm_row(label, m, n, k, dtype, opts, target, ex, peak_of))
        convs = []
        if "conv" in want:
            print(f"== conv2d, ResNet-18 layers (<= {opts.trials} trials per task)")
            tasks = {t.name: t for t in load_tasks("resnet18")}
            if opts.quick:
                tasks = {"small": load_tasks({"tasks": [{"name": "small", "op": "conv2d",
                                                         "args": {"c": 16, "k": 16,
                                                                  "h": 14, "w": 14}}]})[0]}
            for name in tasks if opts.quick else CONV_NAMES:
                if opts.shapes and name not in opts.shapes and not opts.quick:
                    continue
                convs.append(conv_row(tasks[name], opts, target, ex))
    summary([r for r in rows if r], [c for c in convs if c], peak_of)
    return 0


def summary(rows, convs, peak_of=None):
    """The suite's verdicts against the issue's goals; for int8 and bf16 also which
    instruction the tuned GEMMs chose and what the CPU's measured dot-product peak is
    worth beside its FMA peak (``peak_of``: :func:`peaks`' kind -> operations/s), the
    bound on what a dot path can win."""
    peak_of = peak_of or {}
    print("== summary")
    fp32 = [r["ratio"] for r in rows if r["dtype"] == "float32"]
    if fp32:
        geo = math.exp(statistics.mean(math.log(x) for x in fp32))
        worst = min(rows, key=lambda r: r["ratio"] if r["dtype"] == "float32" else 1e9)
        print(f"  fp32 GEMM: geomean {geo:.2f}x numpy (goal >= 1.0), worst {worst['ratio']:.2f}x "
              f"({worst['label']}; goal >= 0.8), {sum(x < 0.8 for x in fp32)} of {len(fp32)} "
              "shapes below 0.8x")
    rate = {(r["label"], r["dtype"]): r["rate"] for r in rows}
    for dt in ("int8", "bfloat16"):
        pairs = [rate[(lb, dt)] / rate[(lb, "float32")] for lb, d in rate
                 if d == dt and (lb, "float32") in rate]
        if pairs:
            goal = " (goal >= 2.5x with VNNI)" if dt == "int8" else ""
            print(f"  {dt} GEMM operation rate / our fp32 rate: geomean "
                  f"{math.exp(statistics.mean(math.log(x) for x in pairs)):.2f}x{goal}; "
                  f"{dot_note(rows, dt, peak_of)}")
    if convs:
        geo = math.exp(statistics.mean(math.log(c["ratio"]) for c in convs))
        print(f"  conv2d: geomean {geo:.2f}x numpy im2col + matmul (goal >= 2x), worst "
              f"{min(c['ratio'] for c in convs):.2f}x")


def dot_note(rows, dtype, peak_of) -> str:
    """How many of ``dtype``'s tuned GEMMs run on its dot-product instruction, and
    that instruction's measured peak over the fp32 FMA's.

    Example::

        >>> dot_note([{"dtype": "bfloat16", "path": "fma"}], "bfloat16",
        ...          {"fp32": 400.0, "bf16": 200.0})
        'on vdpbf16ps 0 of 1 (its peak 0.50x the FMA peak)'
    """
    name, _, kind = DOT_PATHS[dtype]
    mine = [r for r in rows if r["dtype"] == dtype]
    on = sum(r["path"] == name for r in mine)
    ratio = (f"its peak {peak_of[kind] / peak_of['fp32']:.2f}x the FMA peak"
             if kind in peak_of and peak_of.get("fp32") else "no peak measured")
    return f"on {name} {on} of {len(mine)} ({ratio})"


if __name__ == "__main__":
    sys.exit(main())
