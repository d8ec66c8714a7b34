"""``cache_inplace``: a buffer a block reads and writes, staged through a copy in and a
copy back around the block (TVM's primitive); and the cache_read / cache_write forms
that follow it in TVM's test (a reader before the writer, in-place)."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from schedules.errors import CacheStageError
from tests.schedules.testing import (assert_refused, run, run_llvm, verify_text_roundtrip,
                                     verify_trace_roundtrip)

INPLACE_CALL = '''
@T.prim_func
def inplace_call(data_io: T.Buffer((64,), "int32")):
    for i0 in T.serial(1):
        with T.block("ext_call"):
            T.reads(data_io[0:64])
            T.writes(data_io[0:64])
            T.evaluate(T.call_extern("call_impl", data_io.data, dtype=""))
'''

INPLACE_CALL_CACHED = '''
@T.prim_func
def inplace_call(data_io: T.Buffer((64,), "int32")):
    data_io_local = T.alloc_buffer((64,), "int32", scope="local")
    for i0 in T.serial(1):
        for ax0 in T.serial(64):
            with T.block("data_io_local"):
                v0 = T.axis.spatial(64, ax0)
                data_io_local[v0] = data_io[v0]
        with T.block("ext_call"):
            T.reads(data_io_local[0:64])
            T.writes(data_io_local[0:64])
            T.evaluate(T.call_extern("call_impl", data_io_local.data, dtype=""))
        for ax0 in T.serial(64):
            with T.block("data_io_local_1"):
                v0 = T.axis.spatial(64, ax0)
                data_io[v0] = data_io_local[v0]
'''

# TVM's test_cache_inplace goes on with a cache_read of the copy in and a cache_write
# of the copy back: the reader runs before the writer (in a loop of one iteration)
INPLACE_CALL_CHAIN = '''
@T.prim_func
def inplace_call(data_io: T.Buffer((64,), "int32")):
    data_io_local = T.alloc_buffer((64,), "int32", scope="local")
    data_io_global = T.alloc_buffer((64,), "int32")
    data_io_global_1 = T.alloc_buffer((64,), "int32")
    for ax0 in T.serial(64):
        with T.block("data_io_global"):
            v0 = T.axis.spatial(64, ax0)
            data_io_global[v0] = data_io[v0]
    for i0 in T.serial(1):
        for ax0 in T.serial(64):
            with T.block("data_io_local"):
                v0 = T.axis.spatial(64, ax0)
                data_io_local[v0] = data_io_global[v0]
        with T.block("ext_call"):
            T.reads(data_io_local[0:64])
            T.writes(data_io_local[0:64])
            T.evaluate(T.call_extern("call_impl", data_io_local.data, dtype=""))
        for ax0 in T.serial(64):
            with T.block("data_io_local_1"):
                v0 = T.axis.spatial(64, ax0)
                data_io_global_1[v0] = data_io_local[v0]
    for ax0 in T.serial(64):
        with T.block("data_io_global_1"):
            v0 = T.axis.spatial(64, ax0)
            data_io[v0] = data_io_global_1[v0]
'''

# each element doubled into its right neighbour, in order: a true in-place recurrence,
# whose block writes an element it does not read
SHIFT = '''
@T.prim_func
def shift(A: T.Buffer((10,), "float32")):
    for i in T.serial(9):
        with T.block("S"):
            vi = T.axis.spatial(9, i)
            A[vi + 1] = A[vi] * T.float32(2) + A[vi + 1]
'''


def assert_ir(got, text):
    assert T.structural_equal(got, T.parse(text)), got


def test_tvm_example_exact_ir():
    f = T.parse(INPLACE_CALL)
    sch = S.Schedule(f)
    blocks = sch.cache_inplace(sch.get_block("ext_call"), 0, "local")
    assert blocks == [S.BlockRV("data_io_local"), S.BlockRV("data_io_local_1")]
    assert_ir(sch.func, INPLACE_CALL_CACHED)
    verify_trace_roundtrip(sch, f)


def test_tvm_chain_with_cache_read_and_cache_write_exact_ir():
    f = T.parse(INPLACE_CALL)
    sch = S.Schedule(f)
    cin, cout = sch.cache_inplace("ext_call", 0, "local")
    sch.cache_read(cin, 0, "global", consumer_blocks=[cin])
    sch.cache_write(cout, 0, "global")
    assert_ir(sch.func, INPLACE_CALL_CHAIN)
    verify_trace_roundtrip(sch, f)


def test_recurrence_under_split_loops_agrees_with_numpy():
    f = T.parse(SHIFT)
    sch = S.Schedule(f)
    io, ii = sch.split(sch.get_loops("S")[0], [None, 4])
    sch.cache_inplace("S", 0, "local")
    verify_trace_roundtrip(sch, f)
    a = np.random.default_rng(0).standard_normal(10).astype("float32")
    want = a.copy()
    for i in range(9):
        want[i + 1] += want[i] * 2
    for runner in (run, run_llvm):
        np.testing.assert_allclose(runner(sch, [a])[0], want, rtol=1e-5)
        np.testing.assert_allclose(runner(f, [a])[0], want, rtol=1e-5)


def test_a_block_writing_more_than_it_reads_copies_its_whole_region():
    f = T.parse(SHIFT)
    sch = S.Schedule(f)
    sch.cache_inplace("S", 0, "local")
    cin = sch.get("A_local")
    assert str(cin.reads[0].region[0].min) == "v0"
    copy_in_loop = sch.get(sch.get_loops("A_local")[-1])
    assert copy_in_loop.extent.value == 2       # A[i] and A[i + 1]
    verify_text_roundtrip(sch.func)


def test_block_that_only_reads_the_buffer_is_refused():
    A = T.placeholder((8,), name="A")
    f = T.create_prim_func([A, T.compute((8,), lambda i: A[i] + 1.0, name="B")])
    sch = S.Schedule(f)
    assert_refused(sch, lambda: sch.cache_inplace("B", 0, "local"),
                   "block 'B' reads 'A' but does not write it \\(its writes: \\['B'\\]\\); "
                   "cache_inplace stages a buffer the block both reads and writes",
                   CacheStageError)


def test_bad_index_scope_and_root_are_refused():
    sch = S.Schedule(T.parse(SHIFT))
    assert_refused(sch, lambda: sch.cache_inplace("S", 3, "local"),
                   "read_buffer_index 3 is out of range: block 'S' reads 1 buffer",
                   CacheStageError)
    assert_refused(sch, lambda: sch.cache_inplace("S", 0, "locla"),
                   "no registered target has a memory 'locla'")
    assert_refused(sch, lambda: sch.cache_inplace("root", 0, "local"),
                   "the root block has no place around it", CacheStageError)


def test_cache_write_with_a_reader_before_the_writer_copies_back_after_it():
    # Y reads A before W overwrites it: Y keeps reading A, the copy back follows W
    f = T.parse('''
@T.prim_func
def f(A: T.Buffer((8,), "float32"), Y: T.Buffer((8,), "float32")):
    for i in T.serial(8):
        with T.block("Y"):
            vi = T.axis.spatial(8, i)
            Y[vi] = A[vi] + T.float32(1)
    for i in T.serial(8):
        with T.block("W"):
            vi = T.axis.spatial(8, i)
            A[vi] = T.float32(7)
''')
    sch = S.Schedule(f)
    sch.cache_write("W", 0, "local")
    assert [b.block.name for b in T.analysis.tree.blocks_under(sch.func.body)][1:] == \
        ["Y", "W", "A_local"]
    a = np.arange(8, dtype="float32")
    for runner in (run, run_llvm):
        got = runner(sch, [a, np.zeros(8, "float32")])
        np.testing.assert_array_equal(got[1], a + 1)
        np.testing.assert_array_equal(got[0], np.full(8, 7, "float32"))


@pytest.mark.parametrize("extent", [1, 2])
def test_cache_read_before_a_writer_in_one_loop_needs_one_iteration(extent):
    f = T.parse(f'''
@T.prim_func
def f(A: T.Buffer((4,), "float32"), Y: T.Buffer((4,), "float32")):
    for t in T.serial({extent}):
        for i in T.serial(4):
            with T.block("Y"):
                vt = T.axis.spatial({extent}, t)
                vi = T.axis.spatial(4, i)
                Y[vi] = Y[vi] + A[vi]
        for i in T.serial(4):
            with T.block("W"):
                vt = T.axis.spatial({extent}, t)
                vi = T.axis.spatial(4, i)
                A[vi] = A[vi] * T.float32(2)
''')
    sch = S.Schedule(f)
    if extent == 2:
        # the second iteration reads what the first wrote: no copy made once is right
        assert_refused(sch, lambda: sch.cache_read("Y", 1, "global", consumer_blocks=["Y"]),
                       "a reader of the buffer runs before", CacheStageError)
        return
    sch.cache_read("Y", 1, "global", consumer_blocks=["Y"])
    a = np.arange(4, dtype="float32")
    for runner in (run, run_llvm):
        got = runner(sch, [a, np.ones(4, "float32")])
        np.testing.assert_array_equal(got[1], 1 + a)
        np.testing.assert_array_equal(got[0], a * 2)
