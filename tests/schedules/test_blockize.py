"""blockize: outer/inner iter var division, derived regions, init placement, legality.

Numerics run with the reference interpreter; every test replays its trace.
"""

import numpy as np

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
