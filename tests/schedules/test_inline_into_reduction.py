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


def test_a_bias_becomes_the_start_of_the_sum():
    bias = T.placeholder((4, 3), name="bias")
    A = T.placeholder((4, 5), name="A")
    B = T.placeholder((5, 3), name="B")
    k = T.reduce_axis((0, 5), name="k")
    C = T.compute((4, 3), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = T.compute((4, 3), lambda i, j: bias[i, j] + C[i, j], name="D")
    f = T.create_prim_func([A, B, bias, D])
    sch = S.Schedule(f, debug=True)
    assert_refused(sch, lambda: sch.reverse_compute_inline("D"),
                   r"reverse_compute_inline: block 'D' adds a value to the result of the "
                   r"reduction 'C': that changes the reduction's init, which is what "
                   r"fuse_reduction_epilogue\('C', 'D'\) does", InlineError)
    sch.fuse_reduction_epilogue("C", "D")
    text = str(sch.func)
    assert 'T.block("D")' not in text
    assert "D[v_i, v_j] = bias[v_i, v_j]" in text
    assert "T.reads(bias[v_i, v_j], A[v_i, v_k], B[v_k, v_j])" in text
    rng = np.random.default_rng(3)
    a, b, c = (rng.standard_normal(s).astype("float32") for s in ((4, 5), (5, 3), (4, 3)))
    for runner in (run, run_llvm):
        out = runner(sch, [a, b, c, np.zeros((4, 3), "float32")])
        np.testing.assert_allclose(out[3], a @ b + c, rtol=1e-5, atol=1e-5)
    verify_trace_roundtrip(sch, f)


def test_an_epilogue_that_is_not_linear_is_refused():
    f = _matmul_then(lambda C, i, j: T.max(C[i, j], 0.0))
    sch = S.Schedule(f)
    assert_refused(sch, lambda: sch.fuse_reduction_epilogue("C", "D"),
                   r"fuse_reduction_epilogue: the producer 'C' of block 'D' is not a "
                   r"complete block \(a reduction\), and the consumer is neither a plain "
                   r"copy of its result nor the result plus a value \(a bias a sum can "
                   r"start from\); other epilogues \(ReLU, clipping\) would change the "
                   r"result if applied per reduction step", InlineError)


def test_fuse_reduction_epilogue_names_the_reduction_it_needs():
    A = T.placeholder((4,), name="A")
    B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
    C = T.compute((4,), lambda i: B[i] + 1.0, name="C")
    f = T.create_prim_func([A, C])
    sch = S.Schedule(f)
    assert_refused(sch, lambda: sch.fuse_reduction_epilogue("B", "C"),
                   r"fuse_reduction_epilogue: block 'B' is not a reduction block \(it has no "
                   r"init\); use reverse_compute_inline to fold 'C' into it", InlineError)
    k = T.reduce_axis((0, 4), name="k")
    S1 = T.compute((1,), lambda i: T.sum(A[k], axis=k), name="S1")
    E = T.compute((1,), lambda i: S1[i] + 1.0, name="E")
    g = T.create_prim_func([A, E, C])
    sch = S.Schedule(g)
    assert_refused(sch, lambda: sch.fuse_reduction_epilogue("S1", "C"),
                   r"fuse_reduction_epilogue: block 'C' reads no buffer that block 'S1' "
                   r"writes", InlineError)


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
