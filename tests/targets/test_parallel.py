"""Parallel loops on the native thread pool (llvm) and OpenMP (c): results, threads used,
nesting."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from targets.llvm import threadpool


def _rowsum(m=37, n=64):
    A = T.placeholder((m, n), name="A")
    k = T.reduce_axis((0, n), name="k")
    R = T.compute((m,), lambda i: T.sum(A[i, k], axis=k), name="R")
    return T.create_prim_func([A, R])


@pytest.fixture
def two_threads():
    old = threadpool.get_num_threads()
    threadpool.set_num_threads(2)
    yield
    threadpool.set_num_threads(old)


def test_parallel_outer_loop_matches_numpy(two_threads):
    sch = S.Schedule(_rowsum())
    i, _ = sch.get_loops(sch.get_block("R"))
    sch.parallel(i)
    mod = targets.build(sch, "llvm")
    assert "cuvil_parallel_launch" in mod.get_source("ll")
    a = np.random.default_rng(0).standard_normal((37, 64)).astype("float32")
    r = np.zeros(37, "float32")
    mod(a, r)
    np.testing.assert_allclose(r, a.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_parallel_loop_uses_more_than_one_thread(two_threads):
    A = T.placeholder((4096,), name="A")
    B = T.compute((4096,), lambda i: T.sqrt(T.abs(A[i])) + 1.0, name="B")
    sch = S.Schedule(T.create_prim_func([A, B]))
    (i,) = sch.get_loops(sch.get_block("B"))
    io, _ = sch.split(i, [64, None])
    sch.parallel(io)
    mod = targets.build(sch, "llvm")
    a = np.random.default_rng(1).standard_normal(4096).astype("float32")
    b = np.zeros(4096, "float32")
    mod(a, b)
    np.testing.assert_allclose(b, np.sqrt(np.abs(a)) + 1, rtol=1e-6)
    # the pool started a native worker thread for this launch (the caller is the other)
    assert threadpool.num_workers() >= 1


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_nested_parallel_runs_serially_and_exactly(two_threads, target):
    A = T.placeholder((8, 16), name="A")
    B = T.compute((8, 16), lambda i, j: A[i, j] * 3.0, name="B")
    sch = S.Schedule(T.create_prim_func([A, B]))
    i, j = sch.get_loops(sch.get_block("B"))
    sch.parallel(i)
    sch.parallel(j)
    mod = targets.build(sch, target)
    a = np.arange(128, dtype="float32").reshape(8, 16)
    b = np.zeros_like(a)
    mod(a, b)
    np.testing.assert_array_equal(b, a * 3)


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_parallel_with_symbolic_extent_and_tail(two_threads, target):
    n = T.size_var("n")
    A = T.placeholder((n,), name="A")
    B = T.compute((n,), lambda i: A[i] + 2.0, name="B")
    sch = S.Schedule(T.create_prim_func([A, B]))
    (i,) = sch.get_loops(sch.get_block("B"))
    io, _ = sch.split(i, [None, 16])
    sch.parallel(io)
    mod = targets.build(sch, target)
    for size in (5, 100, 1000):
        a = np.arange(size, dtype="float32")
        b = np.zeros(size, "float32")
        mod(a, b)
        np.testing.assert_array_equal(b, a + 2)
