"""Defects the schedule fuzzer (tests/schedules/fuzz) found beyond issue 25's list, one
regression test each (the others: test_predicate_regions, test_pad_einsum_reach)."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from cuvil_tir.analysis import tree
from tests.schedules.testing import assert_refused, run, run_llvm, verify_trace_roundtrip


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


def _min_over_rows():
    X = T.placeholder((7, 4), "int8", name="X")
    k = T.reduce_axis((0, 4), name="k")
    return T.create_prim_func([X, T.compute(
        (7,), lambda i: T.min(X[i, k].astype("int32"), axis=k), name="Y")])


def test_cache_read_at_a_second_blockized_level_copies_only_what_its_readers_read():
    """Fuzz case 2765535898: the outer level's cache X_global_1 of a blockized block under
    a non-dividing split (4 columns as 2 x 3) holds 3 columns of which the last tile
    writes 1; a cache_read of it inside a second blockized block copied all 3 (the
    interpreter refused the read of unwritten memory).  The copy now takes what the
    guarded reader reads."""
    f = _min_over_rows()
    sch = S.Schedule(f)
    b0 = sch.cache_read("Y", 0, "global")
    sch.blockize(sch.split(sch.get_loops(b0)[1], [None, 3])[1])
    sch.cache_read(b0, 0, "global")
    sch.blockize(sch.split(sch.get_loops(b0)[0], [None, 3])[1])
    copy = sch.cache_read(b0, 0, "global")
    realize = T.analysis.tree.get(sch.func, T.analysis.tree.find_block(sch.func, copy.name))
    assert str(realize.predicate) == "v1_o * 3 + ax1 < 4"      # the reader's guard
    x = np.random.default_rng(3).integers(-100, 100, (7, 4)).astype("int8")
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, np.zeros(7, "int32")])[1],
                                      x.astype("int32").min(1))
    verify_trace_roundtrip(sch, f)


_NESTED = '''
@T.prim_func
def main(X: T.Buffer((2, 6), "int32"), Y: T.Buffer((2, 6), "int32"),
         Z: T.Buffer((2, 6), "int32")):
    for i in T.serial(2):
        with T.block("outer"):
            vi = T.axis.remap("S", [i])
            C = T.alloc_buffer((6,), "int32")
            T.reads(X[vi, 0:6])
            T.writes(Y[vi, 0:6], Z[vi, 0:6])
            for j in T.serial(6):
                with T.block("C"):
                    vj = T.axis.remap("S", [j])
                    T.where(j < 5)
                    T.reads(X[vi, vj])
                    T.writes(C[vj])
                    C[vj] = X[vi, vj] * 2
            for o in T.serial(1):
                with T.block("inner"):
                    vo = T.axis.remap("S", [o])
                    T.reads(C[0:6])
                    T.writes(Y[vi, 0:6], Z[vi, 0:6])
                    for a in T.serial(6):
                        with T.block("Y"):
                            va = T.axis.remap("S", [a])
                            T.where(a < 3)
                            T.reads(C[va])
                            T.writes(Y[vi, va])
                            Y[vi, va] = C[va] + 1
                    for b in T.serial(6):
                        with T.block("Z"):
                            vb = T.axis.remap("S", [b])
                            T.where(b < 4)
                            T.reads(C[ZREAD])
                            T.writes(Z[vi, vb])
                            Z[vi, vb] = C[ZREAD]
'''


def test_cache_read_of_a_buffer_written_outside_its_block_copies_what_each_reader_reads():
    """Two guarded readers (C[a] for a < 3, C[4 - b] for b < 4) of a buffer written
    (C[j] for j < 5) by a block outside theirs: the copy takes the union, C[0:5]."""
    f = T.parse(_NESTED.replace("ZREAD", "4 - vb"))
    sch = S.Schedule(f)
    sch.cache_read("Y", 0, "local")
    x = np.arange(12, dtype="int32").reshape(2, 6)
    want_y = np.zeros((2, 6), "int32")
    want_y[:, :3] = x[:, :3] * 2 + 1
    want_z = np.zeros((2, 6), "int32")
    want_z[:, :4] = x[:, 4:0:-1] * 2
    for runner in (run, run_llvm):
        out = runner(sch, [x, np.zeros((2, 6), "int32"), np.zeros((2, 6), "int32")])
        np.testing.assert_array_equal(out[1], want_y)
        np.testing.assert_array_equal(out[2], want_z)


def test_cache_read_of_a_part_the_copy_cannot_follow_is_refused():
    """C[b // 2] under b < 4 reads C[0:2]; no condition on an element says so, and a
    copy of the whole tile would read C[5], which nothing wrote."""
    from schedules.errors import CacheStageError
    from tests.schedules.testing import assert_refused
    sch = S.Schedule(T.parse(_NESTED.replace("ZREAD", "vb // 2")))
    assert_refused(sch, lambda: sch.cache_read("Y", 0, "local"),
                   r"cache_read: no block in this scope writes 'C', and its readers "
                   r"\['Y', 'Z'\] read only part of it \(under a T.where or in nested "
                   r"blocks\) by indices the copy cannot follow", CacheStageError)


def test_cache_write_of_a_padding_block_guarded_by_an_equality_copies_back_its_element():
    """Fuzz case 4036065169: the padding block of a padded layout runs under
    T.where(ax0_1 == 1 and 1 <= ax1) (one element); a cache_write inside its blockized
    block cut the copy back by the inequality alone and wrote back a whole column, over
    an element of the sum (NaN where the cache was never written)."""
    X = T.placeholder((3, 8), name="X")
    k = T.reduce_axis((1, 8), name="k")
    Y = T.compute((3,), lambda i: T.sum(X[i, k], axis=k), name="Y")
    f = T.create_prim_func([X, T.compute((3,), lambda i: T.max(Y[i], 0.0), name="Z0")])
    sch = S.Schedule(f)
    init = sch.decompose_reduction("Y", sch.get_loops("Y")[0])
    sch.transform_layout(init, 0, lambda i: (i // 2, i % 2), pad_value=0.0)
    sch.blockize(sch.split(sch.get_loops("Y_pad")[0], [None, 2])[1])
    sch.cache_write("Y_pad", 0, "local")
    x = np.random.default_rng(4).integers(-3, 4, (3, 8)).astype("float32")
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, np.zeros(3, "float32")])[1],
                                      np.maximum(x[:, 1:].sum(1), 0))
    verify_trace_roundtrip(sch, f)


def test_cache_write_of_a_guarded_copy_inside_a_blockized_block_copies_back_what_it_wrote():
    """Fuzz case 4156386044: inside a blockized block, the cache_read copy of Y's tile
    [v - 1, v + 2) is guarded to Y's rows; a cache_write of that copy wrote the whole
    tile back from its own cache, rows the guarded copy never wrote included."""
    X = T.placeholder((4, 2), "int8", name="X")
    Y = T.compute((4, 2), lambda i, j: X[i, j], name="Y")
    Z = T.compute((4, 2), lambda i, j: T.if_then_else(i >= 1, Y[i - 1, j], T.int8(0)) +
                  T.if_then_else(i + 1 < 4, Y[i + 1, j], T.int8(0)), name="Z0")
    f = T.create_prim_func([X, Z])
    sch = S.Schedule(f)
    sch.blockize(sch.split(sch.get_loops("Z0")[1], [None, 4])[1])
    copy = sch.cache_read("Z0", 0, "local")
    sch.cache_write(copy, 0, "global")
    x = np.random.default_rng(5).integers(-9, 9, (4, 2)).astype("int8")
    pad = np.pad(x, ((1, 1), (0, 0)))
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, np.zeros((4, 2), "int8")])[1],
                                      pad[:-2] + pad[2:])
    verify_trace_roundtrip(sch, f)


def test_compute_inline_of_a_block_reading_a_cache_of_its_blockized_block_is_refused():
    """Fuzz case 3099901935: Z0 reads Y_local, which its blockized outer block
    allocates; inlined into Z1 (outside that block) the load named a buffer no block
    around Z1 allocates, and the outer block's iterator."""
    from schedules.errors import InlineError
    from tests.schedules.testing import assert_refused
    X = T.placeholder((7, 6), name="X")
    Y = T.compute((7, 6), lambda i, j: X[i, j] * 2.0, name="Y")
    Z0 = T.compute((7, 6), lambda i, j: Y[i, j] * 3.0, name="Z0")
    f = T.create_prim_func([X, T.compute((7, 6), lambda i, j: Z0[i, j] + 1.0, name="Z1")])
    sch = S.Schedule(f)
    sch.blockize(sch.split(sch.get_loops("Z0")[0], [None, 3])[1])
    sch.cache_read("Z0", 0, "local")
    assert_refused(sch, lambda: sch.compute_inline("Z0"),
                   r"compute_inline: block 'Z0' reads or names \['Y_local'\], which a block "
                   r"around it allocates or binds, and its readers \['Z1'\] are not all "
                   "inside that block", InlineError)
    x = np.random.default_rng(6).standard_normal((7, 6)).astype("float32")
    np.testing.assert_allclose(run(sch, [x, np.zeros((7, 6), "float32")])[1],
                               x * 6 + 1, rtol=1e-6)


def test_build_of_a_split_of_a_fused_reduction_bounds_a_loop_that_runs_for_one_tile():
    """fuse, a non-dividing split, decompose_reduction and a second non-dividing split:
    lowering splits the guarded loop into T.serial(T.max(2 - io * 3, 0)), which runs
    for io = 0 only, and the build refused it (CVL-E104: X[io * 7 + k + 7] 'ranges over
    [7, 20]'), ignoring that the loop's extent ties io to 0."""
    X = T.placeholder((2, 7), "int32", name="X")
    W = T.placeholder((7, 3), "int32", name="W")
    k = T.reduce_axis((0, 7), name="k")
    f = T.create_prim_func([X, W, T.compute(
        (2, 3), lambda i, j: T.sum(X[i, k] * W[k, j], axis=k), name="Y")])
    sch = S.Schedule(f)
    i, j, _ = sch.get_loops("Y")
    sch.split(sch.fuse(i, j), [None, 4])
    sch.decompose_reduction("Y", sch.get_loops("Y")[2])
    sch.split(sch.get_loops("Y_update")[1], [None, 3])
    rng = np.random.default_rng(2)
    x, w = rng.integers(-5, 6, (2, 7)).astype("int32"), \
        rng.integers(-5, 6, (7, 3)).astype("int32")
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, w, np.zeros((2, 3), "int32")])[2],
                                      x @ w)
    verify_trace_roundtrip(sch, f)


def test_nested_blockize_under_non_dividing_splits_then_loop_partition_parses_back():
    """Blockize of a tile of 3 rows, then of a split of it by 2: the inner outer block
    declares Y[v * 3 + vo * 2 : +2] while its inner T.where(vo * 2 + i < 3) keeps it in
    the tile.  Once loop_partition bounded the tile's block, the region check compared
    the loose region with the tile's exact one: the printed function did not parse back
    (CVL-E108)."""
    X = T.placeholder((7, 4), name="X")
    f = T.create_prim_func([X, T.compute((7, 4), lambda i, j: X[i, j] + X[6 - i, j],
                                         name="Y")])
    sch = S.Schedule(f)
    tile = sch.blockize(sch.split(sch.get_loops("Y")[0], [None, 3])[1])
    sch.blockize(sch.split(sch.get_loops("Y")[0], [None, 2])[1])
    sch.loop_partition(sch.get_loops(tile)[0], [2, None])
    verify_trace_roundtrip(sch, f)          # prints and parses back
    x = np.random.default_rng(3).standard_normal((7, 4)).astype("float32")
    for runner in (run, run_llvm):
        np.testing.assert_allclose(runner(sch, [x, np.zeros((7, 4), "float32")])[1],
                                   x + x[::-1], rtol=1e-6)


def test_compute_at_of_a_block_whose_region_width_names_its_own_iterator_is_refused():
    """Fuzz case 4113888420: after a padded transform_layout of a blockized block's
    init, the outer block's write region has a width that names its own iter var;
    compute_at solved it into a loop extent naming v_i_o, undefined there."""
    X = T.placeholder((6, 1), "float16", name="X")
    k = T.reduce_axis((0, 1), name="k")
    Y = T.compute((6,), lambda i: T.sum(X[i, k], axis=k), name="Y")
    Z0 = T.compute((6,), lambda i: T.max(Y[i], T.const(0, "float16")), name="Z0")
    f = T.create_prim_func([X, T.compute((6,), lambda i: T.max(Z0[i], T.const(0, "float16")),
                                         name="Z1")])
    sch = S.Schedule(f)
    _, inner = sch.split(sch.get_loops("Y")[0], [None, 4])
    outer_block = sch.blockize(inner)
    sch.cache_read("Y", 1, "global")
    sch.transform_layout("Y_init", 0, lambda i: (i // 2, i % 2), pad_value=0.0)
    (consumer,) = sch.get_consumers(outer_block)
    with pytest.raises(S.ScheduleError, match=r"compute_at: block 'Y_o' accesses Y\[.*\], "
                       r"whose width depends on its own iterators \['v_i_o'\]"):
        sch.compute_at(outer_block, sch.get_loops(consumer)[0])


def test_loop_partition_then_fuse_and_split_of_a_part_parses_back():
    """Fuzz case 2011735872: the part's block declares X[0:3, 0:3]; its inner block
    reads X[(f0 * 5 + f1) // 3, ...] under T.where(f0 * 5 + f1 < 9).  The region check
    bounded f0 and f1 apart (row 3) and then by the row's domain (row 7): the printed
    function did not parse back (CVL-E108)."""
    X = T.placeholder((8, 3), "int8", name="X")
    W = T.placeholder((3, 1), "int8", name="W")
    k = T.reduce_axis((0, 3), name="k")
    f = T.create_prim_func([X, W, T.compute(
        (8, 1), lambda i, j: T.sum(X[i, k].astype("int32") * W[k, j].astype("int32"),
                                   axis=k), name="Y")])
    sch = S.Schedule(f)
    i, j, _ = sch.get_loops("Y")
    sch.loop_partition(sch.fuse(i, j), [3, None])
    sch.split(sch.fuse(*sch.get_loops("Y_i_j_fused0")), [None, 5])
    verify_trace_roundtrip(sch, f)          # prints and parses back
    rng = np.random.default_rng(5)
    x = rng.integers(-9, 9, (8, 3)).astype("int8")
    w = rng.integers(-9, 9, (3, 1)).astype("int8")
    for runner in (run, run_llvm):
        got = runner(sch, [x, w, np.zeros((8, 1), "int32")])[2]
        np.testing.assert_array_equal(got, x.astype("int32") @ w.astype("int32"))


def _max_tiles_with_a_local_copy():
    """max over X[i, 1:7] with the reduce loop split by 4 and blockized (the last tile
    holds two of its four columns), then X's row tile cached in local memory."""
    X = T.placeholder((4, 7), "int8", name="X")
    k = T.reduce_axis((1, 7), name="k")
    f = T.create_prim_func([X, T.compute(
        (4,), lambda i: T.max(X[i, k].astype("int32"), axis=k), name="Y")])
    sch = S.Schedule(f)
    sch.blockize(sch.split(sch.get_loops("Y")[1], [None, 4])[1])
    return f, sch, sch.cache_read("Y", 1, "local")


def test_cache_read_of_a_guarded_copy_split_by_one_copies_only_what_it_wrote():
    """Fuzz case 2437960785: the local copy's row loop split by [None, 1, 1] binds
    ax0_0 + ax0_1 + ax0_2; the element condition gave up on the three loops (one
    value), and the second cache_read copied X_local[0, 2:4] of the last tile, which
    its T.where never wrote (an uninitialised read)."""
    f, sch, local = _max_tiles_with_a_local_copy()
    sch.split(sch.get_loops(local)[-2], [None, 1, 1])
    sch.cache_read("Y", 1, "global")
    x = np.random.default_rng(7).integers(-9, 9, (4, 7)).astype("int8")
    for runner in (run, run_llvm):
        got = runner(sch, [x, np.zeros(4, "int32")])[1]
        np.testing.assert_array_equal(got, x[:, 1:].astype("int32").max(1))


def test_cache_read_of_a_guarded_copy_whose_columns_were_split_is_refused():
    """The same copy with its column loop split by 2 binds ax1_0 * 2 + ax1_1 under
    T.where(v_k_o * 4 + ax1_0 * 2 + ax1_1 < 6): which elements it wrote cannot be
    told, so a copy of the whole tile is refused (it read unwritten elements)."""
    f, sch, local = _max_tiles_with_a_local_copy()
    sch.split(sch.get_loops(local)[-1], [None, 2])
    assert_refused(sch, lambda: sch.cache_read("Y", 1, "global"),
                   r"cache_read: block 'X_local' writes only part of 'X_local' here "
                   r"\(under a T.where\), by indices the copy cannot follow .* apply "
                   r"cache_read before splitting or fusing the loops of 'X_local'")


def test_cache_write_of_a_partition_over_a_symbolic_dimension():
    """Fuzz case 2705098703: cache_write of the second part of a loop_partition, whose
    region over the symbolic dimension n differs from its tile's by constants at the
    ends but has the extent n: the cut read ``.value`` of a SizeVar (AttributeError)."""
    n = T.size_var("n")
    X = T.placeholder((5, n), name="X")
    f = T.create_prim_func([X, T.compute((5, n), lambda i, j: X[4 - i, j] + X[i, j],
                                         name="Y")])
    sch = S.Schedule(f)
    sch.loop_partition(sch.get_loops("Y")[0], [3, None])
    sch.cache_write("Y_i1", 0, "local")
    x = np.random.default_rng(2).standard_normal((5, 3)).astype("float32")
    for runner in (run, run_llvm):
        got = runner(sch, [x, np.zeros((5, 3), "float32")])[1]
        np.testing.assert_allclose(got, x[::-1] + x, rtol=1e-6)


def test_compute_at_under_a_fused_split_of_a_symbolic_reduction_loops_over_the_row():
    """Fuzz case 1427104149: the copy of X's row moved under a fused and split
    (j, k) loop read X[i, (f * 4 + g) % n], whose bound was the index type's limit:
    the copy ran T.serial(2147483647) under T.where(ax0 < n) (the run never ended)."""
    n = T.size_var("n")
    X = T.placeholder((n, n), name="X")
    W = T.placeholder((n, 7), name="W")
    k = T.reduce_axis((0, n), name="k")
    f = T.create_prim_func([X, W, T.compute(
        (n, 7), lambda i, j: T.sum(X[i, k] * W[k, j], axis=k), name="Y")])
    sch = S.Schedule(f)
    sch.decompose_reduction("Y", sch.get_loops("Y")[0])
    copy = sch.cache_read("Y_update", 1, "global")
    _, j, kk = sch.get_loops("Y_update")
    sch.split(sch.fuse(j, kk), [None, 4])
    sch.compute_at(copy, sch.get_loops("Y_update")[1])
    (ax0,) = [lp for _, lp in tree.loops_above(sch.func, tree.find_block(sch.func,
              "X_global")) if lp.loop_var.name == "ax0"]
    assert str(ax0.extent) == "n", ax0.extent
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 3)).astype("float32")
    w = rng.standard_normal((3, 7)).astype("float32")
    for runner in (run, run_llvm):
        got = runner(sch, [x, w, np.zeros((3, 7), "float32")])[2]
        np.testing.assert_allclose(got, x @ w, rtol=1e-5, atol=1e-5)


def _matmul_then_neighbour_rows():
    """Y = X @ W (int8 -> int32), Z[i, j] = Y[i - 1, j] + Y[i + 1, j] (zero outside)."""
    X = T.placeholder((4, 5), "int8", name="X")
    W = T.placeholder((5, 4), "int8", name="W")
    k = T.reduce_axis((0, 5), name="k")
    Y = T.compute((4, 4), lambda i, j: T.sum(
        X[i, k].astype("int32") * W[k, j].astype("int32"), axis=k), name="Y")
    Z = T.compute((4, 4), lambda i, j: T.if_then_else(i >= 1, Y[i - 1, j], 0) +
                  T.if_then_else(i + 1 < 4, Y[i + 1, j], 0), name="Z")
    return T.create_prim_func([X, W, Z])


def _neighbour_rows_expected(x, w):
    y = x.astype("int32") @ w.astype("int32")
    z = np.zeros_like(y)
    z[1:] += y[:-1]
    z[:-1] += y[1:]
    return z


def test_cache_read_in_a_loop_partition_part_parses_back():
    """Fuzz case 1766258219: the copy block of a cache_read in the part of columns
    1..3 binds v1 = 1 + ax1 under a T.where (its rows are cut).  Under a T.where the
    region check bounded v1 by its domain [0, 4) alone and found column 0 outside the
    part's T.reads(Y[..., 1:4]): the printed function did not parse back (CVL-E108).
    The binding bounds an iterator as well as its domain does."""
    f = _matmul_then_neighbour_rows()
    sch = S.Schedule(f)
    _, j = sch.get_loops("Z")
    sch.loop_partition(j, [1, None])
    sch.cache_read("Z_j1", 0, "local")
    verify_trace_roundtrip(sch, f)          # prints and parses back
    rng = np.random.default_rng(7)
    x = rng.integers(-9, 9, (4, 5)).astype("int8")
    w = rng.integers(-9, 9, (5, 4)).astype("int8")
    for runner in (run, run_llvm):
        got = runner(sch, [x, w, np.zeros((4, 4), "int32")])[2]
        np.testing.assert_array_equal(got, _neighbour_rows_expected(x, w))
