"""merge: sibling loop nests into one; numerics (interpreter and LLVM), dependences
between the nests, trace round trip, refusals."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from schedules.errors import LoopNestError, ScheduleArgumentError
from tests.schedules.testing import assert_refused, run, run_llvm, verify_trace_roundtrip


def two_maps(m=6):
    A = T.placeholder((4, 6), name="A")
    B = T.compute((4, 6), lambda i, j: A[i, j] * 2.0, name="B")
    C = T.compute((4, m), lambda i, j: A[i, j] + 1.0, name="C")
    return T.create_prim_func([A, B, C])


def both(sch, arrays):
    out = run(sch, arrays)
    for a, b in zip(run_llvm(sch, arrays), out):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    return out


def test_merge_outer_loops_runs_both_bodies_per_iteration():
    f = two_maps()
    sch = S.Schedule(f)
    merged = sch.merge(sch.get_loops("B")[0], sch.get_loops("C")[0])
    assert merged.var.name == "i_m"
    assert [rv.var.name for rv in sch.get_loops("B")] == ["i_m", "j"]
    assert sch.get_loops("C")[0] == merged
    a = np.random.default_rng(0).random((4, 6), dtype="float32")
    _, b, c = both(sch, [a, np.zeros((4, 6), "float32"), np.zeros((4, 6), "float32")])
    np.testing.assert_allclose(b, a * 2, rtol=1e-6)
    np.testing.assert_allclose(c, a + 1, rtol=1e-6)
    verify_trace_roundtrip(sch, f)
    assert "l4 = sch.merge(l0, l2)" in sch.trace.as_python()


def test_merge_two_levels():
    f = two_maps()
    sch = S.Schedule(f)
    merged = sch.merge(sch.get_loops("B")[1], sch.get_loops("C")[1])
    assert merged.var.name == "j_m"
    assert [rv.var.name for rv in sch.get_loops("C")] == ["i_m", "j_m"]
    a = np.random.default_rng(1).random((4, 6), dtype="float32")
    _, b, c = both(sch, [a, np.zeros((4, 6), "float32"), np.zeros((4, 6), "float32")])
    np.testing.assert_allclose(c, a + 1, rtol=1e-6)
    verify_trace_roundtrip(sch, f)


def test_a_producer_consumer_pair_on_the_same_element_merges():
    A = T.placeholder((8,), name="A")
    B = T.compute((8,), lambda i: A[i] * 2.0, name="B")
    C = T.compute((8,), lambda i: B[i] + 1.0, name="C")
    g = T.create_prim_func([A, B, C])
    sch = S.Schedule(g)
    sch.merge(sch.get_loops("B")[0], sch.get_loops("C")[0])
    a = np.random.default_rng(2).random(8, dtype="float32")
    out = both(sch, [a, np.zeros(8, "float32"), np.zeros(8, "float32")])
    np.testing.assert_allclose(out[2], a * 2 + 1, rtol=1e-6)
    verify_trace_roundtrip(sch, g)


SHIFTED = '''
@T.prim_func
def main(A: T.Buffer((7,), "float32"), B: T.Buffer((8,), "float32"),
         C: T.Buffer((7,), "float32")):
    for i in T.serial(7):
        with T.block("B"):
            vi = T.axis.spatial(7, i)
            B[vi] = A[vi] * T.float32(2)
    for i in T.serial(7):
        with T.block("C"):
            vi = T.axis.spatial(7, i)
            C[vi] = B[vi + 1] + T.float32(1)
'''


def test_refuses_a_consumer_reading_a_later_iteration():
    sch = S.Schedule(T.parse(SHIFTED))
    b, c = sch.get_loops("B")[0], sch.get_loops("C")[0]
    assert_refused(sch, lambda: sch.merge(b, c), r"block 'B' writes B\[.*\] and block 'C' "
                   r"reads B\[.*\].*merging would run one nest's iteration", LoopNestError)


def test_refuses_overwriting_what_an_earlier_nest_still_reads():
    src = '''
@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((7,), "float32")):
    for i in T.serial(7):
        with T.block("B"):
            vi = T.axis.spatial(7, i)
            B[vi] = A[vi + 1] * T.float32(2)
    for i in T.serial(7):
        with T.block("W"):
            vi = T.axis.spatial(7, i)
            A[vi] = T.float32(0)
'''
    sch = S.Schedule(T.parse(src))
    b, w = sch.get_loops("B")[0], sch.get_loops("W")[0]
    assert_refused(sch, lambda: sch.merge(b, w), r"block 'W' writes A\[.*\] and block 'B' "
                   "reads", LoopNestError)


NESTS = '''
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32"),
         C: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj]
    for i in T.serial(8):
        for j in T.serial(1, 8):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj]
        for j in T.serial(8):
            with T.block("D"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] + C[vi, vj]
    for i in T.serial(4):
        with T.block("E"):
            vi = T.axis.spatial(4, i)
            C[vi, 0] = A[vi, 0]
'''


@pytest.mark.parametrize("first,second,match", [
    (("B", 1), ("C", 1), "loop i has more in its body than loop j"),
    (("B", 1), ("E", 0), "is at depth 1 of its nest, loop j at depth 2"),
    (("B", 0), ("E", 0), "have extents 8 and 4: merged loops need equal extents"),
    (("B", 0), ("B", 0), "two of the loops are in the same loop nest"),
])
def test_refusals(first, second, match):
    sch = S.Schedule(T.parse(NESTS))
    x = sch.get_loops(first[0])[first[1]]
    y = sch.get_loops(second[0])[second[1]]
    assert_refused(sch, lambda: sch.merge(x, y), match, LoopNestError)


def test_refuses_a_loop_not_starting_at_zero():
    sch = S.Schedule(T.parse(SPLIT_START))
    x, y = sch.get_loops("B")[0], sch.get_loops("C")[0]
    assert_refused(sch, lambda: sch.merge(x, y), "loop i starts at 1, expected 0",
                   LoopNestError)


SPLIT_START = '''
@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in T.serial(1, 8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi]
    for i in T.serial(7):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            A[vi] = T.float32(1)
'''


def test_refuses_nests_of_different_scopes_and_gaps():
    A = T.placeholder((4,), name="A")
    B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
    C = T.compute((4,), lambda i: A[i] + 1.0, name="C")
    D = T.compute((4,), lambda i: A[i] - 1.0, name="D")
    f = T.create_prim_func([A, B, C, D])
    sch = S.Schedule(f)
    b, d = sch.get_loops("B")[0], sch.get_loops("D")[0]
    assert_refused(sch, lambda: sch.merge(b, d), "the loop nests are not adjacent",
                   LoopNestError)
    sch.blockize(sch.get_loops("C")[0])
    c = sch.get_loops("C")[0]
    assert_refused(sch, lambda: sch.merge(b, c), "are in different blocks' scopes",
                   LoopNestError)
    assert_refused(sch, lambda: sch.merge(b), "expected at least 2 loops, got 1",
                   ScheduleArgumentError)


def test_refuses_a_parallel_loop():
    sch = S.Schedule(two_maps())
    b, c = sch.get_loops("B")[0], sch.get_loops("C")[0]
    sch.parallel(b)
    assert_refused(sch, lambda: sch.merge(b, c), "would lose its kind 'parallel'",
                   LoopNestError)
