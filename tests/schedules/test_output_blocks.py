"""get_output_blocks: the blocks of a scope writing the function's parameters."""

import cuvil_tir as T
import schedules as S
from schedules.errors import ScheduleArgumentError
from tests.schedules.testing import assert_refused


def chain():
    A = T.placeholder((4, 4), name="A")
    B = T.compute((4, 4), lambda i, j: A[i, j] + 1.0, name="B")
    k = T.reduce_axis((0, 4), name="k")
    C = T.compute((4,), lambda i: T.sum(B[i, k], axis=k), name="C")
    D = T.compute((4,), lambda i: C[i] * 2.0, name="D")
    return T.create_prim_func([A, C, D])


def test_blocks_writing_parameters_in_program_order():
    sch = S.Schedule(chain())
    assert sch.get_output_blocks("root") == [S.BlockRV("C"), S.BlockRV("D")]
    sch.decompose_reduction("C", sch.get_loops("C")[1])
    assert sch.get_output_blocks("root") == [S.BlockRV("C_init"), S.BlockRV("C_update"),
                                             S.BlockRV("D")]


def test_nested_blocks_are_found_from_the_root_and_from_their_scope():
    sch = S.Schedule(chain())
    sch.blockize(sch.get_loops("D")[0])
    assert sch.get_output_blocks("root") == [S.BlockRV("C"), S.BlockRV("D_o"),
                                             S.BlockRV("D")]
    assert sch.get_output_blocks("D_o") == [S.BlockRV("D")]
    assert sch.get_output_blocks("B") == []
    assert "b2, b3, b4 = sch.get_output_blocks('root')" in sch.trace.as_python()


def test_refuses_an_unknown_block():
    sch = S.Schedule(chain())
    assert_refused(sch, lambda: sch.get_output_blocks("nope"), "Cannot find a block with the name: nope",
                   ScheduleArgumentError)
