"""pad_einsum over symbolic extents: a domain of extent n grows to (n + p - 1) // p * p
(TensorIR's form), the staged inputs zero-fill past n, the write-back keeps n."""

import numpy as np

import cuvil_tir as T
import schedules as S
from schedules.primitives.pad import PadEinsumError
from tests.schedules.testing import assert_refused, run, run_llvm, verify_trace_roundtrip


def _staged_matmul():
    n = T.size_var("n")
    A = T.placeholder((n, 8), name="A")
    B = T.placeholder((8, 6), name="B")
    k = T.reduce_axis((0, 8), name="k")
    C = T.compute((n, 6), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
    f = T.create_prim_func([A, B, C])
    sch = S.Schedule(f, debug=True)
    blk = sch.get_block("C")
    sch.cache_read(blk, 0, "global")
    sch.cache_read(blk, 1, "global")
    sch.cache_write(blk, 0, "global")
    return f, sch, blk


def test_pad_einsum_rounds_a_symbolic_extent_up():
    f, sch, blk = _staged_matmul()
    sch.pad_einsum(blk, [4, 4, 1])
    text = str(sch.func)
    assert 'A_global = T.alloc_buffer(((n + 3) // 4 * 4, 8), "float32")' in text
    assert 'C_global = T.alloc_buffer(((n + 3) // 4 * 4, 8), "float32")' in text
    assert "for ax0_2 in T.serial(n):" in text          # the write-back keeps n
    rng = np.random.default_rng(4)
    for size in (1, 5, 8, 13):
        a = rng.standard_normal((size, 8)).astype("float32")
        b = rng.standard_normal((8, 6)).astype("float32")
        for runner in (run, run_llvm):
            out = runner(sch, [a, b, np.zeros((size, 6), "float32")])
            np.testing.assert_allclose(out[2], a @ b, rtol=1e-5, atol=1e-5)
    verify_trace_roundtrip(sch, f)


PARTIAL = '''@T.prim_func
def main(A: T.Buffer((n + 1,), "float32"), C: T.Buffer((n,), "float32")):
    n = T.size_var("n")
    A_s = T.alloc_buffer((n + 1,), "float32")
    C_s = T.alloc_buffer((n,), "float32")
    for i in T.serial(n + 1):
        with T.block("A_s"):
            v = T.axis.spatial(n + 1, i)
            A_s[v] = A[v]
    for i in T.serial(n):
        with T.block("C"):
            v = T.axis.spatial(n, i)
            C_s[v] = A_s[v] * T.float32(2)
    for i in T.serial(n):
        with T.block("C_s"):
            v = T.axis.spatial(n, i)
            C[v] = C_s[v]
'''


def test_pad_einsum_refuses_a_symbolic_index_that_reaches_part_of_its_dimension():
    sch = S.Schedule(T.parse(PARTIAL))
    blk = sch.get_block("C")
    assert_refused(sch, lambda: sch.pad_einsum(blk, [4]),
                   r"pad_einsum: block 'C': index v of 'A_s' reaches n along a dimension "
                   r"of extent n \+ 1: with symbolic extents pad_einsum pads only an index "
                   r"that reaches the whole dimension", PadEinsumError)
