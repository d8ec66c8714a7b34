"""compute_inline and reverse_compute_inline: numerics, printed IR, legality."""

import numpy as np

import cuvil_tir as T
import schedules as S
from cuvil_tir.stmt import BufferStore, SeqStmt
from cuvil_tir.analysis import tree
from schedules.errors import InlineError
from tests import workloads
from tests.schedules.testing import (assert_refused, check_workload, run,
                                     verify_trace_roundtrip)


def block_names(sch):
    return [b.block.name for b in tree.blocks_under(sch.func.body)]


def test_compute_inline_elementwise_chain():
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func)
    sch.compute_inline(sch.get_block("E"))
    assert block_names(sch) == ["root", "D"]
    assert sch.func.body.block.alloc_buffers == ()
    text = str(sch.func)
    assert "T.reads(A[v_i], B[v_i], C[v_i])" in text
    assert "D[v_i] = T.max(A[v_i] * B[v_i] + C[v_i], T.float32(0))" in text
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_compute_inline_conv_padding():
    w = workloads.conv2d_nchw()
    sch = S.Schedule(w.func)
    sch.compute_inline(sch.get_block("pad"))
    assert block_names(sch) == ["root", "conv"]
    reads = [r.buffer.name for r in tree.get(sch.func, tree.find_block(sch.func, "conv"))
             .block.reads]
    assert reads == ["X", "W"]      # X takes the place of pad among the reads
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_compute_inline_into_two_consumers():
    w = workloads.softmax(3, 5)
    sch = S.Schedule(w.func)
    sch.compute_inline(sch.get_block("exp"))
    assert block_names(sch) == ["root", "row_max", "row_sum", "softmax"]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_compute_inline_shifted_consumer_index():
    A = T.placeholder((10,), name="A")
    B = T.compute((10,), lambda i: A[i] * 3.0, name="B")
    C = T.compute((8,), lambda i: B[i] + B[i + 2], name="C")
    f = T.create_prim_func([A, C])
    sch = S.Schedule(f)
    sch.compute_inline(sch.get_block("B"))
    assert "C[v_i] = A[v_i] * T.float32(3) + A[v_i + 2] * T.float32(3)" in str(sch.func)
    a = np.arange(10, dtype="float32")
    out = run(sch, [a, np.zeros(8, "float32")])
    np.testing.assert_allclose(out[1], 3 * a[:8] + 3 * a[2:])
    verify_trace_roundtrip(sch, f)


def test_reverse_compute_inline_elementwise_chain():
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func)
    sch.reverse_compute_inline(sch.get_block("D"))
    assert block_names(sch) == ["root", "E"]
    assert sch.func.body.block.alloc_buffers == ()
    assert "D[v_i] = T.max(A[v_i] * B[v_i] + C[v_i], T.float32(0))" in str(sch.func)
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_reverse_compute_inline_transposed_consumer():
    A = T.placeholder((3, 4), name="A")
    B = T.compute((3, 4), lambda i, j: A[i, j] + 1.0, name="B")
    C = T.compute((4, 3), lambda i, j: B[j, i] * 2.0, name="C")
    f = T.create_prim_func([A, C])
    sch = S.Schedule(f)
    sch.reverse_compute_inline(sch.get_block("C"))
    assert "C[v_j, v_i] = (A[v_i, v_j] + T.float32(1)) * T.float32(2)" in str(sch.func)
    a = np.arange(12, dtype="float32").reshape(3, 4)
    out = run(sch, [a, np.zeros((4, 3), "float32")])
    np.testing.assert_allclose(out[1], ((a + 1) * 2).T)
    verify_trace_roundtrip(sch, f)


def test_reverse_compute_inline_keeps_other_inputs():
    A = T.placeholder((4,), name="A")
    bias = T.placeholder((4,), name="bias")
    B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
    C = T.compute((4,), lambda i: B[i] + bias[i], name="C")
    f = T.create_prim_func([A, bias, C])
    sch = S.Schedule(f)
    sch.reverse_compute_inline(sch.get_block("C"))
    blk = tree.get(sch.func, tree.find_block(sch.func, "B")).block
    assert [r.buffer.name for r in blk.reads] == ["A", "bias"]
    assert [r.buffer.name for r in blk.writes] == ["C"]
    a, b = np.arange(4, dtype="float32"), np.ones(4, "float32")
    out = run(sch, [a, b, np.zeros(4, "float32")])
    np.testing.assert_allclose(out[2], a * 2 + b)
    verify_trace_roundtrip(sch, f)


# legality --------------------------------------------------------------------------------

def test_compute_inline_reduction_block_is_refused():
    w = workloads.matmul_bias_relu(4, 4, 4)
    sch = S.Schedule(w.func)
    blk = sch.get_block("C")
    assert_refused(sch, lambda: sch.compute_inline(blk),
                   r"compute_inline: block 'C' is a reduction block", InlineError)


def test_compute_inline_output_block_is_refused():
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func)
    blk = sch.get_block("D")
    assert_refused(sch, lambda: sch.compute_inline(blk),
                   r"compute_inline: block 'D' is an output block: it writes the function "
                   r"parameter 'D'", InlineError)


def test_compute_inline_non_trivial_body_is_refused():
    w = workloads.elementwise_chain(8)
    path = tree.find_block(w.func, "E")
    store = tree.get(w.func, path).block.body
    f = tree.replace(w.func, path + ("block", "body"), SeqStmt((store, store)))
    sch = S.Schedule(f)
    blk = sch.get_block("E")
    assert_refused(sch, lambda: sch.compute_inline(blk),
                   r"compute_inline: block 'E' has a non-trivial body", InlineError)


def test_compute_inline_non_injective_store_is_refused():
    w = workloads.elementwise_chain(8)
    path = tree.find_block(w.func, "E")
    store = tree.get(w.func, path).block.body
    bad = BufferStore(store.buffer, store.value, (store.indices[0] // 2,))
    f = tree.replace(w.func, path + ("block", "body"), bad)
    sch = S.Schedule(f)
    blk = sch.get_block("E")
    assert_refused(sch, lambda: sch.compute_inline(blk),
                   r"block 'E' stores to \[v_i // 2\]: the index map is not injective "
                   r"\(block variable v_i appears only as v_i // 2", InlineError)


def test_reverse_compute_inline_reduction_producer_is_refused():
    w = workloads.matmul_bias_relu(4, 4, 4)
    sch = S.Schedule(w.func)
    blk = sch.get_block("D")
    assert_refused(sch, lambda: sch.reverse_compute_inline(blk),
                   r"reverse_compute_inline: the producer 'C' of block 'D' is not a "
                   r"complete block", InlineError)


def test_reverse_compute_inline_reduction_consumer_is_refused():
    w = workloads.softmax(3, 4)
    sch = S.Schedule(w.func)
    blk = sch.get_block("row_sum")
    assert_refused(sch, lambda: sch.reverse_compute_inline(blk),
                   r"block 'row_sum' is not a complete block", InlineError)


def test_reverse_compute_inline_non_invertible_load_is_refused():
    A = T.placeholder((4,), name="A")
    B = T.compute((4,), lambda i: A[i] + 1.0, name="B")
    C = T.compute((8,), lambda i: B[i // 2], name="C")
    f = T.create_prim_func([A, C])
    sch = S.Schedule(f)
    blk = sch.get_block("C")
    assert_refused(sch, lambda: sch.reverse_compute_inline(blk),
                   r"block 'C' loads B \[v_i // 2\]: the index map is not injective",
                   InlineError)


def test_reverse_compute_inline_second_reader_is_refused():
    A = T.placeholder((4,), name="A")
    B = T.compute((4,), lambda i: A[i] + 1.0, name="B")
    C = T.compute((4,), lambda i: B[i] * 2.0, name="C")
    D = T.compute((4,), lambda i: B[i] * 3.0, name="D")
    f = T.create_prim_func([A, C, D])
    sch = S.Schedule(f)
    blk = sch.get_block("C")
    assert_refused(sch, lambda: sch.reverse_compute_inline(blk),
                   r"buffer 'B' is also read by \['D'\]; block 'C' must be its only "
                   r"consumer", InlineError)


def test_reverse_compute_inline_two_producers_is_refused():
    A = T.placeholder((4,), name="A")
    B = T.compute((4,), lambda i: A[i] + 1.0, name="B")
    C = T.compute((4,), lambda i: A[i] * 2.0, name="C")
    D = T.compute((4,), lambda i: B[i] + C[i], name="D")
    f = T.create_prim_func([A, D])
    sch = S.Schedule(f)
    blk = sch.get_block("D")
    assert_refused(sch, lambda: sch.reverse_compute_inline(blk),
                   r"block 'D' reads 2 buffers produced in its scope \(\['B', 'C'\]\)",
                   InlineError)


def test_reverse_inline_into_a_guarded_producer_keeps_one_copy_of_the_guard():
    # the consumer's domain guard (vi < 10) is the producer's own T.where: not repeated
    f = T.parse('''
def f(A: T.Buffer((16,), "float32"), C: T.Buffer((10,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in T.serial(12):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            T.where(i < 10)
            B[vi] = A[vi] * T.float32(2)
    for i in T.serial(10):
        with T.block("C"):
            vi = T.axis.spatial(10, i)
            C[vi] = B[vi] + T.float32(1)
''')
    sch = S.Schedule(f)
    sch.reverse_compute_inline("C")
    assert "T.where(i < 10)\n" in str(sch.func)
    a = np.arange(16, dtype="float32")
    c = np.zeros(10, "float32")
    T.interpret(sch.func, a, c)
    np.testing.assert_array_equal(c, a[:10] * 2 + 1)


def test_reverse_inline_keeps_alike_guards_on_different_variables():
    # i < 7 and j < 7 look alike but guard different loops: both stay (dropping one
    # stored past the consumer's buffer)
    f = T.parse('''
def f(A: T.Buffer((8, 8), "float32"), C: T.Buffer((7, 7), "float32")):
    B = T.alloc_buffer((8, 8), "float32")
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(7, 7):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
''')
    sch = S.Schedule(f)
    sch.reverse_compute_inline("C")
    assert "T.where(i < 7 and j < 7)" in str(sch.func)
    a = np.arange(64, dtype="float32").reshape(8, 8)
    c = np.zeros((7, 7), "float32")
    T.interpret(sch.func, a, c)
    np.testing.assert_array_equal(c, a[:7, :7] * 2 + 1)


def _partitioned_chain():
    """E computed at D's loop, then the loop split in three parts by loop_partition:
    each part's E and D sit in a block of their own, all writing the one buffer E."""
    w = workloads.elementwise_chain(6)
    sch = S.Schedule(w.func)
    sch.compute_at(sch.get_block("E"), sch.get_loops(sch.get_block("D"))[0])
    sch.loop_partition(sch.get_loops(sch.get_block("E"))[0], [2, 1])
    return w, sch


def test_inlining_one_part_of_a_partitioned_buffer_is_refused():
    # compute_inline of E_i0 looked for other writers in its own scope only and
    # dropped E's allocation, which E_i1 and E_i2 still wrote (found by
    # test_properties_blocks with a random seed)
    w, sch = _partitioned_chain()
    e0, d0 = sch.get_block("E_i0"), sch.get_block("D_i0")
    assert_refused(sch, lambda: sch.compute_inline(e0),
                   r"compute_inline: buffer 'E' of block 'E_i0' is also written by "
                   r"\['E_i1_partition', 'E_i1', 'E_i2_partition', 'E_i2'\]", InlineError)
    assert_refused(sch, lambda: sch.reverse_compute_inline(d0),
                   r"reverse_compute_inline: buffer 'E' is also used by \['E_i1_partition', "
                   r"'E_i1', 'D_i1', .*\] outside this scope", InlineError)
    check_workload(sch, w)
