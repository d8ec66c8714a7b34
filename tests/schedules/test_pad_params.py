"""pad_einsum of a block on function parameters: padded copies (X_pad) zero-filled
before the block, the output's valid part copied back after; numerics against numpy
for constant and symbolic extents, interpreted and compiled."""

import numpy as np

import cuvil_tir as T
import schedules as S
from schedules.primitives.pad import PadEinsumError
from tests.schedules.testing import assert_refused, run, run_llvm, verify_trace_roundtrip


def matmul(n, m, k):
    A = T.placeholder((n, k), name="A")
    B = T.placeholder((k, m), name="B")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((n, m), lambda i, j: T.sum(A[i, r] * B[r, j], axis=r), name="C")
    return T.create_prim_func([A, B, C])


def test_parameters_are_padded_through_copies():
    f = matmul(20, 12, 10)
    sch = S.Schedule(f, debug=True)
    sch.pad_einsum(sch.get_block("C"), [16, 16, 16])
    allocs = sch.func.body.block.alloc_buffers
    assert [(b.name, [int(d) for d in b.shape]) for b in allocs] == [
        ("A_pad", [32, 16]), ("B_pad", [16, 16]), ("C_pad", [32, 16])]
    text = str(sch.func)
    assert "A_pad[v0, v1] = T.if_then_else(v0 < 20 and v1 < 10, A[v0, v1], T.float32(0))" \
        in text
    assert "C[v0_2, v1_2] = C_pad[v0_2, v1_2]" in text
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((20, 10)).astype("float32"), \
        rng.standard_normal((10, 12)).astype("float32")
    for runner in (run, run_llvm):
        out = runner(sch, [a, b, np.zeros((20, 12), "float32")])
        np.testing.assert_allclose(out[2], a @ b, rtol=1e-5, atol=1e-5)
    verify_trace_roundtrip(sch, f)


def test_symbolic_parameter_rows():
    n = T.size_var("n")
    A = T.placeholder((n, 8), name="A")
    B = T.placeholder((8, 6), name="B")
    r = T.reduce_axis((0, 8), name="k")
    f = T.create_prim_func([A, B, T.compute((n, 6), lambda i, j: T.sum(A[i, r] * B[r, j],
                                                                        axis=r), name="C")])
    sch = S.Schedule(f)
    sch.pad_einsum(sch.get_block("C"), [4, 1, 1])
    assert 'A_pad = T.alloc_buffer(((n + 3) // 4 * 4, 8), "float32")' in str(sch.func)
    rng = np.random.default_rng(6)
    for size in (1, 5, 8):
        a = rng.standard_normal((size, 8)).astype("float32")
        b = rng.standard_normal((8, 6)).astype("float32")
        for runner in (run, run_llvm):
            out = runner(sch, [a, b, np.zeros((size, 6), "float32")])
            np.testing.assert_allclose(out[2], a @ b, rtol=1e-5, atol=1e-5)


def test_an_update_without_init_into_a_parameter_is_refused():
    sch = S.Schedule(matmul(20, 12, 10))
    c = sch.get_block("C")
    sch.decompose_reduction(c, sch.get_loops(c)[0])
    assert_refused(sch, lambda: sch.pad_einsum(c, [16, 16, 16]),
                   r"pad_einsum: block 'C_update' updates the parameter 'C' without an init: its "
                   r"padded copy would start uninitialised", PadEinsumError)
