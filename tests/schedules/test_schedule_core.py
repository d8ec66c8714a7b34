"""Schedule core: construction, queries, copy, show, annotations, unknown primitives,
and the error message format."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from cuvil_tir.analysis import tree
from schedules.errors import (AnnotationError, BlockNotFoundError, LoopNestError,
                              ScheduleArgumentError, UnknownPrimitiveError, schedule_error)
from tests import workloads
from tests.schedules.testing import (assert_refused, check_workload, run,
                                     verify_trace_roundtrip)


def test_schedule_holds_func_and_empty_trace():
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    assert sch.func is w.func
    assert len(sch.trace) == 0
    assert S.ScheduleError is T.ScheduleError
    with pytest.raises(S.ScheduleError, match=r"Schedule: expected a PrimFunc .* got str"):
        S.Schedule("matmul")


def test_get_block_and_get_loops():
    w = workloads.matmul(4, 5, 6)
    sch = S.Schedule(w.func)
    blk = sch.get_block("C")
    assert blk == S.BlockRV("C")
    loops = sch.get_loops(blk)
    assert [l.var.name for l in loops] == ["i", "j", "k"]
    assert [tree.get(sch.func, tree.find_loop(sch.func, l.var)).extent.value
            for l in loops] == [4, 5, 6]
    assert sch.get_loops(sch.get_block("root")) == []
    assert sch.func is w.func
    verify_trace_roundtrip(sch, w.func)


def test_get_block_refuses_unknown_name():
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    assert_refused(sch, lambda: sch.get_block("D"), r"get_block: Cannot find a block with the name: D; "
                   r"the function has the blocks \['root', 'C'\]", BlockNotFoundError)
    assert_refused(sch, lambda: sch.get_loops(S.BlockRV("X")),
                   r"get_loops: Cannot find a block with the name: X", ScheduleArgumentError)
    verify_trace_roundtrip(sch, w.func)


def test_child_blocks_producers_consumers_softmax():
    w = workloads.softmax(4, 8)
    sch = S.Schedule(w.func)
    root = sch.get_block("root")
    names = [b.name for b in sch.get_child_blocks(root)]
    assert names == ["row_max", "exp", "row_sum", "softmax"]
    exp = sch.get_block("exp")
    assert sch.get_producers(exp) == [S.BlockRV("row_max")]
    assert sch.get_consumers(exp) == [S.BlockRV("row_sum"), S.BlockRV("softmax")]
    assert sch.get_producers(sch.get_block("softmax")) == [S.BlockRV("exp"),
                                                           S.BlockRV("row_sum")]
    assert sch.get_consumers(sch.get_block("softmax")) == []
    assert sch.get_producers(sch.get_block("row_max")) == []
    (i, _) = sch.get_loops(sch.get_block("softmax"))
    assert sch.get_child_blocks(i) == [S.BlockRV("softmax")]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_copy_is_independent():
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func, seed=3)
    i, j, k = sch.get_loops(sch.get_block("C"))
    other = sch.copy()
    other.fuse(i, j)
    assert sch.func is w.func and len(sch.trace) == 2 and len(other.trace) == 3
    sch.reorder(k, i)
    assert [l.var.name for l in sch.get_loops(sch.get_block("C"))] == ["k", "j", "i"]
    assert [l.var.name for l in other.get_loops(other.get_block("C"))] == ["i_j_fused", "k"]
    assert sch.copy().sample_categorical([1, 2, 3], [1, 1, 1]) == \
        sch.copy().sample_categorical([1, 2, 3], [1, 1, 1])
    verify_trace_roundtrip(sch, w.func)
    verify_trace_roundtrip(other, w.func)
    check_workload(other, w)


def test_show_prints_the_function(capsys):
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func)
    sch.show()
    out = capsys.readouterr().out
    assert out == str(w.func) + "\n"
    assert 'with T.block("E"):' in out
    verify_trace_roundtrip(sch, w.func)


def test_unknown_primitive_is_a_clear_error():
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    assert_refused(sch, lambda: sch._apply("no_such_primitive", 1),
                   r"no_such_primitive: this primitive is not registered .* registered: "
                   r".*split", UnknownPrimitiveError)
    verify_trace_roundtrip(sch, w.func)


def test_annotate_and_unannotate_loop_and_block():
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func)
    blk = sch.get_block("D")
    (i,) = sch.get_loops(blk)
    sch.annotate(i, "pragma_auto_unroll_max_step", 16)
    sch.annotate(blk, "meta_schedule.tiling", "SSR")
    sch.annotate(blk, "sizes", [1, 2])
    node = tree.get(sch.func, tree.find_block(sch.func, "D"))
    assert dict(node.block.annotations) == {"meta_schedule.tiling": "SSR", "sizes": (1, 2)}
    loop = tree.get(sch.func, tree.find_loop(sch.func, i.var))
    assert dict(loop.annotations) == {"pragma_auto_unroll_max_step": 16}
    assert 'annotations={"pragma_auto_unroll_max_step": 16}' in str(sch.func)
    verify_trace_roundtrip(sch, w.func)
    sch.unannotate(blk, "sizes")
    sch.unannotate(i, "pragma_auto_unroll_max_step")
    loop = tree.get(sch.func, tree.find_loop(sch.func, i.var))
    assert loop.annotations == ()
    node = tree.get(sch.func, tree.find_block(sch.func, "D"))
    assert dict(node.block.annotations) == {"meta_schedule.tiling": "SSR"}
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_annotation_refusals():
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func)
    blk = sch.get_block("D")
    (i,) = sch.get_loops(blk)
    assert_refused(sch, lambda: sch.unannotate(i, "x"), r"unannotate: loop i has no "
                   r"annotation 'x'; it has none", AnnotationError)
    assert_refused(sch, lambda: sch.unannotate(blk, "x"), r"unannotate: block 'D' has no "
                   r"annotation 'x'", AnnotationError)
    assert_refused(sch, lambda: sch.annotate(blk, "x", object()), r"annotate: annotation "
                   r"values must be bool, int, float, str, or lists or str-keyed dicts of them",
                   AnnotationError)
    assert_refused(sch, lambda: sch.annotate(blk, "", 1), r"argument 2, 'key' to annotate: "
                   r"expected a non-empty str, found '' \(str\)", AnnotationError)
    assert_refused(sch, lambda: sch.annotate(3, "x", 1), r"argument 1, 'loop_or_block' to "
                   r"annotate: expected a loop handle .* or a block name, found 3 \(int\)",
                   ScheduleArgumentError)
    verify_trace_roundtrip(sch, w.func)


def test_annotation_with_a_dict_value_prints_parses_and_replays():
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func)
    blk = sch.get_block("D")
    (i,) = sch.get_loops(blk)
    sch.annotate(blk, "meta", {"arr": [0, 0], "name": "x", "nested": {"k": [1, 2]}})
    sch.annotate(i, "ranges", [[0, 1], [2, 3]])
    text = str(sch.func)
    assert 'T.block_attr({"meta": {"arr": (0, 0), "name": "x", "nested": {"k": (1, 2)}}})' \
        in text and 'annotations={"ranges": ((0, 1), (2, 3))}' in text
    assert T.structural_equal(T.parse(text), sch.func)
    assert "sch.annotate(b0, 'meta', {'arr': [0, 0], 'name': 'x', 'nested': {'k': [1, 2]}})" \
        in sch.trace.as_python()
    verify_trace_roundtrip(sch, w.func)
    with pytest.raises(AnnotationError, match=r"str-keyed dicts of them .* got dict \{1: 2\}"):
        sch.annotate(blk, "bad", {1: 2})


def test_annotation_sequences_have_one_normal_form():
    # the parser reads TVM's list, a schedule records a tuple: the IR holds one form
    text = ('def f(A: T.Buffer((4,), "float32")):\n'
            '    for i in T.serial(4, annotations={"r": [[0, 1]]}):\n'
            '        A[i] = T.float32(0)\n')
    f = T.parse(text)
    assert f.body.annotations == (("r", ((0, 1),)),)
    assert T.structural_equal(f, T.parse(text.replace("[[0, 1]]", "((0, 1),)")))
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func)
    sch.annotate(sch.get_block("D"), "r", [[0, 1]])
    assert "T.block_attr({\"r\": ((0, 1),)})" in str(sch.func)
    assert T.structural_equal(T.parse(str(sch.func).replace("((0, 1),)", "[[0, 1]]")),
                              sch.func)


def test_error_message_names_primitive_and_marks_the_ir():
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    i, _, k = sch.get_loops(sch.get_block("C"))
    err = assert_refused(sch, lambda: sch.fuse(i, k), r"^\[CVL-E103\] fuse: loops i and k",
                         LoopNestError)
    assert err.primitive == "fuse"
    assert err.reason.startswith("loops i and k are not adjacent")
    assert err.node is tree.get(sch.func, tree.find_loop(sch.func, k.var))
    text = str(err)
    assert "in the IR:\n@T.prim_func" in text
    lines = text.splitlines()
    marked = [n for n, line in enumerate(lines) if line.strip().startswith("for k in")]
    assert marked and set(lines[marked[0] + 1].strip()) == {"^"}
    assert isinstance(err, T.CuvilError) and err.code == "CVL-E103"
    plain = schedule_error(LoopNestError, "reorder", "loops differ")
    assert str(plain) == "[CVL-E103] reorder: loops differ"
    verify_trace_roundtrip(sch, w.func)


def test_primitives_leave_the_input_function_untouched():
    w = workloads.matmul_bias_relu(4, 4, 4)
    before = str(w.func)
    sch = S.Schedule(w.func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.tile(i, j, 2, 2)
    sch.parallel(sch.get_loops(sch.get_block("D"))[0])
    assert str(w.func) == before
    out = run(sch, w.make_inputs(np.random.default_rng(1)))
    w.check(out)
    verify_trace_roundtrip(sch, w.func)
