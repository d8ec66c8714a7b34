"""loop_partition: consecutive sub-loops with their own copies of the body; numerics
against numpy (interpreter and LLVM), trace and text round trips, refusals."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from cuvil_tir.analysis import tree
from schedules.errors import FactorError, LoopNestError
from tests.schedules.testing import (assert_refused, run, run_llvm, verify_text_roundtrip,
                                     verify_trace_roundtrip)


def scale(n=12):
    X = T.placeholder((n, 3), name="X")
    return T.create_prim_func([X, T.compute((n, 3), lambda i, j: X[i, j] * 3.0 + 1.0,
                                            name="Y")])


def rowsum():
    X = T.placeholder((6, 5), name="X")
    k = T.reduce_axis((0, 5), name="k")
    return T.create_prim_func([X, T.compute((6,), lambda i: T.sum(X[i, k], axis=k),
                                            name="S")])


def both(sch, arrays):
    out = run(sch, arrays)[-1]
    np.testing.assert_allclose(run_llvm(sch, arrays)[-1], out, rtol=1e-6)
    return out


LOCAL_TEMP = '''
@T.prim_func
def main(A: T.Buffer((6,), "float32"), B: T.Buffer((6,), "float32")):
    for i in T.serial(6):
        with T.block("outer"):
            vi = T.axis.spatial(6, i)
            T.reads(A[vi])
            T.writes(B[vi])
            t = T.alloc_buffer((1,), "float32")
            with T.block("T"):
                T.reads(A[vi])
                T.writes(t[0])
                t[0] = A[vi] * T.float32(2)
            with T.block("B"):
                T.reads(t[0])
                T.writes(B[vi])
                B[vi] = t[0] + T.float32(1)
'''


def block_names(sch):
    return [b.block.name for b in tree.blocks_under(sch.func.body)]


def find(sch, name):
    return next(b.block for b in tree.blocks_under(sch.func.body) if b.block.name == name)


def test_partition_with_a_remainder_makes_one_loop_more():
    f = scale()
    sch = S.Schedule(f)
    loops = sch.loop_partition(sch.get_loops("Y")[0], [2, 3])
    assert [rv.var.name for rv in loops] == ["i0", "i1", "i2"]
    text = str(sch.func)
    for expected in ("for i0 in T.serial(2)", "for i1 in T.serial(2, 5)",
                     "for i2 in T.serial(5, 12)"):
        assert expected in text, expected
    assert block_names(sch)[1:5] == ["Y_i_common", "Y_i0_partition", "Y_i0", "Y_i1_partition"]
    # the iterator bound to the partitioned loop gets the partition's range
    dom = find(sch, "Y_i2").iter_vars[0].dom
    assert (dom.min.value, dom.extent.value) == (5, 7)
    assert sch.get_loops("Y_i2") == [loops[2], sch.get_loops("Y_i2")[1]]
    x = np.random.default_rng(0).random((12, 3), dtype="float32")
    np.testing.assert_allclose(both(sch, [x, np.zeros((12, 3), "float32")]), x * 3 + 1,
                               rtol=1e-6)
    verify_trace_roundtrip(sch, f)
    verify_text_roundtrip(sch.func)


def test_inferred_length_and_nested_partition():
    f = scale()
    sch = S.Schedule(f)
    sch.loop_partition(sch.get_loops("Y")[0], [None, 4])
    inner = sch.get_loops("Y_i1")
    assert len(inner) == 2
    sch.loop_partition(inner[1], [1, None])
    assert {"Y_i0", "Y_i1_j0", "Y_i1_j1", "Y_i1_j_common"} <= set(block_names(sch))
    x = np.random.default_rng(1).random((12, 3), dtype="float32")
    np.testing.assert_allclose(both(sch, [x, np.zeros((12, 3), "float32")]), x * 3 + 1,
                               rtol=1e-6)
    verify_trace_roundtrip(sch, f)


def test_partition_of_a_reduction_loop_keeps_the_sum():
    f = rowsum()
    sch = S.Schedule(f)
    sch.loop_partition(sch.get_loops("S")[1], [2])
    x = np.random.default_rng(2).random((6, 5), dtype="float32")
    np.testing.assert_allclose(both(sch, [x, np.zeros(6, "float32")]), x.sum(1), rtol=1e-5)
    verify_trace_roundtrip(sch, f)


def test_partition_copies_buffers_allocated_inside():
    f = T.parse(LOCAL_TEMP)
    sch = S.Schedule(f)
    sch.loop_partition(sch.get_loops("outer")[0], [4])
    temps = [find(sch, n).alloc_buffers[0].name for n in ("outer_i0", "outer_i1")]
    assert temps == ["t_i0", "t_i1"]
    x = np.random.default_rng(3).random(6, dtype="float32")
    np.testing.assert_allclose(both(sch, [x, np.zeros(6, "float32")]), x * 2 + 1, rtol=1e-6)
    verify_trace_roundtrip(sch, f)


def test_wrapper_blocks_declare_what_the_copies_access():
    sch = S.Schedule(scale())
    sch.loop_partition(sch.get_loops("Y")[1], [1])
    common = find(sch, "Y_j_common")
    assert [r.buffer.name for r in common.reads] == ["X"]
    assert [r.buffer.name for r in common.writes] == ["Y"]
    # the loop around the copies is still analysed: its iterations are independent
    sch.parallel(sch.get_loops("Y_j0")[0])


SCAN = '''
@T.prim_func
def main(A: T.Buffer((8, 4), "float32"), B: T.Buffer((8, 4), "float32")):
    for i, j in T.grid(7, 4):
        with T.block("B"):
            vi = T.axis.spatial(8, i + 1)
            vj = T.axis.spatial(4, j)
            T.reads(B[vi - 1, vj], A[vi, vj])
            T.writes(B[vi, vj])
            B[vi, vj] = B[vi - 1, vj] + A[vi, vj]
'''


def test_a_dependence_inside_the_copies_still_blocks_parallel():
    f = T.parse(SCAN)
    sch = S.Schedule(f)
    i, j = sch.get_loops("B")
    sch.loop_partition(j, [2])
    assert_refused(sch, lambda: sch.parallel(i), "loop-carried dependence")
    a = np.random.default_rng(4).random((8, 4), dtype="float32")
    b = np.zeros((8, 4), "float32")
    np.testing.assert_allclose(both(sch, [a, b]), np.concatenate(
        [b[:1], np.cumsum(a[1:], axis=0)]), rtol=1e-5)


def test_refuses_lengths_reaching_the_extent():
    sch = S.Schedule(scale())
    i = sch.get_loops("Y")[0]
    assert_refused(sch, lambda: sch.loop_partition(i, [10, 2]),
                   r"lengths \[10, 2\] add up to 12, but loop i has only 12 iterations",
                   FactorError)
    assert_refused(sch, lambda: sch.loop_partition(i, [100, None]), "add up to 100",
                   FactorError)


@pytest.mark.parametrize("factors,why", [([0, None], "element 0 is 0"),
                                         ([None, -3], "element 1 is -3"),
                                         ([None, None], "more than one None"),
                                         ([], "expected a non-empty list")])
def test_refuses_bad_lengths(factors, why):
    sch = S.Schedule(scale())
    i = sch.get_loops("Y")[0]
    assert_refused(sch, lambda: sch.loop_partition(i, factors), why, FactorError)


def test_refuses_a_symbolic_extent():
    n = T.size_var("n")
    X = T.placeholder((n,), name="X")
    sch = S.Schedule(T.create_prim_func([X, T.compute((n,), lambda i: X[i], name="Y")]))
    (i,) = sch.get_loops("Y")
    assert_refused(sch, lambda: sch.loop_partition(i, [4, None]),
                   "has extent n, which are not both constant: the partition points",
                   FactorError)


def test_refuses_bound_parallel_and_annotated_loops():
    sch = S.Schedule(scale())
    i, j = sch.get_loops("Y")
    sch.parallel(i)
    assert_refused(sch, lambda: sch.loop_partition(i, [4]), "would lose its kind 'parallel'",
                   LoopNestError)
    sch.annotate(j, "pragma_x", 1)
    assert_refused(sch, lambda: sch.loop_partition(j, [1]), "would lose its annotations",
                   LoopNestError)
    sch2 = S.Schedule(scale())
    i2 = sch2.get_loops("Y")[0]
    sch2.bind(i2, "threadIdx.x")
    assert_refused(sch2, lambda: sch2.loop_partition(i2, [4]),
                   "would lose its binding to threadIdx.x", LoopNestError)


def test_as_python_names_the_primitive():
    sch = S.Schedule(scale())
    sch.loop_partition(sch.get_loops("Y")[0], [None, 4])
    assert "l2, l3 = sch.loop_partition(l0, [None, 4])" in sch.trace.as_python()
