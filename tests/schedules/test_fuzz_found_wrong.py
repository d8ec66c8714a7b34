"""Accepted schedules the differential fuzzer found computing wrong results (seed
1445087623: fuzz cases 1567903225, 1532791086, 1863173224, and later ones each named in
its test); each reduced to its
smallest form: the step is refused with a coded error, or it now computes right."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from schedules.errors import (BlockLocationError, CacheStageError, InlineError,
                             ReductionLoopError)
from schedules.primitives.pad import PadEinsumError
from tests.schedules.testing import assert_refused, run, run_llvm


def _row_matmul():
    X = T.placeholder((1, 4), name="X")
    W = T.placeholder((4, 7), name="W")
    k = T.reduce_axis((0, 4), name="k")
    Y = T.compute((1, 7), lambda i, j: T.sum(X[i, k] * W[k, j], axis=k), name="Y")
    return T.create_prim_func([X, W, Y])


def test_pad_einsum_refuses_a_padded_iter_var_that_does_not_index_the_output():
    """transform_layout folds the unit dimension of Y to 0 (Y[v_j, 0]): padding v_i to 2
    made iteration i = 1 re-initialise and overwrite every Y[j] with zeros (case
    1567903225)."""
    sch = S.Schedule(_row_matmul())
    sch.transform_layout("Y", 0, lambda a, b: (b, a))
    assert_refused(sch, lambda: sch.pad_einsum("Y", [2, 1, 1]),
                   r"CVL-E103.*spatial iter var 'v_i' must index its output.*"
                   r"found Y\[v_j, 0\].*Use padding 1 for 'v_i'", PadEinsumError)
    sch.pad_einsum("Y", [1, 8, 1])          # padding the vars that index Y stays right
    x, w = np.arange(4, dtype="float32").reshape(1, 4), np.ones((4, 7), "float32")
    got = run(sch, [x, w, np.zeros((7, 1), "float32")])[2]
    np.testing.assert_array_equal(got, (x @ w).T)


def _rowmin():
    X = T.placeholder((2, 4), name="X")
    k = T.reduce_axis((0, 4), name="k")
    return T.create_prim_func([X, T.compute((2,), lambda i: T.min(X[i, k], axis=k),
                                            name="Y")])


def test_rfactor_refuses_a_partition_part_that_continues_the_reduction():
    """The second loop_partition part reduces k = 3 onto what the first part left; its
    init never runs, but rfactor's write-back ran it at the start of its own loop and
    dropped the first part's minimum (case 1532791086)."""
    sch = S.Schedule(_rowmin())
    _, k = sch.get_loops("Y")
    k0, _ = sch.split(k, [None, 3])
    sch.loop_partition(k0, [1, None])
    later = sch.get_loops("Y_k_01")[-2]
    assert_refused(sch, lambda: sch.rfactor(later, 0),
                   r"CVL-E103.*block 'Y_k_01' starts its reduce iter var 'v_k' at 3, "
                   r"expected the start of its domain 0.*rfactor before loop_partition",
                   ReductionLoopError)
    sch.rfactor(sch.get_loops("Y_k_00")[-2], 0)     # the first part starts it: stays right
    x = np.array([[5, 2, 7, 1], [4, 8, 6, 9]], "float32")
    np.testing.assert_array_equal(run(sch, [x, np.zeros(2, "float32")])[1], x.min(1))


def _neighbours():
    X = T.placeholder((6, 6), "int8", name="X")
    Y = T.compute((6, 6), lambda i, j: X[i, j] * 2, name="Y")
    zero = T.const(0, "int8")
    Z = T.compute((6, 6), lambda i, j: T.if_then_else(i >= 1, Y[i - 1, j], zero)
                  + T.if_then_else(i + 1 < 6, Y[i + 1, j], zero), name="Z")
    return T.create_prim_func([X, Z])


def test_a_nested_cache_read_copies_only_what_the_outer_copy_wrote():
    """The outer cache_read copies Y's rows i - 1 .. i + 1 clipped to Y (a T.where): at
    i = 0 it leaves row 0 of Y_local unwritten.  The nested cache_read copied all three
    rows, reading that row, which Z reads only under an if_then_else that skips it
    (case 1863173224); it now copies under the outer copy's condition."""
    sch = S.Schedule(_neighbours())
    sch.blockize(sch.get_loops("Z")[1])
    sch.cache_read("Z", 0, "local")
    sch.blockize(sch.get_loops("Z")[0])
    sch.cache_read("Z", 0, "local")
    x = np.arange(36, dtype="int8").reshape(6, 6)
    y = np.pad(x * 2, ((1, 1), (0, 0)))
    want = y[:-2] + y[2:]
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, np.zeros((6, 6), "int8")])[1], want)


def _sum2d():
    X = T.placeholder((3, 2, 4), name="X")
    k = T.reduce_axis((0, 2), name="k")
    r = T.reduce_axis((0, 4), name="r")
    return T.create_prim_func([X, T.compute((3,), lambda i: T.sum(X[i, k, r], axis=[k, r]),
                                            name="Y")])


def test_decompose_reduction_refuses_a_fused_reduction_part_that_does_not_start_it():
    """Fused reduce loops bind v_k = f // 4, v_r = f % 4; the second loop_partition part
    (f from 6) continues the sum the first began, but its hoisted init ran there
    unconditionally and wiped it (seed 942729098, case 2015041221: a max reduction
    gave -inf)."""
    sch = S.Schedule(_sum2d())
    _, k, r = sch.get_loops("Y")
    f = sch.fuse(k, r)
    sch.loop_partition(f, [6])
    second = sch.get_loops("Y_k_r_fused1")[-1]
    assert_refused(sch, lambda: sch.decompose_reduction("Y_k_r_fused1", second),
                   r"CVL-E103.*binds the reduce iter var v_k to .*not provably at its "
                   r"start 0 where the loops start", ReductionLoopError)
    first = sch.get_loops("Y_k_r_fused0")[-1]
    sch.decompose_reduction("Y_k_r_fused0", first)    # the part that starts it: right
    x = np.arange(24, dtype="float32").reshape(3, 2, 4)
    np.testing.assert_array_equal(run(sch, [x, np.zeros(3, "float32")])[1],
                                  x.sum(axis=(1, 2)))


def test_reverse_compute_inline_refuses_a_producer_cut_where_the_consumer_computes():
    """A cache_read inside a blockized block copies only the rows of X that exist
    (T.where(v_i_o * 4 + ax0 < 6)); Y reads the copy under a condition and sets its
    last row to 0 without reading it: inlined into the copy, Y's last row was never
    written (case 3848889141: an uninitialised read)."""
    X = T.placeholder((7, 6), "int8", name="X")
    Y = T.compute((7, 6), lambda i, j: T.if_then_else(i + 1 < 7, X[i + 1, j],
                                                     T.int8(0)) * T.int8(2), name="Y")
    f = T.create_prim_func([X, T.compute((7, 6), lambda i, j: Y[i, j] + T.int8(1),
                                         name="Z")])
    sch = S.Schedule(f)
    sch.blockize(sch.split(sch.get_loops("Y")[0], [None, 4])[1])
    sch.cache_read("Y", 0, "local")
    assert_refused(sch, lambda: sch.reverse_compute_inline("Y"),
                   r"CVL-E103.*the producer 'X_local' runs only where v_i_o \* 4 \+ v0 < 6 "
                   r"holds, but block 'Y' reads X_local under a condition", InlineError)
    x = np.arange(-21, 21, dtype="int8").reshape(7, 6)
    want = np.concatenate([x[1:], np.zeros((1, 6), "int8")]) * 2 + 1
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, np.zeros((7, 6), "int8")])[1], want)


def test_reindex_refuses_a_guarded_read_of_a_cut_copy():
    """A cache_read copy clipped to X (its T.where never holds: Y reads X's row 1,
    which does not exist, only under a condition that never holds); reindex of Y's
    guarded read copied every element of the copy, unwritten ones too (case
    3820702966: an uninitialised read, then an out-of-bounds load of X once the copy
    was inlined)."""
    X = T.placeholder((1, 7), "int32", name="X")
    f = T.create_prim_func([X, T.compute(
        (1, 7), lambda i, j: T.if_then_else(i + 1 < 1, X[i + 1, j], 0), name="Y")])
    sch = S.Schedule(f)
    sch.blockize(sch.split(sch.get_loops("Y")[1], [None, 3])[1])
    sch.cache_read("Y", 0, "local")
    assert_refused(sch, lambda: sch.reindex("Y", ("read", 0)),
                   r"CVL-E103.*block 'Y' reads X_local\[0, v_j_i\] only where a condition "
                   r"holds, and its writer 'X_local' stores it only where")
    x = np.arange(7, dtype="int32").reshape(1, 7)
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, np.ones((1, 7), "int32")])[1], 0 * x)


_CUT_PRODUCER = """
@T.prim_func
def f(X: T.Buffer((7,), "int32"), Y: T.Buffer((7,), "int32")):
    P = T.alloc_buffer((7,), "int32")
    for i in T.serial(7):
        with T.block("P"):
            v = T.axis.remap("S", [i])
            T.where(i < 6)
            T.reads(X[v + 1])
            T.writes(P[v])
            P[v] = X[v + 1]
    for i in T.serial(7):
        with T.block("Y"):
            v = T.axis.remap("S", [i])
            T.reads(P[v])
            T.writes(Y[v])
            Y[v] = VALUE
"""


def test_compute_inline_refuses_a_load_of_elements_the_producer_never_stores():
    """P stores only where i < 6; a consumer load of P[6] (unguarded) would, once P is
    inlined, evaluate X[7]: out of bounds (case 3820702966's last step)."""
    sch = S.Schedule(T.parse(_CUT_PRODUCER.replace("VALUE", "T.if_then_else(v < 6, P[v], 0)")))
    sch.compute_inline("P")      # Y's load is guarded by v < 6: the same elements
    x = np.arange(7, dtype="int32")
    want = np.concatenate([x[1:], [0]]).astype("int32")
    np.testing.assert_array_equal(run(sch, [x, np.zeros(7, "int32")])[1], want)
    sch = S.Schedule(T.parse(_CUT_PRODUCER.replace("VALUE", "P[v] * 0")))
    assert_refused(sch, lambda: sch.compute_inline("P"),
                   r"CVL-E103.*the producer 'P' stores P only where v < 6 holds, but "
                   r"block 'Y' loads P\[v\] also where that may fail", InlineError)


def _matmul(k_extent):
    X = T.placeholder((2, k_extent), name="X")
    W = T.placeholder((k_extent, 5), name="W")
    k = T.reduce_axis((0, k_extent), name="k")
    return T.create_prim_func([X, W, T.compute((2, 5), lambda i, j: T.sum(
        X[i, k] * W[k, j], axis=k), name="Y")])


def _unit_loop_parts(k_extent):
    """Y with a unit loop split by 3 (T.where(u_0 * 3 + u_1 < 1)) and partitioned into
    three parts: only the first runs an iteration."""
    sch = S.Schedule(_matmul(k_extent))
    _, u = sch.split(sch.add_unit_loop("Y"), [None, 3])
    return sch, sch.loop_partition(u, [1, 1, None])


def test_decompose_reduction_keeps_the_guard_of_a_partition_part_that_runs_no_iteration():
    """The third part (u_1 from 2) runs no iteration.  decompose_reduction at it dropped
    its guard (it names only loops the init does not iterate), so the init ran anyway,
    after the first part had summed k = 0, and Y lost that term (fuzz case
    1818399772: Z0 all 1).  The guard is now taken where the reduction starts
    (u_0 * 3 + 2 < 1): the init runs where the block's T.init would."""
    sch, parts = _unit_loop_parts(3)
    sch.decompose_reduction("Y_u_12", parts[2])
    sch.decompose_reduction("Y_u_10", parts[0])     # the part that runs: its init stays
    rng = np.random.default_rng(0)
    x = rng.integers(-4, 5, (2, 3)).astype("float32")
    w = rng.integers(-4, 5, (3, 5)).astype("float32")
    for runner in (run, run_llvm):
        got = runner(sch, [x, w, np.full((2, 5), 7.0, "float32")])[2]
        np.testing.assert_array_equal(got, x @ w)


def test_decompose_reduction_refuses_a_part_whose_reduction_loop_is_outside_and_may_be_empty():
    """With K symbolic the reduction loop k is outside the part's block: the hoisted init
    would run inside it, and with K = 0 never, leaving Y unwritten (numpy: zeros)."""
    sch, parts = _unit_loop_parts(T.size_var("K"))
    assert_refused(sch, lambda: sch.decompose_reduction("Y_u_12", parts[2]),
                   r"CVL-E103.*the reduction of block 'Y_u_12' is driven by 'k', outside "
                   r"its enclosing block 'Y_u_12_partition', and may run no iteration.*"
                   r"decompose_reduction before the step that nested the block",
                   ReductionLoopError)
    for k in (0, 3):        # the parts as they are: right, the empty sum too
        x = np.arange(2 * k, dtype="float32").reshape(2, k)
        w = np.ones((k, 5), "float32")
        for runner in (run, run_llvm):
            got = runner(sch, [x, w, np.full((2, 5), 7.0, "float32")])[2]
            np.testing.assert_array_equal(got, x @ w)


def _int_matmul_scaled():
    n = T.size_var("n")
    X = T.placeholder((n, 6), name="X", dtype="int32")
    W = T.placeholder((6, n), name="W", dtype="int32")
    k = T.reduce_axis((0, 6), name="k")
    Y = T.compute((n, n), lambda i, j: T.sum(X[i, k] * W[k, j], axis=k), name="Y")
    Z = T.compute((n, n), lambda i, j: Y[i, j] * 3 + 1, name="Z0")
    return T.create_prim_func([X, W, Z])


def test_pad_einsum_drops_a_producer_guard_that_would_skip_the_padding():
    """cache_write of a padded copy guards the copy back by its loop's own extent;
    padding again grew the loop but kept the guard, so the new columns of W_pad were
    never written and the matmul read them (case 2440590812, an uninitialised read)."""
    sch = S.Schedule(_int_matmul_scaled())
    sch.pad_einsum("Y", [4, 2, 1])
    sch.cache_write("W_pad", 0, "local")
    sch.pad_einsum("Y", [2, 4, 2])
    rng = np.random.default_rng(0)
    x = rng.integers(-5, 5, (5, 6)).astype("int32")
    w = rng.integers(-5, 5, (6, 5)).astype("int32")
    got = run(sch, [x, w, np.zeros((5, 5), "int32")])[2]
    np.testing.assert_array_equal(got, (x @ w) * 3 + 1)


_GUARDED_COPY = """
@T.prim_func
def main(X: T.Buffer((6, 6), "float32"), W: T.Buffer((6, 6), "float32"),
         Y: T.Buffer((6, 6), "float32")):
    W_s = T.alloc_buffer((6, 6), "float32")
    for a in range(6):
        for b in range(6):
            with T.block("W_s"):
                v0, v1 = T.axis.remap("SS", [a, b])
                T.where(a * b != 7)
                W_s[v0, v1] = W[v0, v1]
    for i in range(6):
        for j in range(6):
            for k in range(6):
                with T.block("Y"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    with T.init():
                        Y[vi, vj] = T.float32(0)
                    Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W_s[vk, vj]
"""


def test_pad_einsum_refuses_a_producer_guard_that_may_not_hold():
    """A guard the analyzer cannot prove over the producer's old loops (this one always
    holds: 7 is prime) is neither kept (it could skip the padding) nor dropped (it could
    store what the function never stored): the step is refused."""
    sch = S.Schedule(T.parse(_GUARDED_COPY))
    assert_refused(sch, lambda: sch.pad_einsum("Y", [8, 8, 8]),
                   r"CVL-E103.*producer 'W_s' runs under T.where\(a \* b != 7\), which "
                   r"would skip the padding it must fill with zeros; pad_einsum before",
                   PadEinsumError)


_SUM_THEN_REVERSED = """
@T.prim_func
def main(X: T.Buffer((6, 1), "int8"), Z0: T.Buffer((6,), "int32")):
    Y = T.alloc_buffer((6,), "int32")
    for i in range(6):
        for k in range(1):
            with T.block("Y"):
                v_i, v_k = T.axis.remap("SR", [i, k])
                with T.init():
                    Y[v_i] = 0
                Y[v_i] = Y[v_i] + T.Cast("int32", X[v_i, v_k])
    for i_1 in range(6):
        with T.block("Z0"):
            v_i_1 = T.axis.remap("S", [i_1])
            T.reads(Y[0:6])
            Z0[v_i_1] = Y[5 - v_i_1] + Y[v_i_1]
"""


def test_compute_at_drops_the_guard_of_loops_the_block_shared_with_a_producer():
    """After reverse_compute_at under a cache_read copy and non-dividing splits of the
    shared loops, Y carried their guard; compute_at moved Y under Z0's loop and kept
    the guard, naming loops no longer around it (case 3245741115: 'variable ax0_0_0 is
    used but not defined'). A guard the new domain implies is now dropped."""
    sch = S.Schedule(T.parse(_SUM_THEN_REVERSED))
    copy = sch.cache_read("Y", 0, "global")
    sch.reverse_compute_at("Y", sch.get_loops(copy)[0])
    sch.split(sch.get_loops("Y")[0], [4, None])
    sch.split(sch.get_loops("Y")[0], [None, 5, 2])
    sch.compute_at("Y", sch.get_loops("Z0")[0])
    x = np.arange(-3, 3, dtype="int8").reshape(6, 1)
    got = run(sch, [x, np.zeros(6, "int32")])[1]
    y = x[:, 0].astype("int32")
    np.testing.assert_array_equal(got, y[::-1] + y)


def test_pad_einsum_refuses_a_block_inside_a_partition_part():
    """Padding a loop_partition part's block grew Y past what the part's wrapper block
    declares (Y[0:3, 0]): the step broke the region contract (case 2734158303, caught
    by the schedule's contract check). It is refused by pad_einsum itself, saying what
    to do instead."""
    X = T.placeholder((4, 6), "int8", name="X")
    W = T.placeholder((6, 1), "int8", name="W")
    k = T.reduce_axis((0, 6), name="k")
    Y = T.compute((4, 1), lambda i, j: T.sum(X[i, k].astype("int32") * W[k, j].astype(
        "int32"), axis=k), name="Y")
    f = T.create_prim_func([X, W, T.compute((4, 1), lambda i, j: Y[i, j] + 1, name="Z")])
    sch = S.Schedule(f)
    sch.loop_partition(sch.get_loops("Y")[0], [3])
    assert_refused(sch, lambda: sch.pad_einsum("Y_i0", [1, 4, 1]),
                   r"CVL-E103.*block 'Y_i0' is inside block 'Y_i0_partition', whose "
                   r"regions cover only the unpadded iterations; pad_einsum before the "
                   r"step that nested it", PadEinsumError)


def test_cache_stage_of_blocks_inside_an_init_is_refused():
    """reindex of a blockized reduction's init put Y_init and Y_reindex in the T.init of
    Y_o; cache_read of Y_reindex then searched the block's body for its readers and
    crashed with a raw StopIteration (case 2292935507)."""
    X = T.placeholder((2, 1), name="X")
    k = T.reduce_axis((0, 1), name="k")
    f = T.create_prim_func([X, T.compute((2,), lambda i: T.min(X[i, k], axis=k),
                                         name="Y")])
    sch = S.Schedule(f)
    sch.blockize(sch.get_loops("Y")[0])
    sch.reindex("Y_init", ["write", 0])
    sch.split(sch.get_loops("Y_init")[0], [None, 4])
    for stage, block in (("cache_read", "Y_reindex"), ("cache_write", "Y_init")):
        assert_refused(sch, lambda s=stage, b=block: getattr(sch, s)(b, 0, "local"),
                       rf"CVL-E103\] {stage}: blocks \['Y_init', 'Y_reindex'\] sit in "
                       r"the T.init of block 'Y_o', where a copy stage has no place.*"
                       r"cache the buffer before the blockize", CacheStageError)
    x = np.array([[3.0], [-1.0]], "float32")
    np.testing.assert_array_equal(run(sch, [x, np.zeros(2, "float32")])[1], x[:, 0])


def test_blockize_guards_the_outer_block_of_a_fused_non_dividing_split():
    """split [None, 2, 2] of 6, fuse of the outer two, split and blockize of the inner:
    the guard, written with // and % of the fused loop, gave the outer block no T.where
    and its iter var left its domain [0, 3) at the fourth fused iteration (case
    14236232: 'v_j_o is bound to 3, outside its domain'). The outer guard now comes from
    the inner block's T.where."""
    X = T.placeholder((2, 6), name="X")
    f = T.create_prim_func([X, T.compute((2, 6), lambda i, j: X[i, j] * 2.0, name="Y")])
    sch = S.Schedule(f)
    _, j = sch.get_loops("Y")
    sch.split(j, [None, 2, 2])
    _, j0, j1, _ = sch.get_loops("Y")
    sch.fuse(j0, j1)
    sch.blockize(sch.split(sch.get_loops("Y")[2], [None, 2])[1])
    text = str(sch.func)
    assert "T.where(j_2_0 * 2 + j_0_j_1_fused * 2 < 6)" in text, text
    sch.cache_read("Y", 0, "local")
    x = np.arange(12, dtype="float32").reshape(2, 6)
    np.testing.assert_array_equal(run(sch, [x, np.zeros((2, 6), "float32")])[1], x * 2)


def test_blockize_refuses_an_upper_bound_it_cannot_move_to_the_outer_block():
    from cuvil_tir.expr import LT, Var, const
    from cuvil_tir.stmt import Evaluate, For
    from schedules.primitives.blockize import SubspaceError, _outer_predicate
    i_0, i_1, v_o = Var("i_0", "int32"), Var("i_1", "int32"), Var("v_o", "int32")
    inner_loop = For(i_1, const(0, "int32"), const(4, "int32"), "serial",
                     Evaluate(const(0, "int32")))
    guard = LT(i_0 * i_0 + i_1, const(6, "int32"))        # not linear in the loops
    with pytest.raises(SubspaceError, match=r"CVL-E103.*the guard i_0 \* i_0 \+ i_1 < 6 "
                       r"of block 'Y' is not a bound the new outer block can be guarded "
                       r"by.*blockize before the fuse or split that made it"):
        _outer_predicate(guard, [inner_loop], LT(v_o * v_o + i_1, const(6, "int32")),
                         {v_o: i_0}, "blockize", "Y")


def test_split_of_a_fused_symbolic_loop_in_a_partition_part_keeps_its_region():
    """In loop_partition's first part (one row), fuse of the row with the reduce loop of
    extent n, then a split of that: the region check bounded the row's binding
    ``(f0 * 3 + f1) // n`` by the iter var's domain [0, 6) and refused the split as
    breaking the part's declared X[0, 0:n] (case 1149947718). The T.where f0 * 3 + f1 <
    n now bounds it to 0."""
    n = T.size_var("n")
    X = T.placeholder((6, n), name="X")
    k = T.reduce_axis((0, n), name="k")
    f = T.create_prim_func([X, T.compute((6,), lambda i: T.min(X[i, n - 1 - k], axis=k),
                                         name="Y")])
    sch = S.Schedule(f)
    sch.split(sch.get_loops("Y")[0], [None, 1])
    i0, i1, _ = sch.get_loops("Y")
    sch.loop_partition(sch.fuse(i0, i1), [1])
    sch.split(sch.fuse(*sch.get_loops("Y_i_0_i_1_fused0")), [None, 3])
    x = np.random.default_rng(0).standard_normal((6, 5)).astype("float32")
    np.testing.assert_array_equal(run(sch, [x, np.zeros(6, "float32")])[1], x.min(axis=1))


def test_decompose_reduction_starts_where_the_guard_lets_the_reduction_start():
    """A sum over k in [1, 8) moved under a copy's loop of 8 by reverse_compute_at runs
    under T.where(1 <= ax0_1); decompose_reduction took the reduction's start at the
    loop's first value 0, found v_k = 0 not at the domain's start 1, and guarded the
    hoisted init by False: the sum added to whatever Y held (case 1887014092)."""
    X = T.placeholder((2, 8), name="X")
    k = T.reduce_axis((1, 8), name="k")
    f = T.create_prim_func([X, T.compute((2,), lambda i: T.sum(X[i, k], axis=k),
                                         name="Y")])
    sch = S.Schedule(f)
    copy = sch.cache_read("Y", 0, "local")
    sch.reverse_compute_at("Y", sch.get_loops(copy)[0])
    sch.decompose_reduction("Y", sch.get_loops("Y")[1])
    assert "T.where(T.bool(False))" not in str(sch.func)
    x = np.arange(16, dtype="float32").reshape(2, 8)
    got = run(sch, [x, np.full(2, 50.0, "float32")])[1]
    np.testing.assert_array_equal(got, x[:, 1:].sum(axis=1))


def test_reindex_refuses_the_output_of_a_reduction_part_whose_init_never_fires():
    """loop_partition of a split reduce loop: the second part's init never fires (it
    adds to what the first part summed). reindex of its output gave it a new buffer
    that nothing initialised (cases 248028249 and 1736947001: an uninitialised read)."""
    X = T.placeholder((5, 7), "int8", name="X")
    k = T.reduce_axis((1, 7), name="k")
    f = T.create_prim_func([X, T.compute((5,), lambda i: T.sum(
        X[i, 7 - k].astype("int32"), axis=k), name="Y")])
    sch = S.Schedule(f)
    _, k1 = sch.split(sch.get_loops("Y")[1], [None, 3])
    sch.loop_partition(k1, [1, None])
    assert_refused(sch, lambda: sch.reindex("Y_k_11", ["write", 0]),
                   r"CVL-E103\] reindex: block 'Y_k_11' accumulates into 'Y', but its "
                   r"reduce iter vars are bound through \['k_0'\], outside the block's "
                   r"scope.*reindex before loop_partition", CacheStageError)
    sch2 = S.Schedule(f)
    sch2.reindex("Y", ["write", 0])
    x = np.arange(35, dtype="int8").reshape(5, 7)
    got = run(sch2, [x, np.zeros(5, "int32")])[1]
    np.testing.assert_array_equal(got, x[:, 1:].astype("int32").sum(axis=1))


_SUM_FROM_ONE = """
@T.prim_func
def main(X: T.Buffer((2, 8), "float32"), Y: T.Buffer((2,), "float32")):
    for i in range(2):
        for k in range(7):
            with T.block("Y"):
                v_i = T.axis.spatial(2, i)
                v_k = T.axis.reduce(8, k + 1)
                T.reads(X[v_i, v_k])
                T.writes(Y[v_i])
                with T.init():
                    Y[v_i] = T.float32(0)
                Y[v_i] = Y[v_i] + X[v_i, v_k]
"""


def test_reindex_refuses_a_reduction_that_never_reaches_its_start():
    # v_k = k + 1 never meets the domain's start 0: T.init never fires, Y keeps what
    # the caller passed, and a new buffer would start unwritten
    sch = S.Schedule(T.parse(_SUM_FROM_ONE))
    assert_refused(sch, lambda: sch.reindex("Y", ["write", 0]),
                   r"CVL-E103\] reindex: block 'Y' accumulates into 'Y', but its reduction "
                   r"does not provably start inside the block's scope", CacheStageError)


def test_reverse_compute_at_follows_a_split_producers_cut_of_its_inner_loops():
    """A split of a split: the producer writes Y[i_0 * 3 + 2] only in the second
    iteration of i_1_0 (T.where(i_1_0 * 2 + i_1_1 < 3)), but the consumer moved under
    i_1_0 read the box [i_0 * 3 + 2, i_0 * 3 + 4), Y[3] before the next i_0 wrote it
    (case 2632808080: an uninitialised read)."""
    X = T.placeholder((5,), "int32", name="X")
    Y = T.compute((5,), lambda i: X[i] + 1, name="Y")
    Z = T.compute((5,), lambda i: Y[i] * 3, name="Z")
    sch = S.Schedule(T.create_prim_func([X, Z]))
    _, i1 = sch.split(sch.get_loops("Y")[0], [None, 3])
    i10, _ = sch.split(i1, [None, 2])
    sch.reverse_compute_at("Z", i10)
    assert "T.where(i_0 * 3 + i_1_0 * 2 + ax0 < 5 and i_1_0 * 2 + ax0 < 3)" in str(sch.func)
    x = np.arange(5, dtype="int32")
    for got in (run(sch, [x, np.zeros(5, "int32")])[1],
                run_llvm(sch, [x, np.zeros(5, "int32")])[1]):
        np.testing.assert_array_equal(got, (x + 1) * 3)


def test_reverse_compute_at_refuses_a_producer_cut_it_cannot_follow():
    # T.where(i_1_0 * 2 + i_1_1 != 2) is no bound on what Y writes: refused, not wrong
    src = """
@T.prim_func
def main(X: T.Buffer((6,), "int32"), Z: T.Buffer((6,), "int32")):
    Y = T.alloc_buffer((6,), "int32")
    for i_0 in range(3):
        for i_1 in range(2):
            with T.block("Y"):
                v_i = T.axis.spatial(6, i_0 * 2 + i_1)
                T.where(i_0 * 2 + i_1 != 3)
                T.reads(X[v_i])
                T.writes(Y[v_i])
                Y[v_i] = X[v_i] + 1
    for i in range(6):
        with T.block("Z"):
            v_i = T.axis.spatial(6, i)
            T.reads(Y[v_i])
            T.writes(Z[v_i])
            Z[v_i] = Y[v_i] * 3
"""
    sch = S.Schedule(T.parse(src))
    i0 = sch.get_loops("Y")[0]
    assert_refused(sch, lambda: sch.reverse_compute_at("Z", i0),
                   r"CVL-E103\] reverse_compute_at: producer 'Y' runs under "
                   r"T.where\(i_0 \* 2 \+ i_1 != 3\); its condition .* is not a bound on "
                   r"one dimension of what the producer writes.*Move the block before "
                   r"splitting", BlockLocationError)


def test_decompose_reduction_declares_a_blockized_inits_reads_at_its_own_level():
    """The init of a blockized matmul holds blocks of its own (a cache_write's copy
    reading Y_local, allocated inside them); decompose_reduction declared their loads
    as the hoisted init's reads, T.reads(Y_local[v0, v1]), naming an inner buffer and
    inner iterators: the text did not parse back (case 947147808)."""
    X = T.placeholder((5, 7), name="X")
    W = T.placeholder((7, 7), name="W")
    k = T.reduce_axis((0, 7), name="k")
    Y = T.compute((5, 7), lambda i, j: T.sum(X[i, k] * W[k, j], axis=k), name="Y")
    sch = S.Schedule(T.create_prim_func([X, W, Y]))
    _, j = sch.get_loops("Y")[:2]
    _, j1 = sch.split(j, [None, 3])
    outer = sch.blockize(j1)
    _, j1i = sch.split(sch.get_loops("Y_init")[0], [None, 3])
    sch.blockize(j1i)
    sch.cache_write("Y_init", 0, "local")
    sch.decompose_reduction(outer, sch.get_loops(outer)[0])
    init = sch.get_block("Y_o_init")
    assert sch.get(init).reads == ()
    assert str(T.parse(str(sch.func))) == str(sch.func)
    x = np.arange(35, dtype="float32").reshape(5, 7)
    w = np.ones((7, 7), "float32")
    np.testing.assert_allclose(run(sch, [x, w, np.zeros((5, 7), "float32")])[2], x @ w)
