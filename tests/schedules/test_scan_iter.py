"""``T.axis.scan``: TensorIR's ordered iterator.  Its instances run in order, so no
primitive reorders, parallelizes, vectorizes or binds a loop that drives it (reorder
refuses opaque iterators too, as TensorIR does); splitting keeps the order."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from schedules.errors import LoopCarriedError, LoopNestError
from schedules.primitives.compute_location import BlockLocationError
from schedules.primitives.reduction import NotReductionError
from tests.schedules.testing import assert_refused, run, run_llvm, verify_trace_roundtrip

CUMSUM = '''@T.prim_func
def main(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
    for i, k in T.grid(4, 8):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            vk = T.axis.scan(8, k)
            B[vi, vk] = T.if_then_else(vk == 0, A[vi, vk], B[vi, T.max(vk - 1, 0)] + A[vi, vk])
'''


def _cumsum():
    return T.parse(CUMSUM)


def test_scan_prints_parses_back_and_runs_in_order():
    f = _cumsum()
    assert "vk = T.axis.scan(8, k)" in str(f)
    assert T.structural_equal(T.parse(str(f)), f)
    sch = S.Schedule(f)
    i, k = sch.get_loops("B")
    sch.parallel(i)                      # the spatial loop may run in parallel
    sch.split(k, [None, 4])              # a split keeps the scan's order
    a = np.random.default_rng(0).standard_normal((4, 8)).astype("float32")
    for out in (run(sch, [a, np.zeros((4, 8), "float32")]),
                run_llvm(sch, [a, np.zeros((4, 8), "float32")])):
        np.testing.assert_allclose(out[1], np.cumsum(a, axis=1), rtol=1e-5)
    verify_trace_roundtrip(sch, f)


@pytest.mark.parametrize("apply, match, cls", [
    (lambda s, i, k: s.reorder(k, i), r"reorder: loop k drives the scan iterator vk of "
     r"block 'B', whose instances may depend on their order", LoopNestError),
    (lambda s, i, k: s.parallel(k), r"parallel: loop k drives the ordered iterator vk of "
     r"block 'B' \(T.axis.scan\): its iterations must run one after another",
     LoopCarriedError),
    (lambda s, i, k: s.vectorize(k), r"vectorize: loop k drives the ordered iterator vk",
     LoopCarriedError),
    (lambda s, i, k: s.bind(k, "threadIdx.x"), r"bind: loop k drives the ordered "
     r"iterator vk", LoopCarriedError),
])
def test_loops_of_a_scan_keep_their_order(apply, match, cls):
    f = _cumsum()
    sch = S.Schedule(f)
    i, k = sch.get_loops("B")
    assert_refused(sch, lambda: apply(sch, i, k), match, cls)


def test_a_block_with_a_scan_is_not_moved():
    f = T.parse(CUMSUM.replace('''    for i, k in T.grid(4, 8):''', '''    C = T.alloc_buffer((4, 8))
    for i, k in T.grid(4, 8):''').replace('''            B[vi, vk] =''', '''            C[vi, vk] =''').replace(
        "B[vi, T.max", "C[vi, T.max") + '''    for i, k in T.grid(4, 8):
        with T.block("D"):
            vi, vk = T.axis.remap("SS", [i, k])
            B[vi, vk] = C[vi, vk]
''')
    sch = S.Schedule(f)
    loop = sch.get_loops("D")[0]
    assert_refused(sch, lambda: sch.compute_at("B", loop),
                   r"block 'B' is neither a complete block nor a reduction block \(it has "
                   r"opaque or scan iter vars", BlockLocationError)


def test_reorder_refuses_loops_of_opaque_iterators_too():
    f = T.parse(CUMSUM.replace("T.axis.scan", "T.axis.opaque"))
    sch = S.Schedule(f)
    i, k = sch.get_loops("B")
    assert_refused(sch, lambda: sch.reorder(k, i), r"loop k drives the opaque iterator vk",
                   LoopNestError)


def test_rfactor_refuses_a_reduction_with_a_scan_iterator():
    f = T.parse('''@T.prim_func
def main(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4,), "float32")):
    for s, k in T.grid(4, 8):
        with T.block("B"):
            vs = T.axis.scan(4, s)
            vk = T.axis.reduce(8, k)
            with T.init():
                B[vs] = T.float32(0)
            B[vs] = B[vs] + A[vs, vk]
''')
    sch = S.Schedule(f)
    _, k = sch.get_loops("B")
    assert_refused(sch, lambda: sch.rfactor(k, 0), r"rfactor: block 'B' has the scan "
                   r"iterator vs: rfactor needs a block of spatial and reduction iterators "
                   r"only", NotReductionError)
