"""compute_at and reverse_compute_at: numerics against numpy, printed IR, legality.

Every numerical test runs the scheduled function with the reference interpreter and
compares with the workload's numpy reference; every test replays its trace.
"""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from cuvil_tir.analysis import tree
from schedules.errors import BlockLocationError
from tests import workloads
from tests.schedules.testing import (assert_refused, check_workload, run, run_llvm,
                                     verify_trace_roundtrip)


def loop_shape(sch, name):
    """``[(loop var name, extent)]`` of the loops above block ``name``."""
    f = sch.func
    return [(l.loop_var.name, l.extent.value)
            for _, l in tree.loops_above(f, tree.find_block(f, name))]


def realize(sch, name):
    return tree.get(sch.func, tree.find_block(sch.func, name))


@pytest.mark.parametrize("depth", [0, 1])
def test_compute_at_matmul_bias_relu(depth):
    w = workloads.matmul_bias_relu(4, 5, 3)
    sch = S.Schedule(w.func)
    loops = sch.get_loops(sch.get_block("D"))
    sch.compute_at(sch.get_block("C"), loops[depth])
    want = [[("i", 4), ("ax0", 5), ("ax1", 3)], [("i", 4), ("j", 5), ("ax0", 3)]][depth]
    assert loop_shape(sch, "C") == want
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_compute_at_conv_padding(depth):
    w = workloads.conv2d_nchw()
    sch = S.Schedule(w.func)
    sch.compute_at(sch.get_block("pad"), sch.get_loops(sch.get_block("conv"))[depth])
    # the padded input is computed only where the output rows/cols at this loop need it
    want = {0: [("b", 1), ("ax0", 3), ("ax1", 10), ("ax2", 10)],
            2: [("b", 1), ("f", 4), ("y", 8), ("ax0", 3), ("ax1", 3), ("ax2", 10)],
            3: [("b", 1), ("f", 4), ("y", 8), ("x", 8), ("ax0", 3), ("ax1", 3),
                ("ax2", 3)]}
    if depth in want:
        assert loop_shape(sch, "pad") == want[depth]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_compute_at_iter_values_are_region_min_plus_loop():
    w = workloads.conv2d_nchw()
    sch = S.Schedule(w.func)
    sch.compute_at(sch.get_block("pad"), sch.get_loops(sch.get_block("conv"))[2])
    # the batch loop has extent 1: its iter value is its start (TensorIR's form)
    assert [str(v) for v in realize(sch, "pad").iter_values] == ["0", "ax0", "y + ax1",
                                                                 "ax2"]
    assert "T.where" not in str(sch.func)


def test_compute_at_printed_ir():
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func)
    sch.compute_at(sch.get_block("E"), sch.get_loops(sch.get_block("D"))[0])
    text = str(sch.func)
    assert text.splitlines()[3:8] == [
        "    for i in T.serial(8):",
        '        with T.block("E"):',
        '            v_i = T.axis.remap("S", [i])',
        "            T.reads(A[v_i], B[v_i], C[v_i])",
        "            T.writes(E[v_i])",
    ]
    assert '        with T.block("D"):' in text
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_compute_at_boundary_tile_keeps_predicate():
    # D's loop split by 4 over 10 elements: the last tile asks for E[8:12], E has 10
    w = workloads.elementwise_chain(10)
    sch = S.Schedule(w.func)
    (i,) = sch.get_loops(sch.get_block("D"))
    io, _ = sch.split(i, [None, 4])
    sch.compute_at(sch.get_block("E"), io)
    assert loop_shape(sch, "E") == [("i_0", 3), ("ax0", 4)]
    pred = realize(sch, "E").predicate
    assert str(pred) == "i_0 * 4 + ax0 < 10"
    assert "T.where(i_0 * 4 + ax0 < 10)" in str(sch.func)
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_compute_at_reduction_producer_into_tiled_consumer():
    w = workloads.matmul_bias_relu(8, 8, 4)
    sch = S.Schedule(w.func)
    i, j = sch.get_loops(sch.get_block("D"))
    _, _, ii, ji = sch.tile(i, j, 4, 2)
    sch.compute_at(sch.get_block("C"), sch.get_loops(sch.get_block("D"))[1])
    assert loop_shape(sch, "C") == [("i_0", 2), ("j_0", 4), ("ax0", 4), ("ax1", 2),
                                    ("ax2", 4)]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_compute_at_twice_moves_deeper():
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func)
    (i,) = sch.get_loops(sch.get_block("D"))
    io, ii = sch.split(i, [2, 4])
    sch.compute_at(sch.get_block("E"), io)
    sch.compute_at(sch.get_block("E"), ii)
    assert loop_shape(sch, "E") == [("i_0", 2), ("i_1", 4)]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_reverse_compute_at_softmax():
    w = workloads.softmax(4, 6)
    sch = S.Schedule(w.func)
    row = sch.get_loops(sch.get_block("row_max"))[0]
    sch.reverse_compute_at(sch.get_block("exp"), row)
    sch.reverse_compute_at(sch.get_block("row_sum"), row)
    sch.reverse_compute_at(sch.get_block("softmax"), row)
    for name in ("exp", "row_sum", "softmax"):
        assert loop_shape(sch, name) == [("i", 4), ("ax0", 6)]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_reverse_compute_at_inner_loop_streams_reduction():
    # row_sum under exp's inner loop: one reduction step per produced element
    w = workloads.softmax(3, 5)
    sch = S.Schedule(w.func)
    loops = sch.get_loops(sch.get_block("exp"))
    sch.reverse_compute_at(sch.get_block("row_sum"), loops[1])
    assert loop_shape(sch, "row_sum") == [("i", 3), ("j", 5)]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_reverse_compute_at_epilogue_of_matmul():
    w = workloads.matmul_bias_relu(4, 4, 4)
    sch = S.Schedule(w.func)
    i, j, _ = sch.get_loops(sch.get_block("C"))
    sch.reverse_compute_at(sch.get_block("D"), j)
    assert loop_shape(sch, "D") == [("i", 4), ("j", 4)]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


# legality --------------------------------------------------------------------------------

def test_compute_at_own_loop_is_refused():
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func)
    (i,) = sch.get_loops(sch.get_block("E"))
    blk = sch.get_block("E")
    assert_refused(sch, lambda: sch.compute_at(blk, i),
                   r"compute_at: loop 'i' is an ancestor of block 'E' \(one of its own loops\)",
                   BlockLocationError)


def test_compute_at_loop_not_enclosing_every_consumer():
    w = workloads.softmax(4, 6)
    sch = S.Schedule(w.func)
    row = sch.get_loops(sch.get_block("row_sum"))[0]
    blk = sch.get_block("exp")
    assert_refused(sch, lambda: sch.compute_at(blk, row),
                   r"compute_at: onto a loop that does not enclose every consumer: "
                   r"consumer\(s\) \['softmax'\] of block 'exp' are outside loop 'i'; "
                   r"compute_at requires all the consumers under the loop",
                   BlockLocationError)


def test_compute_at_output_block_is_refused():
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func)
    (i,) = sch.get_loops(sch.get_block("E"))
    blk = sch.get_block("D")
    assert_refused(sch, lambda: sch.compute_at(blk, i),
                   r"compute_at: block 'D' is an output block .* Use reverse_compute_at",
                   BlockLocationError)


def test_compute_at_loop_of_unrelated_nest_is_refused():
    # row_max has one consumer (exp); the loop of row_sum does not enclose it
    w = workloads.softmax(4, 6)
    sch = S.Schedule(w.func)
    row = sch.get_loops(sch.get_block("row_sum"))[0]
    blk = sch.get_block("row_max")
    assert_refused(sch, lambda: sch.compute_at(blk, row),
                   r"does not enclose every consumer: consumer\(s\) \['exp'\]",
                   BlockLocationError)


def test_reverse_compute_at_loop_not_enclosing_every_producer():
    w = workloads.softmax(4, 6)
    sch = S.Schedule(w.func)
    row = sch.get_loops(sch.get_block("row_sum"))[0]
    blk = sch.get_block("softmax")
    assert_refused(sch, lambda: sch.reverse_compute_at(blk, row),
                   r"reverse_compute_at: onto a loop that does not enclose every "
                   r"producer: producer\(s\) \['exp'\].*reverse_compute_at requires all "
                   r"the producers under the loop", BlockLocationError)


def test_reverse_compute_at_into_reduction_loop_is_refused():
    w = workloads.matmul_bias_relu(4, 4, 4)
    sch = S.Schedule(w.func)
    k = sch.get_loops(sch.get_block("C"))[2]
    blk = sch.get_block("D")
    assert_refused(sch, lambda: sch.reverse_compute_at(blk, k),
                   r"reverse_compute_at: loop 'k' \(or a loop above it\) drives the "
                   r"reduction of producer 'C'", BlockLocationError)


def test_reverse_compute_at_onto_own_new_loop_is_refused():
    # after the move D sits under E's loop i, which is now one of D's own loops
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func)
    (i,) = sch.get_loops(sch.get_block("E"))
    sch.reverse_compute_at(sch.get_block("D"), i)
    blk = sch.get_block("D")
    assert_refused(sch, lambda: sch.reverse_compute_at(blk, i),
                   r"loop 'i' is an ancestor of block 'D' \(one of its own loops\)", BlockLocationError)


def test_compute_at_handle_of_replaced_loop_is_refused():
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func)
    (i,) = sch.get_loops(sch.get_block("D"))
    sch.split(i, [2, 4])
    blk = sch.get_block("E")
    assert_refused(sch, lambda: sch.compute_at(blk, i),
                   r"compute_at: the loop 'i' is not in the function any more")


def test_reverse_compute_at_refuses_reads_no_single_iteration_produces():
    # B reads A[i] and A[3 - i]: its region A[0:4] names none of its variables, so it
    # was placed whole in every iteration of A's loop, reading A[1..3] before they were
    # written (issue 25, repro 13)
    X = T.placeholder((4,), "int32", name="X")
    A = T.compute((4,), lambda i: X[i] + 1, name="A")
    f = T.create_prim_func([X, T.compute((4,), lambda i: A[i] + A[3 - i], name="B")])
    sch = S.Schedule(f)
    b, (ia,) = sch.get_block("B"), sch.get_loops(sch.get_block("A"))
    assert_refused(sch, lambda: sch.reverse_compute_at(b, ia),
                   r"reverse_compute_at: block 'B' reads A\[0:4\] \(the union of its "
                   r"accesses, over no variable of its own\), which one iteration of the "
                   r"loop does not produce whole \(it produces A\[i:i \+ 1\]\)",
                   BlockLocationError)


def test_reverse_compute_at_refuses_a_reduction_that_would_run_backwards():
    # Y sums X_global[i, 1 - k] under the copy's inner loop: v_k = 1 - ax1 reached its
    # minimum (and ran its init) last, wiping the partial sum (issue 25, repro 15)
    X = T.placeholder((2, 2), "int32", name="X")
    k = T.reduce_axis((0, 2), name="k")
    f = T.create_prim_func([X, T.compute((2,), lambda i: T.sum(X[i, 1 - k], axis=k),
                                         name="Y")])
    sch = S.Schedule(f)
    xg = sch.cache_read(sch.get_block("Y"), 0, "global")
    y, loops = sch.get_block("Y"), sch.get_loops(xg)
    assert_refused(sch, lambda: sch.reverse_compute_at(y, loops[1]),
                   "reverse_compute_at: under loop 'ax1' the reduction of block 'Y' would "
                   "run backwards: v_k starts at 1 - ax1", BlockLocationError)
    # at the outer loop the whole reduction runs in one iteration, in order: right
    sch.reverse_compute_at(y, loops[0])
    x = np.array([[1, 2], [3, 4]], "int32")
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, np.full(2, -1, "int32")])[1], [3, 7])
