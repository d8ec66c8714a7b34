"""The trace: JSON round trip, Python form, sampling decisions, replay with new
decisions, and trace errors."""

import json
import random

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from cuvil_tir.analysis import tree
from schedules.errors import ScheduleArgumentError, TraceError
from schedules.sampling import SampledInt, perfect_tiles, symbolic_tiles
from schedules.trace import decode_index_map, encode_index_map
from tests import workloads
from tests.schedules.testing import assert_refused, check_workload, run, verify_trace_roundtrip


def tiled_matmul(seed=None, decisions=None):
    w = workloads.matmul(16, 16, 8)
    sch = S.Schedule(w.func, seed=seed)
    i, j, k = sch.get_loops(sch.get_block("C"))
    fi = sch.sample_perfect_tile(i, 2, max_innermost_factor=8)
    fj = sch.sample_perfect_tile(j, 2, max_innermost_factor=8)
    i0, i1 = sch.split(i, fi)
    j0, j1 = sch.split(j, fj)
    sch.reorder(i0, j0, i1, j1)
    return w, sch


def extents(sch, block):
    return [tree.get(sch.func, tree.find_loop(sch.func, l.var)).extent.value
            for l in sch.get_loops(sch.get_block(block))]


def test_trace_json_round_trip_and_python_form():
    w, sch = tiled_matmul(seed=0)
    text = sch.trace.as_json()
    data = json.loads(text)
    assert data["format"] == "cuvil-trace" and data["version"] == 1
    assert [d["name"] for d in data["insts"]] == [
        "get_block", "get_loops", "sample_perfect_tile", "sample_perfect_tile", "split",
        "split", "reorder"]
    assert data["insts"][4]["inputs"] == [{"rv": 1}, [{"rv": 4}, {"rv": 5}]]
    py = str(sch.trace).splitlines()
    assert py[0] == "b0 = sch.get_block('C')"
    assert py[1] == "l1, l2, l3 = sch.get_loops(b0)"
    assert py[2].startswith("v4, v5 = sch.sample_perfect_tile(l1, 2, "
                            "max_innermost_factor=8, decision=[")
    assert py[4] == "l8, l9 = sch.split(l1, [v4, v5])"
    assert py[6] == "sch.reorder(l8, l10, l9, l11)"
    assert S.Trace.from_json(text) == sch.trace
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_sampling_is_reproducible_with_a_seed():
    _, a = tiled_matmul(seed=7)
    _, b = tiled_matmul(seed=7)
    assert a.trace.as_json() == b.trace.as_json()
    assert T.structural_equal(a.func, b.func)
    decisions = {tuple(tiled_matmul(seed=s)[1].trace.decisions[2]) for s in range(12)}
    assert len(decisions) > 1
    for d in decisions:
        assert d[0] * d[1] == 16 and d[1] <= 8


def test_with_decisions_replays_another_candidate():
    w, sch = tiled_matmul(seed=0)
    trace = sch.trace.with_decisions({2: [2, 8], 3: [16, 1]})
    assert trace.decisions == {2: [2, 8], 3: [16, 1]}
    new = trace.apply(w.func)
    assert extents(new, "C") == [2, 16, 8, 1, 8]
    check_workload(new, w)
    verify_trace_roundtrip(new, w.func)
    again = S.Trace.from_json(trace.as_json()).apply(w.func)
    assert T.structural_equal(again.func, new.func)


def test_with_decisions_refuses_non_sampling_instruction():
    _, sch = tiled_matmul(seed=0)
    with pytest.raises(TraceError, match=r"with_decisions: instruction 4 is not a "
                       r"sampling instruction of this trace; sampling instructions are "
                       r"\[2, 3\]"):
        sch.trace.with_decisions({4: [1]})


def test_replay_refuses_a_bad_decision():
    w, sch = tiled_matmul(seed=0)
    trace = sch.trace.with_decisions({2: [3, 5]})
    with pytest.raises(ScheduleArgumentError, match=r"sample_perfect_tile: decision "
                       r"\[3, 5\]: expected 2 factors multiplying to the extent 16 of loop i"):
        trace.apply(w.func)


def test_sample_perfect_tile_values_and_given_decision():
    w = workloads.matmul(12, 4, 4)
    sch = S.Schedule(w.func, seed=1)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    values = sch.sample_perfect_tile(i, 3, max_innermost_factor=2)
    assert all(isinstance(v, SampledInt) for v in values)
    assert values[0] * values[1] * values[2] == 12 and values[2] <= 2
    fixed = sch.sample_perfect_tile(i, 2, decision=[3, 4])
    assert fixed == [3, 4] and sch.trace.decisions[3] == [3, 4]
    sch.split(i, fixed)
    assert extents(sch, "C") == [3, 4, 4, 4]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)
    assert perfect_tiles(12, 2, 4) == [[3, 4], [4, 3], [6, 2], [12, 1]]


def _symbolic_double():
    n = T.size_var("n")
    A = T.placeholder((n,), name="A")
    return T.create_prim_func([A, T.compute((n,), lambda i: A[i] * 2.0, name="B")])


def test_sample_perfect_tile_on_a_symbolic_extent():
    # as TensorIR: the outer factor is -1 (inferred by split); the inner ones are drawn
    f = _symbolic_double()
    sch = S.Schedule(f, seed=3)
    (i,) = sch.get_loops("B")
    values = sch.sample_perfect_tile(i, 3, max_innermost_factor=8)
    assert values[0] == -1 and all(v in (1, 2, 4, 8) for v in values[1:])
    assert values in symbolic_tiles(3, 8)
    sch.split(i, values)
    tile = values[1] * values[2]
    assert f"T.serial((n + {tile - 1}) // {tile})" in str(sch.func)
    for n in (1, 13, 64):
        x = np.arange(n, dtype="float32")
        np.testing.assert_array_equal(run(sch, [x, np.zeros(n, "float32")])[1], x * 2)
    verify_trace_roundtrip(sch, f)
    # replay with a given decision, and the mutation keeps the form
    sch = S.Schedule(f)
    (i,) = sch.get_loops("B")
    values = sch.sample_perfect_tile(i, 2, decision=[-1, 16])
    assert values == [-1, 16]
    sch.split(i, values)
    assert "T.serial((n + 15) // 16)" in str(sch.func)
    (k,) = sch.trace.decisions
    for seed in range(3):
        mutated = sch.trace.mutate(random.Random(seed)).decisions[k]
        assert mutated[0] == -1 and mutated[1] in (1, 2, 4, 8, 16)


def test_split_takes_minus_one_as_the_inferred_factor():
    w = workloads.matmul(12, 4, 4)
    sch = S.Schedule(w.func)
    i, _, _ = sch.get_loops("C")
    sch.split(i, [-1, 5])
    assert extents(sch, "C") == [3, 5, 4, 4]
    check_workload(sch, w)
    k = sch.get_loops("C")[2]
    assert_refused(sch, lambda: sch.split(k, [-1, -1]),
                   r"argument 2, 'factors' to split: .*: more than one None")


def test_sample_perfect_tile_refusals():
    f = _symbolic_double()
    sch = S.Schedule(f)
    (i,) = sch.get_loops(sch.get_block("B"))
    assert_refused(sch, lambda: sch.sample_perfect_tile(i, 2, decision=[4, 4]),
                   r"sample_perfect_tile: decision \[4, 4\]: loop i has the symbolic extent "
                   r"n, so expected 2 ints: -1 \(the outer factor, inferred\) then 1 "
                   "positive factors")
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    assert_refused(sch, lambda: sch.sample_perfect_tile(i, 0), r"argument 2, 'n' to "
                   r"sample_perfect_tile: expected a positive int, found 0 \(int\)")
    assert_refused(sch, lambda: sch.sample_perfect_tile(i, 2, decision=[2, 3]),
                   r"decision \[2, 3\]: expected 2 factors multiplying to the extent 4")
    verify_trace_roundtrip(sch, w.func)


def test_sample_categorical_drives_annotation_and_replays():
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func, seed=5)
    blk = sch.get_block("D")
    step = sch.sample_categorical([0, 16, 64], [0.0, 0.0, 1.0])
    assert step == 64
    sch.annotate(blk, "pragma_auto_unroll_max_step", step)
    assert sch.trace.decisions == {1: 2}
    assert_refused(sch, lambda: sch.sample_categorical([1, 2], [1.0]),
                   r"sample_categorical: expected as many probabilities as candidates")
    assert_refused(sch, lambda: sch.sample_categorical([1, 2], [-1, 2]),
                   r"argument 2, 'probs' to sample_categorical: expected a list of "
                   r"non-negative numbers with a positive sum, found \[-1, 2\]")
    assert_refused(sch, lambda: sch.sample_categorical([1, 2], [1, 1], decision=2),
                   r"sample_categorical: decision 2: expected an index in \[0, 2\)")
    verify_trace_roundtrip(sch, w.func)
    other = sch.trace.with_decisions({1: 0}).apply(w.func)
    node = tree.get(other.func, tree.find_block(other.func, "D"))
    assert dict(node.block.annotations) == {"pragma_auto_unroll_max_step": 0}
    check_workload(other, w)


def test_from_json_refusals():
    with pytest.raises(TraceError, match=r"Trace.from_json: not JSON"):
        S.Trace.from_json("{nope")
    with pytest.raises(TraceError, match=r'expected an object with "format": "cuvil-trace"'):
        S.Trace.from_json('{"insts": []}')
    with pytest.raises(TraceError, match=r"expected version 1, got 9"):
        S.Trace.from_json('{"format": "cuvil-trace", "version": 9, "insts": []}')
    bad = ('{"format": "cuvil-trace", "version": 1, "insts": [{"name": "get_loops", '
           '"inputs": [{"rv": 3}], "attrs": {}, "outputs": []}]}')
    w = workloads.matmul(4, 4, 4)
    with pytest.raises(TraceError, match=r"replay: instruction 0 refers to value 3, which "
                       "no earlier instruction produced"):
        S.Trace.from_json(bad).apply(w.func)


def test_index_map_lambda_is_serialised():
    enc = encode_index_map(lambda i, j: (j // 4, i, j % 4))
    fn = decode_index_map(json.loads(json.dumps(enc)))
    a, b = T.var("a"), T.var("b")
    got = fn(a, b)
    assert len(got) == 3
    assert T.structural_equal(got[0], b // 4) and got[1] is a
    assert T.structural_equal(got[2], b % 4)
    single = decode_index_map(encode_index_map(lambda i: i + 1))
    assert T.structural_equal(single(a), a + 1)


def test_block_handle_built_by_name_is_recorded():
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    loops = sch.get_loops(S.BlockRV("C"))
    sch.fuse(loops[0], loops[1])
    assert json.loads(sch.trace.as_json())["insts"][0]["inputs"] == [{"block": "C"}]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_arithmetic_on_sampled_values_is_recorded_and_replayed_with_new_decisions():
    A = T.placeholder((16,), name="A")
    f = T.create_prim_func([A, T.compute((16,), lambda i: A[i] * 2.0, name="B")])
    sch = S.Schedule(f)
    i = sch.get_loops(sch.get_block("B"))[0]
    t = sch.sample_perfect_tile(i, 2, decision=[4, 4])
    _, inner = sch.split(i, [None, t[1] // 2 + 0 * t[0]])
    assert "(v3 // 2)" in sch.trace.as_python()
    assert '"derived": ["add"' in sch.trace.as_json()
    (idx,) = list(sch.trace.decisions)
    other = sch.trace.with_decisions({idx: [2, 8]}).apply(f)
    loops = other.get_loops(other.get_block("B"))
    extents = [tree.get(other.func, tree.find_loop(other.func, l.var)).extent.value
               for l in loops]
    assert extents == [4, 4]   # 8 // 2 from the new decision, not the recorded 2
    assert S.Trace.from_json(other.trace.as_json()).apply(f).trace.as_json() == \
        other.trace.as_json()


def test_a_loop_handle_of_another_schedule_is_named_as_such():
    A = T.placeholder((16,), name="A")
    f = T.create_prim_func([A, T.compute((16,), lambda i: A[i] * 2.0, name="B")])
    mine, theirs = S.Schedule(f), S.Schedule(f)
    foreign = theirs.split(theirs.get_loops(theirs.get_block("B"))[0], [4, 4])[0]
    with pytest.raises(S.ScheduleError, match=r"split: LoopRV\(i_0\) was not produced by "
                                              r"this schedule"):
        mine.split(foreign, [2, 2])
