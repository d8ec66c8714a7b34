"""decompose_padding / can_decompose_padding: fill + in-bound blocks, placement,
numerics, refusals."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from schedules.primitives.decompose_padding import PaddingError
from tests.schedules.testing import assert_refused, run, verify_trace_roundtrip


def padded(n=6, lo=2, hi=1, pad=-1.0, select=False):
    """P = X padded by ``lo`` before and ``hi`` after, then Y = P * 2."""
    X = T.placeholder((n,), name="X")
    m = n + lo + hi

    def body(i):
        c = T.all(i >= lo, i < n + lo)
        if select:     # evaluates both sides: the load must stay in bounds
            return T.Select(c, X[(i - lo) % n], T.const(pad))
        return T.if_then_else(c, X[i - lo], T.const(pad))
    P = T.compute((m,), body, name="P")
    Y = T.compute((m,), lambda i: P[i] * 2.0, name="Y")
    return T.create_prim_func([X, Y])


def pool_pad(h=10, w=9, p=1, k=3):
    X = T.placeholder((h, w), name="X")
    P = T.compute((h + 2 * p, w + 2 * p), lambda i, j: T.if_then_else(
        T.all(i >= p, i < h + p, j >= p, j < w + p), X[i - p, j - p], T.const(0.0)),
        name="P")
    r0, r1 = T.reduce_axis((0, k), name="r0"), T.reduce_axis((0, k), name="r1")
    Y = T.compute((h + 2 * p - k + 1, w + 2 * p - k + 1),
                  lambda i, j: T.sum(P[i + r0, j + r1], axis=[r0, r1]), name="Y")
    return T.create_prim_func([X, Y])


def check(sch, f, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal([int(d) for d in f.params[0].shape]).astype("float32")
    y = np.zeros([int(d) for d in f.params[1].shape], "float32")
    np.testing.assert_allclose(run(sch, [x, y])[1], run(f, [x, y])[1], rtol=1e-6)


@pytest.mark.parametrize("select", [False, True])
def test_one_dimension(select):
    f = padded(select=select)
    sch = S.Schedule(f)
    assert sch.can_decompose_padding("P", sch.get_loops("P")[0])
    fill = sch.decompose_padding("P", sch.get_loops("P")[0])
    assert fill.name == "P_pad_const"
    text = str(sch.func)
    assert "P[v_i] = T.float32(-1)" in text and "P[v_i_1 + 2] = X[v_i_1" in text
    assert [s.extent.value for s in sch.func.body.block.body.seq[:2]] == [9, 6]
    check(sch, f)
    verify_trace_roundtrip(sch, f)


def test_tiled_under_compute_at():
    f = pool_pad()
    sch = S.Schedule(f)
    i, j, _, _ = sch.get_loops("Y")
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, [None, 4])
    sch.reorder(io, jo, ii, ji)
    sch.compute_at(sch.get_block("P"), jo)
    # the tile's bindings are not single loops: the bounds become a predicate
    sch.decompose_padding("P", sch.get_loops("P")[2])
    assert "1 <= " in str(sch.func)
    check(sch, f, seed=1)
    verify_trace_roundtrip(sch, f)


def test_fill_lifted_above_the_consumer():
    f = pool_pad(8, 8)
    sch = S.Schedule(f)
    i, j, _, _ = sch.get_loops("Y")
    io, ii = sch.split(i, [None, 4])
    sch.reorder(io, j, ii)
    sch.compute_at(sch.get_block("P"), io)
    # at the outermost loop: the fill runs once for all tiles, before the consumer
    sch.decompose_padding("P", sch.get_loops("P")[0])
    assert sch.get_child_blocks("root")[0].name == "P_pad_const"
    check(sch, f, seed=2)
    verify_trace_roundtrip(sch, f)


def test_refuses_a_block_that_does_not_pad():
    X = T.placeholder((4,), name="X")
    f = T.create_prim_func([X, T.compute((4,), lambda i: X[i] + 1.0, name="Y")])
    sch = S.Schedule(f)
    loop = sch.get_loops("Y")[0]
    assert not sch.can_decompose_padding("Y", loop)
    assert_refused(sch, lambda: sch.decompose_padding("Y", loop),
                   r"block 'Y' is not a padding block: it stores .*not "
                   r"T.if_then_else\(cond, value, pad\)", PaddingError)


def test_refuses_a_trivial_condition():
    X = T.placeholder((4,), name="X")
    Y = T.compute((4,), lambda i: T.if_then_else(T.all(i >= 0, i < 4), X[i],
                                                   T.const(0.0)), name="Y")
    sch = S.Schedule(T.create_prim_func([X, Y]))
    loop = sch.get_loops("Y")[0]
    assert not sch.can_decompose_padding("Y", loop)
    assert_refused(sch, lambda: sch.decompose_padding("Y", loop),
                   "holds on the whole iteration domain: nothing pads", PaddingError)


def test_refuses_a_pad_value_that_is_not_constant():
    X = T.placeholder((4,), name="X")
    Y = T.compute((6,), lambda i: T.if_then_else(i < 4, X[i], X[0]), name="Y")
    sch = S.Schedule(T.create_prim_func([X, Y]))
    loop = sch.get_loops("Y")[0]
    assert_refused(sch, lambda: sch.decompose_padding("Y", loop),
                   "its pad value X\\[0\\] is not a constant", PaddingError)


def test_refuses_a_condition_on_data():
    X = T.placeholder((4,), name="X")
    Y = T.compute((4,), lambda i: T.if_then_else(X[i] > 0.0, X[i], T.const(0.0)),
                  name="Y")
    sch = S.Schedule(T.create_prim_func([X, Y]))
    loop = sch.get_loops("Y")[0]
    assert_refused(sch, lambda: sch.decompose_padding("Y", loop),
                   "is not a constant bound on one iteration variable", PaddingError)


def test_refuses_a_loop_of_another_block():
    f = padded()
    sch = S.Schedule(f)
    loop = sch.get_loops("Y")[0]
    assert_refused(sch, lambda: sch.decompose_padding("P", loop),
                   "is not a loop of block 'P'", PaddingError)


READ_FIRST = '''@T.prim_func
def f(X: T.Buffer((4,), "float32"), Y: T.Buffer((2, 6), "float32")):
    P = T.alloc_buffer((6,))
    for t in T.serial(2):
        for i in T.serial(6):
            with T.block("Y"):
                vt, vi = T.axis.remap("SS", [t, i])
                Y[vt, vi] = P[vi]
        for i in T.serial(6):
            with T.block("P"):
                vi = T.axis.remap("S", [i])
                P[vi] = T.if_then_else(1 <= vi and vi < 5, X[vi - 1], T.float32(0))
'''


def test_refuses_a_reader_before_the_block_under_the_loop():
    sch = S.Schedule(T.parse(READ_FIRST))
    t = sch.get_loops("P")[0]
    assert_refused(sch, lambda: sch.decompose_padding("P", t),
                   "block 'Y' reads 'P' under loop t before the padding block",
                   PaddingError)
    # at the block's own loop nothing else runs under it
    sch.decompose_padding("P", sch.get_loops("P")[1])
    check(sch, T.parse(READ_FIRST))


DIAGONAL = '''@T.prim_func
def f(X: T.Buffer((4, 4), "float32"), Y: T.Buffer((6, 6), "float32")):
    for i in T.serial(6):
        with T.block("P"):
            vi, vj = T.axis.remap("SS", [i, i])
            Y[vi, vj] = T.if_then_else(1 <= vi and vi < 5, X[vi - 1, 0], T.float32(-1))
'''


def test_a_loop_two_bindings_use_is_guarded_not_shrunk():
    # shrinking i would shift vj too: the bound becomes a predicate instead
    f = T.parse(DIAGONAL)
    sch = S.Schedule(f)
    sch.decompose_padding("P", sch.get_loops("P")[0])
    assert [s.extent.value for s in sch.func.body.block.body.seq] == [6, 6]
    x = np.random.default_rng(3).standard_normal((4, 4)).astype("float32")
    y = np.zeros((6, 6), "float32")
    np.testing.assert_allclose(run(sch, [x, y])[1], run(f, [x, y])[1])
    verify_trace_roundtrip(sch, f)
