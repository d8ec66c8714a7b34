"""A reduction whose range is empty at run time writes its identity, as numpy does
(issue 25, F2: a matmul called with K = 0 left its output unwritten on every target)."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets


def _matmul(k_extent):
    A = T.placeholder((4, k_extent), name="A")
    B = T.placeholder((k_extent, 3), name="B")
    r = T.reduce_axis((0, k_extent), name="r")
    C = T.compute((4, 3), lambda i, j: T.sum(A[i, r] * B[r, j], axis=r), name="C")
    return T.create_prim_func([A, B, C])


def _run(kernel, k):
    a = np.random.default_rng(0).standard_normal((4, k)).astype("float32")
    b = np.random.default_rng(1).standard_normal((k, 3)).astype("float32")
    c = np.full((4, 3), 123.0, "float32")
    kernel(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("runner", ["interpret", "llvm", "c"])
def test_a_symbolic_reduction_called_empty_writes_zeros(runner):
    f = _matmul(T.size_var("K"))
    kernel = (lambda *a: T.interpret(f, *a)) if runner == "interpret" else \
        targets.build(f, runner)
    for k in (0, 5):
        _run(kernel, k)


def test_a_scheduled_empty_reduction_writes_its_identity_once_per_element():
    # reduction loop outside the spatial ones, split: the identity nest regenerates j
    f = _matmul(T.size_var("K"))
    sch = S.Schedule(f)
    i, j, r = sch.get_loops(sch.get_block("C"))
    sch.reorder(r, i, j)
    sch.split(r, [None, 2])
    for kernel in (lambda *a: T.interpret(sch.func, *a), targets.build(sch, "llvm")):
        for k in (0, 3):
            _run(kernel, k)


def test_a_constant_empty_max_gives_its_identity():
    A = T.placeholder((2, 4), name="A")
    r = T.reduce_axis((0, 0), name="r")
    f = T.create_prim_func([A, T.compute((2,), lambda i: T.max(A[i, r], axis=r), name="M")])
    for kernel in (lambda *a: T.interpret(f, *a), targets.build(f, "llvm")):
        m = np.zeros(2, "float32")
        kernel(np.ones((2, 4), "float32"), m)
        np.testing.assert_array_equal(m, [-np.inf, -np.inf])      # max's identity


def test_an_empty_reduction_on_the_gpu_writes_zeros():
    f = _matmul(T.size_var("K"))
    sch = S.Schedule(f)
    i, j, _ = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    low = T.lower(sch, "cuda")
    _run(lambda *a: T.interpret(low, *a), 0)


def test_a_provably_nonempty_reduction_is_left_as_it_is():
    from cuvil_tir.transform.empty_reductions import write_empty_reductions
    f = _matmul(3)
    assert write_empty_reductions(f) is f


@pytest.mark.parametrize("combiner, want", [("max", -np.inf), ("min", np.inf)])
def test_a_masked_reduction_with_an_empty_mask_gives_one_identity_everywhere(combiner, want):
    # one identity on every path (cuvil_tir.analysis.reducer.identity): -inf for a max
    # of floats, so that a max over -inf values is -inf, as in numpy
    A = T.placeholder((2, 4), name="A")
    r = T.reduce_axis((0, 4), name="r")
    fn = T.max if combiner == "max" else T.min
    M = T.compute((2,), lambda i: fn(A[i, r], axis=r, where=A[i, r] > 10.0), name="M")
    f = T.create_prim_func([A, M])
    runs = [lambda *a: T.interpret(f, *a), targets.build(f, "llvm"), targets.build(f, "c")]
    sch = S.Schedule(f)
    i, rr = sch.get_loops(sch.get_block("M"))
    sch.bind(i, "blockIdx.x")
    sch.bind(rr, "threadIdx.x")      # a cross-thread reduction: its masked lanes
    low = T.lower(sch, "cuda")
    runs.append(lambda *a: T.interpret(low, *a))
    a = np.array([[1, 2, 3, 4], [1, 20, 3, 4]], "float32")
    for kernel in runs:
        m = np.zeros(2, "float32")
        kernel(a, m)
        np.testing.assert_array_equal(m, [want, 20.0])


@pytest.mark.parametrize("runner", ["interpret", "llvm", "c"])
def test_an_empty_reduction_in_a_nested_block_writes_zeros(runner):
    # loop_partition wraps each part in a block of its own, inside the k loop: the
    # identity is written before k, outside the blocks that hold the reduction
    sch = S.Schedule(_matmul(T.size_var("K")))
    _, u = sch.split(sch.add_unit_loop("C"), [None, 3])
    sch.loop_partition(u, [1, None])
    kernel = (lambda *a: T.interpret(sch.func, *a)) if runner == "interpret" else \
        targets.build(sch, runner)
    for k in (0, 5):
        _run(kernel, k)
