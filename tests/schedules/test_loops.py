"""Loop primitives: split, fuse, reorder, tile, parallel, vectorize, unroll, bind.

Each primitive has a numerical test (reference interpreter against numpy), an exact
printed-IR test, and an error test per legality rule (message matched, schedule
unchanged).  Every test replays its trace.
"""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from schedules.errors import (FactorError, LoopNestError, NonConstantExtentError,
                              ReductionLoopError, ScheduleArgumentError)
from cuvil_tir.stmt import For, SeqStmt
from cuvil_tir.visitor import substitute
from cuvil_tir.analysis import tree
from tests import workloads
from tests.schedules.testing import (assert_refused, check_workload, run,
                                     verify_trace_roundtrip)


def scale(n=10):
    A = T.placeholder((n,), name="A")
    return T.create_prim_func([A, T.compute((n,), lambda i: A[i] * 2.0, name="B")])


def scale2d(m=4, n=6):
    A = T.placeholder((m, n), name="A")
    return T.create_prim_func([A, T.compute((m, n), lambda i, j: A[i, j] * 2.0, name="B")])


def check_scale(sch, n=10):
    a = np.arange(n, dtype="float32")
    out = run(sch, [a, np.zeros(n, "float32")])
    np.testing.assert_array_equal(out[1], a * 2)


def check_scale2d(sch, m=4, n=6):
    a = np.arange(m * n, dtype="float32").reshape(m, n)
    out = run(sch, [a, np.zeros((m, n), "float32")])
    np.testing.assert_array_equal(out[1], a * 2)


def merged_chain(m=4, n=4):
    """E = A + 1; D = E * 2 with both stages under one ``i`` loop (not a single chain)."""
    A = T.placeholder((m, n), name="A")
    E = T.compute((m, n), lambda i, j: A[i, j] + 1.0, name="E")
    D = T.compute((m, n), lambda i, j: E[i, j] * 2.0, name="D")
    f = T.create_prim_func([A, D])
    first, second = f.body.block.body.seq
    body = SeqStmt((first.body, substitute(second.body, {second.loop_var: first.loop_var})))
    merged = For(first.loop_var, first.min, first.extent, "serial", body)
    return tree.replace(f, ("block", "body"), merged)


# split ----------------------------------------------------------------------------------

SPLIT_2_4 = '''@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i_0 in T.serial(2):
        for i_1 in T.serial(4):
            with T.block("B"):
                v_i = T.axis.spatial(8, i_0 * 4 + i_1)
                T.reads(A[v_i])
                T.writes(B[v_i])
                B[v_i] = A[v_i] * T.float32(2)'''


def test_split_dividing_ir_and_values():
    f = scale(8)
    sch = S.Schedule(f)
    (i,) = sch.get_loops(sch.get_block("B"))
    outer, inner = sch.split(i, [2, 4])
    assert str(sch.func) == SPLIT_2_4
    assert sch.get_loops(sch.get_block("B")) == [outer, inner]
    check_scale(sch, 8)
    verify_trace_roundtrip(sch, f)


def test_split_inferred_factor_adds_guard():
    f = scale(10)
    sch = S.Schedule(f)
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.split(i, [None, 4])
    text = str(sch.func)
    assert "for i_0 in T.serial(3):" in text and "for i_1 in T.serial(4):" in text
    assert "T.where(i_0 * 4 + i_1 < 10)" in text
    check_scale(sch, 10)
    verify_trace_roundtrip(sch, f)


def test_split_inferred_outer_position():
    f = scale(10)
    sch = S.Schedule(f)
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.split(i, [4, None])
    loops = [tree.get(sch.func, tree.find_loop(sch.func, l.var))
             for l in sch.get_loops(sch.get_block("B"))]
    assert [l.extent.value for l in loops] == [4, 3]
    assert "T.where(i_0 * 3 + i_1 < 10)" in str(sch.func)
    check_scale(sch, 10)
    verify_trace_roundtrip(sch, f)


def test_split_exact_product_has_no_guard_and_three_factors():
    f = scale(16)
    sch = S.Schedule(f)
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.split(i, [2, None, T.const(2)])
    text = str(sch.func)
    assert "v_i = T.axis.spatial(16, i_0 * 8 + i_1 * 2 + i_2)" in text
    assert "T.where" not in text
    check_scale(sch, 16)
    verify_trace_roundtrip(sch, f)


def test_split_product_larger_than_extent_guards():
    f = scale(10)
    sch = S.Schedule(f)
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.split(i, [3, 4])
    assert "T.where(i_0 * 4 + i_1 < 10)" in str(sch.func)
    check_scale(sch, 10)
    verify_trace_roundtrip(sch, f)


def test_split_twice_combines_predicates():
    f = scale(10)
    sch = S.Schedule(f)
    (i,) = sch.get_loops(sch.get_block("B"))
    _, inner = sch.split(i, [None, 4])
    sch.split(inner, [None, 3])
    text = str(sch.func)
    assert "i_1_0 * 3 + i_1_1 < 4" in text and "< 10" in text
    check_scale(sch, 10)
    verify_trace_roundtrip(sch, f)


def test_split_reduction_loop_matmul():
    w = workloads.matmul(8, 8, 12)
    sch = S.Schedule(w.func)
    _, _, k = sch.get_loops(sch.get_block("C"))
    sch.split(k, [None, 5])
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_split_symbolic_extent():
    n = T.size_var("n")
    A = T.placeholder((n,), name="A")
    f = T.create_prim_func([A, T.compute((n,), lambda i: A[i] * 2.0, name="B")])
    sch = S.Schedule(f)
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.split(i, [None, 4])
    assert "for i_0 in T.serial((n + 3) // 4):" in str(sch.func)
    assert "T.where(i_0 * 4 + i_1 < n)" in str(sch.func)
    check_scale(sch, 7)
    outer = sch.get_loops(sch.get_block("B"))[0]
    assert_refused(sch, lambda: sch.split(outer, [2, 2]),
                   r"split: the extent of loop i_0 .* is symbolic: give one factor as None",
                   FactorError)
    verify_trace_roundtrip(sch, f)


def test_split_symbolic_extent_in_three_has_folded_strides():
    # the middle loop's stride is the inferred extent itself, not 1 * (...)
    n = T.size_var("n")
    A = T.placeholder((n,), name="A")
    f = T.create_prim_func([A, T.compute((n,), lambda i: A[i] * 2.0, name="B")])
    sch = S.Schedule(f)
    sch.split(sch.get_loops(sch.get_block("B"))[0], [2, None, 1])
    text = str(sch.func)
    assert "i_0 * ((n + 1) // 2) + i_1 + i_2" in text and "1 * (" not in text
    check_scale(sch, 7)


@pytest.mark.parametrize("factors, message", [
    ([0, None], r"^\[CVL-E103\] argument 2, 'factors' to split: expected a list of at least "
                r"2 positive ints, one of which may be None, found \[0, None\] \(list\): "
                r"element 0 is 0$"),
    ([-4, None], r"found \[-4, None\] \(list\): element 0 is -4"),
    ([2.5, 4], r"found \[2.5, 4\] \(list\): element 0 is 2.5"),
    (["a", 4], r"element 0 is 'a'"),
    ([True, 10], r"element 0 is True"),
    ([None, None], r"more than one None"),
    ([2, 4], r"split: factors \[2, 4\] multiply to 8 but loop i has extent 10: 2 "
             r"iterations would be dropped"),
    ([10], r"argument 2, 'factors' to split: expected a list of at least 2 positive ints"),
    (4, r"argument 2, 'factors' to split: .* found 4 \(int\)$"),
])
def test_split_refuses_bad_factors(factors, message):
    f = scale(10)
    sch = S.Schedule(f)
    (i,) = sch.get_loops(sch.get_block("B"))
    assert_refused(sch, lambda: sch.split(i, factors), message, FactorError)
    verify_trace_roundtrip(sch, f)


def test_split_refuses_stale_handle_and_wrong_kind():
    f = scale(8)
    sch = S.Schedule(f)
    blk = sch.get_block("B")
    (i,) = sch.get_loops(blk)
    sch.split(i, [2, 4])
    assert_refused(sch, lambda: sch.split(i, [2, 4]),
                   r"split: the loop 'i' is not in the function any more")
    assert_refused(sch, lambda: sch.split(blk, [2, 4]),
                   r"argument 1, 'loop' to split: expected a loop handle \(from "
                   r"sch.get_loops\), found BlockRV\('B'\) \(BlockRV\): a block; pass one of "
                   r"sch.get_loops\(block\)",
                   ScheduleArgumentError)
    verify_trace_roundtrip(sch, f)


# fuse -----------------------------------------------------------------------------------

FUSED = '''@T.prim_func
def main(A: T.Buffer((4, 6), "float32"), B: T.Buffer((4, 6), "float32")):
    for i_j_fused in T.serial(24):
        with T.block("B"):
            v_i = T.axis.spatial(4, i_j_fused // 6)
            v_j = T.axis.spatial(6, i_j_fused % 6)
            T.reads(A[v_i, v_j])
            T.writes(B[v_i, v_j])
            B[v_i, v_j] = A[v_i, v_j] * T.float32(2)'''


def test_fuse_ir_and_values():
    f = scale2d()
    sch = S.Schedule(f)
    fused = sch.fuse(*sch.get_loops(sch.get_block("B")))
    assert str(sch.func) == FUSED
    assert sch.get_loops(sch.get_block("B")) == [fused]
    check_scale2d(sch)
    verify_trace_roundtrip(sch, f)


def test_fuse_three_loops_of_matmul():
    w = workloads.matmul(4, 6, 5)
    sch = S.Schedule(w.func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    fused = sch.fuse(i, j, k)
    text = str(sch.func)
    assert "for i_j_k_fused in T.serial(120):" in text
    assert "T.axis.spatial(4, i_j_k_fused // 30)" in text
    assert "T.axis.spatial(6, i_j_k_fused % 30 // 5)" in text
    assert "T.axis.reduce(5, i_j_k_fused % 5)" in text
    assert fused.var.name == "i_j_k_fused"
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_fuse_refusals():
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    assert_refused(sch, lambda: sch.fuse(i, k), r"fuse: loops i and k are not adjacent "
                   r"and perfectly nested: the body of i must be exactly loop k",
                   LoopNestError)
    assert_refused(sch, lambda: sch.fuse(j, i), r"fuse: loops j and i are not adjacent",
                   LoopNestError)
    assert_refused(sch, lambda: sch.fuse(i, i), r"fuse: loop i is given twice",
                   LoopNestError)
    assert_refused(sch, lambda: sch.fuse(i), r"fuse: expected at least 2 loops, got 1",
                   ScheduleArgumentError)
    verify_trace_roundtrip(sch, w.func)


def test_fuse_refuses_loop_containing_two_statements():
    f = merged_chain()
    sch = S.Schedule(f)
    i, j = sch.get_loops(sch.get_block("E"))
    assert_refused(sch, lambda: sch.fuse(i, j), r"fuse: loops i and j are not adjacent "
                   "and perfectly nested", LoopNestError)
    verify_trace_roundtrip(sch, f)


# reorder --------------------------------------------------------------------------------

REORDERED = '''@T.prim_func
def main(A: T.Buffer((4, 6), "float32"), B: T.Buffer((4, 6), "float32")):
    for j in T.serial(6):
        for i in T.serial(4):
            with T.block("B"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                T.reads(A[v_i, v_j])
                T.writes(B[v_i, v_j])
                B[v_i, v_j] = A[v_i, v_j] * T.float32(2)'''


def test_reorder_ir_and_values():
    f = scale2d()
    sch = S.Schedule(f)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.reorder(j, i)
    assert str(sch.func) == REORDERED
    check_scale2d(sch)
    verify_trace_roundtrip(sch, f)


def test_reorder_non_adjacent_keeps_loops_between():
    w = workloads.matmul(4, 5, 6)
    sch = S.Schedule(w.func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.reorder(k, i)
    assert sch.get_loops(sch.get_block("C")) == [k, j, i]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_reorder_same_order_is_identity():
    f = scale2d()
    sch = S.Schedule(f)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.reorder(i, j)
    assert sch.func is f
    verify_trace_roundtrip(sch, f)


def test_reorder_refusals():
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func)
    (e,) = sch.get_loops(sch.get_block("E"))
    (d,) = sch.get_loops(sch.get_block("D"))
    assert_refused(sch, lambda: sch.reorder(d, e), r"reorder: loops i, i are in "
                   "different loop nests", LoopNestError)
    assert_refused(sch, lambda: sch.reorder(e, e), r"reorder: loop i is given twice",
                   LoopNestError)
    f = merged_chain()
    sch = S.Schedule(f)
    i, j = sch.get_loops(sch.get_block("E"))
    assert_refused(sch, lambda: sch.reorder(j, i), r"reorder: the loops are not a single "
                   "chain: loop i contains a SeqStmt, not only a loop, above loop j",
                   LoopNestError)
    verify_trace_roundtrip(sch, f)


# tile -----------------------------------------------------------------------------------

def test_tile_ir_and_values():
    f = scale2d(4, 6)
    sch = S.Schedule(f)
    i, j = sch.get_loops(sch.get_block("B"))
    loops = sch.tile(i, j, 2, 4)
    assert [l.var.name for l in loops] == ["i_0", "j_0", "i_1", "j_1"]
    text = str(sch.func)
    assert ("for i_0 in T.serial(2):\n        for j_0 in T.serial(2):\n            "
            "for i_1 in T.serial(2):\n                for j_1 in T.serial(4):") in text
    assert "T.where(j_0 * 4 + j_1 < 6)" in text
    check_scale2d(sch, 4, 6)
    verify_trace_roundtrip(sch, f)


def test_tile_matmul_values():
    w = workloads.matmul(8, 8, 8)
    sch = S.Schedule(w.func)
    i, j, _ = sch.get_loops(sch.get_block("C"))
    sch.tile(i, j, 4, 2)
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_tile_refuses_inner_loop_first():
    f = scale2d()
    sch = S.Schedule(f)
    i, j = sch.get_loops(sch.get_block("B"))
    assert_refused(sch, lambda: sch.tile(j, i, 2, 2), r"tile: loop j must enclose loop i",
                   LoopNestError)
    verify_trace_roundtrip(sch, f)


# loop kinds -----------------------------------------------------------------------------

@pytest.mark.parametrize("method, kind, text", [
    ("parallel", "parallel", "for j in T.parallel(6):"),
    ("vectorize", "vectorized", "for j in T.vectorized(6):"),
    ("unroll", "unrolled", "for j in T.unroll(6):"),
])
def test_loop_kinds(method, kind, text):
    f = scale2d()
    sch = S.Schedule(f)
    _, j = sch.get_loops(sch.get_block("B"))
    getattr(sch, method)(j)
    assert tree.get(sch.func, tree.find_loop(sch.func, j.var)).kind == kind
    assert text in str(sch.func)
    check_scale2d(sch)
    verify_trace_roundtrip(sch, f)


@pytest.mark.parametrize("method", ["parallel", "vectorize"])
def test_parallel_and_vectorize_refuse_reduction_loops(method):
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    _, _, k = sch.get_loops(sch.get_block("C"))
    assert_refused(sch, lambda: getattr(sch, method)(k), rf"{method}: loop k carries the "
                   "reduction of block 'C'", ReductionLoopError)
    sch.unroll(k)
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_vectorize_refuses_symbolic_extent():
    n = T.size_var("n")
    A = T.placeholder((n,), name="A")
    f = T.create_prim_func([A, T.compute((n,), lambda i: A[i] * 2.0, name="B")])
    sch = S.Schedule(f)
    (i,) = sch.get_loops(sch.get_block("B"))
    assert_refused(sch, lambda: sch.vectorize(i), r"vectorize: loop i has the symbolic "
                   "extent n; vectorize needs a constant extent", NonConstantExtentError)
    _, inner = sch.split(i, [None, 4])
    sch.vectorize(inner)
    check_scale(sch, 9)
    verify_trace_roundtrip(sch, f)


def test_bind_spatial_and_cross_thread_reduction():
    w = workloads.matmul(4, 4, 8)
    sch = S.Schedule(w.func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.y")
    sch.bind(k, "threadIdx.x")
    text = str(sch.func)
    assert 'for i in T.thread_binding(4, thread="blockIdx.x"):' in text
    assert 'for j in T.thread_binding(4, thread="threadIdx.y"):' in text
    k_loop = tree.get(sch.func, tree.find_loop(sch.func, k.var))
    assert k_loop.thread_tag == "threadIdx.x"
    assert k_loop.annotations == ()        # recognised from the IR when lowered
    verify_trace_roundtrip(sch, w.func)


def test_bind_refusals():
    w = workloads.matmul(4, 4, 8)
    sch = S.Schedule(w.func)
    i, _, k = sch.get_loops(sch.get_block("C"))
    assert_refused(sch, lambda: sch.bind(k, "blockIdx.x"), r"bind: loop k carries the "
                   "reduction of block 'C' and cannot be bound to blockIdx.x",
                   ReductionLoopError)
    assert_refused(sch, lambda: sch.bind(i, "threadIdx.w"), r"bind: unknown thread axis "
                   "'threadIdx.w'; expected one of blockIdx.x", ScheduleArgumentError)
    verify_trace_roundtrip(sch, w.func)


def test_reorder_refuses_a_loop_fused_from_spatial_and_reduction_axes():
    from tests import workloads
    w = workloads.matmul(4, 6, 5)
    sch = S.Schedule(w.func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [2, 2])
    f0, f1 = sch.split(sch.fuse(j, k), [15, 2])
    before = sch.func
    with pytest.raises(S.ScheduleError, match=r"reorder: loop j_k_fused_1 drives both a "
                                              r"spatial and a reduction axis of block 'C'"):
        sch.reorder(f1, i1, f0, i0)
    assert sch.func is before
    sch.reorder(i0, i1, f0, f1)          # the fused loops keep their order: legal
    arrays = w.make_inputs(np.random.default_rng(0))
    T.interpret(sch.func, *arrays)
    w.check(arrays)


def test_parallel_over_a_fused_grid_of_tiles_with_a_local_accumulator():
    from tests import workloads
    w = workloads.matmul(16, 16, 8)
    sch = S.Schedule(w.func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, [None, 4])
    sch.reorder(io, jo, k, ii, ji)
    cl = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(cl, jo)
    sch.decompose_reduction(c, k)
    fused = sch.fuse(io, jo)
    sch.parallel(fused)                 # each iteration owns its 4x4 tile of C_local
    check_workload(sch, w)
