"""TensorIR's block names after ``decompose_reduction`` (``C_init`` and ``C_update``)
and the schedule's rename map: a handle or a name of ``C`` from before still finds the
update, as a TVM handle follows its block."""

import numpy as np

import cuvil_tir as T
import schedules as S
from schedules.primitive import PRIMITIVES, Renamed
from tests import workloads
from tests.schedules.testing import check_workload, verify_trace_roundtrip

UPDATE_NAMED = '''
@T.prim_func
def main(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")):
    for i, j in T.grid(4, 4):
        with T.block("C_init"):
            v_i, v_j = T.axis.remap("SS", [i, j])
            C[v_i, v_j] = T.float32(0)
        for k in T.serial(4):
            with T.block("C_update"):
                v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
                C[v_i, v_j] = C[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]
'''


def test_decompose_reduction_names_the_update_as_tensorir():
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    c = sch.get_block("C")
    init = sch.decompose_reduction(c, sch.get_loops(c)[2])
    assert init == S.BlockRV("C_init")
    assert T.structural_equal(sch.func, T.parse(UPDATE_NAMED)), sch.func
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_old_handles_and_names_follow_the_rename():
    w = workloads.matmul(8, 8, 8)
    sch = S.Schedule(w.func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.decompose_reduction(c, k)
    assert sch.get(c).name == sch.get("C").name == "C_update"
    assert sch.get_block("C") == sch.get_block("C_update") == S.BlockRV("C_update")
    ko, ki = sch.split(sch.get_loops(c)[2], [None, 4])     # the old handle, again
    sch.reorder(ko, ki)
    sch.vectorize(sch.get_loops("C")[1])                   # the old name
    check_workload(sch, w)
    replayed = verify_trace_roundtrip(sch, w.func)
    assert replayed.get("C").name == "C_update"


def test_a_copy_keeps_the_renames():
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    sch.decompose_reduction("C", sch.get_loops("C")[0])
    other = sch.copy()
    assert other.get_block("C") == S.BlockRV("C_update")


def test_renames_are_per_function_of_a_module():
    A = T.placeholder((4, 4), name="A")
    k = T.reduce_axis((0, 4), name="k")

    def rowsum(name):
        return T.create_prim_func([A, T.compute((4,), lambda i: T.sum(A[i, k], axis=k),
                                                name="C")]).with_attr("global_symbol", name)
    sch = S.Schedule(T.IRModule((rowsum("f"), rowsum("g"))))
    sch.work_on("f")
    sch.decompose_reduction("C", sch.get_loops("C")[0])
    assert sch.get_block("C") == S.BlockRV("C_update", "f")
    sch.work_on("g")
    assert sch.get_block("C") == S.BlockRV("C", "g")        # g's C is not renamed
    a = np.arange(16, dtype="float32").reshape(4, 4)
    out = np.zeros(4, "float32")
    T.interpret(sch.mod["f"], a, out)
    np.testing.assert_array_equal(out, a.sum(1))


def test_direct_callers_get_the_result_alone():
    w = workloads.matmul(4, 4, 4)
    i = w.func.body.block.body.loop_var
    _, init = PRIMITIVES["decompose_reduction"](w.func, "C", S.LoopRV(i))
    assert init == S.BlockRV("C_init")
    renamed = PRIMITIVES["decompose_reduction"].raw(w.func, S.BlockRV("C"), S.LoopRV(i))[1]
    assert isinstance(renamed, Renamed) and renamed.renames == {"C": "C_update"}
