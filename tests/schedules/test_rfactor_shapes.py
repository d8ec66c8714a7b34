"""rfactor on loop nests shared with other blocks, on unit loops, and into one slot.

Each accepted schedule is checked numerically (interpreter and llvm against numpy) and
its trace replayed; each refusal matches its message and leaves the schedule unchanged.
"""

import numpy as np

import cuvil_tir as T
import schedules as S
from cuvil_tir.analysis import tree
from schedules.errors import LoopNestError, ReductionLoopError
from tests import workloads
from tests.schedules.testing import (assert_refused, check_workload, run, run_llvm,
                                     verify_trace_roundtrip)


def block(sch, name):
    return tree.get(sch.func, tree.find_block(sch.func, name)).block


def test_rfactor_under_an_outer_loop_shared_with_a_consumer():
    # D = relu(C + bias) moved under C's j loop: C's partial sums get a loop nest of
    # their own before i, the write-back stays where C was, before D
    w = workloads.matmul_bias_relu(4, 4, 8)
    sch = S.Schedule(w.func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    ko, ki = sch.split(k, [None, 4])
    sch.reverse_compute_at(sch.get_block("D"), j)
    rf = sch.rfactor(ki, 0)
    assert rf.name == "C_rf"
    top = sch.func.body.block.body.seq
    assert [b.block.name for b in tree.blocks_under(top[0])] == ["C_rf"]
    assert [b.block.name for b in tree.blocks_under(top[1])] == ["C", "D"]
    # the write-back keeps i, j and the rfactor loop (extent 4); ko is gone
    path = tree.find_block(sch.func, "C")
    assert [int(l.extent) for _, l in tree.loops_above(sch.func, path)] == [4, 4, 4]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


SHARED = '''
def f(A: T.Buffer((4, 8), "float32"), E: T.Buffer((4,), "float32")):
    P = T.alloc_buffer((4, 8))
    C = T.alloc_buffer((4,))
    for i in range(4):
        for k in range(8):
            with T.block("P"):
                vi, vk = T.axis.remap("SS", [i, k])
                P[vi, vk] = A[vi, vk] * T.float32(2)
        for k in range(8):
            with T.block("C"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    C[vi] = T.float32(0)
                C[vi] = C[vi] + P[vi, vk]
        with T.block("E"):
            vi = T.axis.S(4, i)
            E[vi] = C[vi]
'''


def test_rfactor_refuses_a_block_whose_input_is_produced_in_the_shared_loop():
    sch = S.Schedule(T.parse(SHARED))
    k = sch.get_loops(sch.get_block("C"))[1]
    assert_refused(sch, lambda: sch.rfactor(k, 0),
                   r"rfactor: the outermost loop 'i' above block 'C' also holds block "
                   r"'P', which writes 'P' that 'C' reads: the partial results, computed "
                   r"in a copy of the loop nest before 'i', would read 'P' before it is "
                   r"written", LoopNestError)


UNIT = '''
def f(A: T.Buffer((4, 6, 6), "float32"), C: T.Buffer((4,), "float32")):
    for b, o, u in T.grid(4, 36, 1):
        with T.block("C"):
            vb = T.axis.S(4, b)
            vi = T.axis.R(6, o // 6)
            vj = T.axis.R(6, o % 6)
            with T.init():
                C[vb] = T.float32(0)
            C[vb] = C[vb] + A[vb, vi, vj] * A[vb, vi, vj]
'''


def test_rfactor_of_a_unit_loop_no_binding_uses():
    f = T.parse(UNIT)
    sch = S.Schedule(f)
    _, _, u = sch.get_loops(sch.get_block("C"))
    sch.rfactor(u, 0)
    assert [b.name for b in sch.func.body.block.alloc_buffers] == ["C_rf"]
    assert [int(s) for s in sch.func.body.block.alloc_buffers[0].shape] == [1, 4]
    a = np.random.default_rng(3).standard_normal((4, 6, 6)).astype("float32")
    want = (a.astype("float64") ** 2).sum(axis=(1, 2))
    for out in (run(sch, [a, np.zeros(4, "float32")]),
                run_llvm(sch, [a, np.zeros(4, "float32")])):
        np.testing.assert_allclose(out[1], want, rtol=1e-5)
    verify_trace_roundtrip(sch, f)


def test_rfactor_refuses_a_longer_loop_no_binding_uses():
    f = T.parse(UNIT.replace("T.grid(4, 36, 1)", "T.grid(4, 36, 2)"))
    sch = S.Schedule(f)
    _, _, u = sch.get_loops(sch.get_block("C"))
    assert_refused(sch, lambda: sch.rfactor(u, 0),
                   r"loop 'u' is not a reduction loop of block 'C' \(no reduce iter var "
                   r"uses it, and its extent is not 1\)", ReductionLoopError)


def test_rfactor_of_the_only_reduction_loop_makes_a_plain_copy():
    # one value per slot: the rfactor block is spatial, without init
    w = workloads.matmul(4, 4, 8)
    sch = S.Schedule(w.func)
    c = sch.get_block("C")
    k = sch.get_loops(c)[2]
    sch.rfactor(k, 0)
    rf = block(sch, "C_rf")
    assert rf.init is None and [iv.kind for iv in rf.iter_vars] == ["spatial"] * 3
    assert str(rf.body.value).startswith("A[")
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)
