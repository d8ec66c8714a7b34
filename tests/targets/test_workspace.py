"""The llvm runtime's workspace cache, ``nsw`` index arithmetic and signed loop counters."""

import ctypes
import resource
import threading

import numpy as np

import cuvil_tir as T
import schedules as S
import targets
from targets.llvm import threadpool as tp
from targets.llvm.workspace_ir import HUGE_MIN_PAGES, SLOTS, huge_page_bytes, workspace_ir

_alloc = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_uint64)
_free = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _runtime():
    addrs = tp.ensure_loaded()
    return (_alloc(addrs["cuvil_workspace_alloc"]), _free(addrs["cuvil_workspace_free"]))


def test_a_freed_block_is_handed_out_again_aligned():
    alloc, free = _runtime()
    p = alloc(100_000)
    assert p % 64 == 0
    ctypes.memset(p, 7, 100_000)            # the whole requested size is writable
    free(p)
    q = alloc(90_000)                       # fits: 90000 <= capacity <= 2 * 90000
    assert q == p
    free(q)


def test_a_block_of_several_huge_pages_starts_on_one():
    # 4 kB pages under a 16 MB packed operand cost tutorial 04 ~8% at 2048^3 (TLB)
    alloc, free = _runtime()
    huge = huge_page_bytes()
    size = HUGE_MIN_PAGES * max(huge, 1 << 20)
    p = alloc(size)
    ctypes.memset(p, 1, size)
    assert (p - 64) % max(huge, 64) == 0          # the header sits at the block's start
    free(p)


def test_a_request_near_the_top_of_the_address_space_is_refused():
    # rounding up to whole huge pages must not wrap around to a small block
    alloc, _ = _runtime()
    assert not alloc((1 << 64) - (1 << 20))
    assert not alloc((1 << 64) - 8)


def test_huge_pages_are_asked_for_only_where_the_kernel_has_them():
    assert "madvise" not in workspace_ir(0)
    text = workspace_ir(2 << 20)
    assert "i32 14)" in text and f"icmp uge i64 %want, {HUGE_MIN_PAGES * (2 << 20)}" in text


def test_a_small_request_does_not_take_a_large_block():
    alloc, free = _runtime()
    big = alloc(1 << 20)
    free(big)
    small = alloc(1 << 12)
    assert small != big
    again = alloc(1 << 20)                  # the large block is still cached
    assert again == big
    free(small)
    free(again)


def test_live_blocks_are_distinct_past_the_number_of_slots():
    alloc, free = _runtime()
    live = [alloc(4096) for _ in range(2 * SLOTS)]
    assert len(set(live)) == len(live)
    for p in live:
        free(p)                             # SLOTS kept, the rest go back to libc
    again = [alloc(4096) for _ in range(2 * SLOTS)]
    assert len(set(again)) == len(again)
    for p in again:
        free(p)


def test_concurrent_callers_never_share_a_block():
    alloc, free = _runtime()
    seen, errors = [], []

    def worker(k):
        for _ in range(200):
            p = alloc(8192)
            ctypes.memset(p, k, 8192)
            if ctypes.string_at(p, 8192) != bytes([k]) * 8192:
                errors.append(k)
            seen.append(p)
            free(p)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def _heap_chain(n):
    A = T.placeholder((n,), name="A")
    B = T.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = T.compute((n,), lambda i: B[i] + 1.0, name="C")
    return T.create_prim_func([A, C])


def test_a_large_internal_buffer_is_not_faulted_in_again_on_each_call():
    n = 1 << 21                              # an 8 MB intermediate: 2048 pages
    mod = targets.build(_heap_chain(n), "llvm")
    a = np.ones(n, "float32")
    c = np.zeros(n, "float32")
    mod(a, c)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(3):
        mod(a, c)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    np.testing.assert_array_equal(c, 3.0)
    assert faults < 512, f"{faults} page faults in 3 calls (2048 per call uncached)"


def test_index_arithmetic_is_nsw_and_data_arithmetic_wraps():
    n = T.var("n")
    A = T.placeholder((n, 8), "int32", name="A")
    B = T.compute((n, 8), lambda i, j: A[i, j] + 1, name="B")
    sch = S.Schedule(T.create_prim_func([A, B]))
    mod = targets.build(sch, "llvm")
    ir = mod.get_source("ll")
    assert "mul nsw i64" in ir or "shl nsw i64" in ir      # indices: 64 bits (index64)
    data_adds = [line for line in ir.splitlines() if " add " in line and ", 1\n" not in line
                 and "nsw" not in line]
    assert data_adds, "the element + 1 carries no nsw"
    a = np.full((3, 8), np.iinfo(np.int32).max, "int32")
    b = np.zeros((3, 8), "int32")
    mod(a, b)
    np.testing.assert_array_equal(b, np.iinfo(np.int32).min)   # wraps like numpy


def test_a_loop_from_a_negative_start_runs_every_iteration():
    A = T.decl_buffer((8,), "float32", "A")
    i = T.var("i")
    f = T.PrimFunc([A], T.For(i, T.const(-3), T.const(6), "serial",
                              T.BufferStore(A, T.Cast("float32", i), (i + 3,))))
    a = np.zeros(8, "float32")
    targets.build(f, "llvm")(a)
    np.testing.assert_array_equal(a, [-3, -2, -1, 0, 1, 2, 0, 0])


def test_a_full_cache_keeps_the_larger_blocks_and_release_empties_it():
    alloc, free = _runtime()
    small = [alloc(4096) for _ in range(SLOTS)]
    for p in small:
        free(p)                             # every slot holds a small block
    big = alloc(1 << 20)
    free(big)                               # replaces one of them
    assert alloc(1 << 20) == big
    free(big)
    tp.release_workspace()
    fresh = alloc(1 << 20)                  # nothing cached: libc's block, usable
    ctypes.memset(fresh, 1, 1 << 20)
    free(fresh)
    tp.release_workspace()
