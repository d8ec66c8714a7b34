"""``Schedule.get``: what a handle names now, and the handles it refuses."""

import pytest

import cuvil_tir as T
import schedules as S
from cuvil_tir.stmt import Block, For, SeqStmt
from schedules.errors import ForeignHandleError, ScheduleArgumentError


def _sch():
    A = T.placeholder((12,), name="A")
    return S.Schedule(T.create_prim_func([A, T.compute((12,), lambda i: A[i] + 1.0,
                                                       name="B")]))


def test_get_resolves_blocks_loops_and_sampled_values():
    sch = _sch()
    (i,) = sch.get_loops("B")
    assert isinstance(sch.get(i), For) and sch.get(i).extent.value == 12
    assert isinstance(sch.get("B"), Block) and sch.get(sch.get_block("B")) is sch.get("B")
    io, ii = sch.split(i, [3, 4])
    assert (sch.get(io).extent.value, sch.get(ii).extent.value) == (3, 4)
    (f,) = sch.sample_perfect_tile(ii, 1, decision=[4])
    assert sch.get(f) == 4 and type(sch.get(f)) is int
    # the node is the function's own: nothing is copied
    assert sch.get(ii) is sch.func.body.block.body.body


def test_a_copy_shares_nodes_but_not_later_handles():
    sch = _sch()
    (i,) = sch.get_loops("B")
    other = sch.copy()
    assert other.get(i) is sch.get(i)
    io, _ = sch.split(i, [3, 4])
    with pytest.raises(ForeignHandleError, match=r"get: LoopRV\(i_0\) was not produced by "
                       r"this schedule"):
        other.get(io)
    with pytest.raises(IndexError):
        other.get(io)


def test_get_refuses_a_replaced_loop_and_other_values():
    sch = _sch()
    (i,) = sch.get_loops("B")
    sch.split(i, [3, 4])
    with pytest.raises(S.ScheduleError, match=r"get: .*\bi\b"):
        sch.get(i)
    with pytest.raises(ScheduleArgumentError, match=r"get: expected a BlockRV, a block name, "
                       r"a LoopRV or a sampled value, found float 1.5"):
        sch.get(1.5)
    with pytest.raises(ForeignHandleError, match=r"get: sampled value 2 was not drawn by "
                       r"this schedule"):
        sch.get(S.SampledInt(2))


def test_seq_stmt_indexes_its_statements():
    s = SeqStmt((T.Evaluate(T.const(0)), T.Evaluate(T.const(1))))
    assert s[1] is s.seq[1] and s[-1].value.value == 1


def test_remove_rv_retires_a_handle_and_nothing_else():
    sch = _sch()
    (i,) = sch.get_loops("B")
    blk = sch.get_block("B")
    (f,) = sch.sample_perfect_tile(i, 1, decision=[12])
    func, trace = sch.func, sch.trace.as_json()
    for h in (i, blk, f):
        sch.remove_rv(h)
        with pytest.raises(ForeignHandleError, match=r"get: .* was removed from this "
                           r"schedule by remove_rv; get a new handle"):
            sch.get(h)
    assert sch.func is func and sch.trace.as_json() == trace
    with pytest.raises(IndexError, match=r"split: LoopRV\(i\) was removed"):
        sch.split(i, [3, 4])
    with pytest.raises(IndexError, match=r"compute_inline: BlockRV\('B'\) was removed"):
        sch.compute_inline(blk)
    # the block itself stays reachable through a new handle, by name or get_block
    assert sch.get(sch.get_block("B")) is sch.get("B")
    (j,) = sch.get_loops("B")
    assert sch.split(j, [3, 4])


def test_remove_rv_refuses_what_is_not_a_handle():
    with pytest.raises(ScheduleArgumentError, match=r"remove_rv: expected a BlockRV, a "
                       r"LoopRV or a sampled value, found int 3"):
        _sch().remove_rv(3)
