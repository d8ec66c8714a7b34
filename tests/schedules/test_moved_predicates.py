"""compute_at / reverse_compute_at / reverse_compute_inline keep a block's T.where
conditions that are not domain guards (they were dropped, and the block then ran where
it did not: an output written where the original left it alone)."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from schedules.errors import BlockLocationError, InlineError
from tests.schedules.testing import (assert_refused, run, run_llvm, verify_trace_roundtrip,
                                     verify_text_roundtrip)

SKIPPING_CONSUMER = """
@T.prim_func
def main(A: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,))
    for i in T.serial(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi] * T.float32(2)
    for i in T.serial(8):
        with T.block("D"):
            vi = T.axis.spatial(8, i)
            T.where(i % 3 != 1)
            T.reads(B[vi])
            T.writes(D[vi])
            D[vi] = B[vi] + T.float32(1)
"""


def _check(sch, f):
    a = np.arange(8, dtype="float32")
    d = np.full(8, -5.0, "float32")        # D[1], D[4], D[7] must keep their value
    want = np.where(np.arange(8) % 3 != 1, a * 2 + 1, d)
    np.testing.assert_array_equal(run(sch, [a, d])[1], want)
    np.testing.assert_array_equal(run_llvm(sch, [a, d])[1], want)
    verify_trace_roundtrip(sch, f)
    verify_text_roundtrip(sch.func)


def test_reverse_compute_at_keeps_the_consumer_predicate():
    f = T.parse(SKIPPING_CONSUMER)
    sch = S.Schedule(f)
    sch.reverse_compute_at("D", sch.get_loops("B")[0])
    assert "T.where(i % 3 != 1)" in str(sch.func)
    _check(sch, f)


def test_reverse_compute_inline_keeps_the_consumer_predicate():
    f = T.parse(SKIPPING_CONSUMER)
    sch = S.Schedule(f)
    sch.reverse_compute_inline("D")
    assert "T.where(i % 3 != 1)" in str(sch.func)
    _check(sch, f)


def test_compute_at_keeps_the_producer_predicate_over_a_split():
    # B reads A one ahead, guarded by T.where; C reads B where B writes it.  Split and
    # moved under C's loop, B keeps "v < 7" only where the new loops do not imply it
    src = """
@T.prim_func
def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,))
    for i in T.serial(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            T.where(i < 7)
            T.reads(A[vi + 1])
            T.writes(B[vi])
            B[vi] = A[vi + 1] * T.float32(2)
    for i in T.serial(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            T.where(i < 7)
            T.reads(B[vi])
            T.writes(C[vi])
            C[vi] = B[vi] + T.float32(1)
"""
    f = T.parse(src)
    sch = S.Schedule(f)
    io, _ = sch.split(sch.get_loops("C")[0], [None, 4])
    sch.compute_at("B", io)
    text = str(sch.func)
    assert text.count("T.where") == 2, text      # C's split guard and B's v < 7
    a = np.arange(8, dtype="float32")
    c = np.full(8, -5.0, "float32")
    want = np.concatenate([a[1:] * 2 + 1, [-5.0]]).astype("float32")
    np.testing.assert_array_equal(run(sch, [a, c])[1], want)
    np.testing.assert_array_equal(run_llvm(sch, [a, c])[1], want)
    verify_trace_roundtrip(sch, f)


STRAY_LOOP = """
@T.prim_func
def main(A: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,))
    for i in T.serial(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi] * T.float32(2)
    for i in T.serial(8):
        for j in T.serial(2):
            with T.block("D"):
                vi = T.axis.spatial(8, i)
                T.where(j < 1)
                T.reads(B[vi])
                T.writes(D[vi])
                D[vi] = B[vi] + T.float32(1)
"""


@pytest.mark.parametrize("prim,cls", [("reverse_compute_at", BlockLocationError),
                                      ("reverse_compute_inline", InlineError)])
def test_a_predicate_over_a_loop_outside_the_bindings_is_refused(prim, cls):
    sch = S.Schedule(T.parse(STRAY_LOOP))
    loop = sch.get_loops("B")[0]
    call = (lambda: sch.reverse_compute_at("D", loop)) \
        if prim == "reverse_compute_at" else (lambda: sch.reverse_compute_inline("D"))
    assert_refused(sch, call, rf"{prim}: block 'D' runs under the predicate "
                   r"T.where\(j < 1\), whose condition j < 1 uses the loop\(s\) \['j'\] "
                   "other than through the block's iteration variables", cls)


def test_the_guard_of_a_split_fused_loop_is_recognised_as_a_domain_guard():
    # i_j_fused split by 5: T.where(i_j_fused_0 * 5 + i_j_fused_1 < 32) is no iter value,
    # but it holds wherever the values (.. // 8, .. % 8) lie in the domain: dropped
    A = T.placeholder((4, 8), name="A")
    B = T.compute((4, 8), lambda i, j: A[i, j] * 2.0, name="B")
    D = T.compute((4, 8), lambda i, j: B[i, j] + 1.0, name="D")
    f = T.create_prim_func([A, D])
    sch = S.Schedule(f)
    fused = sch.fuse(*sch.get_loops("D"))
    sch.split(fused, [None, 5])
    sch.reverse_compute_at("D", sch.get_loops("B")[0])
    x = np.random.default_rng(0).random((4, 8), dtype="float32")
    np.testing.assert_allclose(run_llvm(sch, [x, np.zeros((4, 8), "float32")])[1],
                               x * 2 + 1, rtol=1e-6)
    verify_trace_roundtrip(sch, f)
