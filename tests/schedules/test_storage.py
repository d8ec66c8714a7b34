"""set_scope and storage_align: numerics unchanged, IR records the storage, legality."""

import pytest

import schedules as S
from cuvil_tir.analysis import tree
from schedules.primitives.storage import aligned_strides
from schedules.errors import StorageError
from tests import workloads
from tests.schedules.testing import assert_refused, check_workload, verify_trace_roundtrip


def alloc(sch, name):
    return next(b for b in sch.func.body.block.alloc_buffers if b.name == name)


@pytest.mark.parametrize("scope", ["local", "shared", "global"])
def test_set_scope(scope):
    w = workloads.matmul_bias_relu(4, 4, 4)
    sch = S.Schedule(w.func)
    sch.set_scope(sch.get_block("C"), 0, scope)
    buf = alloc(sch, "C")
    assert buf.scope == scope
    d = tree.get(sch.func, tree.find_block(sch.func, "D")).block
    assert d.reads[0].buffer is buf
    if scope != "global":
        assert f'C = T.alloc_buffer((4, 4), "float32", scope="{scope}")' in str(sch.func)
    # "shared" is a GPU memory: a CPU build refuses it, the interpreter runs it
    check_workload(sch, w, targets=() if scope == "shared" else ("llvm", "c"))
    verify_trace_roundtrip(sch, w.func)


def test_set_scope_of_cache():
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    cc = sch.cache_read(sch.get_block("C"), 0, "local")
    sch.set_scope(cc, 0, "shared")
    assert alloc(sch, "A_local").scope == "shared"
    check_workload(sch, w, targets=())   # "shared" is a GPU memory: interpreter only
    verify_trace_roundtrip(sch, w.func)


def test_storage_align():
    w = workloads.matmul_bias_relu(4, 6, 4)
    sch = S.Schedule(w.func)
    sch.storage_align(sch.get_block("C"), 0, 0, 4, 1)
    buf = alloc(sch, "C")
    assert [s.value for s in buf.strides] == [9, 1]
    assert 9 % 4 == 1
    blk = tree.get(sch.func, tree.find_block(sch.func, "C")).block
    assert dict(blk.annotations)["buffer_dim_align"] == ((0, 0, 4, 1),)
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_storage_align_twice_same_axis_replaces():
    w = workloads.matmul_bias_relu(4, 6, 4)
    sch = S.Schedule(w.func)
    sch.storage_align(sch.get_block("C"), 0, 0, 4, 1)
    sch.storage_align(sch.get_block("C"), 0, 0, 8, 0)
    assert [s.value for s in alloc(sch, "C").strides] == [8, 1]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_aligned_strides_three_dims():
    # inner axis 1 aligned first, the outer stride builds on the padded one
    assert aligned_strides((2, 3, 5), {1: (4, 2)}) == (18, 6, 1)
    assert aligned_strides((2, 3, 5), {0: (16, 0), 1: (4, 2)}) == (32, 6, 1)
    assert aligned_strides((3, 4), {}) == (4, 1)


# legality --------------------------------------------------------------------------------

def test_set_scope_parameter_is_refused():
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    blk = sch.get_block("C")
    assert_refused(sch, lambda: sch.set_scope(blk, 0, "shared"),
                   r"set_scope: buffer 'C' \(write 0 of block 'C'\) is a function "
                   r"parameter", StorageError)


def test_set_scope_index_out_of_range_is_refused():
    w = workloads.matmul_bias_relu(4, 4, 4)
    sch = S.Schedule(w.func)
    blk = sch.get_block("C")
    assert_refused(sch, lambda: sch.set_scope(blk, 1, "shared"),
                   r"set_scope: buffer_index 1 is out of range: block 'C' writes 1 "
                   r"buffer\(s\) \['C'\]", StorageError)


def test_storage_align_parameter_is_refused():
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    blk = sch.get_block("C")
    assert_refused(sch, lambda: sch.storage_align(blk, 0, 0, 4, 1),
                   r"storage_align: buffer 'C' .* is a function parameter", StorageError)


def test_storage_align_bad_axis_is_refused():
    w = workloads.matmul_bias_relu(4, 4, 4)
    sch = S.Schedule(w.func)
    blk = sch.get_block("C")
    assert_refused(sch, lambda: sch.storage_align(blk, 0, 2, 4, 1),
                   r"storage_align: axis 2 is out of range for buffer 'C' of 2 "
                   r"dimension\(s\)", StorageError)


@pytest.mark.parametrize("factor,offset", [(0, 0), (4, 4), (4, -1)])
def test_storage_align_bad_factor_offset_is_refused(factor, offset):
    w = workloads.matmul_bias_relu(4, 4, 4)
    sch = S.Schedule(w.func)
    blk = sch.get_block("C")
    assert_refused(sch, lambda: sch.storage_align(blk, 0, 0, factor, offset),
                   rf"storage_align: expected factor > 0 and 0 <= offset < factor, got "
                   rf"factor={factor}, offset={offset}", StorageError)
