"""add_unit_loop: a loop of extent 1 above a block or a loop; numerics, trace, refusal."""

import numpy as np

import cuvil_tir as T
import schedules as S
from schedules.errors import LoopNestError, ScheduleArgumentError
from tests.schedules.testing import assert_refused, run, verify_trace_roundtrip

SCALAR = '''
@T.prim_func
def main(A: T.Buffer((), "int32"), B: T.Buffer((), "int32"), C: T.Buffer((), "int32")):
    with T.block("C"):
        vi = T.axis.spatial(1, 0)
        C[()] = A[()] + B[()]
'''


def test_unit_loop_above_a_block_without_loops():
    f = T.parse(SCALAR)
    sch = S.Schedule(f)
    u = sch.add_unit_loop("C")
    assert sch.get_loops("C") == [u]
    assert "for u in T.serial(1):" in str(sch.func)
    out = run(sch, [np.array(3, "int32"), np.array(4, "int32"), np.array(0, "int32")])
    assert int(out[2]) == 7
    verify_trace_roundtrip(sch, f)
    # the new loop is a loop like any other: it can be split or blockized
    sch.blockize(u)
    assert "C_o" in str(sch.func)


def test_unit_loop_above_a_loop_becomes_the_outer_one():
    A = T.placeholder((4,), name="A")
    f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] * 2.0, name="B")])
    sch = S.Schedule(f)
    (i,) = sch.get_loops("B")
    u = sch.add_unit_loop(i)
    assert sch.get_loops("B") == [u, i]
    x = np.arange(4, dtype="float32")
    np.testing.assert_array_equal(run(sch, [x, np.zeros(4, "float32")])[1], x * 2)
    verify_trace_roundtrip(sch, f)
    assert "l1 = sch.add_unit_loop(l0)" in sch.trace.as_python()


def test_refuses_the_root_and_other_arguments():
    sch = S.Schedule(T.parse(SCALAR))
    assert_refused(sch, lambda: sch.add_unit_loop("root"), "the root block has no parent",
                   LoopNestError)
    assert_refused(sch, lambda: sch.add_unit_loop(3), "argument 1, 'target' to "
                   "add_unit_loop: expected a loop handle", ScheduleArgumentError)
