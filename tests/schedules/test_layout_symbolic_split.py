"""transform_layout with a symbolic divisor, ``i -> (i // n, i % n)`` (TVM's
TestTransformLayoutWithVar): one-to-one for ``n > 0``, which the function checks on
entry unless Cuvil can prove it."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from schedules.primitives.layout import LayoutError
from tests.schedules.testing import assert_refused, run, run_llvm, verify_trace_roundtrip

BEFORE = '''
def before(A: T.Buffer(16, "int32"), n: T.int32, C: T.Buffer(16, "int32")):
    B = T.alloc_buffer(16, "int32")
    for i in T.serial(16):
        with T.block("block"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi]
    for i in T.serial(16):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi] * 2
'''

AFTER = '''
def before(A: T.Buffer(16, "int32"), n: T.int32, C: T.Buffer(16, "int32")):
    B = T.alloc_buffer(((16 + n - 1) // n, n), "int32")
    T.assert_(n > 0, "transform_layout of buffer B: the index map divides by n, which must be positive; found {}", n)
    for ax0 in T.serial((16 + n - 1) // n):
        for ax1 in T.serial(n):
            with T.block("block"):
                v0, v1 = T.axis.remap("SS", [ax0, ax1])
                B[v0, v1] = T.if_then_else(v0 == 16 // n and 16 % n <= v1, 0, A[v0 * n + v1])
    for i in T.serial(16):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi // n, vi % n] * 2
'''


def _runners(sch):
    """The interpreter and the llvm build, called with ``A, n, C`` (``n`` an int)."""
    mod = targets.build(sch, "llvm")
    return (lambda a, n, c: T.interpret(sch.func, a, n, c)), mod


def _transformed():
    f = T.parse(BEFORE)
    sch = S.Schedule(f)
    n = f.params[1]
    sch.transform_layout("block", 0, lambda i: [i // n, i % n], pad_value=0)
    return f, sch


def test_split_by_a_scalar_parameter_exact_ir():
    f, sch = _transformed()
    assert T.structural_equal(sch.func, T.parse(AFTER)), sch.func
    verify_trace_roundtrip(sch, f)


@pytest.mark.parametrize("n", [1, 4, 5, 16, 20])
def test_split_by_a_scalar_parameter_agrees_with_numpy(n):
    _, sch = _transformed()
    a = np.arange(16, dtype="int32")
    for runner in _runners(sch):
        c = np.zeros(16, "int32")
        runner(a, n, c)
        np.testing.assert_array_equal(c, a * 2)


def test_a_divisor_that_is_not_positive_stops_the_call():
    _, sch = _transformed()
    a = np.arange(16, dtype="int32")
    for runner in _runners(sch):
        with pytest.raises(T.RuntimeCheckError, match="the index map divides by n, which "
                           "must be positive; found 0"):
            runner(a, 0, np.zeros(16, "int32"))
        # a negative n makes B's shape negative: refused when B is allocated, first
        with pytest.raises(T.CuvilError, match="negative extent|could not be allocated"):
            runner(a, -3, np.zeros(16, "int32"))


def test_a_provably_positive_divisor_needs_no_check():
    n = T.size_var("n")
    X = T.placeholder((24,), "float32", name="X")
    Y = T.compute((24,), lambda i: X[i] + 1.0, name="Y")
    W = T.placeholder((n,), "float32", name="W")
    f = T.create_prim_func([X, W, T.compute((24,), lambda i: Y[i] * 3.0 + W[0], name="Z")])
    sch = S.Schedule(f)
    sch.transform_layout("Y", 0, lambda i: (i // (n + 1), i % (n + 1)), pad_value=0.0)
    assert "T.assert_" not in str(sch.func)
    x = np.arange(24, dtype="float32")
    for runner in (run, run_llvm):
        for size in (1, 4, 6):
            w = np.full(size, 0.5, "float32")
            out = runner(sch, [x, w, np.zeros(24, "float32")])[2]
            np.testing.assert_allclose(out, (x + 1) * 3 + 0.5)


def test_other_symbolic_maps_are_still_refused():
    f = T.parse(BEFORE)
    sch = S.Schedule(f)
    n = f.params[1]
    assert_refused(sch, lambda: sch.transform_layout("block", 0, lambda i: [i // n, i % 4],
                                                     pad_value=0),
                   r"cannot prove the index map \['i // n', 'i % 4'\] one-to-one",
                   LayoutError)
