"""Inlining through access maps TensorIR's iter maps accept: unit block variables that
no index names, and indices that divide one fused sum of several variables."""

import numpy as np

import cuvil_tir as T
import schedules as S
from schedules.errors import InlineError
from tests.schedules.testing import assert_refused, run, verify_trace_roundtrip


def _fused_consumer():
    """B (16, 8) read back as C (2, 4, 4, 4) through one fused sum of C's indices."""
    A = T.placeholder((16, 8), name="A")
    B = T.compute((16, 8), lambda i, j: A[i, j] * 2.0, name="B")

    def flat(i, j, k, m):
        f = ((i * 4 + j) * 4 + k) * 4 + m
        return B[f // 8, f % 8] + 1.0
    C = T.compute((2, 4, 4, 4), flat, name="C")
    return T.create_prim_func([A, C])


def test_reverse_compute_inline_through_a_fused_load():
    f = _fused_consumer()
    sch = S.Schedule(f, debug=True)
    sch.reverse_compute_inline(sch.get_block("C"))
    text = str(sch.func)
    assert [b for b in ("B", "C") if f'T.block("{b}")' in text] == ["B"]
    assert "T.where" not in text          # the load fills its box: no guard needed
    a = np.random.default_rng(0).standard_normal((16, 8)).astype("float32")
    out = run(sch, [a, np.zeros((2, 4, 4, 4), "float32")])
    np.testing.assert_allclose(out[1], (a * 2 + 1).reshape(2, 4, 4, 4), rtol=1e-6)
    verify_trace_roundtrip(sch, f)


def _unit_var_chain():
    """B (8, 4) -> C (2, 4, 4) = B[i * 4 + j, k] -> D (1, 2, 4, 4) = C[j, k, m]."""
    A = T.placeholder((8, 4), name="A")
    B = T.compute((8, 4), lambda i, j: A[i, j] * 2.0, name="B")
    C = T.compute((2, 4, 4), lambda i, j, k: B[i * 4 + j, k] + 1.0, name="C")
    D = T.compute((1, 2, 4, 4), lambda u, i, j, k: C[i, j, k] * 3.0, name="D")
    return T.create_prim_func([A, D])


def test_reverse_compute_inline_consumer_with_a_unit_block_variable():
    for order in (("C", "D"), ("D", "C")):
        f = _unit_var_chain()
        sch = S.Schedule(f, debug=True)
        for name in order:
            sch.reverse_compute_inline(sch.get_block(name))
        text = str(sch.func)
        assert 'T.block("C")' not in text and 'T.block("D")' not in text
        assert "D[0, " in text and "T.where" not in text
        a = np.arange(32, dtype="float32").reshape(8, 4)
        out = run(sch, [a, np.zeros((1, 2, 4, 4), "float32")])
        np.testing.assert_allclose(out[1], ((a * 2 + 1) * 3).reshape(1, 2, 4, 4))
        verify_trace_roundtrip(sch, f)


def test_compute_inline_producer_storing_through_a_fused_sum():
    # B stored into a (4, 8) buffer through the fused sum of its three indices
    text = '''
@T.prim_func
def g(A: T.Buffer((2, 4, 4), "float32"), C: T.Buffer((4, 8), "float32")):
    B = T.alloc_buffer((4, 8), "float32")
    for i, j, k in T.grid(2, 4, 4):
        with T.block("B"):
            vi, vj, vk = T.axis.remap("SSS", [i, j, k])
            B[((vi * 4 + vj) * 4 + vk) // 8, ((vi * 4 + vj) * 4 + vk) % 8] = A[vi, vj, vk] + 1.0
    for i, j in T.grid(4, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] * 2.0
'''
    f = T.parse(text)
    sch = S.Schedule(f, debug=True)
    sch.compute_inline(sch.get_block("B"))
    assert 'T.block("B")' not in str(sch.func)
    a = np.arange(32, dtype="float32").reshape(2, 4, 4)
    out = run(sch, [a, np.zeros((4, 8), "float32")])
    np.testing.assert_allclose(out[1], ((a + 1) * 2).reshape(4, 8))
    verify_trace_roundtrip(sch, f)


def test_reverse_compute_inline_through_a_modulo_that_never_wraps():
    # (i * 4 + j) % 16 is i * 4 + j over the domain (i < 4, j < 4): the map is
    # injective, and the inlined producer writes only where the consumer loads
    A = T.placeholder((16, 4), name="A")
    B = T.compute((16, 4), lambda i, j: A[i, j] * 2.0, name="B")
    C = T.compute((4, 4), lambda i, j: B[(i * 4 + j) % 16, i], name="C")
    f = T.create_prim_func([A, C])
    sch = S.Schedule(f)
    sch.reverse_compute_inline(sch.get_block("C"))
    a = np.arange(64, dtype="float32").reshape(16, 4)
    out = run(sch, [a, np.zeros((4, 4), "float32")])
    want = [[a[i * 4 + j, i] * 2 for j in range(4)] for i in range(4)]
    np.testing.assert_array_equal(out[1], np.array(want, "float32"))
    verify_trace_roundtrip(sch, f)


def test_reverse_compute_inline_refuses_a_fused_sum_whose_variable_is_also_outside():
    A = T.placeholder((16, 8), name="A")
    B = T.compute((16, 8), lambda i, j: A[i, j] * 2.0, name="B")
    C = T.compute((8, 4), lambda i, j: B[(i * 4 + j) % 16, i], name="C")
    f = T.create_prim_func([A, C])
    sch = S.Schedule(f)
    blk = sch.get_block("C")
    assert_refused(sch, lambda: sch.reverse_compute_inline(blk),
                   r"reverse_compute_inline: block 'C' loads B \[.*\]: the index map is "
                   r"not injective \(block variable v_i appears both inside a fused sum "
                   r"and outside it\)", InlineError)


def test_reverse_compute_inline_refuses_a_fused_sum_that_is_not_injective():
    A = T.placeholder((8, 4), name="A")
    B = T.compute((8, 4), lambda i, j: A[i, j] * 2.0, name="B")
    # (i * 2 + j) with j < 4: two (i, j) pairs reach one element
    C = T.compute((4, 4), lambda i, j: B[(i * 2 + j) // 4, (i * 2 + j) % 4], name="C")
    f = T.create_prim_func([A, C])
    sch = S.Schedule(f)
    blk = sch.get_block("C")
    assert_refused(sch, lambda: sch.reverse_compute_inline(blk),
                   r"reverse_compute_inline: block 'C' loads B \[.*\]: the index map is "
                   r"not injective", InlineError)
