"""reorder and parallel refuse blocks whose bindings or predicates are not quasi-affine:
two iterations may write one element, so the order of iterations may matter."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from schedules.errors import LoopCarriedError, LoopNestError
from tests.schedules.testing import assert_refused, run, verify_trace_roundtrip

NON_AFFINE_BINDING = '''@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i in T.serial(8):
        for j in T.serial(8):
            with T.block("B"):
                v = T.axis.spatial(8, i * j % 8)
                w = T.axis.spatial(8, j)
                T.reads(A[v, w])
                T.writes(B[v])
                B[v] = A[v, w]
'''

NON_AFFINE_PREDICATE = '''@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i in T.serial(8):
        for j in T.serial(8):
            with T.block("B"):
                v, w = T.axis.remap("SS", [i, j])
                T.where(i * j < 20)
                T.reads(A[v, w])
                T.writes(B[v, w])
                B[v, w] = A[v, w]
'''


def test_reorder_refuses_a_non_affine_binding():
    f = T.parse(NON_AFFINE_BINDING)
    sch = S.Schedule(f)
    i, j = sch.get_loops("B")
    assert_refused(sch, lambda: sch.reorder(j, i), r"reorder: block 'B' binds v to "
                   r"i \* j % 8, which is not quasi-affine in its loops: the order of its "
                   r"iterations may matter", LoopNestError)
    verify_trace_roundtrip(sch, f)


def test_reorder_refuses_a_non_affine_predicate_and_accepts_an_affine_one():
    f = T.parse(NON_AFFINE_PREDICATE)
    sch = S.Schedule(f)
    i, j = sch.get_loops("B")
    assert_refused(sch, lambda: sch.reorder(j, i), r"reorder: block 'B' has the "
                   r"predicate i \* j < 20, which is not a condition on quasi-affine "
                   r"expressions", LoopNestError)
    # a split's guard is affine: reorder over it stays legal and exact
    A = T.placeholder((10, 4), name="A")
    g = T.create_prim_func([A, T.compute((10, 4), lambda a, b: A[a, b] + 1.0, name="C")])
    sch = S.Schedule(g)
    a, b = sch.get_loops("C")
    ao, ai = sch.split(a, [None, 4])
    sch.reorder(ai, b, ao)
    x = np.arange(40, dtype="float32").reshape(10, 4)
    np.testing.assert_array_equal(run(sch, [x, np.zeros((10, 4), "float32")])[1], x + 1)
    verify_trace_roundtrip(sch, g)


@pytest.mark.parametrize("prim", ["parallel", "vectorize"])
def test_parallel_and_vectorize_refuse_a_non_affine_binding(prim):
    f = T.parse(NON_AFFINE_BINDING)
    sch = S.Schedule(f)
    i, _ = sch.get_loops("B")
    assert_refused(sch, lambda: getattr(sch, prim)(i), rf"{prim}: block 'B' under loop i "
                   r"binds v to i \* j % 8, which is not quasi-affine in its loops: "
                   r"different iterations may write one element", LoopCarriedError)


def _copy_8x8(v: str, w: str, where: str = "", width: int = 8) -> str:
    """A copy block B[v, w] = A[v, w] under two loops i, j of extent 8."""
    guard = f"\n            T.where({where})" if where else ""
    return f'''@T.prim_func
def main(A: T.Buffer((8, {width}), "float32"), B: T.Buffer((8, {width}), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("B"):
            v = T.axis.spatial(8, {v})
            w = T.axis.spatial({width}, {w}){guard}
            B[v, w] = A[v, w]
'''


COUPLED_PREDICATE = _copy_8x8("i", "j", where="i * 8 + j < 20")
STRIDED_BINDING = _copy_8x8("i", "j * 4", width=32)

PARTIAL_AFFINE = '''@T.prim_func
def main(A: T.Buffer((30, 4), "float32"), B: T.Buffer((30, 4), "float32")):
    for a in T.serial(5):
        for b in T.serial(4):
            for c in T.serial(4):
                with T.block("B"):
                    v = T.axis.spatial(30, a * a + b)
                    w = T.axis.spatial(4, c)
                    T.reads(A[v, w])
                    T.writes(B[v, w])
                    B[v, w] = A[v, w] + 1.0
'''


def test_reorder_refuses_a_predicate_coupling_the_loops_of_two_iter_values():
    f = T.parse(COUPLED_PREDICATE)
    sch = S.Schedule(f)
    i, j = sch.get_loops("B")
    assert_refused(sch, lambda: sch.reorder(j, i), r"reorder: block 'B' has the predicate "
                   r"i \* 8 \+ j < 20, whose condition i \* 8 \+ j < 20 couples loops "
                   r"\(i, j\) that feed different iter values: its iteration domain is "
                   r"not a box of its variables; reorder permutes only loops whose blocks "
                   r"have affine bindings", LoopNestError)


def test_reorder_refuses_a_strided_binding():
    f = T.parse(STRIDED_BINDING)
    sch = S.Schedule(f)
    i, j = sch.get_loops("B")
    assert_refused(sch, lambda: sch.reorder(j, i), r"reorder: block 'B' binds w to j \* 4, "
                   r"a strided map of its loops \(no loop steps it by 1: its domain has "
                   r"gaps\)", LoopNestError)


def test_reorder_treats_loops_outside_the_reordered_ones_as_constants():
    f = T.parse(PARTIAL_AFFINE)
    sch = S.Schedule(f)
    a, b, c = sch.get_loops("B")
    # a * a is not quasi-affine in a: a cannot move ...
    assert_refused(sch, lambda: sch.reorder(a, c, b), r"reorder: block 'B' binds v to "
                   r"a \* a \+ b, which is not quasi-affine in its loops", LoopNestError)
    # ... but below a it is a constant, and b, c may be swapped
    sch.reorder(c, b)
    assert [lp.var.name for lp in sch.get_loops("B")] == ["a", "c", "b"]
    x = np.arange(120, dtype="float32").reshape(30, 4)
    want = np.zeros((30, 4), "float32")
    for a_ in range(5):
        for b_ in range(4):
            want[a_ * a_ + b_] = x[a_ * a_ + b_] + 1
    np.testing.assert_array_equal(run(sch, [x, np.zeros((30, 4), "float32")])[1], want)
    verify_trace_roundtrip(sch, f)


def test_reorder_accepts_strided_loops_whose_gaps_an_outer_loop_fills():
    # k = (k_0_0 + k_0_1) * 2 + k_1 with k_1 moved outside: below k_1 the binding steps
    # by 2, but k_1 fills the gaps, so the reordered nest still covers every k
    A = T.placeholder((4, 5), name="A")
    k = T.reduce_axis((0, 5), name="k")
    f = T.create_prim_func([A, T.compute((4,), lambda i: T.sum(A[i, k], axis=k), name="B")])
    sch = S.Schedule(f)
    _, kk = sch.get_loops("B")
    k0, k1 = sch.split(kk, [None, 2])
    sch.reorder(k1, k0)
    k00, k01 = sch.split(k0, [None, 1])
    sch.reorder(k01, k00)
    assert [lp.var.name for lp in sch.get_loops("B")] == ["i", "k_1", "k_0_1", "k_0_0"]
    x = np.arange(20, dtype="float32").reshape(4, 5)
    np.testing.assert_allclose(run(sch, [x, np.zeros(4, "float32")])[1], x.sum(axis=1))
    verify_trace_roundtrip(sch, f)
