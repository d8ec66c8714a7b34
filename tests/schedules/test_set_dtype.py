"""unsafe_set_dtype: an intermediate buffer stored in another dtype, with casts."""

import numpy as np

import cuvil_tir as T
import schedules as S
from cuvil_tir.analysis import tree
from schedules.errors import ScheduleArgumentError, StorageError
from tests.schedules.testing import assert_refused, run, run_llvm, verify_trace_roundtrip


def body(sch, name):
    return tree.get(sch.func, tree.find_block(sch.func, name)).block.body


def chain(n=16):
    A = T.placeholder((n,), name="A")
    B = T.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = T.compute((n,), lambda i: B[i] + 1.0, name="C")
    return T.create_prim_func([A, C])


def test_float16_intermediate_casts_stores_and_loads():
    f = chain()
    sch = S.Schedule(f)
    sch.unsafe_set_dtype("B", 0, "float16")
    (buf,) = sch.func.body.block.alloc_buffers
    assert buf.dtype == "float16"
    assert str(body(sch, "B")) == \
        'B[v_i] = T.Cast("float16", A[v_i] * T.float32(2))'
    assert str(body(sch, "C")) == \
        'C[v_i] = T.Cast("float32", B[v_i]) + T.float32(1)'
    a = (np.arange(16, dtype="float32") / 3).astype("float32")
    want = (a * 2).astype("float16").astype("float32") + 1
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [a, np.zeros(16, "float32")])[1], want)
    verify_trace_roundtrip(sch, f)


def test_int8_intermediate_of_an_int_chain_wraps_as_the_cast_does():
    A = T.placeholder((8,), "int32", name="A")
    B = T.compute((8,), lambda i: A[i] + 100, name="B")
    C = T.compute((8,), lambda i: B[i] * 2, name="C")
    f = T.create_prim_func([A, C])
    sch = S.Schedule(f)
    sch.unsafe_set_dtype("B", 0, "int8")
    a = np.arange(8, dtype="int32") * 10
    want = (a + 100).astype("int8").astype("int32") * 2
    np.testing.assert_array_equal(run(sch, [a, np.zeros(8, "int32")])[1], want)
    verify_trace_roundtrip(sch, f)


def test_same_dtype_changes_nothing():
    sch = S.Schedule(chain())
    before = sch.func
    sch.unsafe_set_dtype("B", 0, "float32")
    assert sch.func is before


def test_refusals():
    sch = S.Schedule(chain())
    assert_refused(sch, lambda: sch.unsafe_set_dtype("C", 0, "float16"),
                   r"unsafe_set_dtype: buffer 'C' \(write 0 of block 'C'\) is a function "
                   "parameter; its dtype is the caller's", StorageError)
    assert_refused(sch, lambda: sch.unsafe_set_dtype("B", 1, "float16"),
                   r"block 'B' has 1 write buffer\(s\) \['B'\]; buffer_index 1 is out of "
                   "range", ScheduleArgumentError)
    assert_refused(sch, lambda: sch.unsafe_set_dtype("B", -1, "float16"),
                   "argument 2, 'buffer_index' to unsafe_set_dtype: expected a "
                   "non-negative int", ScheduleArgumentError)
    assert_refused(sch, lambda: sch.unsafe_set_dtype("B", 0, "float17"),
                   "unsafe_set_dtype: dtype 'float17' is not a dtype", StorageError)
    assert_refused(sch, lambda: sch.unsafe_set_dtype("B", 0, "float32x4"),
                   r"buffer 'B' of dtype float32 to float32x4: only scalar element dtypes "
                   "change", StorageError)


EXTERN = '''
def f(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,), "float32")
    for i in T.serial(8):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] * T.float32(2)
    with T.block("C"):
        T.reads(B[0:8])
        T.writes(C[0:8])
        T.evaluate(T.call_extern("int32", "copy8", C[0:8], B[0:8]))
'''


def test_a_buffer_an_extern_call_reads_keeps_its_dtype_and_layout():
    sch = S.Schedule(T.parse(EXTERN))
    assert_refused(sch, lambda: sch.unsafe_set_dtype("B", 0, "float16"),
                   r"unsafe_set_dtype: buffer 'B' is passed to \['copy8'\], which read\(s\) its "
                   "memory as float32", StorageError)
    assert_refused(sch, lambda: sch.transform_layout("B", 0, lambda i: (i % 2, i // 2)),
                   r"transform_layout: buffer 'B' is passed to \['copy8'\], which index\(es\) "
                   "its memory in the current layout")
