"""reindex, reindex_cache_read, reindex_cache_write: staged accesses, layouts, placement,
numerics, refusals."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from cuvil_tir.analysis import tree
from schedules.errors import CacheStageError, ScheduleArgumentError
from schedules.primitives.layout import LayoutError
from tests import workloads
from tests.schedules.testing import (assert_refused, check_workload, run, run_llvm,
                                     verify_text_roundtrip, verify_trace_roundtrip)


def transpose_double():
    A = T.placeholder((8, 4), name="A")
    return T.create_prim_func([A, T.compute((4, 8), lambda i, j: A[j, i] * 2.0, name="B")])


def chain():
    A = T.placeholder((4, 8), name="A")
    B = T.compute((4, 8), lambda i, j: A[i, j] * 2.0, name="B")
    C = T.compute((4, 8), lambda i, j: B[i, j] + 1.0, name="C")
    return T.create_prim_func([A, C])


def rowsum():
    X = T.placeholder((4, 6), name="X")
    k = T.reduce_axis((0, 6), name="k")
    return T.create_prim_func([X, T.compute((4,), lambda i: T.sum(X[i, k], axis=k),
                                            name="Y")])


def alloc(sch, name):
    return next(b for b in sch.func.body.block.alloc_buffers if b.name == name)


def both(sch, arrays):
    """Interpreter and LLVM results (last array), which must agree."""
    a = run(sch, arrays)[-1]
    np.testing.assert_allclose(run_llvm(sch, arrays)[-1], a, rtol=1e-5)
    return a


def test_reindex_read_takes_the_layout_of_the_block():
    f = transpose_double()
    sch = S.Schedule(f)
    rv = sch.reindex("B", ("read", 0))
    assert rv.name == "A_reindex"
    assert [int(s) for s in alloc(sch, "A_reindex").shape] == [4, 8]
    text = str(sch.func)
    assert "A_reindex[v_i, v_j] = A[v_j, v_i]" in text
    assert "B[v_i_1, v_j_1] = A_reindex[v_i_1, v_j_1] * T.float32(2)" in text
    x = np.random.default_rng(0).random((8, 4), dtype="float32")
    np.testing.assert_array_equal(both(sch, [x, np.zeros((4, 8), "float32")]), x.T * 2)
    verify_trace_roundtrip(sch, f)
    verify_text_roundtrip(sch.func)


def test_reindex_omits_the_variables_the_access_does_not_use():
    # matmul's B[k, j] does not use i: B_reindex is (j, k) and its copy has no i loop
    w = workloads.matmul(4, 6, 5)
    sch = S.Schedule(w.func)
    sch.reindex("C", ("read", 1))
    assert [int(s) for s in alloc(sch, "B_reindex").shape] == [6, 5]
    nest = tree.get(sch.func, tree.find_block(sch.func, "B_reindex"))
    assert [iv.var.name for iv in nest.block.iter_vars] == ["v_j", "v_k"]
    assert len(tree.loops_above(sch.func, tree.find_block(sch.func, "B_reindex"))) == 2
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_reindex_write_of_a_reduction_by_name():
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    sch.reindex("C", "C")
    assert [b.name for b in sch.get_child_blocks("root")] == ["C", "C_reindex"]
    c = tree.get(sch.func, tree.find_block(sch.func, "C")).block
    assert c.init.buffer.name == "C_reindex"
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_reindex_cache_read_with_an_index_map():
    f = chain()
    sch = S.Schedule(f)
    sch.reindex_cache_read("C", 0, "local", lambda i, j: (j, i // 2, i % 2))
    buf = alloc(sch, "B_local")
    assert [int(s) for s in buf.shape] == [8, 2, 2] and buf.scope == "local"
    copy = tree.get(sch.func, tree.find_block(sch.func, "B_local")).block
    assert [str(x) for x in copy.body.indices] == ["v_j", "v_i // 2", "v_i % 2"]
    assert [str(x) for x in copy.body.value.indices] == ["v_i", "v_j"]
    assert [b.name for b in sch.get_child_blocks("root")] == ["B", "B_local", "C"]
    x = np.random.default_rng(1).random((4, 8), dtype="float32")
    np.testing.assert_allclose(both(sch, [x, np.zeros((4, 8), "float32")]), x * 2 + 1,
                               rtol=1e-6)
    verify_trace_roundtrip(sch, f)


def test_reindex_cache_read_under_a_shared_loop_copies_the_inner_loop():
    # B and C share loop i (compute_at); the copy sits between them under i, with its
    # own copy of C's inner loop and C's binding
    f = chain()
    sch = S.Schedule(f)
    sch.compute_at("B", sch.get_loops("C")[0])
    sch.reindex_cache_read("C", 0, "local", lambda i, j: (j, i))
    loops = tree.loops_above(sch.func, tree.find_block(sch.func, "B_local"))
    assert [lp.loop_var.name for _, lp in loops] == ["i", "j"]
    assert loops[0][1] is tree.loops_above(sch.func, tree.find_block(sch.func, "C"))[0][1]
    assert [int(s) for s in alloc(sch, "B_local").shape] == [8, 4]
    x = np.random.default_rng(2).random((4, 8), dtype="float32")
    np.testing.assert_allclose(both(sch, [x, np.zeros((4, 8), "float32")]), x * 2 + 1,
                               rtol=1e-6)
    verify_trace_roundtrip(sch, f)


def test_reindex_cache_write_of_a_reduction():
    f = rowsum()
    sch = S.Schedule(f)
    sch.reindex_cache_write("Y", 0, "local", lambda i, k: (i % 2, i // 2))
    assert [int(s) for s in alloc(sch, "Y_local").shape] == [2, 2]
    x = np.random.default_rng(3).random((4, 6), dtype="float32")
    np.testing.assert_allclose(both(sch, [x, np.zeros(4, "float32")]), x.sum(axis=1),
                               rtol=1e-5)
    verify_trace_roundtrip(sch, f)
    verify_text_roundtrip(sch.func)


def test_reindex_of_a_split_block_keeps_the_guard():
    # a non-dividing split: the copy runs under the same guard (no read past A's end)
    A = T.placeholder((10,), name="A")
    f = T.create_prim_func([A, T.compute((10,), lambda i: A[9 - i] + 1.0, name="B")])
    sch = S.Schedule(f)
    sch.split(sch.get_loops("B")[0], [None, 4])
    sch.reindex("B", ("read", 0))
    copy = tree.get(sch.func, tree.find_block(sch.func, "A_reindex"))
    assert "i_0 * 4 + i_1 < 10" in str(copy.predicate)
    x = np.arange(10, dtype="float32")
    np.testing.assert_array_equal(both(sch, [x, np.zeros(10, "float32")]), x[::-1] + 1)


# refusals --------------------------------------------------------------------------------

def test_two_index_tuples_are_refused():
    A = T.placeholder((4, 4), name="A")
    f = T.create_prim_func([A, T.compute((4, 4), lambda i, j: A[i, j] + A[j, i], name="B")])
    sch = S.Schedule(f)
    assert_refused(sch, lambda: sch.reindex("B", ("read", 0)),
                   r"reindex: block 'B' accesses 'A' at different indices "
                   r"\['A\[v_i, v_j\]', 'A\[v_j, v_i\]'\]", CacheStageError)


def test_a_map_that_is_not_one_to_one_is_refused():
    sch = S.Schedule(chain())
    assert_refused(sch, lambda: sch.reindex_cache_read("C", 0, "local", lambda i, j: (j * 2,)),
                   r"reindex_cache_read: index_map is not one-to-one on the accessed "
                   r"iteration variables of block 'C'", LayoutError)


def test_a_map_over_a_variable_the_access_does_not_use_is_refused():
    sch = S.Schedule(rowsum())
    assert_refused(sch, lambda: sch.reindex_cache_write("Y", 0, "local", lambda i, k: (i, k)),
                   r"reindex_cache_write: index_map uses \['k'\], which the access of "
                   r"block 'Y' does not", CacheStageError)


def test_an_update_without_its_init_is_refused():
    sch = S.Schedule(rowsum())
    sch.decompose_reduction("Y", sch.get_loops("Y")[1])
    assert_refused(sch, lambda: sch.reindex_cache_write("Y", 0, "local", lambda i, k: (i,)),
                   r"reads 'Y' and has no init \(an update whose init is elsewhere\)",
                   CacheStageError)


def test_reading_what_the_block_writes_is_refused():
    sch = S.Schedule(rowsum())
    assert_refused(sch, lambda: sch.reindex("Y", ("read", 1)),
                   r"reindex: block 'Y' has 1 read buffer\(s\) \['X'\]; index 1 is out",
                   ScheduleArgumentError)


@pytest.mark.parametrize("bad", [("both", 0), ("read", -1), 3, "Z"])
def test_bad_buffer_arguments_are_refused(bad):
    sch = S.Schedule(transpose_double())
    match = r"accesses no buffer named 'Z'" if bad == "Z" else \
        r"argument 2, 'buffer' to reindex: expected \('read', i\)"
    assert_refused(sch, lambda: sch.reindex("B", bad), match, ScheduleArgumentError)


def test_reindex_refuses_a_guarded_read_that_would_load_out_of_bounds():
    # a padding block loads X[h - 1] only where 1 <= h < 5: a copy over all of h would
    # load X[-1] and X[4]
    X = T.placeholder((4,), name="X")
    P = T.compute((6,), lambda h: T.if_then_else(T.all(h >= 1, h < 5), X[h - 1],
                                                 T.const(0.0, "float32")), name="P")
    sch = S.Schedule(T.create_prim_func([X, P]))
    with pytest.raises(CacheStageError, match=r"reads X\[v_h - 1\], whose index v_h - 1 "
                       r"\(axis 0\) is not within \[0, 4\).*Pad 'X' first"):
        sch.reindex("P", ("read", 0))
    with pytest.raises(CacheStageError, match="out of bounds"):
        sch.reindex_cache_read("P", 0, "global", lambda h: (h,))


def test_reindex_refuses_a_conditional_store():
    f = T.parse('''
@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            if vi < 4:
                B[vi] = A[vi] * 2.0
''')
    sch = S.Schedule(f)
    with pytest.raises(CacheStageError, match=r"stores B\[vi\] only where vi < 4 holds"):
        sch.reindex("B", ("write", 0))
