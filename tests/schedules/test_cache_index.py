"""cache_index: index arithmetic precomputed into buffers; numerics, thresholds,
what is never cached, trace."""

import numpy as np

import cuvil_tir as T
import schedules as S
from cuvil_tir.analysis import tree
from schedules.errors import ScheduleArgumentError
from tests.schedules.testing import (assert_refused, run, run_llvm, verify_text_roundtrip,
                                     verify_trace_roundtrip)

RESIZE = '''
@T.prim_func
def main(A: T.Buffer((1, 3, 40, 40), "float32"), B: T.Buffer((1, 3, 80, 80), "float32")):
    for i0, i1, i2, i3 in T.grid(1, 3, 80, 80):
        with T.block("A"):
            n, c, vi, vj = T.axis.remap("SSSS", [i0, i1, i2, i3])
            B[n, c, vi, vj] = A[n, c, vi // 4 + vj // 4, vj // 2]
'''


def alloc(sch, name):
    return next(b for b in sch.func.body.block.alloc_buffers if b.name == name)


def test_each_index_computation_gets_a_buffer_over_the_iterators_it_uses():
    f = T.parse(RESIZE)
    sch = S.Schedule(f)
    assert sch.cache_index("A", "global") == [S.BlockRV("index_0"), S.BlockRV("index_1")]
    assert [int(s) for s in alloc(sch, "index_var_0").shape] == [80, 80]
    assert [int(s) for s in alloc(sch, "index_var_1").shape] == [80]
    text = str(sch.func)
    assert "index_var_0[v0, v1] = v0 // 4 + v1 // 4" in text
    assert "B[n, c, vi, vj] = A[n, c, index_var_0[vi, vj], index_var_1[vj]]" in text
    blk = tree.get(sch.func, tree.find_block(sch.func, "A")).block
    assert [r.buffer.name for r in blk.reads] == ["index_var_0", "index_var_1", "A"]
    a = np.random.default_rng(0).random((1, 3, 40, 40), dtype="float32")
    want = run(f, [a, np.zeros((1, 3, 80, 80), "float32")])[1]
    np.testing.assert_array_equal(run(sch, [a, np.zeros((1, 3, 80, 80), "float32")])[1], want)
    np.testing.assert_array_equal(run_llvm(sch, [a, np.zeros((1, 3, 80, 80), "float32")])[1],
                                  want)
    verify_trace_roundtrip(sch, f)
    verify_text_roundtrip(sch.func)
    assert "b0, b1 = sch.cache_index('A', 'global')" in sch.trace.as_python()


def test_threshold_keeps_only_repeated_computations_and_tells_iterators_apart():
    X = T.placeholder((8, 8), name="X")
    f = T.create_prim_func([X, T.compute(
        (8, 8), lambda i, j: X[i // 2, j // 2] + X[j // 2, i // 2] * X[(i + j) % 8, 0],
        name="Y")])
    sch = S.Schedule(f)
    # i // 2 and j // 2 occur twice each (same shape, different iterators); (i + j) % 8
    # once
    assert len(sch.cache_index("Y", "global", cse_thresh=2)) == 2
    assert "(v_i + v_j) % 8" in str(sch.func)
    x = np.random.default_rng(1).random((8, 8), dtype="float32")
    want = run(f, [x, np.zeros((8, 8), "float32")])[1]
    np.testing.assert_allclose(run(sch, [x, np.zeros((8, 8), "float32")])[1], want)
    verify_trace_roundtrip(sch, f)


def test_nothing_to_cache_leaves_the_block():
    X = T.placeholder((8,), name="X")
    f = T.create_prim_func([X, T.compute((8,), lambda i: X[i] * 2.0, name="Y")])
    sch = S.Schedule(f)
    assert sch.cache_index("Y", "global") == []
    assert sch.func is f


def test_division_by_an_iterator_is_not_precomputed():
    X = T.placeholder((9,), name="X")
    f = T.create_prim_func([X, T.compute((8,), lambda i: X[8 // (i + 1)], name="Y")])
    sch = S.Schedule(f)
    assert sch.cache_index("Y", "global") == [S.BlockRV("index_0")]
    assert "index_var_0[v0] = v0 + 1" in str(sch.func)
    x = np.arange(9, dtype="float32")
    np.testing.assert_array_equal(run(sch, [x, np.zeros(8, "float32")])[1],
                                  x[[8 // (i + 1) for i in range(8)]])


def test_refuses_a_bad_scope_or_threshold():
    sch = S.Schedule(T.parse(RESIZE))
    assert_refused(sch, lambda: sch.cache_index("A", "locla"), "no registered target has "
                   "a memory 'locla'", ScheduleArgumentError)
    assert_refused(sch, lambda: sch.cache_index("A", "global", -1), "argument 3, "
                   "'cse_thresh' to cache_index: expected a non-negative int, found -1", ScheduleArgumentError)


def test_inlining_the_index_buffers_back_leaves_no_load_of_them_in_the_reads():
    # each inline rewrites the consumer's declared reads too: a read region still
    # naming the inlined buffer would not parse back (the buffer is gone)
    from tests import workloads
    w = workloads.conv2d_nchw(1, 2, 4, 4, 2, 3, 1)
    sch = S.Schedule(w.func)
    sch.cache_index(sch.get_block("pad"), "global", 0)
    cached = [b.name for b in sch.func.body.block.alloc_buffers if b.name.startswith("index")]
    for k in range(len(cached)):
        sch.compute_inline(sch.get_block(f"index_{k}"))
    assert "index_var" not in str(sch.func)
    verify_text_roundtrip(sch.func)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal([int(d) for d in b.shape]).astype("float32")
            for b in w.func.params]
    np.testing.assert_allclose(run(sch, args)[-1], run(w.func, args)[-1], rtol=1e-5)
    verify_trace_roundtrip(sch, w.func)


def test_any_pure_op_of_the_registry_is_cached():
    # purity comes from the op registry: a bitwise shift (missing from the hand-written
    # list this replaced) is index arithmetic like any other
    f = T.parse('''
@T.prim_func
def main(A: T.Buffer((40,), "float32"), B: T.Buffer((80,), "float32")):
    for i in T.serial(80):
        with T.block("A"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[T.shift_right(vi, 1)]
''')
    sch = S.Schedule(f)
    assert sch.cache_index("A", "global") == [S.BlockRV("index_0")]
    assert "index_var_0[v0] = T.shift_right(v0, 1)" in str(sch.func)
    a = np.random.default_rng(2).random(40, dtype="float32")
    out = run(sch, [a, np.zeros(80, "float32")])[1]
    np.testing.assert_array_equal(out, a[np.arange(80) >> 1])
    verify_trace_roundtrip(sch, f)
