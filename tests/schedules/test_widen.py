"""widen: a staged copy stored in the exact wider dtype its readers convert it to."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from cuvil_tir.analysis import tree
from schedules.errors import StorageError
from schedules.primitives.widen import exact_conversion
from schedules.tune.measure import random_args
from schedules.tune.networks import matmul
from tests.schedules.testing import assert_refused, run, run_llvm, verify_trace_roundtrip


def body(sch, name):
    return str(tree.get(sch.func, tree.find_block(sch.func, name)).block.body)


def allocated(sch):
    return {b.name: b.dtype for _, s in tree.walk(sch.func)
            for b in getattr(s, "alloc_buffers", ())}


def staged_gemm(m, n, k, dtype, acc, wide):
    """The GEMM with both operands staged by cache_read and the copies widened to
    ``wide`` (None: not widened)."""
    f = matmul(m, n, k, dtype, acc)
    sch = S.Schedule(f)
    copies = [sch.cache_read("C", i, "global") for i in (0, 1)]
    if wide:
        for copy in copies:
            sch.widen(copy, wide)
    return f, sch


def as_float(arr, dtype):
    """The float32 values of an argument array (bfloat16 arrives as its uint16 bits)."""
    if dtype == "bfloat16":
        return (arr.astype("uint32") << 16).view("float32")
    return arr.astype("float32" if dtype != "int8" else "int32")


def test_bf16_gemm_copies_store_float32_and_the_gemm_reads_no_cast():
    f, sch = staged_gemm(32, 48, 64, "bfloat16", "float32", "float32")
    assert allocated(sch) == {"A_global": "float32", "B_global": "float32"}
    assert body(sch, "A_global") == 'A_global[v0, v1] = T.Cast("float32", A[v0, v1])'
    assert body(sch, "B_global") == 'B_global[v0, v1] = T.Cast("float32", B[v0, v1])'
    assert body(sch, "C").endswith(
        "C[v_i, v_j] = C[v_i, v_j] + A_global[v_i, v_k] * B_global[v_k, v_j]")
    verify_trace_roundtrip(sch, f)


@pytest.mark.parametrize("dtype,acc,m,n,k", [("bfloat16", "float32", 32, 48, 64),
                                             ("float16", "float32", 16, 24, 32),
                                             ("int8", "int32", 16, 24, 32)])
def test_widened_gemm_computes_what_the_cast_in_the_loop_computed(dtype, acc, m, n, k):
    _, plain = staged_gemm(m, n, k, dtype, acc, None)
    _, wide = staged_gemm(m, n, k, dtype, acc, acc)
    args = random_args(plain.func, 0)
    a, b = (as_float(x, dtype) for x in args[:2])
    want = run(plain, args)[2]
    # the same sums in the same order: exactly what the unwidened schedule computes
    np.testing.assert_array_equal(run(wide, args)[2], want)
    np.testing.assert_array_equal(run_llvm(wide, args)[2], want)
    if acc == "int32":
        np.testing.assert_array_equal(want, a @ b)
    else:
        np.testing.assert_allclose(want, a @ b, rtol=1e-5, atol=1e-4)


INT16_READER = '''
def f(A: T.Buffer((8,), "int8"), C: T.Buffer((8,), "int16")):
    for i in T.serial(8):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = T.Cast("int16", A[vi]) * T.int16(300)
'''


def test_an_int8_copy_widens_to_int16_for_an_int16_reader():
    f = T.parse(INT16_READER)
    sch = S.Schedule(f)
    sch.widen(sch.cache_read("C", 0, "global"), "int16")
    assert allocated(sch) == {"A_global": "int16"}
    a = np.arange(-4, 4, dtype="int8") * 30
    got = run(sch, [a, np.zeros(8, "int16")])[1]
    np.testing.assert_array_equal(got, (a.astype("int16") * 300).astype("int16"))


def bf16_copy_then(reader):
    """A bfloat16 ``A`` staged into ``A_global`` and read by ``reader(A_global, i)``."""
    A = T.placeholder((8,), "bfloat16", name="A")
    f = T.create_prim_func([A, T.compute((8,), lambda i: reader(A, i), name="C")])
    sch = S.Schedule(f)
    return sch, sch.cache_read("C", 0, "global")


def test_narrowing_or_inexact_conversions_are_refused():
    sch, copy = bf16_copy_then(lambda A, i: A[i].astype("float32"))
    for dtype in ("float16", "bfloat16", "int32"):
        assert_refused(sch, lambda dtype=dtype: sch.widen(copy, dtype),
                       f"widen: buffer 'A_global' of dtype bfloat16 to {dtype} is not an "
                       "exact widening: expected a wider scalar dtype that holds every "
                       r"value .*; to accept rounding use unsafe_set_dtype", StorageError)
    assert_refused(sch, lambda: sch.widen(copy, "float32x4"),
                   "bfloat16 to float32x4 is not an exact widening", StorageError)
    assert_refused(sch, lambda: sch.widen(copy, "float33"),
                   "widen: dtype 'float33' is not a dtype; expected a name such as "
                   "'float32'", StorageError)


def test_a_read_not_under_the_cast_is_refused():
    sch, copy = bf16_copy_then(lambda A, i: A[i])      # a bfloat16 output: no cast
    assert_refused(sch, lambda: sch.widen(copy, "float32"),
                   r"widen: block 'C' reads A_global\[v_i\] not as "
                   r'T.Cast\("float32", A_global\[...\]\); expected every read of '
                   "'A_global' converted to float32, so that storing it widened changes "
                   "no value", StorageError)
    sch, copy = bf16_copy_then(lambda A, i: A[i].astype("float64"))
    assert_refused(sch, lambda: sch.widen(copy, "float32"),
                   r"block 'C' reads A_global\[v_i\] not as T.Cast\(\"float32\"",
                   StorageError)


def test_a_parameter_is_refused():
    sch, _ = bf16_copy_then(lambda A, i: A[i].astype("float32"))
    assert_refused(sch, lambda: sch.widen("C", "float64"),
                   "widen: buffer 'C' written by block 'C' is not allocated in the "
                   r"function \(a parameter's dtype is the caller's\); stage it with "
                   "cache_read first", StorageError)


EXTERN = '''
def f(A: T.Buffer((8,), "bfloat16"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,), "bfloat16")
    for i in T.serial(8):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi]
    with T.block("C"):
        T.reads(B[0:8])
        T.writes(C[0:8])
        T.evaluate(T.call_extern("int32", "widen8", C[0:8], B[0:8]))
'''

TWO_WRITES = '''
def f(A: T.Buffer((8,), "bfloat16"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,), "bfloat16")
    D = T.alloc_buffer((8,), "bfloat16")
    for i in T.serial(8):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi]
            D[vi] = A[vi]
    for i in T.serial(8):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = T.Cast("float32", B[vi]) + T.Cast("float32", D[vi])
'''


def test_a_buffer_an_extern_call_reads_is_refused():
    sch = S.Schedule(T.parse(EXTERN))
    assert_refused(sch, lambda: sch.widen("B", "float32"),
                   r"widen: buffer 'B' is passed to \['widen8'\], which read\(s\) its "
                   "memory as bfloat16", StorageError)


def test_a_block_writing_two_buffers_is_refused():
    sch = S.Schedule(T.parse(TWO_WRITES))
    assert_refused(sch, lambda: sch.widen("B", "float32"),
                   r"widen: block 'B' writes 2 buffers \['B', 'D'\]; expected the "
                   "one-buffer copy of a cache_read", StorageError)


def test_exact_conversions():
    exact = [("bfloat16", "float32"), ("float16", "float32"), ("float16", "float64"),
             ("int8", "int16"), ("int8", "int32"), ("uint8", "int16"), ("uint8", "uint32"),
             ("int8", "float16"), ("int16", "float32")]
    inexact = [("float32", "float16"), ("float16", "bfloat16"), ("bfloat16", "float16"),
               ("int8", "uint16"), ("int32", "float32"), ("int32", "int16"),
               ("float32", "float32"), ("float32", "int32"), ("bool", "int8")]
    assert all(exact_conversion(s, d) for s, d in exact)
    assert not any(exact_conversion(s, d) for s, d in inexact)
