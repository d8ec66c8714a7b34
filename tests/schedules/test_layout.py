"""transform_layout: new shapes, rewritten accesses and regions, numerics, legality."""

import numpy as np

import cuvil_tir as T
import schedules as S
from cuvil_tir.stmt import Block
from cuvil_tir.analysis import tree
from schedules.errors import ScheduleArgumentError
from schedules.primitives.layout import LayoutError
from tests import workloads
from tests.schedules.testing import (assert_refused, check_workload, run,
                                     verify_trace_roundtrip)


def chain(n=32):
    A = T.placeholder((n,), name="A")
    B = T.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = T.compute((n,), lambda i: B[i] + 1.0, name="C")
    return T.create_prim_func([A, C])


def block(sch, name):
    return tree.get(sch.func, tree.find_block(sch.func, name)).block


def check_chain(sch, n=32):
    a = np.arange(n, dtype="float32")
    out = run(sch, [a, np.zeros(n, "float32")])
    np.testing.assert_array_equal(out[1], a * 2 + 1)


def test_split_layout_rewrites_producer_and_consumer():
    f = chain()
    sch = S.Schedule(f)
    sch.transform_layout(sch.get_block("B"), 0, lambda i: (i // 8, i % 8))
    (buf,) = sch.func.body.block.alloc_buffers
    assert [s.value for s in buf.shape] == [4, 8]
    store = block(sch, "B").body
    assert [str(x) for x in store.indices] == ["v_i // 8", "v_i % 8"]
    load = block(sch, "C").body.value.a
    assert load.buffer is buf and [str(x) for x in load.indices] == ["v_i // 8", "v_i % 8"]
    assert [str(r.min) for r in block(sch, "C").reads[0].region] == ["v_i // 8", "v_i % 8"]
    check_chain(sch)
    verify_trace_roundtrip(sch, f)


def test_padded_layout_shape_is_the_bounding_box():
    f = chain(30)
    sch = S.Schedule(f)
    sch.transform_layout(sch.get_block("C"), 0, lambda i: (i // 7, i % 7), "read",
                         pad_value=0.0)
    assert [s.value for s in sch.func.body.block.alloc_buffers[0].shape] == [5, 7]
    check_chain(sch, 30)
    verify_trace_roundtrip(sch, f)


def test_padding_without_pad_value_is_refused():
    sch = S.Schedule(chain(30))
    assert_refused(sch, lambda: sch.transform_layout("C", 0, lambda i: (i // 7, i % 7),
                                                     "read"),
                   r"transform_layout: the index map lays buffer 'B' of shape \(30,\) out "
                   r"as \(5, 7\): 5 padding element\(s\) that no index maps to, and so "
                   r"that nothing writes. Pass pad_value=", LayoutError)


def test_pad_value_must_be_a_number():
    f = chain(30)
    sch = S.Schedule(f)
    assert_refused(sch, lambda: sch.transform_layout("C", 0, lambda i: (i // 7, i % 7),
                                                     "read", pad_value="zero"),
                   r"option 'pad_value' to transform_layout: expected an int, a float, an "
                   r"expression or a function of the new indices, found 'zero'",
                   ScheduleArgumentError)


def test_pad_value_is_written_by_the_producer_rebuilt_over_the_new_shape():
    f = chain(30)
    sch = S.Schedule(f)
    sch.transform_layout("B", 0, lambda i: (i // 8, i % 8), pad_value=-1.0)
    assert [b.name for b in sch.get_child_blocks("root")] == ["B", "C"]
    assert [int(lp.extent) for lp in (sch.func.body.block.body.seq[0],
                                      sch.func.body.block.body.seq[0].body)] == [4, 8]
    assert str(block(sch, "B").body) == ("B[v0, v1] = T.if_then_else(v0 == 3 and 6 <= v1, "
                                         "T.float32(-1), A[v0 * 8 + v1] * T.float32(2))")
    check_chain(sch, 30)
    verify_trace_roundtrip(sch, f)


def test_transform_layout_of_an_output_parameter_with_padding():
    f = chain(30)
    sch = S.Schedule(f)
    sch.transform_layout("C", 0, lambda i: (i // 8, i % 8), pad_value=7.0)
    out = sch.func.params[1]
    assert out.name == "C" and [s.value for s in out.shape] == [4, 8]
    a = np.arange(30, dtype="float32")
    c = run(sch, [a, np.zeros((4, 8), "float32")])[1]
    np.testing.assert_array_equal(c.ravel()[:30], a * 2 + 1)
    np.testing.assert_array_equal(c.ravel()[30:], [7.0, 7.0])
    verify_trace_roundtrip(sch, f)


def test_transform_layout_of_an_input_parameter():
    f = chain(32)
    sch = S.Schedule(f)
    sch.transform_layout("B", 0, lambda i: (i % 8, i // 8), "read")
    inp = sch.func.params[0]
    assert [s.value for s in inp.shape] == [8, 4]
    a = np.arange(32, dtype="float32")
    out = run(sch, [a.reshape(4, 8).T.copy(), np.zeros(32, "float32")])[1]
    np.testing.assert_array_equal(out, a * 2 + 1)
    verify_trace_roundtrip(sch, f)


def test_transpose_intermediate_of_matmul_bias_relu():
    w = workloads.matmul_bias_relu(4, 6, 8)
    sch = S.Schedule(w.func)
    sch.transform_layout(sch.get_block("C"), 0, lambda i, j: (j, i))
    (buf,) = sch.func.body.block.alloc_buffers
    assert [s.value for s in buf.shape] == [6, 4]
    init = block(sch, "C").init
    assert init.buffer is buf and [x.name for x in init.indices] == ["v_j", "v_i"]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_three_dim_tiled_layout_after_split():
    f = chain(64)
    sch = S.Schedule(f)
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.split(i, [None, 16])
    sch.transform_layout(sch.get_block("B"), 0, lambda i: (i // 16, i % 16 // 4, i % 4))
    assert [s.value for s in sch.func.body.block.alloc_buffers[0].shape] == [4, 4, 4]
    check_chain(sch, 64)
    verify_trace_roundtrip(sch, f)


def test_refuses_non_injective_map_and_wrong_arity():
    f = chain()
    sch = S.Schedule(f)
    b = sch.get_block("B")
    assert_refused(sch, lambda: sch.transform_layout(b, 0, lambda i: (i // 2,)),
                   r"index_map is not one-to-one on buffer 'B' of shape \[32\]: 32 "
                   "elements map to 16 positions", LayoutError)
    assert_refused(sch, lambda: sch.transform_layout(b, 0, lambda i, j: (i, j)),
                   "index_map takes 2 index\\(es\\) but buffer 'B' has 1 dimension",
                   LayoutError)
    assert_refused(sch, lambda: sch.transform_layout(b, 0, lambda i: (i - 4,)),
                   "index_map gives the negative index -4", LayoutError)


def test_refuses_bad_buffer_index_and_type():
    f = chain()
    sch = S.Schedule(f)
    b = sch.get_block("B")
    assert_refused(sch, lambda: sch.transform_layout(b, 1, lambda i: (i,)),
                   r"block 'B' has 1 write buffer\(s\) \['B'\]; buffer_index 1 is out of "
                   "range", ScheduleArgumentError)
    assert_refused(sch, lambda: sch.transform_layout(b, 0, lambda i: (i,), "both"),
                   "buffer_index_type must be 'read' or 'write', found 'both'",
                   ScheduleArgumentError)


def test_allocated_buffer_stays_in_its_block():
    f = chain()
    sch = S.Schedule(f)
    sch.transform_layout(sch.get_block("B"), 0, lambda i: (i % 4, i // 4))
    roots = [s for _, s in tree.walk(sch.func) if isinstance(s, Block) and s.alloc_buffers]
    assert [r.name for r in roots] == ["root"]
    assert [s.value for s in roots[0].alloc_buffers[0].shape] == [4, 8]
    check_chain(sch)


def test_tile_region_of_blockized_block_is_mapped():
    w = workloads.matmul_bias_relu(8, 16, 8)
    sch = S.Schedule(w.func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, 4])
    outer = sch.blockize(ii)
    sch.transform_layout(outer, 0, lambda i, j: (j // 4, i, j % 4))
    (wr,) = block(sch, "C_o").writes
    assert [(str(r.min), str(r.extent)) for r in wr.region] == [
        ("0", "4"), ("v_i_o * 4", "4"), ("0", "4")]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


PARTIAL_WRITE = '''
def f(A: T.Buffer((14,), "int32")):
    for i in T.serial(3):
        with T.block("block"):
            vi = T.axis.spatial(3, i)
            A[vi * 5] = A[vi * 5] + 1
'''


def test_pad_value_fills_only_the_padding_of_a_parameter():
    # the writer touches 3 of the 14 elements: the other 11 are the caller's and must
    # survive (the fill used to cover the whole new layout and clobber them)
    sch = S.Schedule(T.parse(PARTIAL_WRITE))
    sch.transform_layout("block", 0, lambda i: (i // 4, i % 4), pad_value=-1)
    assert "T.where(ax0 == 3 and 2 <= ax1)" in str(sch.func)
    assert [b.name for b in sch.get_child_blocks("root")] == ["block", "A_pad"]
    a = np.arange(16, dtype="int32").reshape(4, 4) + 100
    want = a.copy().ravel()
    want[[0, 5, 10]] += 1
    want[14:] = -1
    T.interpret(sch.func, a)
    np.testing.assert_array_equal(a.ravel(), want)
    verify_trace_roundtrip(sch, T.parse(PARTIAL_WRITE))


def test_padding_of_a_parameter_under_a_map_without_inverse_is_refused():
    # (i // 4, (i % 4) ** 2) is one-to-one but not quasi-affine: Cuvil cannot tell its
    # padding apart, and filling everything would clobber the caller's elements
    sch = S.Schedule(T.parse(PARTIAL_WRITE))
    assert_refused(sch, lambda: sch.transform_layout(
        "block", 0, lambda i: (i // 4, (i % 4) * (i % 4)), pad_value=-1),
        r"transform_layout: the padding of parameter 'A' under this index map cannot be "
        r"told apart from its elements", LayoutError)


def test_var_args_index_map_gathers_the_leading_indices():
    A = T.placeholder((2, 3, 8), name="A")
    B = T.compute((2, 3, 8), lambda i, j, k: A[i, j, k] + 1.0, name="B")
    f = T.create_prim_func([A, B])
    sch = S.Schedule(f)
    sch.transform_layout("B", 0, lambda *rest, k: (*rest, k // 4, k % 4), "read")
    assert [int(s) for s in sch.func.params[0].shape] == [2, 3, 2, 4]
    a = np.arange(48, dtype="float32").reshape(2, 3, 8)
    out = run(sch, [a.reshape(2, 3, 2, 4), np.zeros((2, 3, 8), "float32")])[1]
    np.testing.assert_array_equal(out, a + 1)
    verify_trace_roundtrip(sch, f)


INT64_WRITE = '''
def f(A: T.Buffer((T.int64(10),), "int32"), B: T.Buffer((T.int64(10),), "int32")):
    for i in T.serial(T.int64(10)):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] * 3
'''


def test_index_map_over_int64_shapes_computes_in_int64():
    f = T.parse(INT64_WRITE)
    sch = S.Schedule(f)
    sch.transform_layout("B", 0, lambda i: (i // 4, i % 4), pad_value=-1)
    out = sch.func.params[1]
    assert [str(s) for s in out.shape] == ["T.int64(3)", "T.int64(4)"]
    a = np.arange(10, dtype="int32")
    b = run(sch, [a, np.zeros((3, 4), "int32")])[1].ravel()
    np.testing.assert_array_equal(b[:10], a * 3)
    np.testing.assert_array_equal(b[10:], [-1, -1])
    verify_trace_roundtrip(sch, f)


def test_block_layout_over_int64_extents_keeps_int64_iterators():
    f = T.parse(INT64_WRITE.replace("(T.int64(10),)", "(T.int64(2), T.int64(5))")
                .replace("for i in T.serial(T.int64(10)):",
                         "for i, j in T.grid(T.int64(2), T.int64(5)):")
                .replace('vi = T.axis.remap("S", [i])', 'vi, vj = T.axis.remap("SS", [i, j])')
                .replace("B[vi] = A[vi] * 3", "B[vi, vj] = A[vi, vj] * 3"))
    sch = S.Schedule(f)
    sch.transform_block_layout("B", lambda i, j: (i * 5 + j,))
    loop = sch.func.body.block.body
    assert loop.loop_var.dtype == "int64" and str(loop.extent) == "T.int64(10)"
    a = np.arange(10, dtype="int32").reshape(2, 5)
    np.testing.assert_array_equal(run(sch, [a, np.zeros((2, 5), "int32")])[1], a * 3)
    verify_trace_roundtrip(sch, f)


def test_indices_of_a_tile_reader_are_simplified_with_the_iterator_ranges():
    f = chain(64)
    sch = S.Schedule(f)
    (i,) = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, 16])
    sch.blockize(ii)
    sch.transform_layout("C", 0, lambda i: (i // 16, i % 16), "read")
    load = block(sch, "C").body.value.a
    assert [str(x) for x in load.indices] == ["v_i_o", "v_i_i"]
    check_chain(sch, 64)
    verify_trace_roundtrip(sch, f)


def symbolic_chain():
    n = T.size_var("n")
    A = T.placeholder((n,), name="A")
    B = T.compute((n,), lambda i: A[i] * 2.0, name="B")
    return T.create_prim_func([A, T.compute((n,), lambda i: B[i] + 1.0, name="C")])


def test_a_map_not_provably_one_to_one_on_a_symbolic_shape_is_refused():
    # i // 2 sends two elements to one position: on 10 elements it is caught by
    # enumeration, on n elements it has no inverse and used to be accepted
    sch = S.Schedule(symbolic_chain())
    assert_refused(sch, lambda: sch.transform_layout("B", 0, lambda i: (i // 2,)),
                   r"transform_layout: cannot prove the index map \['i // 2'\] one-to-one "
                   r"on buffer 'B' of shape \['n'\]", LayoutError)


def test_a_symbolic_map_the_caller_assumes_injective_is_accepted():
    A = T.placeholder((4, T.size_var("n")), name="A")
    B = T.compute(A.shape, lambda i, j: A[i, j] * 2.0, name="B")
    f = T.create_prim_func([A, B])
    n = A.shape[1]
    sch = S.Schedule(f)
    sch.transform_layout("B", 0, lambda i, j: (i * n + j,), assume_injective_transform=True)
    assert [str(s) for s in sch.func.params[1].shape] == ["n * 4"]
    a = np.arange(12, dtype="float32").reshape(4, 3)
    np.testing.assert_array_equal(run(sch, [a, np.zeros(12, "float32")])[1], a.ravel() * 2)
    # the map names the size variable n: the trace records it by name, replay binds it
    verify_trace_roundtrip(sch, f)


def test_a_map_naming_a_variable_the_function_lacks_is_refused():
    sch = S.Schedule(symbolic_chain())
    m = T.size_var("m")
    assert_refused(sch, lambda: sch.transform_layout("B", 0, lambda i: (i // m, i % m),
                                                     assume_injective_transform=True),
                   r"transform_layout: the index map uses the variable 'm' \(int32\), which "
                   r"the function does not declare \(it has \['n'\]\)", LayoutError)


def test_the_identity_map_changes_nothing_but_separators():
    f = chain()
    sch = S.Schedule(f)
    sch.transform_layout("B", 0, lambda i: (i,))
    assert sch.func is f


def test_a_row_major_linearization_with_a_symbolic_stride_is_one_to_one():
    n = T.size_var("n")
    A = T.placeholder((3, n), name="A")
    B = T.compute((3, n), lambda i, j: A[i, j] + 1.0, name="B")
    f = T.create_prim_func([A, B])
    sch = S.Schedule(f)
    sch.transform_layout("B", 0, lambda i, j: (i * n + j,), "read")
    assert [str(s) for s in sch.func.params[0].shape] == ["n * 3"]
    a = np.arange(15, dtype="float32")
    out = run(sch, [a, np.zeros((3, 5), "float32")])[1]
    np.testing.assert_array_equal(out, a.reshape(3, 5) + 1)
    verify_trace_roundtrip(sch, f)
    # a stride smaller than the extent it skips overlaps rows: not one-to-one
    sch2 = S.Schedule(f)
    assert_refused(sch2, lambda: sch2.transform_layout("B", 0, lambda i, j: (i * (n - 1) + j,),
                                                       "read"),
                   r"cannot prove the index map \['i \* \(n - 1\) \+ j'\] one-to-one", LayoutError)
