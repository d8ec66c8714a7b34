"""``split(..., disable_predication=True)``: TVM's split without the guard, for factors
the author knows divide the extent; Cuvil refuses what is sure to be wrong and checks
a symbolic extent once at run time."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from schedules.errors import FactorError
from tests.schedules.testing import assert_refused, run, run_llvm, verify_trace_roundtrip

N = T.size_var("n")
X = T.placeholder((N,), name="X")
SYMBOLIC = T.create_prim_func([X, T.compute((N,), lambda i: X[i] * 2.0, name="Y")])

SYMBOLIC_SPLIT = '''
@T.prim_func
def main(X: T.Buffer((n,), "float32"), Y: T.Buffer((n,), "float32")):
    n = T.size_var("n")
    T.assert_(n % 4 == 0, "split of loop i with disable_predication=True: its extent n must be a multiple of 4; found {}", n)
    for i_0, i_1 in T.grid((n + 3) // 4, 4):
        with T.block("Y"):
            v_i = T.axis.spatial(n, i_0 * 4 + i_1)
            Y[v_i] = X[v_i] * T.float32(2)
'''


def _const(extent):
    A = T.placeholder((extent,), name="A")
    return T.create_prim_func([A, T.compute((extent,), lambda i: A[i] + 1.0, name="B")])


def test_dividing_factors_give_the_plain_split():
    f = _const(12)
    plain, free = S.Schedule(f), S.Schedule(f)
    plain.split(plain.get_loops("B")[0], [3, 4])
    free.split(free.get_loops("B")[0], [3, None], disable_predication=True)
    assert T.structural_equal(plain.func, free.func)
    assert "disable_predication=True" in str(free.trace)
    verify_trace_roundtrip(free, f)


def test_symbolic_extent_is_checked_once_at_run_time():
    sch = S.Schedule(SYMBOLIC)
    _, inner = sch.split(sch.get_loops("Y")[0], [None, 4], disable_predication=True)
    assert T.structural_equal(sch.func, T.parse(SYMBOLIC_SPLIT)), sch.func
    sch.vectorize(inner)
    verify_trace_roundtrip(sch, SYMBOLIC)
    x = np.arange(8, dtype="float32")
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, np.zeros(8, "float32")])[1], x * 2)
        with pytest.raises(T.RuntimeCheckError, match="its extent n must be a multiple "
                           "of 4; found 6"):
            runner(sch, [x[:6], np.zeros(6, "float32")])


def test_non_dividing_constant_factors_are_refused():
    sch = S.Schedule(_const(10))
    (i,) = sch.get_loops("B")
    assert_refused(sch, lambda: sch.split(i, [3, 4], disable_predication=True),
                   "disable_predication=True: the factors multiply to 12 but loop i has "
                   "extent 10; without the guard the last 2 iterations would run past "
                   "the block's domain", FactorError)
    assert_refused(sch, lambda: sch.split(i, [None, 4], disable_predication=True),
                   "multiply to 12 but loop i has extent 10", FactorError)


TRIANGLE = '''
@T.prim_func
def tri(A: T.Buffer((8, 8), "float32")):
    for i in T.serial(8):
        for j in T.serial(i):
            with T.block("A"):
                vi = T.axis.spatial(8, i)
                vj = T.axis.spatial(8, j)
                A[vi, vj] = T.float32(1)
'''


def test_an_extent_defined_inside_the_function_is_refused():
    sch = S.Schedule(T.parse(TRIANGLE))
    j = sch.get_loops("A")[1]
    assert_refused(sch, lambda: sch.split(j, [None, 4], disable_predication=True),
                   "the extent i of loop j depends on i, defined inside the function, so "
                   "Cuvil cannot check once that it is a multiple of 4", FactorError)
    sch.split(j, [None, 4])          # the guarded split is fine
    a = np.zeros((8, 8), "float32")
    np.testing.assert_array_equal(run(sch, [a])[0], np.tril(np.ones((8, 8)), -1))


def test_disable_predication_must_be_a_bool():
    sch = S.Schedule(_const(8))
    (i,) = sch.get_loops("B")
    assert_refused(sch, lambda: sch.split(i, [2, 4], disable_predication="yes"),
                   "argument 3, 'disable_predication' to split: expected True or False, "
                   "found 'yes'")
