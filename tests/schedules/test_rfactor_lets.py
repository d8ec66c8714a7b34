"""rfactor of a reduction written with LetStmt: the lets are pure values, substituted
into the store; a tuple reduction (argmax) is refused with the reason."""

import numpy as np

import cuvil_tir as T
import schedules as S
from schedules.primitives.reduction import NotReductionError
from tests.schedules.testing import assert_refused, run, verify_trace_roundtrip

LET_MATMUL = '''@T.prim_func
def main(A: T.Buffer((4, 8), "float32"), B: T.Buffer((3, 8), "float32"),
         C: T.Buffer((4, 3), "float32")):
    for i, j, ko, ki in T.grid(4, 3, 2, 4):
        with T.block("update"):
            vi, vj = T.axis.remap("SS", [i, j])
            vk = T.axis.reduce(8, ko * 4 + ki)
            T.reads(A[vi, vk], B[vj, vk])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = T.float32(0)
            acc: T.float32 = C[vi, vj] + A[vi, vk] * B[vj, vk]
            C[vi, vj] = acc
'''

LET_ARGMAX = '''@T.prim_func
def main(idx: T.Buffer((4, 8), "int32"), val: T.Buffer((4, 8), "float32"),
         out_i: T.Buffer((4,), "int32"), out_v: T.Buffer((4,), "float32")):
    for i, ko, ki in T.grid(4, 2, 4):
        with T.block("argmax"):
            vi = T.axis.spatial(4, i)
            vk = T.axis.reduce(8, ko * 4 + ki)
            T.reads(idx[vi, vk], val[vi, vk])
            T.writes(out_i[vi], out_v[vi])
            with T.init():
                out_i[vi] = -1
                out_v[vi] = T.min_value("float32")
            new_i: T.int32 = T.Select(out_v[vi] >= val[vi, vk], out_i[vi], idx[vi, vk])
            new_v: T.float32 = T.Select(out_v[vi] >= val[vi, vk], out_v[vi], val[vi, vk])
            out_i[vi] = new_i
            out_v[vi] = new_v
'''


def test_rfactor_substitutes_the_lets_of_a_reduction():
    f = T.parse(LET_MATMUL)
    sch = S.Schedule(f, debug=True)
    ki = sch.get_loops("update")[3]
    rf = sch.rfactor(ki, 0)
    assert rf.name == "update_rf"
    text = str(sch.func)
    assert "acc" not in text
    assert "C_rf[vki, vi, vj] = C_rf[vki, vi, vj] + A[vi, vko * 4 + vki]" in text
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 8)).astype("float32")
    b = rng.standard_normal((3, 8)).astype("float32")
    out = run(sch, [a, b, np.zeros((4, 3), "float32")])
    np.testing.assert_allclose(out[2], a @ b.T, rtol=1e-5, atol=1e-5)
    verify_trace_roundtrip(sch, f)


def test_rfactor_refuses_a_tuple_reduction():
    f = T.parse(LET_ARGMAX)
    sch = S.Schedule(f)
    ki = sch.get_loops("argmax")[2]
    assert_refused(sch, lambda: sch.rfactor(ki, 0),
                   r"rfactor: block 'argmax' reduces into 2 buffers \(out_i, out_v\) at "
                   r"once, a tuple reduction such as argmax: rfactor factors one buffer",
                   NotReductionError)
