"""Regression tests for schedules that were accepted and computed wrong results.

Each program was found by random differential testing (issue 11 §6).  A schedule that
is legal must now agree with numpy, interpreted and compiled; one that cannot be made
right is refused with a coded error naming the reason, and the schedule is unchanged.
"""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from schedules.errors import ReductionLoopError
from schedules.errors import BlockLocationError, CacheStageError

from .testing import assert_refused, run, run_llvm, verify_trace_roundtrip


def _agree(sch, arrays, index, expected):
    for runner in (run, run_llvm):
        got = runner(sch, arrays)[index]
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_cache_write_after_splitting_a_symbolic_loop_copies_every_element():
    n = T.size_var("n")
    X = T.placeholder((n,), "int32", name="X")
    Y = T.compute((n,), lambda i: X[i] + 1, name="Y")
    f = T.create_prim_func([X, Y])
    sch = S.Schedule(f)
    sch.split(sch.get_loops(sch.get_block("Y"))[0], [2, 5, None])
    sch.cache_write(sch.get_block("Y"), 0, "global")
    copy_loop = sch.get_loops(sch.get_block("Y_global"))[0]
    assert "4294" not in str(sch.func) and "1932735" not in str(sch.func)
    assert copy_loop.var.name == "ax0"
    for size in (1, 10, 37):
        x = np.arange(size, dtype="int32")
        _agree(sch, [x, np.zeros(size, "int32")], 1, x + 1)
    verify_trace_roundtrip(sch, f)


def test_compute_inline_of_a_transposed_layout_reads_the_right_element():
    X = T.placeholder((3, 3), name="X")
    A = T.compute((3, 3), lambda i, j: X[i, j] * 2.0, name="A")
    B = T.compute((3, 3), lambda i, j: A[i, j] + 1.0, name="B")
    f = T.create_prim_func([X, B])
    sch = S.Schedule(f, debug=True)
    sch.transform_layout(sch.get_block("A"), 0, lambda a, b: (b, a))
    sch.compute_inline(sch.get_block("A"))
    x = np.random.default_rng(0).standard_normal((3, 3)).astype("float32")
    _agree(sch, [x, np.zeros((3, 3), "float32")], 1, x * 2 + 1)
    verify_trace_roundtrip(sch, f)


def _overlapping_reduction():
    X = T.placeholder((3,), "int32", name="X")
    k = T.reduce_axis((0, 3), name="k")
    A = T.compute((2,), lambda i: T.sum(X[k], axis=k), name="A")
    B = T.compute((2,), lambda i: A[i] + A[1 - i], name="B")
    return T.create_prim_func([X, B])


def test_compute_at_refuses_a_decomposed_reduction_update():
    sch = S.Schedule(_overlapping_reduction())
    sch.decompose_reduction(sch.get_block("A"), sch.get_loops(sch.get_block("A"))[0])
    a, i = sch.get_block("A"), sch.get_loops(sch.get_block("B"))[0]
    assert_refused(sch, lambda: sch.compute_at(a, i),
                   r"compute_at: block 'A_update' is a reduction update without an init",
                   BlockLocationError)


def test_compute_at_of_the_whole_reduction_recomputes_with_its_init():
    f = _overlapping_reduction()
    sch = S.Schedule(f, debug=True)
    sch.compute_at(sch.get_block("A"), sch.get_loops(sch.get_block("B"))[0])
    x = np.array([1, 2, 3], "int32")
    _agree(sch, [x, np.zeros(2, "int32")], 1, np.array([12, 12]))
    verify_trace_roundtrip(sch, f)


def _row_sum(rows=2, cols=3):
    X = T.placeholder((rows, cols), name="X")
    k = T.reduce_axis((0, cols), name="k")
    Y = T.compute((rows,), lambda i: T.sum(X[i, k], axis=k), name="Y")
    return T.create_prim_func([X, Y])


def test_rfactor_refuses_the_outer_loop_of_a_non_dividing_split():
    sch = S.Schedule(_row_sum())
    ko, _ = sch.split(sch.get_loops(sch.get_block("Y"))[1], [3, 2])
    assert_refused(sch, lambda: sch.rfactor(ko, 0),
                   r"rfactor: the guard k_0 \* 2 \+ k_1 < 3 of block 'Y' leaves some slots "
                   r"of loop 'k_0' without any iteration", ReductionLoopError)


def test_rfactor_of_the_inner_loop_of_a_non_dividing_split_is_exact():
    f = _row_sum()
    sch = S.Schedule(f, debug=True)
    _, ki = sch.split(sch.get_loops(sch.get_block("Y"))[1], [2, 2])
    sch.rfactor(ki, 0)
    x = np.random.default_rng(1).standard_normal((2, 3)).astype("float32")
    _agree(sch, [x, np.zeros(2, "float32")], 1, x.sum(1))
    verify_trace_roundtrip(sch, f)


def _padding():
    X = T.placeholder((4,), name="X")
    P = T.compute((6,), lambda h: T.if_then_else(T.all(h >= 1, h < 5), X[h - 1],
                                                 T.const(0.0, "float32")), name="P")
    Y = T.compute((6,), lambda h: P[h] * 2.0, name="Y")
    return T.create_prim_func([X, Y])


def test_reverse_compute_at_refuses_a_padding_stage_whose_border_would_not_run():
    sch = S.Schedule(_padding())
    xl = sch.cache_read(sch.get_block("P"), 0, "local")
    p, ax0 = sch.get_block("P"), sch.get_loops(xl)[0]
    assert_refused(sch, lambda: sch.reverse_compute_at(p, ax0),
                   r"reverse_compute_at: under loop 'ax0' block 'P' would run only for v_h "
                   r"in \[1, 4\] of its domain \[0, 5\]", BlockLocationError)


def test_reverse_compute_at_that_covers_the_domain_is_still_accepted():
    f = _padding()
    sch = S.Schedule(f, debug=True)
    sch.reverse_compute_at(sch.get_block("Y"), sch.get_loops(sch.get_block("P"))[0])
    x = np.arange(1, 5, dtype="float32")
    _agree(sch, [x, np.zeros(6, "float32")], 1, np.array([0, 2, 4, 6, 8, 0], "float32"))
    verify_trace_roundtrip(sch, f)


def test_cache_write_refuses_an_update_whose_init_is_elsewhere():
    sch = S.Schedule(_row_sum(4, 3))
    sch.blockize(sch.get_loops(sch.get_block("Y"))[1])
    sch.decompose_reduction(sch.get_block("Y_o"), sch.get_loops(sch.get_block("Y_o"))[0])
    y = sch.get_block("Y")
    assert_refused(sch, lambda: sch.cache_write(y, 0, "local"),
                   r"cache_write: block 'Y' reads 'Y' before writing it and has no init",
                   CacheStageError)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_debug_mode_catches_reads_of_uninitialised_memory(dtype):
    # a hand-written accumulator without an init: zero-filled memory hid it before
    A = T.decl_buffer((4,), dtype, "A")
    B = T.decl_buffer((1,), dtype, "B")
    acc = T.decl_buffer((1,), dtype, "acc")
    i = T.var("i")
    zero = T.const(0)
    root = T.Block("root", (), (), (), T.seq(
        T.For(i, zero, T.const(4), "serial", T.BufferStore(acc, acc[zero] + A[i], (zero,))),
        T.BufferStore(B, acc[zero], (zero,))), None, (acc,))
    f = T.PrimFunc((A, B), T.BlockRealize((), T.const(True), root))
    a = np.arange(4).astype(dtype)
    b = np.zeros(1, dtype)
    if dtype == "float32":
        T.interpret(f, a, b)
        assert np.isnan(b[0])
    else:
        with pytest.raises(T.LoweringError, match=r"read of uninitialised memory: "
                                                  r"buffer acc\[0\]"):
            T.interpret(f, a, b)


def test_blockize_below_a_non_dividing_split_guards_the_outer_block():
    X = T.placeholder((10,), name="X")
    f = T.create_prim_func([X, T.compute((10,), lambda i: X[i] * 2.0, name="Y")])
    sch = S.Schedule(f, debug=True)
    _, _, inner = sch.split(sch.get_loops(sch.get_block("Y"))[0], [5, 1, 4])
    sch.blockize(inner)
    outer = sch.func.body.block.body.body.body
    assert str(outer.predicate) == "i_0 * 4 + i_1 * 4 < 10"
    x = np.arange(10, dtype="float32")
    _agree(sch, [x, np.zeros(10, "float32")], 1, x * 2)


def test_compute_inline_into_a_blockized_consumer_relaxes_the_outer_reads():
    X = T.placeholder((4, 4), name="X")
    A = T.compute((4, 4), lambda i, j: X[i, j] * 2.0, name="A")
    f = T.create_prim_func([X, T.compute((4, 4), lambda i, j: A[i, j] + 1.0, name="B")])
    sch = S.Schedule(f, debug=True)
    sch.blockize(sch.get_loops(sch.get_block("B"))[1])
    sch.compute_inline(sch.get_block("A"))
    outer = sch.func.body.block.body.body.block
    assert str(outer.reads[0]) == "X[v_i_o, 0:4]"
    x = np.random.default_rng(2).standard_normal((4, 4)).astype("float32")
    _agree(sch, [x, np.zeros((4, 4), "float32")], 1, x * 2 + 1)
    verify_trace_roundtrip(sch, f)


def test_vectorized_padded_layout_over_a_reduction_builds_and_agrees():
    # transform_layout pads Y (3 -> 2x2) with a guard T.if_then_else(v0 == 1 and 1 <= v1,
    # ...); vectorizing the lane loop unrolls it, leaving the else arm under ax0 != 1:
    # the build refused the accepted schedule with CVL-E104 (issue 25)
    X = T.placeholder((3, 5), name="X")
    k = T.reduce_axis((0, 5), name="k")
    Y = T.compute((3,), lambda i: T.sum(X[i, k], axis=k), name="Y")
    Z = T.compute((3,), lambda i: Y[i] * 2.0, name="Z")
    f = T.create_prim_func([X, Z])
    sch = S.Schedule(f)
    sch.transform_layout(sch.get_block("Y"), 0, lambda k: (k // 2, k % 2), pad_value=0.0)
    sch.vectorize(sch.get_loops(sch.get_block("Y"))[1])
    x = np.random.default_rng(0).standard_normal((3, 5)).astype("float32")
    _agree(sch, [x, np.zeros(3, "float32")], 1, x.sum(1) * 2)
