"""What the schedule fuzzer found around loop_partition parts: declared regions
unprovable or wrong after later steps, cache stages and inlining, a build refusal and a
reduction counted twice (fuzz cases 3387375299, 2585467907, 1094895252, 4142430982,
2292968407, 2003067029, 3003939395, 2268235098); each printed function must parse back
and compute what it did, or the step is refused."""

import numpy as np

import cuvil_tir as T
import schedules as S
from cuvil_tir.analysis import tree
from cuvil_tir.visitor import used_vars
from schedules.errors import BlockLocationError
from tests.schedules.testing import assert_refused, run, run_llvm, verify_trace_roundtrip


def _ints(rng, shape, dt="float32"):
    return rng.integers(-3, 4, shape).astype(dt)


def _elementwise():
    X = T.placeholder((2, 4), "int32", name="X")
    Y = T.compute((2, 4), lambda i, j: X[i, j] + X[i, 3 - j], name="Y")
    return T.create_prim_func([X, T.compute((2, 4), lambda i, j: Y[1 - i, j] * 2,
                                            name="Z")])


def test_a_partition_part_split_again_keeps_its_region_provable():
    """The part's predicate gained a cut of the split (j0_0 * 2 + j0_1 < 3) beside one
    naming outer loops: the interval bound kept the looser one and reached 3, past the
    part's declared Y[0:2, 0:3] (case 3387375299)."""
    f = _elementwise()
    sch = S.Schedule(f)
    i, j = sch.get_loops("Y")
    sch.split(i, [5, None])
    j0, _ = sch.loop_partition(j, [3, None])
    sch.split(j0, [None, 2])
    x = np.arange(8, dtype="int32").reshape(2, 4)
    want = ((x + x[:, ::-1]) * 2)[::-1]
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, np.zeros((2, 4), "int32")])[1], want)
    verify_trace_roundtrip(sch, f)


def _rowsum(n=3):
    X = T.placeholder((2, n), name="X")
    k = T.reduce_axis((0, n), name="k")
    Y = T.compute((2,), lambda i: T.sum(X[i, k], axis=k), name="Y")
    return T.create_prim_func([X, T.compute((2,), lambda i: T.max(Y[i], 0.0), name="Z")])


def test_a_partition_part_split_and_fused_keeps_its_region_provable():
    """A split and a fuse of a part's loops put its reduce index under a predicate on a
    compound of the fused loop ((f0 * 3 + f1 // 2) * 2 + f1 % 2 under f0 * 3 + f1 // 2
    < 1): no interval bound sees the index stay below 2 (case 2585467907)."""
    f = _rowsum()
    sch = S.Schedule(f)
    _, k = sch.get_loops("Y")
    k0, _ = sch.split(k, [None, 2])
    p0, _ = sch.loop_partition(k0, [1, None])
    sch.split(p0, [None, 3])
    sch.fuse(*sch.get_loops("Y_k_00")[-2:])
    x = _ints(np.random.default_rng(1), (2, 3))
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, np.zeros(2, "float32")])[1],
                                      np.maximum(x.sum(1), 0))
    verify_trace_roundtrip(sch, f)


def test_inlining_into_a_blockized_block_keeps_its_cache_out_of_its_reads():
    """compute_inline refreshed the reads of a blockized block holding a cache_write
    stage with the reads of the blocks inside it, its own cache buffer among them: a
    loop_partition block above it then named that buffer outside its allocation, and
    the text did not parse back (case 4142430982)."""
    X = T.placeholder((4, 3), name="X")
    Y = T.compute((4, 3), lambda i, j: X[i, 2 - j] + X[i, j], name="Y")
    f = T.create_prim_func([X, T.compute((4, 3), lambda i, j: Y[i, j] * 2.0, name="Z")])
    sch = S.Schedule(f)
    _, j = sch.get_loops("Z")
    jo, ji = sch.split(j, [None, 2])
    sch.blockize(ji)
    sch.cache_write("Z", 0, "global")
    sch.loop_partition(jo, [1])
    sch.compute_inline("Y")
    for br in tree.blocks_under(sch.func.body):
        mine = {id(b) for b in br.block.alloc_buffers}
        mine |= {id(b) for inner in tree.blocks_under(br.block.body)
                 for b in inner.block.alloc_buffers}
        assert not any(id(r.buffer) in mine for r in br.block.reads), br.block.name
    x = _ints(np.random.default_rng(2), (4, 3))
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, np.zeros((4, 3), "float32")])[1],
                                      (x[:, ::-1] + x) * 2)
    verify_trace_roundtrip(sch, f)


def test_a_nested_partition_declares_the_row_of_its_iteration():
    """A loop_partition inside the loops of an earlier part (under a split's T.where)
    declared W[0:6, 0:8], every column, where an iteration reads one: a cache_read
    sized from it copied whole rows of W, outside the region the outer part declares,
    and the text did not parse back (case 2292968407)."""
    X = T.placeholder((4, 6), name="X")
    W = T.placeholder((6, 8), name="W")
    k = T.reduce_axis((0, 6), name="k")
    f = T.create_prim_func([X, W, T.compute((4, 8), lambda i, j: T.sum(X[i, k] * W[k, j],
                                                                     axis=k), name="Y")])
    sch = S.Schedule(f)
    _, j, _ = sch.get_loops("Y")
    j0, _ = sch.split(j, [None, 3])
    sch.loop_partition(j0, [1, None])
    sch.loop_partition(sch.get_loops("Y_j_00")[-1], [1, 3, None])
    common = tree.get(sch.func, tree.find_block(sch.func, "Y_j_00_k_common")).block
    assert [str(r) for r in common.reads if r.buffer.name == "W"] == \
        ["W[0:6, j_00 * 3 + j_1]"]
    sch.cache_read("Y_j_00_k0", 1, "local")
    rng = np.random.default_rng(3)
    x, w = _ints(rng, (4, 6)), _ints(rng, (6, 8))
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, w, np.zeros((4, 8), "float32")])[2],
                                      x @ w)
    verify_trace_roundtrip(sch, f)


def test_a_guard_that_a_partitioned_loop_decides_leaves_its_dead_arm_unchecked():
    """After a padded layout, fuse, split, decompose_reduction and a loop_partition of
    the init's loop, lowering leaves a loop that runs only where the padding guard holds:
    the guard's other arm (a load of X past its end) is never reached, yet the build's
    bounds check refused it as an out-of-bounds load (case 3003939395)."""
    X = T.placeholder((4, 4), "int8", name="X")
    k = T.reduce_axis((0, 4), name="k")
    Y = T.compute((4,), lambda i: T.max(X[i, k].astype("int32"), axis=k), name="Y")
    f = T.create_prim_func([X, T.compute((4,), lambda i: Y[i] * 3, name="Z")])
    sch = S.Schedule(f)
    sch.transform_layout("Y", 0, lambda i: (i // 3, i % 3), pad_value=0)
    a, b, _ = sch.get_loops("Y")
    _, fi = sch.split(sch.fuse(a, b), [None, 4])
    init = sch.decompose_reduction("Y", sch.get_loops("Y")[2])
    _, inner = sch.split(sch.get_loops(init)[1], [None, 3])
    sch.loop_partition(inner, [2])
    x = np.arange(-8, 8, dtype="int8").reshape(4, 4)
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, np.zeros(4, "int32")])[1],
                                      x.astype("int32").max(1) * 3)
    verify_trace_roundtrip(sch, f)


def test_a_blockized_reversed_partition_part_parses_back():
    """A reversed read (X[i, 7 - k] over k in [2, 6)) blockized in a loop_partition
    part: the outer block's region overshoots what its inner T.where lets the body
    read, and only the loops around the part (k_0_0 of one iteration) bound that
    where; the parse-back check reported X[.., 0:3] outside the part's X[0:n, 2:6]
    (case 2003067029)."""
    n = T.size_var("n")
    X = T.placeholder((n, 6), name="X")
    k = T.reduce_axis((2, 6), name="k")
    f = T.create_prim_func([X, T.compute((n,), lambda i: T.min(X[i, 5 - k + 2], axis=k),
                                         name="Y")])
    sch = S.Schedule(f)
    i, k = sch.get_loops("Y")
    k0, _ = sch.split(k, [None, 3])
    sch.split(i, [None, 2, 1])
    _, k01 = sch.split(k0, [None, 2])
    sch.loop_partition(k01, [1, None])
    sch.blockize(sch.get_loops("Y_k_0_11")[-1])
    x = _ints(np.random.default_rng(4), (7, 6))
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, np.zeros(7, "float32")])[1],
                                      x[:, 2:6].min(1))
    verify_trace_roundtrip(sch, f)


def test_compute_at_of_a_partition_part_of_a_fused_reduction_is_refused():
    """A part of a fused (i, k) loop runs the reduction of row 0 for k = 0 only (the
    rest of the row is in the next part); moved under its cache's write-back loop by
    compute_at, it ran k over its whole domain, and the next part added k = 1..3 again
    (case 2268235098: a wrong sum)."""
    X = T.placeholder((5, 4), name="X")
    k = T.reduce_axis((0, 4), name="k")
    f = T.create_prim_func([X, T.compute((5,), lambda i: T.sum(X[i, k], axis=k),
                                         name="Y")])
    sch = S.Schedule(f)
    sch.loop_partition(sch.fuse(*sch.get_loops("Y")), [1, None])
    (back,) = sch.get_loops(sch.cache_write("Y_i_k_fused0", 0, "global"))
    assert_refused(sch, lambda: sch.compute_at("Y_i_k_fused0", back),
                   r"compute_at: block 'Y_i_k_fused0' runs its reduction over v_k in "
                   r"\[0, 0\] only, of its domain \[0, 3\] .* Move the block before "
                   "partitioning its reduction", BlockLocationError)
    x = _ints(np.random.default_rng(5), (5, 4))
    np.testing.assert_array_equal(run(sch, [x, np.zeros(5, "float32")])[1], x.sum(1))
    verify_trace_roundtrip(sch, f)


def test_a_cache_of_a_partition_part_is_never_sized_by_a_loop():
    """A loop_partition part under a loop declares a region whose extent names that
    loop (X[0:n, 0:n - j_0 * 2 // n]); cache_read sized its allocation by it, and the
    build found the loop variable undefined where allocations live (case 4100259559)."""
    n = T.size_var("n")
    X = T.placeholder((n, n), "float16", name="X")
    f = T.create_prim_func([X, T.compute((n, n), lambda i, j: X[i, n - 1 - j] * 2.0,
                                         name="Y")])
    sch = S.Schedule(f)
    i, j = sch.get_loops("Y")
    sch.reorder(j, i)
    _, inner = sch.split(sch.fuse(j, i), [None, 2])
    sch.loop_partition(inner, [1, None])
    sch.cache_read("Y_j_i_fused_10", 0, "local")
    part = tree.get(sch.func, tree.find_block(sch.func, "Y_j_i_fused_10_partition")).block
    assert part.alloc_buffers and all(isinstance(v, T.SizeVar) for b in part.alloc_buffers
                                      for s in b.shape for v in used_vars(s))
    x = _ints(np.random.default_rng(6), (7, 7), "float16")
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, np.zeros((7, 7), "float16")])[1],
                                      x[:, ::-1] * 2)
    verify_trace_roundtrip(sch, f)


def test_a_partition_nested_in_a_part_declares_within_the_part():
    """A loop_partition inside a part of an earlier one: its second part never runs
    (its T.where never holds) and declared its plain box, all of X, as did the common
    block around it, inside a part declaring X[3, 0:7]; a cache_read sized from it
    copied all of X there, and the text did not parse back (case 3479583659)."""
    X = T.placeholder((4, 7), "int32", name="X")
    f = T.create_prim_func([X, T.compute((4, 7), lambda i, j: X[i, j] * 2, name="Y")])
    sch = S.Schedule(f)
    sch.split(sch.get_loops("Y")[0], [5, None])
    i00, _ = sch.split(sch.get_loops("Y")[0], [None, 3])
    sch.loop_partition(i00, [1, None])
    _, inner = sch.split(sch.get_loops("Y_i_0_01")[0], [None, 3])
    sch.loop_partition(inner, [1, None])
    for name in ("Y_i_0_01_i_0_01_1_common", "Y_i_0_01_i_0_01_11_partition"):
        blk = tree.get(sch.func, tree.find_block(sch.func, name)).block
        assert [str(r) for r in blk.reads] == ["X[3, 0:7]"], name
    sch.fuse(*sch.get_loops(sch.cache_read("Y_i_0_01_i_0_01_11", 0, "global")))
    x = np.arange(28, dtype="int32").reshape(4, 7)
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, np.zeros((4, 7), "int32")])[1], x * 2)
    verify_trace_roundtrip(sch, f)
