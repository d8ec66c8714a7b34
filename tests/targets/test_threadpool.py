"""The native thread pool, driven by hand-written LLVM IR kernels.

Each kernel's task records, per task id, how often it ran (atomic add), which OS
thread ran it (``pthread_self``) and the sum of its range ``[100 t, 100 t + 100)``;
the closure is an int64 array of pointers and parameters (layout in ``_Closure``).
"""

import ctypes
import os
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import llvmlite.binding as llvm

from cuvil_tir.errors import TargetError
from targets.llvm import threadpool as tp

KERNELS = r"""
declare i64 @pthread_self()
declare i32 @usleep(i32)

; closure (i64 slots): 0 counts(i32*), 1 tids(i64*), 2 sums(i64*), 3 fail_at,
; 4 inner_n, 5 outer tids(i64*), 6 naps(i32*: microseconds task t sleeps, or 0)
define i32 @record(i32 %t, i32 %n, ptr %c) {
entry:
  %t64 = sext i32 %t to i64
  %counts = load ptr, ptr %c
  %cp = getelementptr i32, ptr %counts, i64 %t64
  %old = atomicrmw add ptr %cp, i32 1 seq_cst
  %tids.s = getelementptr i64, ptr %c, i64 1
  %tids = load ptr, ptr %tids.s
  %tp = getelementptr i64, ptr %tids, i64 %t64
  %self = call i64 @pthread_self()
  store i64 %self, ptr %tp
  %lo = mul i64 %t64, 100
  %hi = add i64 %lo, 100
  br label %head
head:
  %k = phi i64 [ %lo, %entry ], [ %k1, %body ]
  %acc = phi i64 [ 0, %entry ], [ %acc1, %body ]
  %more = icmp slt i64 %k, %hi
  br i1 %more, label %body, label %exit
body:
  %acc1 = add i64 %acc, %k
  %k1 = add i64 %k, 1
  br label %head
exit:
  %sums.s = getelementptr i64, ptr %c, i64 2
  %sums = load ptr, ptr %sums.s
  %sp = getelementptr i64, ptr %sums, i64 %t64
  store i64 %acc, ptr %sp
  %naps.s = getelementptr i64, ptr %c, i64 6
  %naps = load ptr, ptr %naps.s
  %np = getelementptr i32, ptr %naps, i64 %t64
  %us = load i32, ptr %np
  %is.slow = icmp ne i32 %us, 0
  br i1 %is.slow, label %nap, label %check
nap:
  %u = call i32 @usleep(i32 %us)
  br label %check
check:
  %fail.s = getelementptr i64, ptr %c, i64 3
  %fail = load i64, ptr %fail.s
  %bad = icmp eq i64 %fail, %t64
  %rc = select i1 %bad, i32 42, i32 0
  ret i32 %rc
}

; nested: outer task t launches inner_n tasks writing slot t*inner_n + i
define internal i32 @inner(i32 %i, i32 %m, ptr %frame) {
entry:
  %c = load ptr, ptr %frame
  %t.s = getelementptr { ptr, i32 }, ptr %frame, i32 0, i32 1
  %t = load i32, ptr %t.s
  %base = mul i32 %t, %m
  %slot = add i32 %base, %i
  %r = call i32 @record(i32 %slot, i32 %m, ptr %c)
  ret i32 %r
}

define i32 @outer(i32 %t, i32 %n, ptr %c) {
entry:
  %frame = alloca { ptr, i32 }
  store ptr %c, ptr %frame
  %t.s = getelementptr { ptr, i32 }, ptr %frame, i32 0, i32 1
  store i32 %t, ptr %t.s
  %ots = getelementptr i64, ptr %c, i64 5
  %ot = load ptr, ptr %ots
  %t64 = sext i32 %t to i64
  %op = getelementptr i64, ptr %ot, i64 %t64
  %self = call i64 @pthread_self()
  store i64 %self, ptr %op
  %m.s = getelementptr i64, ptr %c, i64 4
  %m64 = load i64, ptr %m.s
  %m = trunc i64 %m64 to i32
  %r = call i32 @cuvil_parallel_launch(ptr @inner, ptr %frame, i32 %m)
  ret i32 %r
}

define i32 @run(ptr %c, i32 %n) {
entry:
  %r = call i32 @cuvil_parallel_launch(ptr @record, ptr %c, i32 %n)
  ret i32 %r
}

define i32 @run_nested(ptr %c, i32 %n) {
entry:
  %r = call i32 @cuvil_parallel_launch(ptr @outer, ptr %c, i32 %n)
  ret i32 %r
}

; reps launches of n tasks from native code; returns the number that failed
define i32 @repeat(ptr %c, i32 %n, i32 %reps) {
entry:
  br label %head
head:
  %i = phi i32 [ 0, %entry ], [ %i1, %body ]
  %bad = phi i32 [ 0, %entry ], [ %bad1, %body ]
  %more = icmp slt i32 %i, %reps
  br i1 %more, label %body, label %exit
body:
  %r = call i32 @cuvil_parallel_launch(ptr @record, ptr %c, i32 %n)
  %f = icmp ne i32 %r, 0
  %fz = zext i1 %f to i32
  %bad1 = add i32 %bad, %fz
  %i1 = add i32 %i, 1
  br label %head
exit:
  ret i32 %bad
}
"""

_SIG = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32)
_REPEAT = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32)


@pytest.fixture(scope="module")
def kernels():
    tp.ensure_loaded()
    libc = ctypes.CDLL(None)
    for name in ("pthread_self", "usleep"):
        llvm.add_symbol(name, ctypes.cast(getattr(libc, name), ctypes.c_void_p).value)
    module = tp.JitModule(KERNELS + tp.DECLARATIONS)
    return {
        "module": module,
        "run": _SIG(module.address("run")),
        "run_nested": _SIG(module.address("run_nested")),
        "repeat": _REPEAT(module.address("repeat")),
    }


@pytest.fixture
def threads():
    """Restore the pool's thread count after a test changes it."""
    old = tp.get_num_threads()
    yield tp.set_num_threads
    tp.set_num_threads(old)


class _Closure:
    """The arrays one launch writes, and the int64 slot table pointing at them."""

    def __init__(self, n, fail_at=-1, inner_n=0, naps=None):
        self.counts = np.zeros(n, np.int32)
        self.naps = np.zeros(n, np.int32)
        for t, us in (naps or {}).items():
            self.naps[t] = us
        self.tids = np.zeros(n, np.int64)
        self.sums = np.zeros(n, np.int64)
        self.outer = np.zeros(max(n, 1), np.int64)
        self.slots = np.array([self.counts.ctypes.data, self.tids.ctypes.data,
                               self.sums.ctypes.data, fail_at, inner_n,
                               self.outer.ctypes.data, self.naps.ctypes.data], np.int64)

    @property
    def ptr(self):
        return self.slots.ctypes.data

    def expected_sums(self):
        t = np.arange(len(self.sums), dtype=np.int64)
        return 100 * (100 * t) + 4950


def _blocks(n, nthreads):
    """The partition the pool promises: contiguous blocks, block 0 on the caller."""
    t = min(nthreads, n)
    return [range(k * n // t, (k + 1) * n // t) for k in range(t)]


def _check_blocks(c, n, nthreads):
    """Every block ran on one thread, block 0 on the calling thread."""
    blocks = _blocks(n, nthreads)
    assert all(len(set(c.tids[list(b)])) == 1 for b in blocks)
    assert c.tids[0] == threading.get_ident()


def _spread_launch(kernels, n, nthreads, attempts=5, **kw):
    """Launch n tasks whose blocks each start with a 5 ms nap, so every worker claims
    its own block before another thread could steal it; retried on a loaded machine."""
    naps = {b.start: 5000 for b in _blocks(n, nthreads)}
    for _ in range(attempts):
        c = _Closure(n, naps=naps, **kw)
        assert kernels["run"](c.ptr, n) == 0
        if len(set(c.tids)) == min(n, nthreads):
            break
    return c


@pytest.mark.parametrize("n", [1, 2, 3, 17, 1000])
@pytest.mark.parametrize("nthreads", [1, 2, 3])
def test_every_task_runs_once_with_correct_results(kernels, threads, n, nthreads):
    threads(nthreads)
    c = _Closure(n)
    assert kernels["run"](c.ptr, n) == 0
    np.testing.assert_array_equal(c.counts, np.ones(n, np.int32))
    np.testing.assert_array_equal(c.sums, c.expected_sums())
    _check_blocks(c, n, nthreads)
    assert len(set(c.tids)) <= min(n, nthreads)


@pytest.mark.parametrize("nthreads", [2, 3])
def test_more_than_one_os_thread_participates(kernels, threads, nthreads):
    threads(nthreads)
    c = _spread_launch(kernels, 17, nthreads)
    assert len(set(c.tids)) == nthreads
    _check_blocks(c, 17, nthreads)
    np.testing.assert_array_equal(c.sums, c.expected_sums())
    assert tp.num_workers() >= nthreads - 1


@settings(max_examples=25)
@given(n=st.integers(0, 300), nthreads=st.integers(1, 4))
def test_partition_property(kernels, n, nthreads):
    old = tp.get_num_threads()
    tp.set_num_threads(nthreads)
    try:
        c = _Closure(max(n, 1))
        assert kernels["run"](c.ptr, n) == 0
        assert c.counts[:n].tolist() == [1] * n
        if n:
            _check_blocks(c, n, nthreads)
    finally:
        tp.set_num_threads(old)


@pytest.mark.parametrize("n", [0, -5])
def test_no_tasks_runs_nothing(kernels, threads, n):
    threads(2)
    c = _Closure(4)
    assert kernels["run"](c.ptr, n) == 0
    assert c.counts.tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("nthreads,fail_at", [(1, 5), (2, 0), (2, 12), (3, 16)])
def test_task_error_is_reported(kernels, threads, nthreads, fail_at):
    threads(nthreads)
    c = _Closure(17, fail_at=fail_at)
    assert kernels["run"](c.ptr, 17) == 42
    assert c.counts[fail_at] == 1
    assert c.counts.max() == 1
    # the failing task's own block stops after it; other tasks may have been skipped
    block = next(b for b in _blocks(17, nthreads) if fail_at in b)
    assert c.counts[fail_at + 1:block.stop].sum() == 0
    # the pool is usable again, and the error does not leak into the next launch
    c2 = _Closure(17)
    assert kernels["run"](c2.ptr, 17) == 0
    assert c2.counts.tolist() == [1] * 17


@pytest.mark.parametrize("nthreads", [1, 2, 3])
def test_nested_launch_runs_serially_on_the_calling_thread(kernels, threads, nthreads):
    threads(nthreads)
    outer_n, inner_n = 5, 7
    c = _Closure(outer_n * inner_n, inner_n=inner_n)
    assert kernels["run_nested"](c.ptr, outer_n) == 0
    assert c.counts.tolist() == [1] * (outer_n * inner_n)
    np.testing.assert_array_equal(c.sums, c.expected_sums())
    tids = c.tids.reshape(outer_n, inner_n)
    for t in range(outer_n):
        assert set(tids[t]) == {c.outer[t]}
    assert c.outer[0] == threading.get_ident()
    assert len(set(c.outer[:outer_n])) <= min(nthreads, outer_n)


def test_nested_error_propagates_out(kernels, threads):
    threads(2)
    c = _Closure(3 * 4, inner_n=4, fail_at=9)
    assert kernels["run_nested"](c.ptr, 3) == 42
    assert c.counts[9] == 1 and c.counts[10:].sum() == 0


def test_set_num_threads(kernels, threads):
    threads(4)
    assert tp.get_num_threads() == 4
    c = _spread_launch(kernels, 40, 4)
    assert c.counts.tolist() == [1] * 40
    assert len(set(c.tids)) == 4
    threads(1)
    c = _Closure(40)
    assert kernels["run"](c.ptr, 40) == 0
    assert set(c.tids) == {threading.get_ident()}


def test_set_num_threads_rejects_bad_values():
    with pytest.raises(TargetError, match=r"expected an int in \[1, 256\], got 0"):
        tp.set_num_threads(0)
    with pytest.raises(TargetError, match=r"got 2.5"):
        tp.set_num_threads(2.5)


def test_c_abi_set_num_threads_clamps(threads):
    addrs = tp.ensure_loaded()
    set_c = ctypes.CFUNCTYPE(None, ctypes.c_int32)(addrs["cuvil_set_num_threads"])
    get_c = ctypes.CFUNCTYPE(ctypes.c_int32)(addrs["cuvil_get_num_threads"])
    set_c(1000)
    assert get_c() == 256
    set_c(-3)
    assert get_c() == 1 == tp.get_num_threads()


def test_default_num_threads_from_environment(monkeypatch):
    monkeypatch.setenv("CUVIL_NUM_THREADS", "3")
    assert tp.default_num_threads() == 3
    monkeypatch.delenv("CUVIL_NUM_THREADS")
    assert tp.default_num_threads() == min(os.cpu_count(), 256)
    monkeypatch.setenv("CUVIL_NUM_THREADS", "lots")
    with pytest.raises(TargetError, match=r"CUVIL_NUM_THREADS: expected an integer .* 'lots'"):
        tp.default_num_threads()


def test_declarations_are_what_the_module_exports():
    addrs = tp.ensure_loaded()
    assert set(addrs) == set(tp.EXPORTED)
    assert tp.DECLARATIONS == (
        "declare i32 @cuvil_parallel_launch(ptr, ptr, i32)\n"
        "declare void @cuvil_set_num_threads(i32)\n"
        "declare i32 @cuvil_get_num_threads()\n"
        "declare ptr @cuvil_workspace_alloc(i64)\n"
        "declare void @cuvil_workspace_free(ptr)\n")
    assert all(llvm.address_of_symbol(name) == a for name, a in addrs.items())


def _bounded(fn, seconds=60):
    """Run fn on a daemon thread; a deadlock fails the test instead of hanging it."""
    out = {}
    worker = threading.Thread(target=lambda: out.setdefault("r", fn()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "launches deadlocked"
    return out["r"]


def test_stress_consecutive_launches_native(kernels, threads):
    threads(2)
    c = _Closure(8)
    start = time.perf_counter()
    assert _bounded(lambda: kernels["repeat"](c.ptr, 8, 2000)) == 0
    elapsed = time.perf_counter() - start
    assert c.counts.tolist() == [2000] * 8
    print(f"2000 native launches of 8 tasks: {elapsed * 1e3:.1f} ms")


def test_stress_consecutive_launches_from_python(kernels, threads):
    threads(3)
    c = _Closure(5)
    run = kernels["run"]
    _bounded(lambda: [run(c.ptr, 5) for _ in range(2000)])
    assert c.counts.tolist() == [2000] * 5


def test_sleeping_workers_wake_up(kernels, threads):
    # gaps far longer than the spin phase: every launch finds the workers blocked
    threads(3)
    c = _Closure(9)
    for _ in range(5):
        time.sleep(0.01)
        assert kernels["run"](c.ptr, 9) == 0
    assert c.counts.tolist() == [5] * 9


def test_caller_blocks_until_a_slow_worker_finishes(kernels, threads):
    # task 0 naps 5 ms so the worker claims block [2, 4); its task 3 naps 30 ms, far
    # past the caller's spin phase, so the caller sleeps on the condition variable
    threads(2)
    for _ in range(5):
        c = _Closure(4, naps={0: 5000, 3: 30000})
        start = time.perf_counter()
        assert kernels["run"](c.ptr, 4) == 0
        elapsed = time.perf_counter() - start
        if c.tids[3] != threading.get_ident():
            break
    assert c.tids[3] != threading.get_ident()
    assert elapsed >= 0.029
    assert c.counts.tolist() == [1] * 4
    np.testing.assert_array_equal(c.sums, c.expected_sums())


def test_concurrent_launches_from_two_python_threads(kernels, threads):
    # one of them owns the pool at a time, the other runs serially: both correct
    threads(2)
    closures = [_Closure(6), _Closure(6)]
    run = kernels["run"]

    def hammer(c):
        return sum(run(c.ptr, 6) for _ in range(300))

    results = []
    ts = [threading.Thread(target=lambda c=c: results.append(hammer(c))) for c in closures]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert results == [0, 0]
    assert all(c.counts.tolist() == [300] * 6 for c in closures)


def test_shutdown_then_relaunch(kernels, threads):
    threads(2)
    assert kernels["run"](_Closure(4).ptr, 4) == 0
    assert tp.shutdown() is True
    assert tp.num_workers() == 0
    c = _spread_launch(kernels, 4, 2)
    assert tp.num_workers() == 1 and len(set(c.tids)) == 2


def test_pool_is_rebuilt_in_a_forked_child(kernels, threads):
    threads(2)
    assert kernels["run"](_Closure(4).ptr, 4) == 0
    pid = os.fork()
    if pid == 0:  # the child must never return into pytest
        code = 1
        try:
            # more tries than elsewhere: a freshly forked worker starts cold, and on a
            # loaded machine five 5 ms naps were once not enough for it to claim a block
            c = _spread_launch(kernels, 6, 2, attempts=20)
            ok = c.counts.tolist() == [1] * 6 and len(set(c.tids)) == 2
            code = 0 if ok and tp.num_workers() == 1 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_launch_overhead_benchmark_runs(kernels, threads):
    import importlib.util
    path = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks",
                        "parallel_overhead.py")
    spec = importlib.util.spec_from_file_location("parallel_overhead", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    threads(2)
    for handoff in (False, True):
        stats = bench.measure(launches=200, num_tasks=2, handoff=handoff)
        assert stats["launches"] == 200 and 0 < stats["p10_ns"] <= stats["median_ns"]
        print(bench.format_stats(stats))
    assert stats["spread"] > 0.5  # a handoff launch makes a worker run the last task


def _affinities():
    """Native thread id -> CPU set, for every thread of this process."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            out[int(tid)] = os.sched_getaffinity(int(tid))
        except OSError:   # the thread ended meanwhile
            pass
    return out


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or
                    len(os.sched_getaffinity(0)) < 2,
                    reason="thread placement needs Linux and two allowed CPUs")
def test_workers_are_kept_off_the_callers_cpu(kernels, threads):
    threads(2)
    allowed = os.sched_getaffinity(0)
    try:
        for cpu in sorted(allowed)[:2]:     # the caller moves: the workers follow
            os.sched_setaffinity(0, {cpu})
            c = _Closure(8)
            assert kernels["run"](c.ptr, 8) == 0
            np.testing.assert_array_equal(c.sums, c.expected_sums())
            placed = [t for t, cpus in _affinities().items() if cpus == allowed - {cpu}]
            assert len(placed) >= tp.num_workers() >= 1
    finally:
        os.sched_setaffinity(0, allowed)
