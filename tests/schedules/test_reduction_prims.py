"""decompose_reduction and rfactor: numerics against numpy, IR structure, legality.

Every numerical test runs the scheduled function with the reference interpreter; every
error test matches the message and checks the schedule is unchanged; every test replays
its trace.
"""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from cuvil_tir.stmt import BlockRealize, BufferStore, SeqStmt
from cuvil_tir.analysis import tree
from schedules.primitives.reduction import NotReductionError
from schedules.errors import LoopNestError, ReductionLoopError, ScheduleArgumentError
from tests import workloads
from tests.schedules.testing import (assert_refused, check_workload, run,
                                     verify_trace_roundtrip)


def block(sch, name):
    return tree.get(sch.func, tree.find_block(sch.func, name)).block


def loop_names(sch, name):
    return [l.var.name for l in sch.get_loops(sch.get_block(name))]


def reduce_func(combiner, m=6, n=12):
    A = T.placeholder((m, n), name="A")
    k = T.reduce_axis((0, n), name="k")
    fn = {"sum": T.sum, "max": T.max, "min": T.min, "prod": T.prod}[combiner]
    R = T.compute((m,), lambda i: fn(A[i, k], axis=k), name="R")
    return T.create_prim_func([A, R])


def check_reduce(sch, combiner, m=6, n=12):
    a = np.random.default_rng(1).uniform(0.5, 1.5, (m, n)).astype("float32")
    out = run(sch, [a, np.zeros(m, "float32")])
    want = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod}[combiner](a, axis=1)
    np.testing.assert_allclose(out[1], want, rtol=1e-5)


# -- decompose_reduction -------------------------------------------------------------

def test_decompose_at_reduction_loop_values_and_structure():
    w = workloads.matmul(8, 8, 8)
    sch = S.Schedule(w.func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    init = sch.decompose_reduction(c, k)
    assert init.name == "C_init"
    assert sch.get(c).name == "C_update"         # TensorIR's name; the handle follows it
    assert block(sch, "C_update").init is None
    ib = block(sch, "C_init")
    assert [iv.kind for iv in ib.iter_vars] == ["spatial", "spatial"]
    assert isinstance(ib.body, BufferStore) and ib.body.value.value == 0.0
    # the init sits in j, before the k loop; the update block now reads C
    assert loop_names(sch, "C_init") == ["i", "j"]
    assert loop_names(sch, "C") == ["i", "j", "k"]
    assert [r.buffer.name for r in block(sch, "C_update").reads] == ["C", "A", "B"]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_decompose_at_outer_loop_regenerates_spatial_loops():
    w = workloads.matmul(4, 6, 8)
    sch = S.Schedule(w.func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.decompose_reduction(c, i)
    root = sch.func.body.block.body
    assert isinstance(root, SeqStmt) and len(root.seq) == 2
    assert loop_names(sch, "C_init") == ["i_init", "j_init"]
    init_loops = [l for _, l in tree.loops_above(sch.func, tree.find_block(sch.func, "C_init"))]
    assert [l.extent.value for l in init_loops] == [4, 6]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_decompose_after_guarded_split_drops_reduction_guard():
    w = workloads.matmul(4, 4, 10)
    sch = S.Schedule(w.func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    ko, ki = sch.split(k, [None, 4])            # 12 > 10: a guard on the reduction
    sch.decompose_reduction(c, ko)
    init_realize = tree.get(sch.func, tree.find_block(sch.func, "C_init"))
    assert isinstance(init_realize.predicate, T.IntImm) and init_realize.predicate.value
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_decompose_inner_spatial_loop_under_split_reduction_tile():
    w = workloads.matmul(8, 8, 8)
    sch = S.Schedule(w.func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    jo, ji = sch.split(j, [None, 4])
    sch.reorder(i, jo, k, ji)      # k between the spatial loops: init must go above k
    init = sch.decompose_reduction(c, k)
    assert loop_names(sch, init.name) == ["i", "j_0", "j_1_init"]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_decompose_refuses_non_reduction_block():
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func)
    e = sch.get_block("E")
    (i,) = sch.get_loops(e)
    assert_refused(sch, lambda: sch.decompose_reduction(e, i),
                   "decompose_reduction: block 'E' is not a reduction block",
                   NotReductionError)


def test_decompose_refuses_loop_not_above_block():
    w = workloads.matmul_bias_relu(4, 4, 4)
    sch = S.Schedule(w.func)
    c = sch.get_block("C")
    d_loop = sch.get_loops(sch.get_block("D"))[0]
    assert_refused(sch, lambda: sch.decompose_reduction(c, d_loop),
                   r"loop 'i' is not above block 'C' .*use one of its loops \['i', 'j', 'k'\]",
                   LoopNestError)


def test_decompose_refuses_loop_under_reduction_loop():
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.reorder(k, j)
    assert_refused(sch, lambda: sch.decompose_reduction(c, j),
                   "loop 'j' is under the reduction loop 'k' of block 'C'",
                   ReductionLoopError)


# -- rfactor ------------------------------------------------------------------------------

def test_decompose_keeps_a_guard_of_a_loop_fused_from_spatial_and_reduce():
    # fuse(i, k) + a non-dividing split: T.where(f_0 * 4 + f_1 < 6) bounds the init's
    # v_i too; the init dropped it and stored Y[2], past the end (issue 25, repro 22)
    X = T.placeholder((2, 3), name="X")
    k = T.reduce_axis((0, 3), name="k")
    f = T.create_prim_func([X, T.compute((2,), lambda i: T.sum(X[i, k], axis=k), name="Y")])
    sch = S.Schedule(f)
    sch.split(sch.fuse(*sch.get_loops(sch.get_block("Y"))), [None, 4])
    init = sch.decompose_reduction(sch.get_block("Y"), sch.get_loops(sch.get_block("Y"))[0])
    assert "T.where" in str(tree.get(sch.func, tree.find_block(sch.func, init.name)))
    x = np.arange(6, dtype="float32").reshape(2, 3)
    big = np.full(6, -7.0, "float32")            # Y is big[:2]; big[2:] stays -7
    targets_build(sch)(x, big[:2])
    np.testing.assert_array_equal(big, [3, 12, -7, -7, -7, -7])
    np.testing.assert_array_equal(run(sch, [x, np.zeros(2, "float32")])[1], [3, 12])
    verify_trace_roundtrip(sch, f)


def targets_build(sch):
    import targets
    return targets.build(sch, "llvm")


def _recomputed_sum(index):
    """A reduction computed at a consumer loop that reaches each of its instances from
    several iterations (``A[index(i)]``, or not indexing A at all)."""
    X = T.placeholder((8, 3), name="X")
    k = T.reduce_axis((0, 3), name="k")
    A = T.compute((8,), lambda i: T.sum(X[i, k], axis=k), name="A")
    B = T.compute((4,), lambda i: A[index(i)] + A[index(i) + 1], name="B")
    f = T.create_prim_func([X, B])
    sch = S.Schedule(f)
    sch.compute_at(sch.get_block("A"), sch.get_loops(sch.get_block("B"))[0])
    return f, sch


@pytest.mark.parametrize("index, why", [
    (lambda i: i * 0, "loop 'i' feeds none of its iter values"),
    (lambda i: i, r"binds v_i to i \+ ax0: the loops \['ax0', 'i'\] overlap in it"),
    (lambda i: i // 2, r"binds v_i to i // 2 \+ ax0, which meets one instance from several "
                       "iterations of loop 'i'")])
def test_decompose_refuses_to_hoist_an_init_out_of_a_recomputing_loop(index, why):
    # the init ran once per iteration of the consumer loop; hoisted above it, the sums
    # accumulated every pass (issue 25, repro 20: the loop feeds no iter value)
    x = np.random.default_rng(0).standard_normal((8, 3)).astype("float32")
    f, sch = _recomputed_sum(index)
    a, a_loops = sch.get_block("A"), sch.get_loops(sch.get_block("A"))
    assert_refused(sch, lambda: sch.decompose_reduction(a, a_loops[0]),
                   "decompose_reduction: cannot run the init of block 'A' once ahead of the "
                   f"loops .*{why}.*decompose at a loop nearer the block", ReductionLoopError)
    # at the loop nearest the block the init is where it was: right
    sch.decompose_reduction(a, a_loops[-1])
    want = run(f, [x, np.zeros(4, "float32")])[1]
    np.testing.assert_allclose(run(sch, [x, np.zeros(4, "float32")])[1], want, rtol=1e-5)


def split_k(w, factor=4):
    sch = S.Schedule(w.func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    ko, ki = sch.split(k, [None, factor])
    return sch, c, ko, ki


def test_rfactor_inner_loop_values_and_structure():
    w = workloads.matmul(4, 6, 16)
    sch, c, ko, ki = split_k(w)
    rf = sch.rfactor(ki, 0)
    assert rf.name == "C_rf"
    (buf,) = sch.func.body.block.alloc_buffers
    assert buf.name == "C_rf" and [s.value for s in buf.shape] == [4, 4, 6]
    rb = block(sch, "C_rf")
    assert [(iv.var.name, iv.kind) for iv in rb.iter_vars] == [
        ("vk_1", "spatial"), ("v_i", "spatial"), ("v_j", "spatial"), ("vk_0", "reduce")]
    wb = block(sch, "C")
    assert [(iv.var.name, iv.kind) for iv in wb.iter_vars] == [
        ("vk_1", "reduce"), ("v_i", "spatial"), ("v_j", "spatial")]
    assert [r.buffer.name for r in wb.reads] == ["C_rf"]
    assert loop_names(sch, "C_rf") == ["i", "j", "k_0", "k_1"]
    assert loop_names(sch, "C") == ["i", "j", "k_1"]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_rfactor_outer_loop_last_axis():
    w = workloads.matmul(4, 4, 12)
    sch, c, ko, ki = split_k(w, 3)
    sch.rfactor(ko, -1)
    (buf,) = sch.func.body.block.alloc_buffers
    assert [s.value for s in buf.shape] == [4, 4, 4]
    store = block(sch, "C_rf").body
    assert store.indices[2] is block(sch, "C_rf").iter_vars[0].var
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_rfactor_unsplit_reduction_loop():
    w = workloads.matmul(4, 4, 8)
    sch = S.Schedule(w.func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.rfactor(k, 1)
    assert [s.value for s in sch.func.body.block.alloc_buffers[0].shape] == [4, 8, 4]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_rfactor_max_min_prod_combiners():
    for comb in ("max", "min", "prod", "sum"):
        f = reduce_func(comb)
        sch = S.Schedule(f)
        r = sch.get_block("R")
        i, k = sch.get_loops(r)
        ko, ki = sch.split(k, [None, 4])
        sch.rfactor(ki, 0)
        init = block(sch, "R_rf").init
        assert init.buffer.name == "R_rf"
        check_reduce(sch, comb)
        verify_trace_roundtrip(sch, f)


def test_rfactor_then_parallel_rf_loop_and_decompose():
    w = workloads.matmul(4, 4, 16)
    sch, c, ko, ki = split_k(w)
    rf = sch.rfactor(ki, 0)
    i, j, ko2, ki2 = sch.get_loops(rf)
    sch.reorder(ki2, ko2)
    sch.decompose_reduction(rf, ko2)
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_rfactor_refuses_spatial_loop():
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    assert_refused(sch, lambda: sch.rfactor(i, 0),
                   "rfactor: loop 'i' is bound to the spatial iter var 'v_i' of block 'C'",
                   ReductionLoopError)


def test_rfactor_refuses_non_reduction_block():
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func)
    (i,) = sch.get_loops(sch.get_block("E"))
    assert_refused(sch, lambda: sch.rfactor(i, 0),
                   "rfactor: block 'E' is not a reduction block", NotReductionError)


def test_rfactor_refuses_unknown_combiner():
    w = workloads.matmul(4, 4, 4)
    path = tree.find_block(w.func, "C")
    br = tree.get(w.func, path)
    st = br.block.body
    A, B = w.func.params[0], w.func.params[1]
    vi, vj, vk = (iv.var for iv in br.block.iter_vars)
    sub = BufferStore(st.buffer, st.buffer[vi, vj] - A[vi, vk] * B[vk, vj], st.indices)
    blk = T.Block("C", br.block.iter_vars, br.block.reads, br.block.writes, sub,
                  br.block.init)
    f = tree.replace(w.func, path, BlockRealize(br.iter_values, br.predicate, blk))
    sch = S.Schedule(f)
    i, j, k = sch.get_loops(sch.get_block("C"))
    assert_refused(sch, lambda: sch.rfactor(k, 0), "no recognised combiner",
                   NotReductionError)


def test_rfactor_refuses_bad_axis():
    w = workloads.matmul(4, 4, 8)
    sch, c, ko, ki = split_k(w)
    assert_refused(sch, lambda: sch.rfactor(ki, 3),
                   r"factor_axis must be an int in \[-3, 2\] for buffer 'C' of rank 2, "
                   "found 3", ScheduleArgumentError)


def test_rfactor_refuses_decomposed_block():
    sch2, c2, ko2, ki2 = split_k(workloads.matmul(4, 4, 8))
    sch2.decompose_reduction(c2, ko2)
    assert_refused(sch2, lambda: sch2.rfactor(ki2, 0),
                   "rfactor: block 'C_update' is not a reduction block", NotReductionError)
