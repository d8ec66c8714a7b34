"""transform_layout's padding: written in the producer (if_then_else over the new
shape), after the writers (a T.where block), or before them (maps without inverse);
pad values as numbers or functions of the new indices; refusals."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from cuvil_tir.analysis import tree
from schedules.errors import ScheduleArgumentError
from tests.schedules.testing import (assert_refused, run, run_llvm,
                                     verify_trace_roundtrip)


def body(sch, name):
    return tree.get(sch.func, tree.find_block(sch.func, name)).block


def row_sums(n=10, k=6):
    # the output S is a parameter, so its padding can be inspected
    X = T.placeholder((n, k), "int32", name="X")
    r = T.reduce_axis((0, k), name="r")
    S_ = T.compute((n,), lambda i: T.sum(X[i, r], axis=r), name="S")
    return T.create_prim_func([X, S_])


def test_reduction_producer_guards_its_init_and_update():
    f = row_sums()
    sch = S.Schedule(f)
    sch.transform_layout("S", 0, lambda i: (i // 4, i % 4), pad_value=-7)
    blk = body(sch, "S")
    assert [iv.kind for iv in blk.iter_vars] == ["spatial", "spatial", "reduce"]
    assert "T.if_then_else(v0 == 2 and 2 <= v1, -7" in str(blk.init)
    assert "T.if_then_else(v0 == 2 and 2 <= v1, -7" in str(blk.body)
    x = np.arange(60, dtype="int32").reshape(10, 6)
    for runner in (run, run_llvm):
        out = runner(sch, [x, np.zeros((3, 4), "int32")])[1].ravel()
        np.testing.assert_array_equal(out[:10], x.sum(axis=1))
        np.testing.assert_array_equal(out[10:], [-7, -7])
    verify_trace_roundtrip(sch, f)


OPAQUE = '''
def f(X: T.Buffer((6, 3), "float32"), Y: T.Buffer((6,), "float32")):
    for i in T.serial(6):
        Y[i] = T.float32(1)
        for k in T.serial(3):
            with T.block("acc"):
                Y[i] = Y[i] * X[i, k]
'''


def test_loops_indexing_directly_are_rebuilt_too():
    f = T.parse(OPAQUE)
    sch = S.Schedule(f)
    sch.transform_layout("acc", 0, lambda i: (i // 4, i % 4), pad_value=0.5)
    text = str(sch.func)
    assert "for ax0 in T.serial(2):" in text and "for ax1 in T.serial(4):" in text
    x = np.random.default_rng(0).random((6, 3), dtype="float32")
    out = run(sch, [x, np.zeros((2, 4), "float32")])[1].ravel()
    np.testing.assert_allclose(out[:6], x.prod(axis=1), rtol=1e-6)
    np.testing.assert_array_equal(out[6:], [0.5, 0.5])
    verify_trace_roundtrip(sch, f)


TWO_OUTPUTS = '''
def f(A: T.Buffer((9,), "float32"), B: T.Buffer((9,), "float32"),
      C: T.Buffer((9,), "float32")):
    for i in T.serial(9):
        with T.block("both"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] + T.float32(1)
            C[vi] = A[vi] - T.float32(1)
'''


def test_a_producer_with_another_effect_gets_a_padding_block_after_it():
    f = T.parse(TWO_OUTPUTS)
    sch = S.Schedule(f)
    sch.transform_layout("both", 0, lambda i: (i // 4, i % 4), pad_value=9.0)
    assert [b.name for b in sch.get_child_blocks("root")] == ["both", "B_pad"]
    assert body(sch, "B_pad").iter_vars[0].dom.extent.value == 3
    assert "T.where(ax0 == 2 and 1 <= ax1)" in str(sch.func)
    a = np.arange(9, dtype="float32")
    for runner in (run, run_llvm):
        _, b, c = runner(sch, [a, np.zeros((3, 4), "float32"), np.zeros(9, "float32")])
        np.testing.assert_array_equal(b.ravel()[:9], a + 1)
        np.testing.assert_array_equal(b.ravel()[9:], [9.0] * 3)
        np.testing.assert_array_equal(c, a - 1)
    verify_trace_roundtrip(sch, f)


def test_a_split_producer_is_not_row_major_and_gets_a_padding_block():
    f = row_sums()
    sch = S.Schedule(f)
    i, _ = sch.get_loops(sch.get_block("S"))
    sch.split(i, [None, 5])
    sch.transform_layout("S", 0, lambda i: (i // 4, i % 4), pad_value=0)
    assert [b.name for b in sch.get_child_blocks("root")] == ["S", "S_pad"]
    x = np.arange(60, dtype="int32").reshape(10, 6)
    out = run(sch, [x, np.ones((3, 4), "int32")])[1].ravel()
    np.testing.assert_array_equal(out, list(x.sum(axis=1)) + [0, 0])
    verify_trace_roundtrip(sch, f)


def test_pad_value_as_a_function_of_the_new_indices():
    f = row_sums()
    sch = S.Schedule(f)
    sch.transform_layout("S", 0, lambda i: (i // 4, i % 4), pad_value=lambda a, b: a * 10 + b)
    x = np.arange(60, dtype="int32").reshape(10, 6)
    out = run(sch, [x, np.zeros((3, 4), "int32")])[1].ravel()
    np.testing.assert_array_equal(out[10:], [22, 23])
    verify_trace_roundtrip(sch, f)


def test_an_intermediate_under_a_map_without_inverse_is_filled_before_its_writer():
    A = T.placeholder((8,), name="A")
    B = T.compute((8,), lambda i: A[i] * 2.0, name="B")
    C = T.compute((8,), lambda i: B[i] + 1.0, name="C")
    f = T.create_prim_func([A, C])
    sch = S.Schedule(f)
    sch.transform_layout("B", 0, lambda i: (i // 4, (i % 4) * (i % 4)), pad_value=0.0)
    assert [b.name for b in sch.get_child_blocks("root")] == ["B_pad", "B", "C"]
    a = np.arange(8, dtype="float32")
    np.testing.assert_array_equal(run(sch, [a, np.zeros(8, "float32")])[1], a * 2 + 1)
    verify_trace_roundtrip(sch, f)


def test_assume_injective_transform_leaves_the_padding_unwritten():
    f = row_sums()
    sch = S.Schedule(f)
    sch.transform_layout("S", 0, lambda i: (i // 4, i % 4), assume_injective_transform=True)
    assert [b.name for b in sch.get_child_blocks("root")] == ["S"]
    assert [int(s) for s in sch.func.params[1].shape] == [3, 4]
    x = np.arange(60, dtype="int32").reshape(10, 6)
    out = run(sch, [x, np.zeros((3, 4), "int32")])[1].ravel()
    np.testing.assert_array_equal(out[:10], x.sum(axis=1))
    verify_trace_roundtrip(sch, f)


@pytest.mark.parametrize("pad,message", [
    (0, r"option 'pad_value' to transform_layout: the int 0 does not match buffer 'S' "
        r"of dtype float32; write 0\.0"),
    (T.const(0, "int8"), r"option 'pad_value' to transform_layout: T\.int8\(0\) has dtype int8, "
                         r"buffer 'S' holds float32"),
    (lambda a: a, r"option 'pad_value' to transform_layout: a function of the new indices "
                  r"takes 2 of them for buffer 'S'"),
    (lambda a, b: T.decl_buffer((1,), "float32", "other")[0],
     r"option 'pad_value' to transform_layout: the value other\[0\] reads buffer\(s\) "
     r"\['other'\]; the padding may only be a function of the new indices"),
])
def test_pad_value_refusals(pad, message):
    X = T.placeholder((10,), name="X")
    f = T.create_prim_func([X, T.compute((10,), lambda i: X[i] + 1.0, name="S")])
    sch = S.Schedule(f)
    assert_refused(sch, lambda: sch.transform_layout("S", 0, lambda i: (i // 4, i % 4),
                                                     pad_value=pad),
                   message, ScheduleArgumentError)


def test_a_float_pad_value_for_an_int_buffer_is_refused():
    sch = S.Schedule(row_sums())
    assert_refused(sch, lambda: sch.transform_layout("S", 0, lambda i: (i // 4, i % 4),
                                                     pad_value=1.5),
                   r"option 'pad_value' to transform_layout: the float 1\.5 does not match "
                   r"buffer 'S' of dtype int32", ScheduleArgumentError)


SCAN = '''
def f(A: T.Buffer((6,), "int32"), B: T.Buffer((6,), "int32")):
    for i in T.serial(6):
        with T.block("scan"):
            vi = T.axis.remap("S", [i])
            B[vi] = T.if_then_else(vi > 0, B[T.max(vi - 1, 0)], 0) + A[vi]
'''


def test_a_producer_reading_other_elements_of_its_buffer_keeps_its_loops():
    # a running sum reads B[i - 1]: rebuilding its loops over a new layout could change
    # the order the old indices are visited in, so the padding is written after it
    f = T.parse(SCAN)
    sch = S.Schedule(f)
    sch.transform_layout("scan", 0, lambda i: (i % 4, i // 4), pad_value=-1)
    assert [b.name for b in sch.get_child_blocks("root")] == ["scan", "B_pad"]
    a = np.arange(1, 7, dtype="int32")
    out = run(sch, [a, np.zeros((4, 2), "int32")])[1]
    got = np.array([out[i % 4, i // 4] for i in range(6)])
    np.testing.assert_array_equal(got, np.cumsum(a))
    np.testing.assert_array_equal([out[2, 1], out[3, 1]], [-1, -1])
    verify_trace_roundtrip(sch, f)


def symbolic_scale():
    n = T.size_var("n")
    X = T.placeholder((n,), name="X")
    return T.create_prim_func([X, T.compute((n,), lambda i: X[i] * 3.0, name="Y")])


def test_a_symbolic_shape_gets_its_padding_written_for_every_size():
    f = symbolic_scale()
    sch = S.Schedule(f)
    sch.transform_layout("Y", 0, lambda i: (i // 4, i % 4), pad_value=-2.0)
    assert "T.if_then_else(v0 == n // 4 and n % 4 <= v1, T.float32(-2)" in str(sch.func)
    for n in (8, 10):
        x = np.arange(n, dtype="float32")
        rows = (n + 3) // 4
        for runner in (run, run_llvm):
            y = runner(sch, [x, np.zeros((rows, 4), "float32")])[1].ravel()
            np.testing.assert_array_equal(y[:n], x * 3)
            np.testing.assert_array_equal(y[n:], [-2.0] * (rows * 4 - n))
    verify_trace_roundtrip(sch, f)


def test_a_symbolic_shape_that_may_pad_needs_a_pad_value():
    sch = S.Schedule(symbolic_scale())
    assert_refused(sch, lambda: sch.transform_layout("Y", 0, lambda i: (i // 4, i % 4)),
                   r"transform_layout: the index map lays buffer 'Y' of shape \(n,\) out as "
                   r"\(\(n - 1\) // 4 \+ 1, 4\), which has padding for some sizes "
                   r"\(v0 == n // 4 and n % 4 <= v1\)")


def test_an_offset_split_and_a_constant_result_have_their_padding_told_apart():
    # (0, (i + 1) // 8, (i + 1) % 8) on 16 elements: position 0 and the tail are padding
    X = T.placeholder((16,), "int32", name="X")
    f = T.create_prim_func([X, T.compute((16,), lambda i: X[i] + 1, name="Y")])
    sch = S.Schedule(f)
    sch.transform_layout("Y", 0, lambda i: (0, (i + 1) // 8, (i + 1) % 8), pad_value=-1)
    x = np.arange(16, dtype="int32")
    y = run(sch, [x, np.zeros((1, 3, 8), "int32")])[1].ravel()
    np.testing.assert_array_equal(y[1:17], x + 1)
    np.testing.assert_array_equal(y[[0] + list(range(17, 24))], [-1] * 8)
    verify_trace_roundtrip(sch, f)


def test_a_pad_value_out_of_the_dtype_range_is_refused():
    X = T.placeholder((6,), "int8", name="X")
    f = T.create_prim_func([X, T.compute((6,), lambda i: X[i] + T.const(1, "int8"),
                                         name="Y")])
    sch = S.Schedule(f)
    assert_refused(sch, lambda: sch.transform_layout("Y", 0, lambda i: (i // 4, i % 4),
                                                     pad_value=300),
                   r"option 'pad_value' to transform_layout: 300 is not a value of buffer "
                   r"'Y''s dtype int8", ScheduleArgumentError)


def test_an_input_parameter_records_what_its_padding_holds():
    X = T.placeholder((6,), "int32", name="X")
    f = T.create_prim_func([X, T.compute((6,), lambda i: X[i] * 2, name="Y")])
    sch = S.Schedule(f)
    sch.transform_layout("Y", 0, lambda i: (i // 4, i % 4), "read", pad_value=5)
    assert [b.name for b in sch.get_child_blocks("root")] == ["X_assumption", "Y"]
    assert "T.assume(not (v0 == 1 and 2 <= v1) or X[v0, v1] == 5)" in str(sch.func)
    # a hint only: a caller passing other values in the padding gets the same result
    x = np.arange(8, dtype="int32").reshape(2, 4)
    np.testing.assert_array_equal(run(sch, [x, np.zeros(6, "int32")])[1],
                                  x.ravel()[:6] * 2)
    verify_trace_roundtrip(sch, f)
