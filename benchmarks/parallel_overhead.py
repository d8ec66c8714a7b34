"""Launch overhead of the LLVM backend's thread pool, measured natively.

A JIT-compiled loop calls ``cuvil_parallel_launch`` on an empty task ``launches``
times and reads ``clock_gettime(CLOCK_MONOTONIC)`` around each call, so neither
Python nor ctypes is inside the measured interval.  "hot" launches follow each
other back to back (workers are still spinning); "cold" launches are separated by
a sleep longer than the spin phase (workers are blocked on the condition variable
and must be woken by the kernel).  On empty tasks the caller usually finishes every
block before a worker notices the job (it steals unclaimed blocks); "handoff" runs
force a worker to run the last task, measuring a full cross-thread round trip.

Run: ``python benchmarks/parallel_overhead.py [launches]`` (``--quick``, what CI runs:
200 launches)

Example::

    >>> stats = measure(launches=50, num_tasks=2)
    >>> stats["launches"]
    50
"""

from __future__ import annotations

import ctypes
import os
import sys
import time

import llvmlite.binding as llvm
import numpy as np

from targets.llvm import threadpool as tp
from targets.llvm.threadpool_ir import pause_ir

_IR = r"""
declare i32 @clock_gettime(i32, ptr)
declare i32 @usleep(i32)
declare i64 @pthread_self()
declare i32 @sched_yield()
@PAUSE_DECL@

; an (almost) empty task: it only records which thread ran it, in closure[t]
define internal i32 @empty(i32 %t, i32 %n, ptr %c) {
  %self = call i64 @pthread_self()
  %t64 = sext i32 %t to i64
  %p = getelementptr i64, ptr %c, i64 %t64
  store atomic i64 %self, ptr %p monotonic, align 8
  ret i32 0
}

; like @empty, but task 0 waits (up to ~10^7 pauses, yielding the core now and
; then) until the last task has run,
; so the caller cannot steal the workers' blocks: a forced cross-thread handoff
define internal i32 @handoff(i32 %t, i32 %n, ptr %c) {
entry:
  %r = call i32 @empty(i32 %t, i32 %n, ptr %c)
  %first = icmp eq i32 %t, 0
  br i1 %first, label %wait, label %done
wait:
  %n64 = sext i32 %n to i64
  %li = sub i64 %n64, 1
  %lp = getelementptr i64, ptr %c, i64 %li
  br label %spin
spin:
  %i = phi i32 [ 0, %wait ], [ %i1, %again ], [ %i1, %yield ]
  %v = load atomic i64, ptr %lp monotonic, align 8
  %ran = icmp ne i64 %v, 0
  %tired = icmp ugt i32 %i, 10000000
  %stop = or i1 %ran, %tired
  br i1 %stop, label %done, label %again
again:
  @PAUSE_CALL@
  %i1 = add i32 %i, 1
  %tick = and i32 %i1, 63
  %give = icmp eq i32 %tick, 0
  br i1 %give, label %yield, label %spin
yield:
  %y = call i32 @sched_yield()
  br label %spin
done:
  ret i32 0
}

define internal i64 @now() {
  %ts = alloca { i64, i64 }
  %r = call i32 @clock_gettime(i32 @CLOCK@, ptr %ts)
  %s = load i64, ptr %ts
  %nsp = getelementptr { i64, i64 }, ptr %ts, i32 0, i32 1
  %ns = load i64, ptr %nsp
  %s9 = mul i64 %s, 1000000000
  %t = add i64 %s9, %ns
  ret i64 %t
}

; out[i] = nanoseconds spent in launch i; spread[0] = launches whose last task
; ran on another thread than task 0; returns the number of failed launches
define i32 @bench(ptr %out, i32 %reps, i32 %n, i32 %gap_us, ptr %tids, ptr %spread,
                 i32 %handoff) {
entry:
  br label %head
head:
  %i = phi i32 [ 0, %entry ], [ %i1, %body ]
  %bad = phi i32 [ 0, %entry ], [ %bad1, %body ]
  %more = icmp slt i32 %i, %reps
  br i1 %more, label %gap, label %exit
gap:
  %sleep = icmp sgt i32 %gap_us, 0
  br i1 %sleep, label %nap, label %body
nap:
  %u = call i32 @usleep(i32 %gap_us)
  br label %body
body:
  %n64.0 = sext i32 %n to i64
  %clear.i = sub i64 %n64.0, 1
  %clear = getelementptr i64, ptr %tids, i64 %clear.i
  store atomic i64 0, ptr %clear monotonic, align 8
  %forced = icmp ne i32 %handoff, 0
  %task = select i1 %forced, ptr @handoff, ptr @empty
  %t0 = call i64 @now()
  %r = call i32 @cuvil_parallel_launch(ptr %task, ptr %tids, i32 %n)
  %t1 = call i64 @now()
  %first = load i64, ptr %tids
  %n64 = sext i32 %n to i64
  %lastp.i = sub i64 %n64, 1
  %lastp = getelementptr i64, ptr %tids, i64 %lastp.i
  %lastv = load i64, ptr %lastp
  %other = icmp ne i64 %first, %lastv
  %oz = zext i1 %other to i64
  %sp = load i64, ptr %spread
  %sp1 = add i64 %sp, %oz
  store i64 %sp1, ptr %spread
  %dt = sub i64 %t1, %t0
  %i64 = sext i32 %i to i64
  %slot = getelementptr i64, ptr %out, i64 %i64
  store i64 %dt, ptr %slot
  %f = icmp ne i32 %r, 0
  %fz = zext i1 %f to i32
  %bad1 = add i32 %bad, %fz
  %i1 = add i32 %i, 1
  br label %head
exit:
  ret i32 %bad
}
"""

_MODULE = None


def _bench_fn():
    global _MODULE
    if _MODULE is None:
        libc = ctypes.CDLL(None)
        for name in ("clock_gettime", "usleep", "pthread_self", "sched_yield"):
            llvm.add_symbol(name, ctypes.cast(getattr(libc, name), ctypes.c_void_p).value)
        decl, call = pause_ir(llvm.get_process_triple())
        text = (_IR.replace("@CLOCK@", str(time.CLOCK_MONOTONIC))
                .replace("@PAUSE_DECL@", decl).replace("@PAUSE_CALL@", call))
        _MODULE = tp.JitModule(text + tp.DECLARATIONS)
    sig = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32,
                           ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                           ctypes.c_int32)
    return sig(_MODULE.address("bench"))


def measure(launches: int = 10000, num_tasks: int | None = None, gap_us: int = 0,
            handoff: bool = False) -> dict:
    """Time ``launches`` empty launches of ``num_tasks`` tasks (default: all threads).

    With ``handoff``, task 0 waits for the last task, so a worker must run it: the
    time is then a full publish / wake / run / complete round trip between threads.

    Example::

        >>> measure(launches=20, num_tasks=1)["num_tasks"]
        1
    """
    fn = _bench_fn()
    n = tp.get_num_threads() if num_tasks is None else num_tasks
    if not 1 <= n <= 1 << 20:
        raise ValueError(f"measure: expected 1 <= num_tasks <= 2**20, got {n}")
    tids = np.zeros(n, np.int64)
    spread = np.zeros(1, np.int64)
    warm = np.zeros(16, np.int64)
    fn(warm.ctypes.data, 16, n, 0, tids.ctypes.data, spread.ctypes.data, 0)  # spawn workers
    spread[0] = 0
    out = np.zeros(launches, np.int64)
    failed = fn(out.ctypes.data, launches, n, gap_us, tids.ctypes.data, spread.ctypes.data,
                int(handoff))
    if failed:
        raise RuntimeError(f"{failed} empty launches reported an error")
    return {"launches": launches, "num_tasks": n, "num_threads": tp.get_num_threads(),
            "gap_us": gap_us, "handoff": handoff, "median_ns": float(np.median(out)),
            "p10_ns": float(np.percentile(out, 10)), "p90_ns": float(np.percentile(out, 90)),
            "min_ns": int(out.min()), "spread": int(spread[0]) / launches}


def format_stats(s: dict) -> str:
    """One line of a result table.

    Example::

        >>> format_stats({"num_threads": 2, "num_tasks": 2, "gap_us": 0,
        ...               "median_ns": 1500.0, "p10_ns": 900.0, "p90_ns": 3000.0,
        ...               "min_ns": 800, "launches": 10, "spread": 0.5})[:20]
        'threads  2 tasks    '
    """
    mode = ("handoff " if s.get("handoff") else "") + (
        "hot" if s["gap_us"] == 0 else f"cold (gap {s['gap_us']} us)")
    return (f"threads {s['num_threads']:2d} tasks {s['num_tasks']:4d} {mode:26s} "
            f"median {s['median_ns'] / 1e3:7.2f} us  p10 {s['p10_ns'] / 1e3:7.2f} us  "
            f"p90 {s['p90_ns'] / 1e3:7.2f} us  min {s['min_ns'] / 1e3:7.2f} us  "
            f"workers ran the last task in {100 * s['spread']:5.1f}% "
            f"({s['launches']} launches)")


def main(launches: int = 10000) -> None:
    tp.ensure_loaded()
    default = tp.get_num_threads()
    print(f"cuvil_parallel_launch overhead, empty task, {os.cpu_count()} CPUs")
    for threads in sorted({1, 2, default}):
        tp.set_num_threads(threads)
        few = max(launches // 50, 20)
        print(format_stats(measure(launches, num_tasks=threads)))
        print(format_stats(measure(few, num_tasks=threads, gap_us=2000)))
        if threads > 1:
            print(format_stats(measure(launches, num_tasks=threads, handoff=True)))
            print(format_stats(measure(few, num_tasks=threads, gap_us=2000, handoff=True)))
    tp.set_num_threads(default)


if __name__ == "__main__":
    arg = sys.argv[1] if len(sys.argv) > 1 else "10000"
    main(200 if arg == "--quick" else int(arg))
