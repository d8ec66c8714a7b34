"""compute_at refusals named as TensorIR names them (a user migrating from TVM
searches for "complete block", "same block scope", "requires all the consumers")."""

import cuvil_tir as T
import schedules as S
from schedules.errors import BlockLocationError
from tests.schedules.testing import assert_refused

TWO_WRITERS = '''@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    B = T.alloc_buffer((8, 8), "float32")
    for i in T.serial(8):
        for j in T.serial(4):
            with T.block("B_0"):
                vi = T.axis.spatial(8, i)
                vj = T.axis.spatial(8, j)
                B[vi, vj] = A[vi, vj] * 2.0
        for j in T.serial(4):
            with T.block("B_1"):
                vi = T.axis.spatial(8, i)
                vj = T.axis.spatial(8, j + 4)
                B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(8, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + 1.0
'''


def test_compute_at_refuses_a_block_that_is_not_complete_for_its_buffer():
    f = T.parse(TWO_WRITERS)
    sch = S.Schedule(f)
    i = sch.get_loops("C")[0]
    assert_refused(sch, lambda: sch.compute_at("B_0", i),
                   r"compute_at: block 'B_0' is not the only writer of 'B' \(also written "
                   r"by \['B_1'\]\).* \(a complete block: the only writer of its output\)",
                   BlockLocationError)


def test_compute_at_refuses_a_loop_of_another_block_scope():
    A = T.placeholder((8, 8), name="A")
    B = T.compute((8, 8), lambda i, j: A[i, j] * 2.0, name="B")
    C = T.compute((8, 8), lambda i, j: B[i, j] + 1.0, name="C")
    f = T.create_prim_func([A, C])
    sch = S.Schedule(f)
    i, j = sch.get_loops("C")
    _, ii = sch.split(i, [2, 4])
    sch.blockize(ii)
    inner = sch.get_loops("C")[-2]
    assert_refused(sch, lambda: sch.compute_at("B", inner),
                   r"compute_at: loop '.*' and block 'B' are not in the same block scope",
                   BlockLocationError)
