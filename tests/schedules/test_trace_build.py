"""Traces built by hand (fresh handles), dead-code removal, post-processing, replay onto
an existing schedule, and the Python form of single-element results."""

import pytest

import cuvil_tir as T
import schedules as S
from schedules.errors import ScheduleArgumentError, TraceError
from schedules.trace import Instruction


def producer_consumer(n=8):
    X = T.placeholder((n, n), name="X")
    P = T.compute((n, n), lambda i, j: X[i, j] * 3.0, name="P")
    Q = T.compute((n, n), lambda i, j: P[i, j] - 1.0, name="Q")
    return T.create_prim_func([X, Q])


def inline_by_hand():
    b = S.BlockRV()
    return [Instruction("get_block", ["P"], {}, [b]), Instruction("compute_inline", [b])]


def test_hand_built_trace_numbers_fresh_handles_and_replays():
    f = producer_consumer()
    trace = S.Trace(inline_by_hand())
    assert [i.outputs for i in trace] == [[0], []]
    assert trace[1].inputs == [{"rv": 0}]
    expected = S.Schedule(f)
    expected.compute_inline("P")
    assert T.structural_equal(trace.apply(f).func, expected.func)
    # the JSON form of a hand-built trace is the recorded one
    assert S.Trace.from_json(trace.as_json()) == trace


def test_apply_to_appends_to_an_existing_schedule():
    f = producer_consumer()
    sch = S.Schedule(f)
    i, _ = sch.get_loops("Q")
    l0 = S.LoopRV()
    b = S.BlockRV()
    tail = S.Trace([Instruction("get_block", ["Q"], {}, [b]),
                    Instruction("get_loops", [b], {}, [l0, S.LoopRV()]),
                    Instruction("parallel", [l0])])
    assert tail.apply_to(sch) is sch
    assert len(sch.trace) == 4 and "T.parallel(8)" in str(sch.func)
    # replaying the whole trace gives the same function
    assert T.structural_equal(sch.trace.apply(f).func, sch.func)


def test_appending_a_hand_built_instruction_continues_the_numbering():
    sch = S.Schedule(producer_consumer())
    sch.get_loops("Q")
    trace = sch.trace.append(Instruction("get_block", ["P"], {}, [S.BlockRV()]))
    assert trace[-1].outputs == [2]
    assert str(trace).splitlines()[-1] == "b2 = sch.get_block('P')"


def test_sampled_value_placeholder_is_a_var():
    v = T.var("v")
    b, loops = S.BlockRV(), [S.LoopRV(), S.LoopRV()]
    trace = S.Trace([Instruction("sample_categorical", [[2, 4], [1, 1]], {}, [v], 1),
                     Instruction("get_block", ["Q"], {}, [b]),
                     Instruction("get_loops", [b], {}, loops),
                     Instruction("split", [loops[1], [None, v]], {}, [S.LoopRV(), S.LoopRV()])])
    assert trace[3].inputs == [{"rv": 3}, [None, {"rv": 0}]]
    sch = trace.apply(producer_consumer())
    assert [lp.var.name for lp in sch.get_loops("Q")] == ["i", "j_0", "j_1"]
    assert "T.serial(4)" in str(sch.func)


def test_slice_gives_a_trace():
    trace = S.Trace(inline_by_hand())
    head = trace[:-1]
    assert isinstance(head, S.Trace) and len(head) == 1
    assert len(trace) == 2       # traces are immutable


def test_simplified_drops_unused_queries_and_renumbers():
    trace = S.Trace([Instruction("get_block", ["Q"], {}, [S.BlockRV()]),
                     *inline_by_hand(),
                     Instruction("sample_categorical", [[1, 2], [1, 1]], {}, [T.var("v")], 0)])
    simple = trace.simplified()
    assert [i.name for i in simple] == ["get_block", "compute_inline"]
    assert simple[0].outputs == [0] and simple[1].inputs == [{"rv": 0}]
    assert str(simple) == "b0 = sch.get_block('P')\nsch.compute_inline(b0)"


def test_simplified_keeps_used_samples_and_their_decisions():
    sch = S.Schedule(producer_consumer(), seed=0)
    i, j = sch.get_loops("Q")
    sch.sample_categorical([1, 2], [1, 1], decision=0)       # unused: dropped
    f = sch.sample_perfect_tile(j, 2, decision=[2, 4])
    sch.split(j, f)
    simple = sch.trace.simplified()
    assert [inst.name for inst in simple] == ["get_loops", "sample_perfect_tile", "split"]
    assert simple.decisions == {1: [2, 4]}
    assert T.structural_equal(simple.apply(producer_consumer()).func, sch.func)


def test_postproc_is_left_out_on_request():
    f = producer_consumer()
    sch = S.Schedule(f)
    sch.compute_inline("P")
    sch.enter_postproc()
    (i, j) = sch.get_loops("Q")
    sch.vectorize(j)
    assert str(sch.trace).splitlines()[1] == "sch.enter_postproc()"
    design = sch.trace.simplified(remove_postproc=True)
    assert [inst.name for inst in design] == ["compute_inline"]
    assert [inst.name for inst in sch.trace.simplified()] == [
        "compute_inline", "enter_postproc", "get_loops", "vectorize"]
    assert len(sch.trace.before_postproc()) == 1
    kept = sch.trace.apply(f, remove_postproc=True)
    assert "T.vectorized" not in str(kept.func) and "T.vectorized" in str(sch.func)


def test_python_form_unpacks_a_single_loop():
    def func():
        X = T.placeholder((8,), name="X")
        return T.create_prim_func([X, T.compute((8,), lambda i: X[i] + 1.0, name="Y")])
    sch = S.Schedule(func())
    (i,) = sch.get_loops(sch.get_block("Y"))
    sch.split(i, [2, 4])
    lines = str(sch.trace).splitlines()
    assert lines[1] == "(l1,) = sch.get_loops(b0)"
    assert lines[2] == "l2, l3 = sch.split(l1, [2, 4])"
    scope = {"sch": S.Schedule(func())}     # the printed form runs as written
    exec("\n".join(lines), scope)
    assert T.structural_equal(scope["sch"].func, sch.func)


def test_instructions_hash_by_identity():
    a, b = inline_by_hand()[0], inline_by_hand()[0]
    assert a != b and {a: 1, b: 2}[a] == 1


def test_fresh_handles_compare_by_identity():
    b = S.BlockRV()
    assert b == b and b != S.BlockRV() and repr(b) == "BlockRV()"
    assert repr(S.LoopRV()) == "LoopRV()" and S.LoopRV() != S.LoopRV()


def test_error_a_fresh_block_handle_given_to_a_schedule():
    sch = S.Schedule(producer_consumer())
    with pytest.raises(ScheduleArgumentError, match=r"argument 1, 'block' to compute_inline: "
                       r"expected a block handle .* found BlockRV\(\) \(BlockRV\): a fresh "
                       r"handle, which only a hand-built Trace binds"):
        sch.compute_inline(S.BlockRV())


def test_error_a_fresh_loop_handle_given_to_a_schedule():
    sch = S.Schedule(producer_consumer())
    with pytest.raises(TraceError, match=r"parallel: LoopRV\(\) was not produced by this "
                       "schedule"):
        sch.parallel(S.LoopRV())


def test_error_input_handle_no_instruction_produced():
    with pytest.raises(TraceError, match=r"Trace: instruction 0 \(compute_inline\): "
                       r"BlockRV\(\) was not produced by this schedule \(nor by an earlier "
                       r"instruction of the trace\)"):
        S.Trace([Instruction("compute_inline", [S.BlockRV()])])


def test_error_handle_output_twice():
    b = S.BlockRV()
    with pytest.raises(TraceError, match=r"Trace: instruction 1 \(get_block\): output "
                       r"BlockRV\(\): expected a fresh handle .* that no earlier instruction "
                       "produced"):
        S.Trace([Instruction("get_block", ["P"], {}, [b]),
                 Instruction("get_block", ["Q"], {}, [b])])


def test_error_index_output_mixed_with_handles():
    with pytest.raises(TraceError, match=r"output 0: expected a fresh handle .* do not mix "
                       "trace indices and handles in one instruction"):
        S.Trace([Instruction("get_loops", [S.BlockRV("P")], {}, [0, S.LoopRV()])])
