"""blockize: outer/inner iter var division, derived regions, init placement, legality.

Numerics run with the reference interpreter; every test replays its trace.
"""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from cuvil_tir.analysis import tree
from schedules.errors import LoopNestError
from schedules.primitives.blockize import SubspaceError
from tests import workloads
from tests.schedules.testing import (assert_refused, check_workload, run,
                                     verify_text_roundtrip, verify_trace_roundtrip)


def block(sch, name):
    return tree.get(sch.func, tree.find_block(sch.func, name)).block


def tiled_matmul(m=8, n=16, k=8, ti=4, tj=8, tk=4):
    w = workloads.matmul(m, n, k)
    sch = S.Schedule(w.func)
    c = sch.get_block("C")
    i, j, kk = sch.get_loops(c)
    io, ii = sch.split(i, [None, ti])
    jo, ji = sch.split(j, [None, tj])
    ko, ki = sch.split(kk, [None, tk])
    sch.reorder(io, jo, ko, ii, ji, ki)
    return w, sch, (io, jo, ko, ii, ji, ki)


def region_text(region):
    return [(str(r.min), str(r.extent)) for r in region.region]


def test_blockize_tiled_matmul_structure_and_values():
    w, sch, (io, jo, ko, ii, ji, ki) = tiled_matmul()
    outer = sch.blockize(ii)
    assert outer.name == "C_o"
    ob = block(sch, "C_o")
    assert [(iv.var.name, iv.kind, iv.dom.extent.value) for iv in ob.iter_vars] == [
        ("v_i_o", "spatial", 2), ("v_j_o", "spatial", 2), ("v_k_o", "reduce", 2)]
    ib = block(sch, "C")
    assert [(iv.var.name, iv.kind, iv.dom.extent.value) for iv in ib.iter_vars] == [
        ("v_i_i", "spatial", 4), ("v_j_i", "spatial", 8), ("v_k_i", "reduce", 4)]
    assert ib.init is None and ob.init is not None
    # the outer block is the reduction now: as TensorIR's, its reads leave out what
    # its init initialises (the inner block, without init, reads C)
    assert [r.buffer.name for r in ob.reads] == ["A", "B"]
    assert [r.buffer.name for r in ib.reads] == ["C", "A", "B"]
    assert region_text(ob.writes[0]) == [("v_i_o * 4", "4"), ("v_j_o * 8", "8")]
    assert region_text(ob.reads[0]) == [("v_i_o * 4", "4"), ("v_k_o * 4", "4")]
    # the loops keep their handles: the inner loops are inside the outer block
    assert [l.var.name for l in sch.get_loops(sch.get_block("C"))][-3:] == ["i_1", "j_1", "k_1"]
    assert [l.var.name for l in sch.get_loops(outer)] == ["i_0", "j_0", "k_0"]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_blockize_inner_reduction_only_keeps_init_outside():
    w, sch, loops = tiled_matmul()
    sch.reorder(loops[2], loops[3])             # io, jo, ii, ko, ji, ki: k split across
    sch.blockize(loops[4])                      # ji: the inner part holds only k_1
    ob = block(sch, "C_o")
    kinds = [(iv.var.name, iv.kind) for iv in ob.iter_vars]
    assert kinds == [("v_i_o", "spatial"), ("v_j_o", "spatial"), ("v_k_o", "reduce")]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_blockize_whole_nest_has_unit_outer_iter_vars():
    # as TensorIR: one outer iter var per inner one, unit (extent 1, bound to 0) when
    # the loop covers its whole range, of the inner var's kind
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.blockize(i)
    ob = block(sch, "C_o")
    assert [(iv.var.name, int(iv.dom.extent), iv.kind) for iv in ob.iter_vars] == [
        ("v_i_o", 1, "spatial"), ("v_j_o", 1, "spatial"), ("v_k_o", 1, "reduce")]
    realize = tree.get(sch.func, tree.find_block(sch.func, "C_o"))
    assert [int(v) for v in realize.iter_values] == [0, 0, 0]
    assert region_text(ob.writes[0]) == [("0", "4"), ("0", "4")]
    assert "v_i_o" not in str(block(sch, "C").body)     # the inner block uses its own
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_blockize_inner_loop_has_a_unit_outer_iter_var():
    A = T.placeholder((8, 8), name="A")
    f = T.create_prim_func([A, T.compute((8, 8), lambda i, j: A[i, j] * 2.0, name="B")])
    sch = S.Schedule(f)
    sch.blockize(sch.get_loops("B")[1])
    text = str(sch.func)
    assert "v_i_o = T.axis.spatial(8, i)" in text and "v_j_o = T.axis.spatial(1, 0)" in text
    x = np.random.default_rng(0).random((8, 8), dtype="float32")
    np.testing.assert_array_equal(run(sch, [x, np.zeros((8, 8), "float32")])[1], x * 2)
    verify_trace_roundtrip(sch, f)
    verify_text_roundtrip(sch.func)


def test_blockize_without_unit_iters():
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.blockize(i, preserve_unit_iters=False)
    ob = block(sch, "C_o")
    assert ob.iter_vars == ()
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_blockize_elementwise_tile_values():
    A = T.placeholder((32,), name="A")
    f = T.create_prim_func([A, T.compute((32,), lambda i: A[i] * 3.0, name="B")])
    sch = S.Schedule(f)
    (i,) = sch.get_loops(sch.get_block("B"))
    io, ii = sch.split(i, [None, 8])
    sch.blockize(ii)
    ib = block(sch, "B")
    assert str(ib.body.indices[0]) == "v_i_o * 8 + v_i_i"
    a = np.arange(32, dtype="float32")
    out = run(sch, [a, np.zeros(32, "float32")])
    np.testing.assert_array_equal(out[1], a * 3)
    verify_trace_roundtrip(sch, f)


def test_blockize_refuses_loop_over_two_blocks():
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.decompose_reduction(c, j)
    assert_refused(sch, lambda: sch.blockize(i),
                   r"blockize: loop 'i' holds 2 blocks \['C_init', 'C_update'\]", LoopNestError)


def test_blockize_refuses_undividable_binding():
    A = T.placeholder((8, 8), name="A")
    f = T.create_prim_func([A, T.compute((8, 8), lambda i, j: A[i, j] + 1.0, name="B")])
    sch = S.Schedule(f)
    i, j = sch.get_loops(sch.get_block("B"))
    fused = sch.fuse(i, j)
    fo, fi = sch.split(fused, [None, 3])
    assert_refused(sch, lambda: sch.blockize(fi),
                   "blockize: cannot divide the binding v_i = .* of block 'B'",
                   SubspaceError)


def test_a_binding_with_a_non_affine_term_over_outer_loops_divides():
    # TVM's mma schedule: a warp's rows are picked by a fused thread index,
    # ty % 2 * 32 + i0 * 16 + i1; the non-affine term is part of the outer binding
    f = T.parse('''
@T.prim_func
def f(A: T.Buffer((64, 16), "float32"), B: T.Buffer((64, 16), "float32")):
    for ty in range(4):
        for i0, i1, j in T.grid(2, 16, 16):
            with T.block("B"):
                vi = T.axis.spatial(64, ty % 2 * 32 + i0 * 16 + i1)
                vj = T.axis.spatial(16, j)
                B[vi, vj] = A[vi, vj] * T.float32(2)
''')
    sch = S.Schedule(f)
    i1 = sch.get_loops(sch.get_block("B"))[2]
    outer = sch.blockize(i1)
    blk = tree.get(sch.func, tree.find_block(sch.func, sch.get(outer).name))
    assert [str(v) for v in blk.iter_values] == ["i0 + ty % 2 * 2", "0"]
    a = np.arange(64 * 16, dtype="float32").reshape(64, 16)
    b = np.zeros_like(a)
    T.interpret(sch.func, a, b)
    want = np.zeros_like(a)
    want[:, :] = a * 2
    np.testing.assert_array_equal(b, want)


def test_an_outer_part_over_unit_loops_is_zero():
    """Under a loop of extent 1 the outer part of ``v = v_o * 4 + v_i`` is always 0:
    the inner block indexes by ``v_i`` alone, and without preserve_unit_iters the outer
    iterator is bound to 0 rather than to the unit loop."""
    for preserve, binding in ((True, "i_0"), (False, "0")):
        w = workloads.elementwise_chain(4)
        sch = S.Schedule(w.func)
        blk = sch.get_child_blocks("root")[0]
        (i,) = sch.get_loops(blk)
        _, inner = sch.split(i, [1, 4])
        outer = sch.blockize(inner, preserve_unit_iters=preserve)
        realize = tree.get(sch.func, tree.find_block(sch.func, outer.name))
        assert [str(v) for v in realize.iter_values] == [binding]
        ib = block(sch, blk.name)
        assert [str(r.region[0].min) for r in ib.writes] == [ib.iter_vars[0].var.name]
        check_workload(sch, w)
        verify_trace_roundtrip(sch, w.func)


def _checked(sch, f, inputs, out):
    """interpreted and compiled, ``sch`` computes what ``f`` does; text and trace replay."""
    from tests.schedules.testing import run_llvm
    want = run(f, inputs)[out]
    for runner in (run, run_llvm):
        np.testing.assert_allclose(runner(sch, inputs)[out], want, rtol=1e-5)
    verify_text_roundtrip(sch.func)
    verify_trace_roundtrip(sch, f)


@pytest.mark.parametrize("lo, hi, split, at", [(1, 3, [2, 1], 1), (56, 67, [None, 4], 1),
                                              (56, 67, [None, 4], 0)])
def test_blockize_a_reduce_axis_starting_above_zero_runs_its_init(lo, hi, split, at):
    # k in [1, 3) split by 1: the outer iter var was bound to k_0 + 1 over [0, 2), never
    # at its minimum, so T.init never ran (issue 25, repro 14); inner-only and tiled
    # variants of an axis from 56
    X = T.placeholder((70,), "int32", name="X")
    k = T.reduce_axis((lo, hi), name="k")
    f = T.create_prim_func([X, T.compute((2,), lambda i: T.sum(X[k] * (i + 1), axis=k),
                                         name="Y")])
    sch = S.Schedule(f)
    _, kk = sch.get_loops(sch.get_block("Y"))
    sch.blockize(sch.split(kk, split)[at])
    assert all(iv.dom.min.value == 0 for iv in block(sch, "Y_o").iter_vars), str(sch.func)
    _checked(sch, f, [np.arange(70, dtype="int32"), np.full(2, 100, "int32")], 1)


def test_blockize_rewrites_a_guard_on_outer_loops_over_the_outer_iter_vars():
    # the inner blocks kept T.where(k_0 * 2 + k_1 < 3) naming loops outside the new
    # block; decompose_reduction then left k_0 and k_1 undefined (issue 25, repro 18)
    X = T.placeholder((1, 3, 2), "int32", name="X")
    k = T.reduce_axis((0, 3), name="k")
    r = T.reduce_axis((0, 2), name="r")
    f = T.create_prim_func([X, T.compute((1,), lambda i: T.sum(X[i, k, r], axis=[k, r]),
                                         name="Y")])
    sch = S.Schedule(f)
    i, kk, rr = sch.get_loops(sch.get_block("Y"))
    sch.split(kk, [None, 2])
    sch.blockize(rr)
    assert isinstance(tree.get(sch.func, tree.find_block(sch.func, "Y")).predicate,
                      T.IntImm)
    sch.decompose_reduction(sch.get_block("Y_o"), i)
    _checked(sch, f, [np.arange(6, dtype="int32").reshape(1, 3, 2),
                      np.full(1, -1, "int32")], 1)
    # under a non-dividing split of the blockized loop the guard stays, over v_i_o
    X = T.placeholder((5,), name="X")
    f = T.create_prim_func([X, T.compute((5,), lambda i: X[i] * 2.0, name="Y")])
    sch = S.Schedule(f)
    sch.split(sch.get_loops(sch.get_block("Y"))[0], [None, 2])
    sch.blockize(sch.get_loops(sch.get_block("Y"))[0])
    sch.blockize(sch.get_loops(sch.get_block("Y"))[1])       # nested (repro 17)
    assert str(tree.get(sch.func, tree.find_block(sch.func, "Y")).predicate) == \
        "v_i_i_o * 2 + i_1 < 5"
    _checked(sch, f, [np.arange(5, dtype="float32"), np.zeros(5, "float32")], 1)


def test_blockize_refuses_a_guard_it_cannot_express_over_the_outer_iter_vars():
    f = T.parse("""
@T.prim_func
def main(X: T.Buffer((4, 2), "float32"), Y: T.Buffer((4, 2), "float32")):
    for i_0, j, i_1 in T.grid(2, 2, 2):
        with T.block("Y"):
            v_i = T.axis.spatial(4, i_0 * 2 + i_1)
            v_j = T.axis.spatial(2, j)
            T.where(i_0 + j + i_1 < 3)
            T.reads(X[v_i, v_j])
            T.writes(Y[v_i, v_j])
            Y[v_i, v_j] = X[v_i, v_j] + T.float32(1)
""")
    sch = S.Schedule(f)
    inner = sch.get_loops(sch.get_block("Y"))[2]
    assert_refused(sch, lambda: sch.blockize(inner),
                   r"blockize: the guard i_0 \+ j \+ i_1 < 3 of block 'Y' couples loops "
                   "inside and outside the loop in a way the new outer block's iter vars "
                   "cannot express", SubspaceError)


def test_blockize_refuses_an_init_of_a_recomputed_reduction():
    # a loop r that feeds no iter value reruns A, init included, in each iteration:
    # one outer init ahead of r would sum twice (issue 25, repro 20's blockize form)
    f = T.parse("""
@T.prim_func
def main(X: T.Buffer((2,), "float32"), A: T.Buffer((1,), "float32")):
    for r in T.serial(2):
        for k in T.serial(2):
            with T.block("A"):
                v_k = T.axis.reduce(2, k)
                T.reads(X[v_k])
                T.writes(A[0])
                with T.init():
                    A[0] = T.float32(0)
                A[0] = A[0] + X[v_k]
""")
    sch = S.Schedule(f)
    r, k = sch.get_loops(sch.get_block("A"))
    from schedules.errors import ReductionLoopError
    assert_refused(sch, lambda: sch.blockize(r),
                   "blockize: cannot run the init of block 'A' once ahead of the loops "
                   r"\['r', 'k'\]: loop 'r' feeds none of its iter values",
                   ReductionLoopError)
    sch.blockize(k)     # the init stays inside r
    _checked(sch, f, [np.array([1.0, 2.0], "float32"), np.zeros(1, "float32")], 1)
