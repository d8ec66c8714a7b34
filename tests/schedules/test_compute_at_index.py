"""compute_at / reverse_compute_at ``index``: where in the loop's body the block goes."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from cuvil_tir.analysis import tree
from schedules.errors import BlockLocationError
from tests.schedules.testing import assert_refused, run, run_llvm, verify_trace_roundtrip


def producers_of_c():
    """B and W both feed C."""
    A = T.placeholder((4, 4), name="A")
    B = T.compute((4, 4), lambda i, j: A[i, j] + 1.0, name="B")
    W = T.compute((4, 4), lambda i, j: A[i, j] * 3.0, name="W")
    return T.create_prim_func([A, T.compute((4, 4), lambda i, j: B[i, j] * W[i, j],
                                            name="C")])


def consumers_of_b():
    """E and D both read B."""
    A = T.placeholder((4, 4), name="A")
    B = T.compute((4, 4), lambda i, j: A[i, j] + 1.0, name="B")
    E = T.compute((4, 4), lambda i, j: B[i, j] * 2.0, name="E")
    D = T.compute((4, 4), lambda i, j: B[i, j] - 1.0, name="D")
    return T.create_prim_func([A, E, D])


def order(sch, block):
    """Block names under the outermost loop of ``block``, in program order."""
    path = tree.find_loop(sch.func, sch.get_loops(block)[0].var)
    return [b.block.name for b in tree.blocks_under(tree.get(sch.func, path).body)]


def outputs(sch):
    a = np.random.default_rng(0).random((4, 4), dtype="float32")
    arrays = [a, np.zeros((4, 4), "float32"), np.zeros((4, 4), "float32")][:len(
        sch.func.params)]
    out = run(sch, arrays)
    for x, y in zip(run_llvm(sch, arrays), out):
        np.testing.assert_allclose(x, y, rtol=1e-6)
    return a, out


@pytest.mark.parametrize("index,expected", [(-1, ["W", "B", "C"]), (-2, ["B", "W", "C"]),
                                            (0, ["B", "W", "C"]), (1, ["W", "B", "C"])])
def test_compute_at_index(index, expected):
    f = producers_of_c()
    sch = S.Schedule(f)
    i = sch.get_loops("C")[0]
    sch.compute_at("W", i)
    sch.compute_at("B", i, index=index)
    assert order(sch, "C") == expected
    a, out = outputs(sch)
    np.testing.assert_allclose(out[1], (a + 1) * (a * 3), rtol=1e-6)
    verify_trace_roundtrip(sch, f)


@pytest.mark.parametrize("index,expected", [(-1, ["B", "E", "D"]), (-2, ["B", "D", "E"]),
                                            (1, ["B", "D", "E"]), (2, ["B", "E", "D"])])
def test_reverse_compute_at_index(index, expected):
    f = consumers_of_b()
    sch = S.Schedule(f)
    i = sch.get_loops("B")[0]
    sch.reverse_compute_at("E", i)
    sch.reverse_compute_at("D", i, index=index)
    assert order(sch, "B") == expected
    a, out = outputs(sch)
    np.testing.assert_allclose(out[1], (a + 1) * 2, rtol=1e-6)
    np.testing.assert_allclose(out[2], a, atol=1e-6)
    verify_trace_roundtrip(sch, f)


def test_refuses_an_index_outside_the_legal_places():
    sch = S.Schedule(producers_of_c())
    i = sch.get_loops("C")[0]
    sch.compute_at("W", i)
    assert_refused(sch, lambda: sch.compute_at("B", i, index=2), r"index 2: the block can "
                   r"go only between .* at a position in \[0, 1\]", BlockLocationError)
    sch = S.Schedule(consumers_of_b())
    i = sch.get_loops("B")[0]
    assert_refused(sch, lambda: sch.reverse_compute_at("E", i, index=0),
                   r"index 0: .* at a position in \[1, 1\]", BlockLocationError)
    assert_refused(sch, lambda: sch.reverse_compute_at("E", i, index=-3),
                   r"index -3: .* pass one of them, -1 \(the last\) or -2 \(the first\)",
                   BlockLocationError)


DYNAMIC_ROW_SUM = '''@T.prim_func
def main(a: T.handle, c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (32, n, 8))
    C = T.match_buffer(c, (32, n))
    C_rf = T.alloc_buffer((8, 32, n))
    for f, k in T.grid(n * 32, 8):
        with T.block("rf"):
            vk = T.axis.spatial(8, k)
            v0 = T.axis.spatial(32, f // n)
            v1 = T.axis.spatial(n, f % n)
            C_rf[vk, v0, v1] = A[v0, v1, vk] * T.float32(2)
    for f, k in T.grid(n * 32, 8):
        with T.block("sum"):
            vk = T.axis.reduce(8, k)
            v0 = T.axis.spatial(32, f // n)
            v1 = T.axis.spatial(n, f % n)
            with T.init():
                C[v0, v1] = T.float32(0)
            C[v0, v1] = C[v0, v1] + C_rf[vk, v0, v1]
'''


def test_reverse_compute_at_under_a_loop_fused_over_a_dynamic_extent():
    # f ranges over n * 32: f // n covers [0, 31] and f % n covers [0, n - 1] whenever
    # the loop runs, so the consumer covers its whole domain under f
    f = T.parse(DYNAMIC_ROW_SUM)
    sch = S.Schedule(f)
    sch.reverse_compute_at("sum", sch.get_loops("rf")[0])
    assert [sch.get(l).extent for l in sch.get_loops("sum")][1].value == 8
    a = np.random.default_rng(0).standard_normal((32, 3, 8)).astype("float32")
    for out in (run(sch, [a, np.zeros((32, 3), "float32")]),
                run_llvm(sch, [a, np.zeros((32, 3), "float32")])):
        np.testing.assert_allclose(out[1], 2 * a.sum(axis=2), rtol=1e-5)
    verify_trace_roundtrip(sch, f)


LAYOUT_TRANS = '''@T.prim_func
def main(A: T.Buffer((3, 5, 16), "float32"), C: T.Buffer((6, 5, 8), "float32")):
    B = T.alloc_buffer((3, 5, 16))
    for i1, i2, i4 in T.grid(3, 5, 16):
        with T.block("compute"):
            v1, v2, v4 = T.axis.remap("SSS", [i1, i2, i4])
            B[v1, v2, v4] = A[v1, v2, v4] + T.float32(1)
    for ax1, ax2, ax4 in T.grid(6, 5, 8):
        with T.block("T_layout_trans"):
            v1, v2, v4 = T.axis.remap("SSS", [ax1, ax2, ax4])
            C[v1, v2, v4] = B[(v1 * 8 + v4) // 16, v2, (v1 * 8 + v4) % 16]
'''


def test_reverse_compute_at_a_layout_that_splits_a_fused_index():
    # iteration i1 of the producer writes B[i1, :, 0:16]: the rows v1 in [2 i1, 2 i1 + 1]
    # of the 16 -> 2 x 8 relayout read exactly that
    f = T.parse(LAYOUT_TRANS)
    sch = S.Schedule(f)
    sch.reverse_compute_at("T_layout_trans", sch.get_loops("compute")[0])
    assert [sch.get(l).extent.value for l in sch.get_loops("T_layout_trans")] == [3, 2, 5, 8]
    a = np.random.default_rng(0).standard_normal((3, 5, 16)).astype("float32")
    want = (a + 1).reshape(3, 5, 2, 8).transpose(0, 2, 1, 3).reshape(6, 5, 8)
    for out in (run(sch, [a, np.zeros((6, 5, 8), "float32")]),
                run_llvm(sch, [a, np.zeros((6, 5, 8), "float32")])):
        np.testing.assert_allclose(out[1], want, rtol=1e-6)
    verify_trace_roundtrip(sch, f)


CORNER_READ = '''@T.prim_func
def main(A: T.Buffer((32, 32), "float32"), D: T.Buffer((1, 2, 1), "float32")):
    B = T.alloc_buffer((32, 32))
    for i_0, j_0, i_1, j_1 in T.grid(2, 2, 16, 16):
        with T.block("B"):
            vi = T.axis.spatial(32, i_0 * 16 + i_1)
            vj = T.axis.spatial(32, j_0 * 16 + j_1)
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for ax0, ax1, ax2 in T.grid(1, 2, 1):
        with T.block("D"):
            v0, v1, v2 = T.axis.remap("SSS", [ax0, ax1, ax2])
            D[v0, v1, v2] = B[v0, v1] + T.float32(1)
'''


def test_kept_unit_loops_read_as_zero_in_the_predicate():
    f = T.parse(CORNER_READ)
    sch = S.Schedule(f)
    sch.reverse_compute_at("D", sch.get_loops("B")[2], preserve_unit_loops=True, index=1)
    d = tree.get(sch.func, tree.find_block(sch.func, "D"))
    assert T.to_text(d.predicate) == "i_0 * 16 + i_1 < 1 and j_0 * 16 + ax1 < 2"
    assert [T.to_text(v) for v in d.iter_values] == [
        "i_0 * 16 + i_1 + ax0", "j_0 * 16 + ax1", "ax2"]
    a = np.random.default_rng(0).standard_normal((32, 32)).astype("float32")
    want = (2 * a[0, 0:2] + 1).reshape(1, 2, 1)
    for out in (run(sch, [a, np.zeros((1, 2, 1), "float32")]),
                run_llvm(sch, [a, np.zeros((1, 2, 1), "float32")])):
        np.testing.assert_allclose(out[1], want, rtol=1e-6)
    verify_trace_roundtrip(sch, f)
