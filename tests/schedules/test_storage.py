"""set_scope and storage_align: numerics unchanged, IR records the storage, legality."""

import numpy as np
import pytest

import cuvil_tir as T

import schedules as S
from cuvil_tir.analysis import tree
from cuvil_tir.transform.storage_align import aligned_strides
from schedules.errors import StorageError
from tests import workloads
from tests.schedules.testing import (assert_refused, check_workload, run, run_llvm,
                                     verify_trace_roundtrip)


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


def lowered_alloc(func, name, target=None):
    """The Allocate of buffer ``name`` in ``func`` lowered for ``target`` (flat)."""
    from cuvil_tir.stmt import Allocate
    mod = T.lower(func, target)
    for fn in mod.functions:
        for _, s in tree.walk(fn):
            if isinstance(s, Allocate) and s.buffer.name == name:
                return s
    raise AssertionError(f"no allocation of {name}")


def test_storage_align():
    w = workloads.matmul_bias_relu(4, 6, 4)
    sch = S.Schedule(w.func)
    sch.storage_align(sch.get_block("C"), 0, 0, 4, 1)
    assert alloc(sch, "C").strides == ()        # recorded, applied in lowering
    blk = tree.get(sch.func, tree.find_block(sch.func, "C")).block
    assert dict(blk.annotations)["buffer_dim_align"] == ((0, 0, 4, 1),)
    for target in (None, "llvm"):
        a = lowered_alloc(sch.func, "C", target)
        assert [int(s) for s in a.buffer.shape] == [4 * 9]   # row stride 9 = 2 * 4 + 1
        assert "C[i * 9 + j]" in str(a.body) or "* 9 +" in str(a.body)
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_storage_align_twice_same_axis_replaces():
    w = workloads.matmul_bias_relu(4, 6, 4)
    sch = S.Schedule(w.func)
    sch.storage_align(sch.get_block("C"), 0, 0, 4, 1)
    sch.storage_align(sch.get_block("C"), 0, 0, 8, 0)
    blk = tree.get(sch.func, tree.find_block(sch.func, "C")).block
    assert dict(blk.annotations)["buffer_dim_align"] == ((0, 0, 8, 0),)
    assert [int(s) for s in lowered_alloc(sch.func, "C", "llvm").buffer.shape] == [32]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_storage_align_applies_to_the_compacted_tile():
    # after compute_at the planner shrinks B to one row (1, 16); the alignment applies
    # to that tile: one row padded to the stride 17 (TensorIR's order: compact, align)
    A = T.placeholder((4, 16), name="A")
    B = T.compute((4, 16), lambda i, j: A[i, j] * 2.0, name="B")
    C = T.compute((4, 16), lambda i, j: B[i, j] + 1.0, name="C")
    f = T.create_prim_func([A, C])
    sch = S.Schedule(f)
    sch.storage_align("B", 0, 0, 8, 1)
    sch.compute_at("B", sch.get_loops("C")[0])
    a = lowered_alloc(sch.func, "B", "llvm")
    assert [int(s) for s in a.buffer.shape] == [17]    # not 4 * 17: compacted first
    x = np.random.default_rng(0).random((4, 16), dtype="float32")
    np.testing.assert_allclose(run_llvm(sch, [x, np.zeros((4, 16), "float32")])[1],
                               x * 2 + 1, rtol=1e-6)
    verify_trace_roundtrip(sch, f)


def test_storage_align_of_a_2d_tile_and_a_3d_buffer():
    A = T.placeholder((2, 3, 5), name="A")
    B = T.compute((2, 3, 5), lambda i, j, k: A[i, j, k] * 2.0, name="B")
    C = T.compute((2, 3, 5), lambda i, j, k: B[i, j, k] - 1.0, name="C")
    f = T.create_prim_func([A, C])
    sch = S.Schedule(f)
    sch.storage_align("B", 0, 1, 4, 2)
    sch.storage_align("B", 0, 0, 16, 0)
    text = str(lowered_alloc(sch.func, "B", "llvm").body)
    assert "i * 32 + j * 6 + k" in text, text
    x = np.random.default_rng(1).random((2, 3, 5), dtype="float32")
    np.testing.assert_allclose(run_llvm(sch, [x, np.zeros((2, 3, 5), "float32")])[1],
                               x * 2 - 1, rtol=1e-6)
    np.testing.assert_allclose(run(sch, [x, np.zeros((2, 3, 5), "float32")])[1],
                               x * 2 - 1, rtol=1e-6)


def test_storage_align_of_a_parsed_annotation():
    # TVMScript as TVM prints it: the annotation alone asks for the alignment
    src = """
@T.prim_func
def main(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4, 8), "float32")):
    B = T.alloc_buffer((4, 8))
    for i, j in T.grid(4, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi, vj])
            T.writes(B[vi, vj])
            T.block_attr({"buffer_dim_align": [[0, 0, 16, 3]]})
            B[vi, vj] = A[vi, vj] + T.float32(1)
    for i, j in T.grid(4, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(B[vi, vj])
            T.writes(C[vi, vj])
            C[vi, vj] = B[vi, vj]
"""
    f = T.parse(src)
    assert [int(s) for s in lowered_alloc(f, "B", "llvm").buffer.shape] == [4 * 19]


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


def test_storage_align_a_negative_axis_counts_from_the_last():
    # TVM's spelling in its mma schedules: axis=-2, the rows of a matrix
    w = workloads.matmul_bias_relu(4, 6, 4)
    sch = S.Schedule(w.func)
    c = sch.get_block("C")
    sch.storage_align(c, 0, -2, 4, 1)
    blk = tree.get(sch.func, tree.find_block(sch.func, "C")).block
    assert dict(blk.annotations)["buffer_dim_align"] == ((0, 0, 4, 1),)
    assert_refused(sch, lambda: sch.storage_align(c, 0, -3, 4, 1),
                   r"storage_align: axis -3 is out of range for buffer 'C' of 2 "
                   r"dimension\(s\); expected -2 <= axis < 2", StorageError)


@pytest.mark.parametrize("factor,offset", [(0, 0), (4, 4), (4, -1)])
def test_storage_align_bad_factor_offset_is_refused(factor, offset):
    w = workloads.matmul_bias_relu(4, 4, 4)
    sch = S.Schedule(w.func)
    blk = sch.get_block("C")
    assert_refused(sch, lambda: sch.storage_align(blk, 0, 0, factor, offset),
                   rf"storage_align: expected factor > 0 and 0 <= offset < factor, got "
                   rf"factor={factor}, offset={offset}", StorageError)


def test_storage_align_of_a_shared_cache_in_the_cuda_pipeline():
    # the bank-conflict use: a shared tile whose rows are 65 floats apart (lowering
    # only: no GPU is needed to check the lowered IR)
    import targets  # noqa: F401  (registers the cuda pipeline)
    w = workloads.matmul(64, 64, 64)
    sch = S.Schedule(w.func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    io, ii = sch.split(i, [None, 8])
    jo, ji = sch.split(j, [None, 8])
    sch.reorder(io, jo, ii, ji, k)
    sch.bind(io, "blockIdx.x")
    sch.bind(ii, "threadIdx.x")
    a_shared = sch.cache_read(c, 0, "shared")
    sch.compute_at(a_shared, jo)
    sch.storage_align(a_shared, 0, 0, 32, 1)
    text = str(T.lower(sch.func, "cuda"))
    # one block's 8 rows, each 65 floats apart (the memory planner keeps one tile per
    # thread block and per step of the serial loop it is computed at)
    assert "T.allocate((520,), \"float32\", scope=\"shared\")" in text, text
    assert "A_shared[ax0 * 65 + ax1] = A[i_0 * 512 + ax0 * 64 + ax1]" in text, text
    assert "A_shared[i_1 * 65 + k]" in text, text
    check_workload(sch, w, targets=())
