"""reverse_compute_inline of a plain copy into a reduction: the reduction accumulates
straight into the copy's buffer (a transposed matmul result written in place)."""

import numpy as np

import cuvil_tir as T
import schedules as S
from schedules.errors import InlineError
from tests.schedules.testing import assert_refused, run, run_llvm, verify_trace_roundtrip


def _matmul_then(consumer):
    A = T.placeholder((4, 5), name="A")
    B = T.placeholder((5, 3), name="B")
    k = T.reduce_axis((0, 5), name="k")
    C = T.compute((4, 3), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = T.compute((3, 4), lambda j, i: consumer(C, i, j), name="D")
    return T.create_prim_func([A, B, D])


def test_a_transposing_copy_is_inlined_into_the_reduction():
    f = _matmul_then(lambda C, i, j: C[i, j])
    sch = S.Schedule(f, debug=True)
    sch.reverse_compute_inline(sch.get_block("D"))
    text = str(sch.func)
    assert 'T.block("D")' not in text and "alloc_buffer" not in text
    assert "D[v_j, v_i] = T.float32(0)" in text
    assert "D[v_j, v_i] = D[v_j, v_i] + A[v_i, v_k] * B[v_k, v_j]" in text
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 5)).astype("float32")
    b = rng.standard_normal((5, 3)).astype("float32")
    for runner in (run, run_llvm):
        out = runner(sch, [a, b, np.zeros((3, 4), "float32")])
        np.testing.assert_allclose(out[2], (a @ b).T, rtol=1e-5, atol=1e-5)
    verify_trace_roundtrip(sch, f)


def test_a_consumer_that_computes_on_the_result_is_refused():
    f = _matmul_then(lambda C, i, j: C[i, j] * 2.0)
    sch = S.Schedule(f)
    blk = sch.get_block("D")
    assert_refused(sch, lambda: sch.reverse_compute_inline(blk),
                   r"reverse_compute_inline: the producer 'C' of block 'D' is not a "
                   r"complete block \(a reduction\), and the consumer is not a plain copy "
                   r"of its result", InlineError)


def test_a_copy_of_part_of_the_reduction_is_refused():
    A = T.placeholder((4, 5), name="A")
    k = T.reduce_axis((0, 5), name="k")
    C = T.compute((4,), lambda i: T.sum(A[i, k], axis=k), name="C")
    D = T.compute((2,), lambda i: C[i + 1], name="D")
    f = T.create_prim_func([A, D])
    sch = S.Schedule(f)
    blk = sch.get_block("D")
    assert_refused(sch, lambda: sch.reverse_compute_inline(blk),
                   r"block 'D' copies only part of what the reduction 'C' computes \(it "
                   r"would need the guard .*\), and a reduction's steps cannot be guarded",
                   InlineError)
