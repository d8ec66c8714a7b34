"""The llvm and c backends on whole workloads, against numpy."""

import numpy as np
import pytest

import cuvil_tir as T
import targets
from tests import workloads as W


@pytest.fixture(params=["llvm", "c"])
def target(request):
    return request.param


@pytest.mark.parametrize("name", sorted(W.ALL))
def test_shared_workloads(name, target):
    w = W.ALL[name]()
    mod = targets.build(w.func, target)
    arrays = w.make_inputs(np.random.default_rng(0))
    mod(*arrays)
    w.check(arrays)


def test_elementwise_with_broadcasting(target):
    A = T.placeholder((4, 5), name="A")
    b = T.placeholder((5,), name="b")
    c = T.placeholder((4, 1), name="c")
    C = T.compute((4, 5), lambda i, j: A[i, j] * b[j] - c[i, 0], name="C")
    mod = targets.build(T.create_prim_func([A, b, c, C]), target)
    rng = np.random.default_rng(1)
    a, bb, cc = (rng.standard_normal(s).astype("float32") for s in ((4, 5), (5,), (4, 1)))
    out = np.zeros((4, 5), "float32")
    mod(a, bb, cc, out)
    np.testing.assert_allclose(out, a * bb - cc, rtol=1e-6)


@pytest.mark.parametrize("combiner, ref", [("sum", np.sum), ("max", np.max),
                                           ("min", np.min), ("prod", np.prod)])
def test_reduction_over_one_and_several_axes(combiner, ref, target):
    A = T.placeholder((3, 4, 5), name="A")
    red = getattr(T, combiner)
    k = T.reduce_axis((0, 5), name="k")
    R1 = T.compute((3, 4), lambda i, j: red(A[i, j, k], axis=k), name="R1")
    j2, k2 = T.reduce_axis((0, 4), name="j"), T.reduce_axis((0, 5), name="k")
    R2 = T.compute((3,), lambda i: red(A[i, j2, k2], axis=[j2, k2]), name="R2")
    mod = targets.build(T.create_prim_func([A, R1, R2]), target)
    a = np.random.default_rng(2).uniform(0.5, 1.5, (3, 4, 5)).astype("float32")
    r1, r2 = np.zeros((3, 4), "float32"), np.zeros(3, "float32")
    mod(a, r1, r2)
    np.testing.assert_allclose(r1, ref(a, axis=2), rtol=1e-5)
    np.testing.assert_allclose(r2, ref(a, axis=(1, 2)), rtol=1e-5)


def test_symbolic_shape_runs_at_two_sizes_with_one_build(target):
    n, m = T.size_var("n"), T.size_var("m")
    A = T.placeholder((n, m), name="A")
    k = T.reduce_axis((0, m), name="k")
    S = T.compute((n,), lambda i: T.sum(A[i, k] * 2.0, axis=k), name="S")
    mod = targets.build(T.create_prim_func([A, S]), target)
    assert [v.name for v in mod.signature.size_vars] == ["n", "m"]
    for shape in ((3, 7), (10, 2)):
        a = np.random.default_rng(3).standard_normal(shape).astype("float32")
        s = np.zeros(shape[0], "float32")
        mod(a, s)
        np.testing.assert_allclose(s, 2 * a.sum(axis=1), rtol=1e-5, atol=1e-6)


def test_scalar_parameter(target):
    alpha = T.var("alpha", "float32")
    A = T.placeholder((6,), name="A")
    B = T.compute((6,), lambda i: A[i] * alpha, name="B")
    mod = targets.build(T.create_prim_func([A, alpha, B]), target)
    a, b = np.arange(6, dtype="float32"), np.zeros(6, "float32")
    mod(a, 2.5, b)
    np.testing.assert_array_equal(b, a * 2.5)
    mod(a, 3, b)
    np.testing.assert_array_equal(b, a * 3)


def test_large_intermediate_is_heap_allocated(target):
    w = W.elementwise_chain(n=20000)     # the 80 KB intermediate exceeds the stack limit
    mod = targets.build(w.func, target)
    src = mod.get_source()
    assert ("@cuvil_workspace_alloc" in src and "@cuvil_workspace_free" in src) \
        if target == "llvm" else \
        ("malloc(" in src and "free(" in src)
    arrays = w.make_inputs(np.random.default_rng(4))
    mod(*arrays)
    w.check(arrays)


def test_small_intermediate_is_a_64_byte_aligned_alloca():
    mod = targets.build(W.elementwise_chain(n=64).func)
    assert "alloca [64 x float], align 64" in mod.get_source("ll")


def test_select_and_if_then_else(target):
    A = T.placeholder((8,), name="A")
    B = T.compute((8,), lambda i: T.select(A[i] > 0.0, A[i], A[i] * 0.5), name="B")
    C = T.compute((8,), lambda i: T.if_then_else(i < 7, A[T.min(i + 1, 7)], 0.0), name="C")
    mod = targets.build(T.create_prim_func([A, B, C]), target)
    a = np.linspace(-2, 2, 8).astype("float32")
    b, c = np.zeros(8, "float32"), np.zeros(8, "float32")
    mod(a, b, c)
    np.testing.assert_array_equal(b, np.where(a > 0, a, a * 0.5))
    np.testing.assert_array_equal(c, np.append(a[1:], 0))
    assert ("phi float" if target == "llvm" else " ? ") in mod.get_source()
