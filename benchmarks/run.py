"""Side-by-side CPU benchmarks: our kernels against numpy, in one process, interleaved.

Run:  python benchmarks/run.py [--quick] [--json FILE]

Workloads: fp32 GEMM 512^3, 1024^3 and 2048^3 on one thread and on all threads
(tutorial 04's schedule; numpy's OpenBLAS limited to the same count), a 3x3 conv2d
(N=1, C=K=64, 56x56, pad 1; numpy: im2col + matmul), the elementwise
``exp(x) * y + z`` on 16M floats (GB/s, beside numpy and a measured copy bandwidth),
a row softmax (2048 x 1024), and an int4 dequantization (4M packed words: shifts,
masks and a scale per group; GB/s beside a measured copy of the output's size).  Every
kernel is built with the default fast-math setting (``contract`` only): ``exp`` runs
in vector registers within 1 ulp (``targets.llvm.vector_math``), and the softmax's
max and sum loops opt in to reassociation one by one (annotation ``pragma_reassoc``),
so LLVM keeps their partial results in vector lanes.  Each figure is the
median of ``--repeat`` runs, ours and numpy's alternating so both see the same machine load;
the spread is min..max.  Every kernel's result is checked against numpy first.
Each timed call is preceded by a ``--settle`` pause (0.15 s): OpenBLAS's worker
threads busy-wait about 0.1 s after every call, and on a 2-core machine that spinning
thread would otherwise take a core from our next call.

Also reported: the machine's fp32 peak, measured with a kernel built by our own
backend (independent FMA chains in the target's widest vector registers: 8 floats
on AVX2, 16 on AVX-512; one chain set per
thread), so each GFLOP/s figure is also a fraction of peak; each kernel's build
time; and the call overhead (argument checks + ctypes) of a one-element kernel.

The peak is measured for each thread count a row uses, with enough work per thread
(tens of milliseconds) and back-to-back launches that every thread of the pool takes
part; a multi-thread peak below 1.3x the one-thread peak is reported (a busy machine)
and the rows that use it show their fraction of peak with a ``?``.  A comparison whose
interleaved repeats spread by more than :data:`NOISY` of their median (ours or numpy's)
is flagged ``noisy`` in place of its ratio: on a loaded machine a ratio is no result.

``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE``: where the environment sets them, they slow
a current numpy; the benchmark re-runs itself without them (``bench_env``).  It reports
which BLAS and which kernel numpy runs (through threadpoolctl: ``pip install
'cuvil[bench]'``).
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir import Allocate, BufferStore, For, PrimFunc, seq

try:
    from benchmarks import bench_env
except ImportError:          # run as a script: benchmarks/ is on sys.path
    import bench_env

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: a comparison whose (max - min) / median exceeds this, on either side, is noisy
NOISY = 0.25
#: a multi-thread peak below this multiple of the one-thread peak is suspect
SCALING = 1.3


def _tutorial04():
    spec = importlib.util.spec_from_file_location(
        "tutorial04", ROOT / "tutorials" / "04_fast_matmul_cpu.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _stats(ts):
    ts = sorted(ts)
    return {"median": float(np.median(ts)), "min": ts[0], "max": ts[-1], "n": len(ts)}


#: seconds to wait before each timed call, so the other side's threads are idle
#: (OpenBLAS workers busy-wait about 2**28 cycles, ~0.1 s, after every call)
SETTLE_S = 0.15


def interleaved(ours, theirs, repeat, settle=None):
    """Run ``ours()`` and ``theirs()`` alternately; seconds per call of each.

    Before each timed call the benchmark sleeps ``settle`` seconds: on a machine
    with few cores, a BLAS worker still spinning from numpy's last call would
    otherwise take a core from our next call (and ours, briefly, from numpy's).

    Example::

        >>> s_ours, s_np = interleaved(lambda: None, lambda: None, 3, settle=0)
        >>> s_ours["n"], s_np["n"]
        (3, 3)
    """
    return tuple(interleaved_all([ours, theirs], repeat, settle))


def interleaved_all(fns, repeat, settle=None, warm_s=0.0):
    """:func:`interleaved` for any number of functions: each called in turn,
    ``repeat`` rounds; the statistics of each.

    With ``warm_s`` > 0 a sample is warm: after the settle, one untimed call (caches
    and threads warmed), then as many calls as fill ``warm_s`` seconds, and the sample
    is their mean (TVM's ``time_evaluator`` with ``number`` > 1).  Without, a sample is
    one call after the settle: cold caches, a kernel's first-call cost.

    Example::

        >>> [s["n"] for s in interleaved_all([lambda: None] * 3, 2, settle=0)]
        [2, 2, 2]
        >>> interleaved_all([lambda: None], 1, settle=0, warm_s=0.001)[0]["n"]
        1
    """
    settle = SETTLE_S if settle is None else settle
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, out in zip(fns, times):
            time.sleep(settle)
            if warm_s > 0:
                fn()
            calls, t0 = 0, time.perf_counter()
            while True:
                fn()
                calls += 1
                spent = time.perf_counter() - t0
                if spent >= warm_s:
                    break
            out.append(spent / calls)
    return [_stats(t) for t in times]


def timed_build(sch, name, target="llvm"):
    t0 = time.perf_counter()
    mod = targets.build(sch, target, name=name)
    return mod, time.perf_counter() - t0


# peak ------------------------------------------------------------------------------------

#: per kind of peak kernel: (accumulator dtype, dtype of A's group and of B, elements
#: per 32-bit lane and step); fp32 is an FMA, int8 a vpdpbusd, bf16 a vdpbf16ps
PEAK_KINDS = {"fp32": ("float32", "float32", "float32", 1),
              "int8": ("int32", "uint8", "int8", 4), "bf16": ("float32", "bfloat16",
                                                             "bfloat16", 2)}


def peak_kernel(threads: int, lanes_per_vec: int, chains: int = 12, reps: int = 400000,
                kind: str = "fp32"):
    """A lowered kernel: per thread, ``chains`` independent chains of ``lanes_per_vec``
    32-bit lanes (the target's widest vector: 8 on AVX2, 16 on AVX-512) of FMAs
    (``kind="fp32"``), or of ``vpdpbusd`` (``"int8"``: 4 multiply-adds per lane) or
    ``vdpbf16ps`` (``"bf16"``: 2 per lane); returns it and the operations it does
    (a multiply-add is 2).

    >>> func, flops = peak_kernel(1, 16, chains=2, reps=10)
    >>> func.params[1].shape[0].value, flops
    (32, 640.0)
    >>> peak_kernel(1, 16, chains=2, reps=10, kind="int8")[1]
    2560.0
    """
    from cuvil_tir.expr import Ramp
    from cuvil_tir.ops.dot import dpbf16ps, dpbusd
    w = lanes_per_vec
    acc_t, a_t, b_t, per = PEAK_KINDS[kind]
    X = T.decl_buffer((w * per,), b_t, "X")
    O = T.decl_buffer((threads * chains * w,), acc_t, "O")
    acc = T.decl_buffer((chains * w,), acc_t, "acc", scope="local")
    p, r = T.var("p"), T.var("r")
    v = [T.var(n) for n in ("c0", "l0", "c1", "l1", "c2", "l2")]

    def lanes(c, l, store):
        return For(c, T.const(0), T.const(chains), "unrolled",
                   For(l, T.const(0), T.const(w), "vectorized", store(c * w + l, l)))

    def step(c):
        vec = Ramp(c * w, T.const(1), w)
        group = Ramp(T.const(0), T.const(1), per)
        fn = dpbusd if kind == "int8" else dpbf16ps
        a = T.cast(X[group], f"{a_t}x{per}")
        return BufferStore(acc, fn(acc[vec], a, X[Ramp(T.const(0), T.const(1), w * per)]),
                           (vec,))

    if kind == "fp32":
        update = lanes(v[2], v[3], lambda ix, l: BufferStore(
            acc, T.fma(acc[ix], X[l], T.const(1e-7)), (ix,)))
    else:
        update = For(v[2], T.const(0), T.const(chains), "unrolled", step(v[2]))
    body = For(p, T.const(0), T.const(threads), "parallel", Allocate(acc, seq(
        lanes(v[0], v[1], lambda ix, l: BufferStore(acc, T.cast(X[l], acc_t), (ix,))),
        For(r, T.const(0), T.const(reps), "serial", update),
        lanes(v[4], v[5], lambda ix, l: BufferStore(
            O, acc[ix], (p * (chains * w) + ix,))))))
    flops = 2.0 * threads * chains * w * per * reps
    return PrimFunc([X, O], body, {"global_symbol": "peak"}), flops


def measure_peak(repeat, target=None, reps=None, kind="fp32"):
    """Peak of ``target`` in G operations/s (a multiply-add is 2) on one thread and on
    all the pool's threads, from chains as wide as its vectors of FMAs
    (``kind="fp32"``), ``vpdpbusd`` (``"int8"``) or ``vdpbf16ps`` (``"bf16"``)
    (:func:`peak_kernel`); ``"scaling"``: the second over the first.

    Each thread's share lasts tens of milliseconds and each sample is three launches
    back to back: a worker still asleep when a short launch starts would see the
    caller take its share (the pool lets idle threads' blocks be stolen), and the
    "all threads" peak would be the one-thread figure.
    """
    from targets.llvm import cpu_info, threadpool
    target = target or targets.Target("llvm")
    info = cpu_info(target)
    w = info.lanes("float32")
    # a chain per spare register keeps every FMA port busy (latency x throughput)
    chains = max(4, min(12, info.vector_registers - 4))
    acc_t, _, b_t, per = PEAK_KINDS[kind]
    # the same operations per launch whatever the kind: a dot step does `per` of them
    reps = (reps or 4_000_000) // per
    out = {"lanes": w, "threads": threadpool.get_num_threads()}
    for label, threads in (("1 thread", 1), ("all threads", out["threads"])):
        func, flops = peak_kernel(threads, w, chains, reps=reps, kind=kind)
        mod, _ = timed_build(func, f"peak_{kind}{threads}", target)
        x = np.ones(w * per, "uint16" if b_t == "bfloat16" else b_t)
        o = np.zeros(threads * chains * w, acc_t)
        mod(x, o)
        best = min(mod.benchmark(x, o, repeat=1, number=3).median for _ in range(repeat))
        out[label] = flops / best / 1e9
    out["scaling"] = out["all threads"] / out["1 thread"]
    return out


@functools.lru_cache(maxsize=None)
def blas_thread_setter():
    """OpenBLAS's ``*_set_num_threads`` of the library numpy loaded, or None.

    threadpoolctl does this properly; without it, the symbol is looked up in the
    OpenBLAS shared object mapped into this process (Linux ``/proc/self/maps``).
    """
    try:
        from threadpoolctl import threadpool_limits
        return lambda n: threadpool_limits(n, user_api="blas")
    except ImportError:
        pass
    import ctypes
    np.ones(2) @ np.ones(2)   # make sure the BLAS is loaded
    try:
        paths = {line.split()[-1] for line in open("/proc/self/maps")
                 if "openblas" in line.lower() and line.rstrip().endswith(".so")}
    except OSError:
        return None
    for path in sorted(paths):
        lib = ctypes.CDLL(path)
        for name in ("openblas_set_num_threads", "openblas_set_num_threads64_",
                     "scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads"):
            if hasattr(lib, name):
                fn = getattr(lib, name)
                fn.argtypes = [ctypes.c_int]
                return fn
    return None


def bench_gemm(n, thread_counts, repeat, rng):
    """GEMM ``n^3`` (built once) on each of ``thread_counts`` threads, ours and numpy's
    BLAS limited to the same count; one result per count."""
    from targets.llvm import threadpool
    t04 = _tutorial04()
    mod, build_s = timed_build(t04.gemm_schedule(n, n, n), f"gemm{n}")
    a = rng.standard_normal((n, n)).astype("float32")
    b = rng.standard_normal((n, n)).astype("float32")
    c = np.zeros((n, n), "float32")
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=2e-4, atol=5e-3)
    setter, old = blas_thread_setter(), threadpool.get_num_threads()
    results = []
    for threads in thread_counts:
        threadpool.set_num_threads(threads)
        if setter is not None:
            setter(threads)
        try:
            ours, theirs = interleaved(lambda: mod(a, b, c), lambda: a @ b, repeat)
        finally:
            threadpool.set_num_threads(old)
            if setter is not None:
                setter(os.cpu_count() or 1)
        label = f"{threads} thread" + ("s" if threads > 1 else "")
        if setter is None and threads != (os.cpu_count() or 1):
            label += ", numpy: all"
        results.append({"name": f"gemm fp32 {n}^3 ({label})", "flops": 2.0 * n ** 3,
                        "ours": ours, "numpy": theirs, "build_s": build_s,
                        "threads": threads})
    return results

def conv_schedule(C=64, K=64, H=56, W=56, kv=16, wt=4):
    """3x3 conv, stride 1, pad 1, NCHW (N=1).

    Weights are packed with 16 output channels innermost (``Wp``); a register tile is
    16 output channels (two 8-wide vectors) x 4 output columns, kept in a ``local``
    buffer laid out channel-innermost (``transform_layout``), so every step is two
    weight vector loads, four input broadcasts and eight FMAs.
    """
    data = T.placeholder((C, H, W), name="data")
    weight = T.placeholder((K, C, 3, 3), name="weight")
    pad = T.compute((C, H + 2, W + 2), lambda c, h, w: T.if_then_else(
        (h >= 1) & (h <= H) & (w >= 1) & (w <= W), data[c, h - 1, w - 1], T.const(0.0)),
        name="pad")
    Wp = T.compute((K // kv, C, 3, 3, kv), lambda ko, c, r, s, ki: weight[ko * kv + ki, c, r, s],
                   name="Wp")
    rc, rh, rw = (T.reduce_axis((0, C), name="rc"), T.reduce_axis((0, 3), name="rh"),
                  T.reduce_axis((0, 3), name="rw"))
    out = T.compute((K, H, W), lambda k, h, w: T.sum(
        pad[rc, h + rh, w + rw] * Wp[k // kv, rc, rh, rw, k % kv], axis=[rc, rh, rw]),
        name="out")
    sch = S.Schedule(T.create_prim_func([data, weight, out]))
    blk = sch.get_block("out")
    k, h, w, c, r, s = sch.get_loops(blk)
    ko, ki = sch.split(k, [None, kv])
    wo, wi = sch.split(w, [None, wt])
    sch.reorder(ko, h, wo, c, r, s, wi, ki)
    cl = sch.cache_write(blk, 0, "local")
    sch.transform_layout(blk, 0, lambda k, h, w: (h, w, k))   # channels innermost
    sch.reverse_compute_at(cl, wo)
    sch.decompose_reduction(blk, c)
    for name in ("out_init", "out"):
        loops = sch.get_loops(sch.get_block(name))
        sch.unroll(loops[-2])
        sch.vectorize(loops[-1])
    loops = sch.get_loops(sch.get_block("out_local"))
    sch.unroll(loops[-3])
    sch.vectorize(loops[-1])            # 4 contiguous output columns per channel
    sch.parallel(sch.get_loops(blk)[0])
    sch.parallel(sch.get_loops(sch.get_block("pad"))[0])
    return sch


def bench_conv(repeat, rng):
    C = K = 64
    H = W = 56
    mod, build_s = timed_build(conv_schedule(C, K, H, W), "conv3x3")
    x = rng.standard_normal((C, H, W)).astype("float32")
    wt = rng.standard_normal((K, C, 3, 3)).astype("float32")
    y = np.zeros((K, H, W), "float32")

    def numpy_conv():
        xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
        cols = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(1, 2))
        cols = cols.transpose(0, 3, 4, 1, 2).reshape(C * 9, H * W)   # im2col
        return (wt.reshape(K, C * 9) @ cols).reshape(K, H, W)

    mod(x, wt, y)
    np.testing.assert_allclose(y, numpy_conv(), rtol=1e-3, atol=1e-3)
    ours, theirs = interleaved(lambda: mod(x, wt, y), numpy_conv, repeat)
    return {"name": "conv2d 3x3 64->64 56x56", "flops": 2.0 * K * C * 9 * H * W,
            "ours": ours, "numpy": theirs, "build_s": build_s}


def elementwise_schedule(n):
    X, Y, Z = (T.placeholder((n,), name=s) for s in "XYZ")
    O = T.compute((n,), lambda i: T.exp(X[i]) * Y[i] + Z[i], name="O")
    sch = S.Schedule(T.create_prim_func([X, Y, Z, O]))
    (i,) = sch.get_loops(sch.get_block("O"))
    # 1024 elements per parallel task (fewer task calls than one 64-wide vector
    # step each: 33 vs 29.5 GB/s), and streaming stores for O: it is written once
    # and not read back, so skipping its read-for-ownership saves a fifth of the
    # memory traffic (26-27 -> 29.5 GB/s at 64 per task)
    io, im, ii = sch.split(i, [None, 16, 64])
    sch.parallel(io)
    sch.vectorize(ii)
    sch.annotate(io, "pragma_nontemporal", 1)
    return sch


def bench_elementwise(n, repeat, rng):
    target = targets.Target("llvm")     # exp in vector registers (vector_math)
    mod, build_s = timed_build(elementwise_schedule(n), "exp_mul_add", target)
    x, y, z = (rng.standard_normal(n).astype("float32") for _ in range(3))
    o = np.empty(n, "float32")
    mod(x, y, z, o)
    np.testing.assert_allclose(o, np.exp(x) * y + z, rtol=1e-5, atol=1e-5)
    ours, theirs = interleaved(lambda: mod(x, y, z, o), lambda: np.exp(x) * y + z, repeat)
    dst = np.empty_like(x)
    copy = _stats([_time(lambda: np.copyto(dst, x)) for _ in range(repeat)])
    return {"name": f"exp(x)*y+z {n >> 20}M fp32", "bytes": 16.0 * n, "ours": ours,
            "numpy": theirs, "build_s": build_s, "copy_gbs": 8.0 * n / copy["median"] / 1e9}


def int4_unpack_schedule(words, group=16):
    """int4 weights (8 per int32 word, low nibble first, offset 8) times a scale per
    ``group`` words: a quantized GEMM's dequantization prologue."""
    W = T.placeholder((words,), "int32", name="W")
    Sc = T.placeholder((words // group,), name="Sc")
    Q = T.compute((words, 8), lambda w, k: T.Cast(
        "float32", ((W[w] >> (k * 4)) & 15) - 8) * Sc[w // group], name="Q")
    sch = S.Schedule(T.create_prim_func([W, Sc, Q]))
    w, k = sch.get_loops(sch.get_block("Q"))
    wo, _, wi = sch.split(w, [None, 64, 4])
    sch.parallel(wo)
    sch.unroll(wi)
    sch.vectorize(k)           # one word's 8 nibbles: a vector shift by (0, 4, ..., 28)
    return sch


def bench_int4_unpack(words, repeat, rng, group=16):
    mod, build_s = timed_build(int4_unpack_schedule(words, group), "int4_unpack")
    w = rng.integers(-2**31, 2**31 - 1, words, dtype="int32")
    sc = rng.standard_normal(words // group).astype("float32")
    q = np.empty((words, 8), "float32")
    shifts = np.arange(8, dtype="int32") * 4

    def numpy_unpack():
        nib = ((w[:, None] >> shifts) & 15) - 8
        return nib.astype(np.float32) * np.repeat(sc, group)[:, None]
    mod(w, sc, q)
    np.testing.assert_array_equal(q, numpy_unpack())
    ours, theirs = interleaved(lambda: mod(w, sc, q), numpy_unpack, repeat)
    dst = np.empty_like(q)
    src = np.ones_like(q)
    copy = _stats([_time(lambda: np.copyto(dst, src)) for _ in range(repeat)])
    return {"name": f"int4 unpack {words * 8 >> 20}M values", "bytes": 36.0 * words,
            "ours": ours, "numpy": theirs, "build_s": build_s,
            "copy_gbs": 64.0 * words / copy["median"] / 1e9}


def _time(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def softmax_schedule(rows, cols):
    X = T.placeholder((rows, cols), name="X")
    k1, k2 = T.reduce_axis((0, cols), name="k1"), T.reduce_axis((0, cols), name="k2")
    M = T.compute((rows,), lambda i: T.max(X[i, k1], axis=k1), name="M")
    E = T.compute((rows, cols), lambda i, j: T.exp(X[i, j] - M[i]), name="E")
    Ssum = T.compute((rows,), lambda i: T.sum(E[i, k2], axis=k2), name="S")
    Y = T.compute((rows, cols), lambda i, j: E[i, j] / Ssum[i], name="Y")
    sch = S.Schedule(T.create_prim_func([X, Y]))
    y = sch.get_block("Y")
    i, j = sch.get_loops(y)
    for name in ("S", "E", "M"):
        sch.compute_at(sch.get_block(name), i)
    for name in ("E", "Y"):
        sch.vectorize(sch.get_loops(sch.get_block(name))[-1])
    for name in ("M", "S"):     # the reductions may reorder: partial results in lanes
        sch.annotate(sch.get_loops(sch.get_block(name))[-1], "pragma_reassoc", 1)
    sch.parallel(i)
    return sch


def bench_softmax(rows, cols, repeat, rng):
    target = targets.Target("llvm")
    mod, build_s = timed_build(softmax_schedule(rows, cols), "softmax", target)
    x = rng.standard_normal((rows, cols)).astype("float32")
    y = np.empty_like(x)

    def numpy_softmax():
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    mod(x, y)
    np.testing.assert_allclose(y, numpy_softmax(), rtol=1e-5, atol=1e-7)
    ours, theirs = interleaved(lambda: mod(x, y), numpy_softmax, repeat)
    return {"name": f"softmax rows {rows}x{cols}", "bytes": 8.0 * rows * cols,
            "ours": ours, "numpy": theirs, "build_s": build_s}


def call_overhead(repeat):
    A = T.placeholder((1,), name="A")
    B = T.compute((1,), lambda i: A[i] + 1.0, name="B")
    mod, _ = timed_build(T.create_prim_func([A, B]), "tiny")
    a, b = np.zeros(1, "float32"), np.zeros(1, "float32")
    return min(mod.benchmark(a, b, repeat=repeat, number=2000).median for _ in range(3))


# report ------------------------------------------------------------------------------------

def blas_info() -> str:
    """The BLAS numpy calls and the kernel it picked for this CPU (threadpoolctl's
    ``architecture``: ``Haswell``, ``SkylakeX``, ``Zen`` ...), and its threads.

    >>> isinstance(blas_info(), str)
    True
    """
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        cfg = np.show_config(mode="dicts") if "mode" in np.show_config.__code__.co_varnames \
            else {}
        blas = cfg.get("Build Dependencies", {}).get("blas", {}) if cfg else {}
        return (f"{blas.get('name', '?')} {blas.get('version', '')} (kernel unknown: "
                "pip install 'cuvil[bench]' for threadpoolctl)")
    libs = [f"{i.get('internal_api')} {i.get('version')}, kernel "
            f"{i.get('architecture') or '?'}, {i.get('num_threads')} threads"
            for i in threadpool_info() if i.get("user_api") == "blas"]
    return "; ".join(libs) or "no BLAS found"


_CACHE_CHILD = """
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("t04", sys.argv[1])
t04 = importlib.util.module_from_spec(spec); spec.loader.exec_module(t04)
import targets
sch = t04.gemm_schedule(1024, 1024, 1024)
t0 = time.perf_counter(); mod = targets.build(sch, t04.TARGET, name="gemm")
print(time.perf_counter() - t0, mod.from_cache)
"""


def measure_cache_build():
    """Build tutorial 04's GEMM in two fresh processes sharing an empty compile
    cache: ``(cold seconds, warm seconds, cache bytes)``."""
    import tempfile
    path = str(pathlib.Path(__file__).resolve().parent.parent / "tutorials" /
               "04_fast_matmul_cpu.py")
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "CUVIL_CACHE_DIR": d, "CUVIL_CACHE": "1"}
        times = []
        for _ in range(2):
            out = subprocess.run([sys.executable, "-c", _CACHE_CHILD, path], env=env,
                                 capture_output=True, text=True, check=True).stdout.split()
            times.append(float(out[0]))
        size = sum(f.stat().st_size for f in pathlib.Path(d).rglob("*") if f.is_file())
    return times[0], times[1], size


def spread(stats) -> float:
    """``(max - min) / median`` of a :func:`_stats` result.

    >>> spread({"median": 2.0, "min": 1.5, "max": 2.5, "n": 3})
    0.5
    """
    return (stats["max"] - stats["min"]) / stats["median"]


def report(results, peak, overhead, info, cache=None):
    print(f"numpy {np.__version__}, BLAS: {info}")
    threads = peak["threads"]
    print(f"fp32 peak (our {peak['lanes']}-lane FMA kernel): "
          f"{peak['1 thread']:.1f} GFLOP/s on 1 thread, "
          f"{peak['all threads']:.1f} GFLOP/s on {threads} threads "
          f"({peak['scaling']:.2f}x)")
    doubtful = threads > 1 and peak["scaling"] < SCALING
    if doubtful:
        print(f"  the {threads}-thread peak is only {peak['scaling']:.2f}x the one-thread "
              "peak: other processes use the cores (or they share FMA units); the "
              "peak% of multi-thread rows is marked ?")
    print(f"call overhead (1-element kernel, checks + ctypes): {overhead * 1e6:.2f} us")
    if cache is not None:
        cold, warm, size = cache
        print(f"build of tutorial 04's GEMM 1024^3 in a new process: {cold * 1e3:.0f} ms "
              f"cold, {warm * 1e3:.1f} ms from the compile cache ({cold / warm:.0f}x; "
              f"entry {size / 1e3:.0f} kB)")
    print(f"{'workload':36s} {'cuvil':>16s} {'numpy':>16s} {'ratio':>6s} {'peak%':>7s} "
          f"{'spread ours/numpy':>18s} {'build':>7s}")
    noisy = []
    for r in results:
        o, n = r["ours"]["median"], r["numpy"]["median"]
        if "flops" in r:
            unit, ours, theirs = "GFLOP/s", r["flops"] / o / 1e9, r["flops"] / n / 1e9
            one = r.get("threads") == 1
            ref = peak["1 thread"] if one else peak["all threads"]
            # a fraction above 100% means the peak measurement was disturbed
            frac = f"{100 * ours / ref:5.1f}%" + \
                ("?" if (doubtful and not one) or ours > ref else "")
        else:
            unit, ours, theirs = "GB/s", r["bytes"] / o / 1e9, r["bytes"] / n / 1e9
            frac = "-"
        wide = max(spread(r["ours"]), spread(r["numpy"]))
        r.update(ours_rate=ours, numpy_rate=theirs, unit=unit, ratio=n / o,
                 noisy=wide > NOISY)
        ratio = "noisy" if r["noisy"] else f"{n / o:6.2f}"
        if r["noisy"]:
            noisy.append(r["name"])
        spreads = f"{100 * spread(r['ours']):4.0f}% /{100 * spread(r['numpy']):4.0f}%"
        print(f"{r['name']:36s} {ours:8.1f} {unit:7s} {theirs:8.1f} {unit:7s} "
              f"{ratio:>6s} {frac:>7s} {spreads:>18s} {r['build_s']:6.2f}s")
        if "copy_gbs" in r:
            print(f"{'':36s} copy bandwidth (numpy copyto): {r['copy_gbs']:.1f} GB/s; ours "
                  f"is {100 * ours / r['copy_gbs']:.0f}% of it")
    if noisy:
        print(f"noisy: {len(noisy)} comparison(s) whose repeats spread by more than "
              f"{100 * NOISY:.0f}% of their median ({', '.join(noisy)}): no ratio is shown "
              "for them; run again on an idle machine, or with more --repeat")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="fewer repeats, smaller sizes (GEMM 512^3 only)")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--settle", type=float, default=SETTLE_S,
                    help="seconds of idle before each timed call (default %(default)s)")
    args = ap.parse_args(argv)
    rc = bench_env.rerun_without_blas_overrides(__file__, argv)
    if rc is not None:
        return rc
    repeat = args.repeat or (3 if args.quick else 7)
    globals()["SETTLE_S"] = args.settle
    rng = np.random.default_rng(0)
    peak = measure_peak(repeat, reps=1_000_000 if args.quick else None)
    results = []
    threads = sorted({1, peak["threads"]})
    for n in [512] + ([] if args.quick else [1024, 2048]):
        results.extend(bench_gemm(n, threads, repeat, rng))
    results.append(bench_conv(repeat, rng))
    results.append(bench_elementwise((1 << 22) if args.quick else (1 << 24), repeat, rng))
    results.append(bench_softmax(2048, 1024, repeat, rng))
    results.append(bench_int4_unpack((1 << 19) if args.quick else (1 << 22), repeat, rng))
    overhead = call_overhead(repeat)
    report(results, peak, overhead, blas_info(), measure_cache_build())
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(
            {"peak_gflops": peak, "call_overhead_s": overhead, "results": results,
             "numpy": np.__version__, "cpu_count": os.cpu_count(), "blas": blas_info()},
            indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
