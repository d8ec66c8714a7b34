"""Defects the schedule fuzzer (tests/schedules/fuzz) found beyond issue 25's list, one
regression test each (the others: test_predicate_regions, test_pad_einsum_reach)."""

import numpy as np

import cuvil_tir as T
import schedules as S
from tests.schedules.testing import run, run_llvm, verify_trace_roundtrip


def _matmul_scaled():
    X = T.placeholder((2, 2), name="X")
    W = T.placeholder((2, 7), name="W")
    k = T.reduce_axis((0, 2), name="k")
    Y = T.compute((2, 7), lambda i, j: T.sum(X[i, k] * W[k, j], axis=k), name="Y")
    return T.create_prim_func([X, W, T.compute((2, 7), lambda i, j: Y[i, j] * 3.0,
                                               name="Z")])


def test_padded_layout_of_a_producer_sharing_a_loop_with_its_consumer_keeps_the_consumer():
    """transform_layout with padding rebuilt the producer's loop nest over the new shape,
    dropping the consumer computed at the nest's outer loop (Z was never computed)."""
    f = _matmul_scaled()
    sch = S.Schedule(f)
    sch.compute_at("Y", sch.get_loops("Z")[0])
    sch.transform_layout("Y", 0, lambda i, j: (i, j // 2, j % 2), pad_value=0.0)
    assert {"Y", "Z", "Y_pad"} <= {b.block.name for b in
                                   T.analysis.tree.blocks_under(sch.func.body)}
    rng = np.random.default_rng(0)
    x, w = rng.integers(-3, 4, (2, 2)).astype("float32"), \
        rng.integers(-3, 4, (2, 7)).astype("float32")
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, w, np.zeros((2, 7), "float32")])[2],
                                      (x @ w) * 3)
    verify_trace_roundtrip(sch, f)


def test_reindex_of_a_block_holding_the_accesses_in_inner_blocks_is_refused():
    """reindex of a blockized outer block rewrote the inner block's store but not its
    declared region: the printed function did not parse back."""
    from schedules.errors import CacheStageError
    from tests.schedules.testing import assert_refused
    A = T.placeholder((8, 1), "int32", name="A")
    f = T.create_prim_func([A, T.compute((8, 1), lambda i, j: A[i, j] * 3, name="Z")])
    sch = S.Schedule(f)
    outer = sch.blockize(sch.get_loops("Z")[1])
    assert_refused(sch, lambda: sch.reindex(outer, ("write", 0)),
                   "reindex: block 'Z_o' accesses 'Z' through the blocks \\['Z'\\] inside "
                   "it; reindex the innermost block that accesses it", CacheStageError)
    a = np.arange(8, dtype="int32").reshape(8, 1)
    np.testing.assert_array_equal(run(sch, [a, np.zeros((8, 1), "int32")])[1], a * 3)
    verify_trace_roundtrip(sch, f)


def test_padded_layout_keeps_a_partition_block_covering_its_nested_block():
    """transform_layout bounded a loop_partition block's region of Y exactly (i % 3 over
    [0, 2)) and its nested block's loosely (over [v - 1, v + 2)): the parent declared
    less than the child, and the printed function did not parse back."""
    X = T.placeholder((6, 3), "int8", name="X")
    k = T.reduce_axis((1, 3), name="k")
    Y = T.compute((6,), lambda i: T.sum(X[i, k].astype("int32"), axis=k), name="Y")
    Z = T.compute((6,), lambda i: T.if_then_else(i >= 1, Y[i - 1], 0) +
                  T.if_then_else(i + 1 < 6, Y[i + 1], 0), name="Z")
    f = T.create_prim_func([X, Z])
    sch = S.Schedule(f)
    sch.loop_partition(sch.get_loops("Z")[0], [1, None])
    sch.transform_layout("Y", 0, lambda i: (i // 3, i % 3), pad_value=0)
    verify_trace_roundtrip(sch, f)          # prints and parses back
    x = np.random.default_rng(1).integers(-3, 4, (6, 3)).astype("int8")
    y = x[:, 1:].astype("int32").sum(1)
    want = np.concatenate([[0], y[:-1]]) + np.concatenate([y[1:], [0]])
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, np.zeros(6, "int32")])[1], want)
