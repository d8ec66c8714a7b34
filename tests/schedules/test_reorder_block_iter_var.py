"""reorder_block_iter_var: a permutation of a block's iteration variables."""

import pytest

import schedules as S
from cuvil_tir.analysis import tree
from schedules.errors import ScheduleArgumentError
from tests import workloads
from tests.schedules.testing import assert_refused, check_workload, verify_trace_roundtrip


def test_reorder_block_iter_var_permutes_variables_and_bindings():
    w = workloads.matmul(3, 4, 2)
    sch = S.Schedule(w.func)
    before = tree.get(sch.func, tree.find_block(sch.func, "C"))
    sch.reorder_block_iter_var("C", [2, 1, 0])
    realize = tree.get(sch.func, tree.find_block(sch.func, "C"))
    assert [iv.kind for iv in realize.block.iter_vars] == ["reduce", "spatial", "spatial"]
    assert realize.iter_values == before.iter_values[::-1]
    assert realize.block.body is before.block.body
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


@pytest.mark.parametrize("order, why", [
    ([2, 1], r"new_order \[2, 1\] lists 2 positions, but block 'C' has 3"),
    ([-1, 3, 2], r"new_order \[-1, 3, 2\] has positions outside \[0, 3\)"),
    ([0, 0, 2], r"new_order \[0, 0, 2\] repeats a position"),
])
def test_reorder_block_iter_var_refuses_what_is_not_a_permutation(order, why):
    w = workloads.matmul(3, 4, 2)
    sch = S.Schedule(w.func)
    assert_refused(sch, lambda: sch.reorder_block_iter_var("C", order),
                   r"reorder_block_iter_var: " + why + r": it must be a permutation of "
                   r"0\.\.2, one position per iteration variable", ScheduleArgumentError)
