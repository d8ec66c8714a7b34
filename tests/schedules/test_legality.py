"""Legality: schedules that would compute wrong results are refused, with the reason.

``parallel``/``vectorize`` need independent iterations: a loop-carried dependence
(a scan ``B[vi] = B[vi - 1] + A[vi]``, a shared temporary) is refused with
``LoopCarriedError``; independent loops, fused or tiled, stay accepted.
"""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from schedules.errors import LoopCarriedError

from .testing import assert_refused, run, run_llvm

SCAN = '''
@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in T.serial(7):
        with T.block("B"):
            vi = T.axis.spatial(8, i + 1)
            T.reads(B[vi - 1], A[vi])
            T.writes(B[vi])
            B[vi] = B[vi - 1] + A[vi]
'''

SHARED_TEMP = '''
@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    t = T.alloc_buffer((1,), "float32")
    for i in T.serial(8):
        with T.block("T"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi])
            T.writes(t[0])
            t[0] = A[vi] * T.float32(2)
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            T.reads(t[0])
            T.writes(B[vi])
            B[vi] = t[0] + T.float32(1)
'''


@pytest.mark.parametrize("prim", ["parallel", "vectorize"])
def test_a_scan_cannot_run_in_parallel(prim):
    sch = S.Schedule(T.parse(SCAN))
    (i,) = sch.get_loops(sch.get_block("B"))
    assert_refused(sch, lambda: getattr(sch, prim)(i),
                   rf"{prim}: block 'B' writes B\[i \+ 1\] and block 'B' reads "
                   r"B\[i \+ 1 - 1\]: different iterations of loop 'i' may touch the same "
                   r"element \(a loop-carried dependence\)", LoopCarriedError)
    a = np.arange(8, dtype="float32")
    b = np.zeros(8, "float32")
    out = run(sch, [a, b])[1]
    np.testing.assert_allclose(out[1:], np.cumsum(a[1:]))


def test_a_temporary_shared_by_all_iterations_is_a_dependence():
    sch = S.Schedule(T.parse(SHARED_TEMP))
    i = sch.get_loops(sch.get_block("B"))[0]
    assert_refused(sch, lambda: sch.parallel(i), r"parallel: block 'T' writes t\[0\] "
                   r"and block 'T' writes t\[0\]", LoopCarriedError)


def test_independent_fused_and_tiled_loops_stay_parallel():
    from tests import workloads
    w = workloads.matmul_bias_relu(8, 8, 8)
    sch = S.Schedule(w.func, debug=True)
    c, d = sch.get_block("C"), sch.get_block("D")
    i, j, _ = sch.get_loops(c)
    io, _ = sch.split(i, [None, 4])
    sch.parallel(io)
    sch.vectorize(sch.fuse(*sch.get_loops(d)))
    arrays = w.make_inputs(np.random.default_rng(0))
    w.check(run(sch, arrays))
    w.check(run_llvm(sch, arrays))


@pytest.mark.parametrize("mark", ["bind", "annotate", "parallel"])
@pytest.mark.parametrize("prim", ["split", "fuse"])
def test_split_and_fuse_refuse_to_drop_a_binding_kind_or_annotation(prim, mark):
    A = T.placeholder((4, 8), name="A")
    sch = S.Schedule(T.create_prim_func([A, T.compute((4, 8), lambda i, j: A[i, j],
                                                      name="B")]))
    i, j = sch.get_loops(sch.get_block("B"))
    if mark == "bind":
        sch.bind(i, "blockIdx.x")
        lost = r"its binding to blockIdx\.x"
    elif mark == "annotate":
        sch.annotate(i, "pragma_unroll", 4)
        lost = r"its annotations \['pragma_unroll'\]"
    else:
        sch.parallel(i)
        lost = r"its kind 'parallel'"
    call = (lambda: sch.split(i, [2, 2])) if prim == "split" else (lambda: sch.fuse(i, j))
    assert_refused(sch, call, rf"{prim}: loop i would lose {lost}: {prim} makes new serial "
                   "loops", S.errors.LoopNestError)
