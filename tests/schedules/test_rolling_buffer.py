"""rolling_buffer: window shapes, modular indexing, skipped overlap, numerics under
perfect and non-perfect tiling, refusals."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from schedules.errors import StorageError
from tests.schedules.testing import assert_refused, run, verify_trace_roundtrip


def box_sum(h, w, k=3):
    """Two stacked k x k box sums (valid padding): B is the intermediate."""
    A = T.placeholder((h, w), "int32", name="A")
    r0, r1 = T.reduce_axis((0, k), name="r0"), T.reduce_axis((0, k), name="r1")
    B = T.compute((h - k + 1, w - k + 1),
                  lambda i, j: T.sum(A[i + r0, j + r1], axis=[r0, r1]), name="B")
    s0, s1 = T.reduce_axis((0, k), name="s0"), T.reduce_axis((0, k), name="s1")
    C = T.compute((h - 2 * k + 2, w - 2 * k + 2),
                  lambda i, j: T.sum(B[i + s0, j + s1] * 3, axis=[s0, s1]), name="C")
    return T.create_prim_func([A, C])


def tiled(func, tiles, consumer="C", producer="B"):
    """Tile the consumer's spatial loops by ``tiles`` and compute the producer at the
    innermost tile loop."""
    sch = S.Schedule(func)
    loops = sch.get_loops(sch.get_block(consumer))
    outer, inner = [], []
    for loop, t in zip(loops, tiles):
        o, i = sch.split(loop, [None, t])
        outer.append(o)
        inner.append(i)
    sch.reorder(*outer, *inner)
    sch.compute_at(sch.get_block(producer), outer[-1])
    return sch


def check_same(sch, func, seed=0):
    a = np.random.default_rng(seed).integers(-50, 50, [int(d) for d in func.params[0].shape])
    out = [int(d) for d in func.params[1].shape]
    want = run(func, [a.astype("int32"), np.zeros(out, "int32")])[1]
    got = run(sch, [a.astype("int32"), np.zeros(out, "int32")])[1]
    np.testing.assert_array_equal(got, want)


def alloc(sch, name):
    return next(b for b in sch.func.body.block.alloc_buffers if b.name == name)


@pytest.mark.parametrize("h,w,tiles,shape", [
    (12, 8, (4, 4), (6, 6)),       # tiles of 4 rows: windows of 6 rows, 2 shared
    (14, 8, (4, 4), (6, 6)),       # 10 rows of C in tiles of 4: the last is partial
    (13, 9, (3, 5), (5, 7)),       # both axes non-perfect
    (10, 6, (1, 2), (3, 4)),       # one row per tile: windows of 3, 2 kept
])
def test_rolls_rows_and_keeps_numbers(h, w, tiles, shape):
    f = box_sum(h, w)
    sch = tiled(f, tiles)
    sch.rolling_buffer(sch.get_block("B"), 0)
    buf = alloc(sch, "B")
    assert [int(d) for d in buf.shape] == [shape[0], w - 2]    # columns keep their size
    text = str(sch.func)
    assert f"% {shape[0]}" in text and "i_0 < 1 or 2 <= ax0" in text
    assert "T.axis.opaque" in text
    check_same(sch, f)
    verify_trace_roundtrip(sch, f)


def test_rolls_the_outer_of_two_tiled_axes():
    f = box_sum(12, 12)
    sch = tiled(f, (4, 4))
    sch.rolling_buffer("B", 0)
    # rows move with the outer tile loop: rows roll, columns skip their overlap only
    assert [int(d) for d in alloc(sch, "B").shape] == [6, 10]
    assert "(i_0 < 1 or 2 <= ax0) and (j_0 < 1 or 2 <= ax1)" in str(sch.func)
    check_same(sch, f, seed=3)
    assert "rolling_buffer" in sch.trace.as_python()
    verify_trace_roundtrip(sch, f)


def test_cascade_of_two_rolled_buffers():
    A = T.placeholder((16, 4), "int32", name="A")
    r = T.reduce_axis((0, 3), name="r")
    B = T.compute((14, 4), lambda i, j: T.sum(A[i + r, j], axis=r), name="B")
    s = T.reduce_axis((0, 3), name="s")
    D = T.compute((6, 4), lambda i, j: T.sum(B[2 * i + s, j], axis=s), name="D")
    t = T.reduce_axis((0, 3), name="t")
    C = T.compute((4, 4), lambda i, j: T.sum(D[i + t, j] + 1, axis=t), name="C")
    f = T.create_prim_func([A, C])
    sch = S.Schedule(f)
    io, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], [2, 2])
    sch.compute_at(sch.get_block("D"), io)
    sch.compute_at(sch.get_block("B"), io)
    sch.rolling_buffer(sch.get_block("B"), 0)
    sch.rolling_buffer(sch.get_block("D"), 0)
    assert int(alloc(sch, "D").shape[0]) == 4 and int(alloc(sch, "B").shape[0]) == 9
    check_same(sch, f, seed=1)
    verify_trace_roundtrip(sch, f)


UPSAMPLED = '''@T.prim_func
def f(A: T.Buffer((16, 4), "int32"), C: T.Buffer((20, 4), "int32")):
    B = T.alloc_buffer((14, 4), "int32")
    for i_0 in T.serial(4):
        for ax0 in T.serial(5):
            for ax1 in T.serial(4):
                for ax2 in T.serial(3):
                    with T.block("B"):
                        vi = T.axis.spatial(14, i_0 * 5 // 2 + ax0)
                        vj = T.axis.spatial(4, ax1)
                        vr = T.axis.reduce(3, ax2)
                        T.where(i_0 * 5 // 2 + ax0 < 14)
                        with T.init():
                            B[vi, vj] = 0
                        B[vi, vj] = B[vi, vj] + A[vi + vr, vj]
        for i_1 in T.serial(5):
            for j in T.serial(4):
                for r in T.serial(3):
                    with T.block("C"):
                        vi = T.axis.spatial(20, i_0 * 5 + i_1)
                        vj = T.axis.spatial(4, j)
                        vr = T.axis.reduce(3, r)
                        with T.init():
                            C[vi, vj] = 0
                        C[vi, vj] = C[vi, vj] + B[vi // 2 + vr, vj]
'''


def test_window_moving_by_a_fraction():
    # the window starts at i_0 * 5 // 2: steps of 2 or 3 rows, overlap at least 2
    f = T.parse(UPSAMPLED)
    sch = S.Schedule(f)
    sch.rolling_buffer(sch.get_block("B"), 0)
    assert int(alloc(sch, "B").shape[0]) == 5
    check_same(sch, f, seed=2)
    verify_trace_roundtrip(sch, f)


def test_refuses_a_parameter_buffer():
    f = box_sum(8, 8)
    sch = tiled(f, (2, 2))
    assert_refused(sch, lambda: sch.rolling_buffer("C", 0),
                   "buffer 'C' is a function parameter", StorageError)


def test_refuses_an_index_out_of_range():
    sch = tiled(box_sum(8, 8), (2, 2))
    assert_refused(sch, lambda: sch.rolling_buffer("B", 1),
                   r"write_buffer_index 1 is out of range: block 'B' writes 1 buffer",
                   StorageError)


def test_refuses_a_producer_not_under_the_consumers_loop():
    f = box_sum(12, 8)
    sch = S.Schedule(f)
    for name in ("B", "C"):
        sch.split(sch.get_loops(sch.get_block(name))[0], [None, 4])
    assert_refused(sch, lambda: sch.rolling_buffer("B", 0),
                   "shares no loop with the blocks reading its buffer", StorageError)


def test_refuses_windows_that_do_not_overlap():
    A = T.placeholder((8,), "int32", name="A")
    B = T.compute((8,), lambda i: A[i] + 1, name="B")
    C = T.compute((8,), lambda i: B[i] * 2, name="C")
    f = T.create_prim_func([A, C])
    sch = S.Schedule(f)
    io, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], [2, 4])
    sch.compute_at(sch.get_block("B"), io)
    assert_refused(sch, lambda: sch.rolling_buffer("B", 0),
                   "do not overlap", StorageError)


TWO_WRITERS = '''@T.prim_func
def f(A: T.Buffer((10,), "int32"), C: T.Buffer((8,), "int32")):
    B = T.alloc_buffer((10,), "int32")
    for i_0 in T.serial(2):
        for ax0 in T.serial(6):
            with T.block("B0"):
                vi = T.axis.spatial(10, i_0 * 4 + ax0)
                B[vi] = A[vi]
        for ax0 in T.serial(6):
            with T.block("B1"):
                vi = T.axis.spatial(10, i_0 * 4 + ax0)
                B[vi] = B[vi] + A[vi]
        for i_1 in T.serial(4):
            with T.block("C"):
                vi = T.axis.spatial(8, i_0 * 4 + i_1)
                C[vi] = B[vi] + B[vi + 2]
'''


def test_refuses_two_writers():
    sch = S.Schedule(T.parse(TWO_WRITERS))
    assert_refused(sch, lambda: sch.rolling_buffer("B0", 0),
                   r"written by \['B0', 'B1'\]; only a buffer with a single writer",
                   StorageError)


def _with(reader_index, pred=""):
    return f'''@T.prim_func
def f(A: T.Buffer((12,), "int32"), C: T.Buffer((8,), "int32")):
    B = T.alloc_buffer((10,), "int32")
    for i_0 in T.serial(2):
        for ax0 in T.serial(6):
            with T.block("B"):
                vi = T.axis.spatial(10, i_0 * 4 + ax0)
                {pred}
                B[vi] = A[vi] + A[vi + 2]
        for i_1 in T.serial(4):
            with T.block("C"):
                vi = T.axis.spatial(8, i_0 * 4 + i_1)
                C[vi] = B[{reader_index}]
'''


def test_refuses_a_reader_outside_the_window():
    # C reads row vi + 2 ... vi + 2 of a later tile: [i_0*4 + 2, i_0*4 + 6) fits, but
    # B[9 - vi] reads a row another iteration computes
    sch = S.Schedule(T.parse(_with("9 - vi")))
    assert_refused(sch, lambda: sch.rolling_buffer("B", 0),
                   "not within the window", StorageError)


def test_refuses_a_predicate_that_skips_in_bounds_elements():
    sch = S.Schedule(T.parse(_with("vi + 1", "T.where(i_0 < 1 or 1 <= ax0)")))
    assert_refused(sch, lambda: sch.rolling_buffer("B", 0),
                   "skips more than out-of-bounds elements", StorageError)


def test_accepts_the_reader_inside_the_window():
    f = T.parse(_with("vi + 2"))
    sch = S.Schedule(f)
    sch.rolling_buffer(sch.get_block("B"), 0)
    a = np.arange(12, dtype="int32") * 7 % 11
    want = run(f, [a, np.zeros(8, "int32")])[1]
    np.testing.assert_array_equal(run(sch, [a, np.zeros(8, "int32")])[1], want)
    verify_trace_roundtrip(sch, f)


ITERATION_VALUE = '''@T.prim_func
def f(A: T.Buffer((12,), "int32"), C: T.Buffer((8,), "int32")):
    B = T.alloc_buffer((10,), "int32")
    for i_0 in T.serial(2):
        for ax0 in T.serial(6):
            with T.block("B"):
                vi = T.axis.spatial(10, i_0 * 4 + ax0)
                vo = T.axis.spatial(2, i_0)
                B[vi] = A[vi] + vo
        for i_1 in T.serial(4):
            with T.block("C"):
                vi = T.axis.spatial(8, i_0 * 4 + i_1)
                C[vi] = B[vi] + B[vi + 2]
'''


def test_refuses_values_that_change_with_the_iteration():
    # B[4] and B[5] hold A + 0 at i_0 = 0 but A + 1 at i_0 = 1: keeping them would
    # change C
    sch = S.Schedule(T.parse(ITERATION_VALUE))
    assert_refused(sch, lambda: sch.rolling_buffer("B", 0),
                   "not one distinct data-parallel variable per index: an element kept "
                   "from an earlier iteration would differ", StorageError)
