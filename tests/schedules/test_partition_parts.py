"""Primitives applied inside the parts of ``loop_partition`` (several cut points, after
fuse or split, symbolic sizes) and the copy-back of ``cache_write``: the defects the
fuzzer found there, one regression test each, and a property test drawing the
partition-then-primitive sequence of the fuzzer (tests/schedules/fuzz/steps.py)."""

import random

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

import cuvil_tir as T
import schedules as S
from tests.schedules.fuzz import steps
from tests.schedules.fuzz.check import check
from tests.schedules.fuzz.programs import random_program
from tests.schedules.testing import assert_refused, run, run_llvm, verify_trace_roundtrip


def _matmul(m=4, k=6, n=5, dtype="float32"):
    X = T.placeholder((m, k), dtype, name="X")
    W = T.placeholder((k, n), dtype, name="W")
    r = T.reduce_axis((0, k), name="k")
    return T.create_prim_func([X, W, T.compute(
        (m, n), lambda i, j: T.sum(X[i, r] * W[r, j], axis=r), name="Y")])


def _operands(m=4, k=6, n=5):
    rng = np.random.default_rng(3)
    return (rng.integers(-4, 4, (m, k)).astype("float32"),
            rng.integers(-4, 4, (k, n)).astype("float32"))


def test_decompose_reduction_in_a_part_of_a_fused_spatial_and_reduce_loop():
    """Fuzz probe seed 139: fuse(j, k), loop_partition at 3, decompose_reduction in
    the second part.  Its loop (3..30) reaches v_j = 0 at v_k = 3, 4, 5 only, where
    T.init does not fire; the hoisted init zeroed Y[i, 0] anyway and lost the first
    part's sum.  The init now runs where the reduce iterator is at its start."""
    f = _matmul()
    sch = S.Schedule(f)
    _, j, k = sch.get_loops("Y")
    _, second = sch.loop_partition(sch.fuse(j, k), [3])
    init = sch.decompose_reduction("Y_j_k_fused1", second)
    assert str(sch.get(init).name) == "Y_j_k_fused1_init"
    assert "T.where(j_k_fused1_init % 6 == 0)" in str(sch.func)
    verify_trace_roundtrip(sch, f)
    x, w = _operands()
    for runner in (run, run_llvm):
        got = runner(sch, [x, w, np.zeros((4, 5), "float32")])[2]
        np.testing.assert_array_equal(got, x @ w)


def test_decompose_reduction_at_a_fused_loop_over_its_whole_range_stays_right():
    f = _matmul()
    sch = S.Schedule(f)
    _, j, k = sch.get_loops("Y")
    fused = sch.fuse(j, k)
    sch.decompose_reduction("Y", fused)
    x, w = _operands()
    np.testing.assert_array_equal(run(sch, [x, w, np.zeros((4, 5), "float32")])[2], x @ w)


def _split_reduction_partitioned(op, shape, factor):
    """Y[i] = op(X[i, k]) with k split by ``factor`` and its inner loop partitioned at
    1: ``(func, schedule, the two parts' loops)``."""
    X = T.placeholder(shape, name="X")
    r = T.reduce_axis((0, shape[1]), name="k")
    f = T.create_prim_func([X, T.compute(shape[:1], lambda i: op(X[i, r], axis=r),
                                         name="Y")])
    sch = S.Schedule(f)
    _, k = sch.get_loops("Y")
    _, k1 = sch.split(k, [None, factor])
    return f, sch, sch.loop_partition(k1, [1, None])


def test_decompose_reduction_in_a_later_part_of_a_split_reduce_loop_never_inits():
    """Fuzz probe seed 2536: split k by 3, partition the inner loop at 1: the part
    over k_1 in 1..3 keeps T.init (it never fires there: v_k = k_0 * 3 + k_1 is never
    0), but decompose_reduction hoisted it unconditionally and zeroed the first
    part's sum.  k_0 runs outside the part's block, where the check for reduction
    loops above the decomposition point did not look."""
    f, sch, (first, second) = _split_reduction_partitioned(T.sum, (3, 6), 3)
    sch.decompose_reduction("Y_k_11", second)
    sch.decompose_reduction("Y_k_10", first)
    text = str(sch.func)
    assert "T.where(k_0 * 3 == -1)" in text and "T.where(k_0 * 3 == 0)" in text
    verify_trace_roundtrip(sch, f)
    x = np.random.default_rng(1).integers(-5, 5, (3, 6)).astype("float32")
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, np.zeros(3, "float32")])[1],
                                      x.sum(axis=1))


def test_cache_write_of_a_split_fused_loop_is_kept():
    """The copy back's box is proven written through a fused loop split again
    (conv2d's recipe: (bo * 32 + tx) // 8 and % 8 over bo in [0, 2), tx in [0, 32))."""
    X = T.placeholder((8, 8), name="X")
    f = T.create_prim_func([X, T.compute((8, 8), lambda y, x: X[y, x] * 2.0, name="Y")])
    sch = S.Schedule(f)
    y, x = sch.get_loops("Y")
    sch.split(sch.fuse(y, x), [None, 32])
    sch.cache_write("Y", 0, "local")
    a = np.arange(64, dtype="float32").reshape(8, 8)
    np.testing.assert_array_equal(run(sch, [a, np.zeros((8, 8), "float32")])[1], a * 2)


def test_cache_write_of_a_part_of_a_fused_loop_is_refused():
    """Fuzz probe seed 282: the third part of fuse(i, j) (5..20) writes Y[1, 2:] and
    rows 2 on; the copy back of its box Y[1:4, 0:5] overwrote Y[1, 0:2] with the
    cache's unwritten elements."""
    f = _matmul()
    sch = S.Schedule(f)
    i, j, _ = sch.get_loops("Y")
    sch.loop_partition(sch.fuse(i, j), [2, 3, None])
    assert_refused(sch, lambda: sch.cache_write("Y_i_j_fused2", 0, "global"),
                   r"cannot be proven to write every element of Y\[1:4, 0:5\] here")


def test_cache_write_of_a_whole_fused_loop_is_kept():
    f = _matmul()
    sch = S.Schedule(f)
    i, j, _ = sch.get_loops("Y")
    sch.fuse(i, j)
    sch.cache_write("Y", 0, "local")
    x, w = _operands()
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(
            runner(sch, [x, w, np.zeros((4, 5), "float32")])[2], x @ w)


def test_cache_write_inside_a_partition_under_a_reduction_loop_is_refused():
    """Fuzz probe seed 53: split k, partition its inner loop: the part's block sits
    under the outer reduce loop k_0, so a cache held in the part's block started
    fresh (unwritten) in each iteration of k_0 and the sum read it."""
    _, sch, _ = _split_reduction_partitioned(T.min, (8, 4), 2)
    assert_refused(sch, lambda: sch.cache_write("Y_k_10", 0, "global"),
                   r"reduces over the loops \['k_0'\] outside the block 'Y_k_10_partition'")


def test_cache_write_of_a_tile_of_a_reshaped_buffer_is_refused():
    """Fuzz case 967054891: Y reshaped to (1, 2, 3), the column loop split by 2 and
    blockized: a tile writes two elements of a row of 3, and the copy back of the
    rows it touches wrote the third from the unwritten cache (NaN in Z)."""
    X = T.placeholder((1, 6), name="X")
    Y = T.compute((1, 6), lambda i, j: X[i, j] + 1.0, name="Y")
    f = T.create_prim_func([X, T.compute((1, 6), lambda i, j: T.max(Y[i, j], 0.0),
                                         name="Z")])
    sch = S.Schedule(f)
    sch.transform_layout("Y", 0, lambda i, j: (i, j // 3, j % 3), pad_value=0.0)
    _, j = sch.get_loops("Y")
    sch.blockize(sch.split(j, [None, 2])[1])
    assert_refused(sch, lambda: sch.cache_write("Y", 0, "global"),
                   r"cannot be proven to write every element of Y\[0, ")


def test_split_of_a_partition_part_of_a_split_loop_parses_back():
    """Hypothesis seed 600: split i by 2, partition the outer loop at 3, split that
    part's loop by 2: the block binds v_i = (a * 2 + b) * 2 + c under T.where(a * 2 + b
    < 3).  The region check bounded v_i by the T.where through v_i - (a * 2 + b) (7,
    then 6), past the part's T.writes(Z[0:6, 0:2]): the printed function did not
    parse back (CVL-E108).  Twice the conjunct cancels a and b: v_i <= 5."""
    X = T.placeholder((8, 2), "int32", name="X")
    f = T.create_prim_func([X, T.compute((8, 2), lambda i, j: X[i, j] * 2, name="Z")])
    sch = S.Schedule(f)
    i, _ = sch.get_loops("Z")
    outer, _ = sch.split(i, [None, 2])
    first, _ = sch.loop_partition(outer, [3])
    sch.split(first, [None, 2])
    assert "T.where(i_00_0 * 2 + i_00_1 < 3)" in str(sch.func)
    verify_trace_roundtrip(sch, f)
    x = np.arange(16, dtype="int32").reshape(8, 2)
    np.testing.assert_array_equal(run(sch, [x, np.zeros((8, 2), "int32")])[1], x * 2)


def test_cache_write_of_a_partition_part_over_a_symbolic_row():
    """Hypothesis probe seed 2082: the part's region Y[max(i, 0):..., 0:2] over a
    symbolic n: cutting it to the buffer built Max(min, 0) from a Python int and
    cache_write failed with CVL-E101 "Max: malformed node" (no schedule error)."""
    n = T.size_var("n")
    X = T.placeholder((n, 6), "int8", name="X")
    Y = T.compute((n, 6), lambda i, j: X[i, j], name="Y")
    f = T.create_prim_func([X, T.compute((n, 6), lambda i, j: Y[i, j] * T.const(3, "int8"),
                                         name="Z")])
    sch = S.Schedule(f)
    _, j = sch.get_loops("Y")
    sch.loop_partition(j, [2, None])
    sch.cache_write("Y_j0", 0, "local")
    verify_trace_roundtrip(sch, f)
    x = np.arange(18, dtype="int8").reshape(3, 6)
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, np.zeros((3, 6), "int8")])[1], x * 3)


def test_split_of_a_partition_part_that_never_runs_parses_back():
    """Fuzz case 1090133322: split a loop of 1 by [2, None], swap and fuse the two:
    v_i = f % 2 + f // 2 under T.where(v_i < 1).  The part over f = 1 never runs; its
    vacuous bounds from the never-true T.where declared X[2:1, 1:5], and after a
    split of the part the check bounded the same access otherwise: the printed
    function did not parse back (CVL-E108).  Such a part declares its plain box."""
    X = T.placeholder((1, 6), "int8", name="X")
    f = T.create_prim_func([X, T.compute((1, 6), lambda i, j: X[i, j] * T.const(2, "int8"),
                                         name="Y")])
    sch = S.Schedule(f)
    i, _ = sch.get_loops("Y")
    i0, i1 = sch.split(i, [2, None])
    sch.reorder(i1, i0)
    _, second = sch.loop_partition(sch.fuse(i1, i0), [1, None])
    assert [str(r) for r in sch.get("Y_i_1_i_0_fused1_partition").reads] == ["X[0, 0:6]"]
    sch.split(second, [None, 3])
    verify_trace_roundtrip(sch, f)
    x = np.arange(6, dtype="int8").reshape(1, 6)
    np.testing.assert_array_equal(run(sch, [x, np.zeros((1, 6), "int8")])[1], x * 2)


def test_compute_at_of_a_partition_wrapper_naming_outer_loops_is_refused():
    """Fuzz case 2064115801: the wrapper block of loop_partition has no iterators and
    its parts name the loops around it (v_i = i_0 * 3 + i_10); compute_at moved it
    under the consumer's loop and left i_0 undefined (the interpreter refused the
    accepted schedule, CVL-E104)."""
    A = T.placeholder((8,), name="A")
    B = T.compute((8,), lambda i: A[i] * 2.0, name="B")
    f = T.create_prim_func([A, T.compute((8,), lambda i: B[i] + 1.0, name="C")])
    sch = S.Schedule(f)
    _, inner = sch.split(sch.get_loops("B")[0], [None, 3])
    sch.loop_partition(inner, [1, None])
    loop = sch.get_loops("C")[0]
    assert_refused(sch, lambda: sch.compute_at("B_i_1_common", loop),
                   r"block 'B_i_1_common' names the loops \['i_0'\] around it")


def test_partition_of_a_blockized_tail_that_never_runs_parses_back():
    """Fuzz case 3271729867: split a loop of 2 by 4, blockize the inner loop (T.where(
    i_1 < 2)), partition it at 2: the part over 2..4 never runs.  Its block's domain
    was cut to [2, 4), where every access Z0[1 - v] lies provably outside the declared
    Z0[0:2]: the printed function did not parse back (CVL-E108).  Under a T.where the
    domain stays."""
    A = T.placeholder((2,), name="A")
    B = T.compute((2,), lambda i: A[1 - i] + A[i], name="B")
    f = T.create_prim_func([A, B])
    sch = S.Schedule(f)
    _, inner = sch.split(sch.get_loops("B")[0], [None, 4])
    sch.blockize(inner)
    sch.loop_partition(sch.get_loops("B")[-1], [2])
    verify_trace_roundtrip(sch, f)
    a = np.array([3.0, 5.0], "float32")
    np.testing.assert_array_equal(run(sch, [a, np.zeros(2, "float32")])[1], a[::-1] + a)


def test_partition_inside_a_partition_part_then_split_parses_back():
    """Fuzz case 2820395434: partition the outer loop of a split column loop, split
    the inner loop of the second part and partition it again, split that part: its
    second part never runs (v_j = 5.. under T.where(v_j < 4)); its vacuous accesses
    were reported outside the outer part's T.writes(Y[..., 3]) (CVL-E108).  A block
    whose T.where never holds is never reported outside."""
    X = T.placeholder((4, 4), name="X")
    f = T.create_prim_func([X, T.compute((4, 4), lambda i, j: X[j, i] + X[i, j],
                                         name="Y")])
    sch = S.Schedule(f)
    outer, _ = sch.split(sch.get_loops("Y")[1], [None, 3])
    sch.loop_partition(outer, [1, None])
    _, inner = sch.split(sch.get_loops("Y_j_01")[-1], [None, 3])
    _, second = sch.loop_partition(inner, [2])
    sch.split(second, [None, 2])
    verify_trace_roundtrip(sch, f)
    x = np.arange(16, dtype="float32").reshape(4, 4)
    np.testing.assert_array_equal(run(sch, [x, np.zeros((4, 4), "float32")])[1], x.T + x)


def test_partition_inside_a_blockized_reduction_with_a_reversed_index_parses_back():
    """Fuzz case 252843159: max over X[i, 6 - k], k in 2..5, split by 4 and blockized,
    the inner loop partitioned [2, 1]: the last part (k_1 = 3) never runs; its vacuous
    access reached column 1, outside Y_o's T.reads(X[v_i_o, 2:5]) (CVL-E108)."""
    X = T.placeholder((4, 5), name="X")
    r = T.reduce_axis((2, 5), name="k")
    f = T.create_prim_func([X, T.compute((4,), lambda i: T.max(X[i, 6 - r], axis=r),
                                         name="Y")])
    sch = S.Schedule(f)
    _, inner = sch.split(sch.get_loops("Y")[1], [None, 4])
    sch.blockize(inner)
    sch.loop_partition(sch.get_loops("Y")[0], [2, 1])
    verify_trace_roundtrip(sch, f)
    x = np.random.default_rng(2).integers(-9, 9, (4, 5)).astype("float32")
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, np.zeros(4, "float32")])[1],
                                      x[:, 2:5].max(axis=1))


def _fuzzed_partition(seed: int):
    rng = random.Random(seed)
    prog = random_program(rng)
    sch = S.Schedule(prog.func)
    try:
        steps._partition_then(sch, rng)
    except T.CuvilError as err:     # a refused part of the sequence: the rest stays
        assert "malformed node" not in str(err), err
    return prog, sch


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**31))
def test_primitives_inside_partition_parts_stay_right(seed):
    """loop_partition (one to three cuts, after fuse or split, symbolic sizes drawn)
    then cache_read / cache_write / compute_at / reverse_compute_at / blockize /
    decompose_reduction / split inside one part: what is accepted computes what the
    unscheduled function does, prints as text that parses back and replays."""
    prog, sch = _fuzzed_partition(seed)
    assert check(prog.func, sch, prog.arrays(np.random.default_rng(seed))) is None


def test_rfactor_in_a_part_of_a_split_reduce_loop_is_refused():
    """Fuzz case 181629056: k split by 3, its inner loop partitioned at 1 and 2, then
    rfactor of the first part's loop.  The part's block reduces over k_0 outside its
    wrapper block, so the partial-result buffer rfactor put inside the wrapper and
    the write-back's init restarted on every k_0: Y lost the sum of k < 3.  Refused,
    naming the loop and the order that works."""
    f = _matmul(3, 6, 1)
    sch = S.Schedule(f)
    _, _, k = sch.get_loops("Y")
    _, k1 = sch.split(k, [None, 3])
    sch.loop_partition(k1, [1, 1, None])
    first, = sch.get_loops("Y_k_10")[-1:]
    assert_refused(sch, lambda: sch.rfactor(first, factor_axis=0),
                   r"\[CVL-E103\] rfactor: block 'Y_k_10' reduces over the loops "
                   r"\['k_0'\] outside its enclosing block 'Y_k_10_partition'.*apply "
                   r"rfactor before loop_partition")


def test_rfactor_before_loop_partition_stays_right():
    f = _matmul(3, 6, 1)
    sch = S.Schedule(f)
    _, _, k = sch.get_loops("Y")
    _, k1 = sch.split(k, [None, 3])
    sch.rfactor(k1, factor_axis=0)
    x, w = _operands(3, 6, 1)
    for runner in (run, run_llvm):
        got = runner(sch, [x, w, np.zeros((3, 1), "float32")])[2]
        np.testing.assert_allclose(got, x @ w)


def test_a_part_whose_where_caps_two_terms_of_an_index_parses_back():
    """Fuzz case 4210929401: i split by 2, its outer loop partitioned at 1 and split
    by 3, the part's j and inner i fused and split by 5, then decompose_reduction.  The
    init's row index is (i_00_0 * 3 + i_00_1) * 2 + (fused) // 4 under
    T.where(i_00_0 * 3 + i_00_1 < 1 and fused < 8): rows 0 and 1 only, as the part
    declares, but the region check took one cap at a time (and the first term as the
    simplifier spreads it, i_00_0 * 6 + i_00_1 * 2) and refused the printed text."""
    f = _matmul(5, 4, 4)
    sch = S.Schedule(f)
    i, _, _ = sch.get_loops("Y")
    i0, _ = sch.split(i, [None, 2])
    first, _ = sch.loop_partition(i0, [1, None])
    sch.split(first, [None, 3])
    _, i1, j, _ = sch.get_loops("Y_i_01")
    sch.reorder(j, i1)
    _, _, a, b, _ = sch.get_loops("Y_i_00")
    sch.split(sch.fuse(a, b), [None, 5])
    k = sch.get_loops("Y_i_00")[-1]
    sch.decompose_reduction("Y_i_00", k)
    text = str(sch.func)
    assert "T.writes(Y[0:2, 0:4])" in text
    assert T.structural_equal(T.parse(text), sch.func)
    x, w = _operands(5, 4, 4)
    for runner in (run, run_llvm):
        got = runner(sch, [x, w, np.zeros((5, 4), "float32")])[2]
        np.testing.assert_array_equal(got, x @ w)
