"""The primitive decorator: typed argument checks, block names, generated methods,
trace naming and mutation from the metadata, lazily rendered IR in errors."""

import inspect
import pickle
import random

import pytest

import cuvil_tir as T
import schedules as S
from schedules.errors import (AnnotationError, FactorError, ScheduleArgumentError,
                              schedule_error)
from schedules.primitive import PRIMITIVES
from tests import workloads
from tests.schedules.testing import assert_refused, check_workload, verify_trace_roundtrip


@pytest.mark.parametrize("call, message, cls", [
    (lambda sch, i, j: sch.split(i, [2, "x"]),
     r"^\[CVL-E103\] argument 2, 'factors' to split: expected a list of at least 2 "
     r"positive ints, one of which may be None, found \[2, 'x'\] \(list\): element 1 is "
     r"'x'$", FactorError),
    (lambda sch, i, j: sch.fuse(i, 7),
     r"argument 2, 'loops' to fuse: expected a loop handle \(from sch.get_loops\), found "
     r"7 \(int\)", ScheduleArgumentError),
    (lambda sch, i, j: sch.tile(i, j, 2, 0),
     r"argument 4, 'factor_b' to tile: expected a positive int, found 0", ScheduleArgumentError),
    (lambda sch, i, j: sch.compute_at("D", i, preserve_unit_loops=1),
     r"argument 3, 'preserve_unit_loops' to compute_at: expected True or False, found 1",
     ScheduleArgumentError),
    (lambda sch, i, j: sch.compute_at("D", i, keep=True),
     r"compute_at: compute_at has no option 'keep'; its options are \['block', 'index', 'loop', "
     r"'preserve_unit_loops'\]", ScheduleArgumentError),
    (lambda sch, i, j: sch.split(i),
     r"split: split needs the argument\(s\) 'factors'", ScheduleArgumentError),
    (lambda sch, i, j: sch.parallel(i, j),
     r"parallel: parallel takes at most 1 arguments, found 2", ScheduleArgumentError),
    (lambda sch, i, j: sch.annotate(i, 5, 1),
     r"argument 2, 'key' to annotate: expected a non-empty str, found 5 \(int\)",
     AnnotationError),
    (lambda sch, i, j: sch.get_loops(None),
     r"argument 1, 'block' to get_loops: expected a block handle \(from sch.get_block\) "
     r"or a block name, found None", ScheduleArgumentError),
])
def test_arguments_are_checked_by_kind_before_the_primitive(call, message, cls):
    w = workloads.matmul_bias_relu(4, 4, 4)
    sch = S.Schedule(w.func)
    i, j, _ = sch.get_loops("C")
    err = assert_refused(sch, lambda: call(sch, i, j), message, cls)
    assert err.primitive in message or err.primitive in str(err)


def test_every_block_argument_accepts_the_block_name():
    w = workloads.matmul_bias_relu(8, 8, 8)
    sch = S.Schedule(w.func)
    i, j, k = sch.get_loops("C")
    ko, ki = sch.split(k, [None, 4])
    sch.decompose_reduction("C", ko)
    sch.cache_read("C", 1, "local")
    sch.annotate("D", "note", 1)
    sch.reverse_compute_at("D", j)
    assert sch.get_producers("D") == [S.BlockRV("C_init"), S.BlockRV("C_update")]
    check_workload(sch, w)
    replayed = verify_trace_roundtrip(sch, w.func)
    # the names were recorded as block handles, so the trace reads as usual
    assert "sch.reverse_compute_at('D', l1)" in str(replayed.trace)
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func)
    sch.compute_inline("E")
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_an_unknown_block_name_is_refused_by_the_resolver():
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func)
    assert_refused(sch, lambda: sch.compute_inline("nope"), r"Cannot find a block with the name: nope;")


def test_schedule_methods_are_generated_with_the_primitives_docstring_and_signature():
    for name, fn in PRIMITIVES.items():
        method = getattr(S.Schedule, name, None)
        assert method is not None, name
        if method.__module__ == "schedules.primitive":
            assert method.__doc__ == fn.__doc__
            params = list(inspect.signature(method).parameters)
            assert params[0] == "self" and "func" not in params
    assert list(inspect.signature(S.Schedule.split).parameters) == [
        "self", "loop", "factors", "disable_predication"]
    assert "Before/after" in S.Schedule.split.__doc__


def test_optional_arguments_by_position_are_recorded_by_name():
    w = workloads.matmul(8, 8, 8)
    sch = S.Schedule(w.func, seed=1)
    i, _, k = sch.get_loops("C")
    sch.sample_perfect_tile(i, 2, 4)
    sch.rfactor(k, 0)
    insts = list(sch.trace)
    assert insts[1].attrs == {"max_innermost_factor": 4}
    assert insts[2].attrs == {"factor_axis": 0}
    verify_trace_roundtrip(sch, w.func)


def test_trace_names_results_from_the_metadata():
    w = workloads.matmul(8, 8, 8)
    sch = S.Schedule(w.func)
    i, _, k = sch.get_loops("C")
    sch.cache_write("C", 0, "local")
    t = sch.sample_categorical([1, 2], [1, 1], decision=0)
    sch.rfactor(k, 0)
    assert t == 1
    assert str(sch.trace).splitlines() == [
        "l0, l1, l2 = sch.get_loops('C')",
        "b3 = sch.cache_write('C', 0, 'local')",
        "v4 = sch.sample_categorical([1, 2], [1, 1], decision=0)",
        "b5 = sch.rfactor(l2, factor_axis=0)",
    ]


def test_trace_mutate_redraws_one_decision_with_its_samplers_rule():
    w = workloads.matmul(16, 16, 16)
    sch = S.Schedule(w.func, seed=0)
    i, j, _ = sch.get_loops("C")
    sch.split(i, sch.sample_perfect_tile(i, 2, max_innermost_factor=4))
    sch.annotate("C", "step", sch.sample_categorical([0, 16, 64], [0, 1, 1]))
    rng = random.Random(3)
    seen = set()
    for _ in range(20):
        m = sch.trace.mutate(rng)
        decs = m.decisions
        tile = decs[1]
        assert tile[0] * tile[1] == 16 and tile[1] <= 4
        assert decs[3] in (1, 2)
        seen.add((tuple(tile), decs[3]))
        m.apply(w.func)
    assert len(seen) > 2
    assert S.Trace().mutate(rng) is None


def test_schedule_error_renders_the_ir_only_when_read():
    calls = []
    w = workloads.elementwise_chain(8)

    def render():
        calls.append(1)
        return "THE IR"

    err = T.ScheduleError("compute_at: refused", render=render)
    assert calls == []
    assert str(err).endswith("in the IR:\nTHE IR") and calls == [1]
    str(err)
    assert calls == [1]
    lazy = schedule_error(ScheduleArgumentError, "fuse", "loops not adjacent", w.func)
    back = pickle.loads(pickle.dumps(lazy))
    assert type(back) is ScheduleArgumentError and back.primitive == "fuse"
    assert "in the IR:" in back.message and 'T.block("D")' in back.message


def test_a_refused_primitive_does_not_print_the_function():
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func)
    (i,) = sch.get_loops("E")
    with pytest.raises(S.ScheduleError) as info:
        sch.compute_at("E", i)
    assert info.value._render is not None          # nothing printed yet
    assert "in the IR:" in str(info.value) and info.value._render is None
