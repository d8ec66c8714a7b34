"""Axis separators: the Buffer field, set_axis_separator, and AXIS_SEPARATOR in
transform_layout (recorded on the buffer, printed, parsed, replayed; numbers unchanged)."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from cuvil_tir.errors import ShapeError
from schedules.errors import ScheduleArgumentError, StorageError
from schedules.primitives.layout import LayoutError
from tests.schedules.testing import (assert_refused, run, run_llvm,
                                     verify_text_roundtrip, verify_trace_roundtrip)


def scale_then_shift(n=6, m=8):
    A = T.placeholder((n, m), name="A")
    B = T.compute((n, m), lambda i, j: A[i, j] * 3.0, name="B")
    C = T.compute((n, m), lambda i, j: B[i, j] - 1.0, name="C")
    return T.create_prim_func([A, C])


def check(sch, n=6, m=8):
    a = np.random.default_rng(1).random((n, m), dtype="float32")
    want = a * 3 - 1
    for runner in (run, run_llvm):
        np.testing.assert_allclose(runner(sch, [a, np.zeros((n, m), "float32")])[1], want,
                                   rtol=1e-6)


def test_buffer_field_defaults_empty_and_is_checked():
    assert T.decl_buffer((4, 4), "float32", "X").axis_separators == ()
    assert T.decl_buffer((2, 3, 4), "float32", "X", axis_separators=[1, 2]).axis_separators \
        == (1, 2)
    with pytest.raises(ShapeError, match=r"buffer X: axis_separators \[2, 1\] must be "
                                         r"increasing axes in 1\.\.2"):
        T.decl_buffer((2, 3, 4), "float32", "X", axis_separators=[2, 1])
    with pytest.raises(ShapeError, match=r"axis_separators must be a list of ints such as "
                                         r"\[1\], found 'a'"):
        T.decl_buffer((2, 3), "float32", "X", axis_separators="a")


def test_separators_take_part_in_structural_equality_and_fingerprint():
    from cuvil_tir.fingerprint import fingerprint
    f = scale_then_shift()
    sch = S.Schedule(f)
    sch.set_axis_separator("B", 0, [1])
    assert not T.structural_equal(f, sch.func)
    assert fingerprint(f) != fingerprint(sch.func)


def test_set_axis_separator_on_an_intermediate():
    f = scale_then_shift()
    sch = S.Schedule(f)
    sch.set_axis_separator(sch.get_block("B"), 0, [1])
    (buf,) = sch.func.body.block.alloc_buffers
    assert buf.axis_separators == (1,)
    assert 'T.alloc_buffer((6, 8), "float32", axis_separators=[1])' in str(sch.func)
    check(sch)
    verify_trace_roundtrip(sch, f)


def test_set_axis_separator_on_a_parameter_read():
    f = scale_then_shift()
    sch = S.Schedule(f)
    sch.set_axis_separator("B", 0, [1], buffer_index_type="read")
    assert sch.func.params[0].axis_separators == (1,)
    assert 'A: T.Buffer((6, 8), "float32", axis_separators=[1])' in str(sch.func)
    check(sch)
    verify_trace_roundtrip(sch, f)


def test_set_axis_separator_refusals():
    sch = S.Schedule(scale_then_shift())
    assert_refused(sch, lambda: sch.set_axis_separator("B", 1, [1]),
                   r"set_axis_separator: block 'B' has 1 write buffer\(s\) \['B'\]; "
                   "buffer_index 1 is out of range", ScheduleArgumentError)
    assert_refused(sch, lambda: sch.set_axis_separator("B", 0, [2]),
                   r"set_axis_separator: buffer 'B': axis_separators \[2\] must be "
                   r"increasing axes in 1\.\.1", StorageError)
    assert_refused(sch, lambda: sch.set_axis_separator("B", 0, [1], "both"),
                   "buffer_index_type must be 'read' or 'write', found 'both'",
                   ScheduleArgumentError)


def test_transform_layout_with_axis_separator_marker():
    f = scale_then_shift(8, 8)
    sch = S.Schedule(f)
    sch.transform_layout("B", 0, lambda i, j: (i // 4, S.AXIS_SEPARATOR, i % 4, j))
    (buf,) = sch.func.body.block.alloc_buffers
    assert [int(s) for s in buf.shape] == [2, 4, 8] and buf.axis_separators == (1,)
    check(sch, 8, 8)
    verify_trace_roundtrip(sch, f)


def test_transform_layout_refuses_a_leading_or_trailing_separator():
    sch = S.Schedule(scale_then_shift())
    assert_refused(sch, lambda: sch.transform_layout("B", 0, lambda i, j: (
        i, j, S.AXIS_SEPARATOR)),
        r"transform_layout: the index map of 'B': axis_separators \[2\] must be "
        r"increasing axes in 1\.\.1", LayoutError)


def test_other_index_maps_refuse_the_marker():
    sch = S.Schedule(scale_then_shift())
    assert_refused(sch, lambda: sch.transform_block_layout("B", lambda i, j: (
        i, S.AXIS_SEPARATOR, j)),
        "AXIS_SEPARATOR groups a buffer's axes; only transform_layout takes it, "
        "transform_block_layout does not", LayoutError)


PARSED = '''
def f(A: T.Buffer((4, 4), "float32", axis_separators=[1]), C: T.Buffer((4, 4), "float32")):
    B = T.alloc_buffer((4, 4), "float32", axis_separators=[1])
    for i, j in T.grid(4, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B_view = T.match_buffer(B[vi, vj], (), offset_factor=1, axis_separators=[0])
            B_view[()] = A[vi, vj] * 2.0
    for i, j in T.grid(4, 4):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + 1.0
'''


def test_separators_parse_print_and_lower_to_the_same_numbers():
    f = T.parse(PARSED)
    assert f.params[0].axis_separators == (1,)
    assert f.body.block.alloc_buffers[0].axis_separators == (1,)
    verify_text_roundtrip(f)
    a = np.arange(16, dtype="float32").reshape(4, 4)
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(f, [a, np.zeros((4, 4), "float32")])[1],
                                      a * 2 + 1)
