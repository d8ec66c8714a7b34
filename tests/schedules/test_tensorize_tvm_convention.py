"""tensorize with an intrinsic written for TVM's convention: the impl passes ``C.data``
(the whole scheduled buffer) and ``C.elem_offset`` (the tile's flat offset in it), as
``T.tvm_mma_sync`` does, beside Cuvil's (the tile's region); and TVM's block names
after ``decompose_reduction`` + ``tensorize`` (``update_update_o``)."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from tests.schedules.testing import run_llvm, verify_trace_roundtrip

MMA_DESC = '''
def mma_desc(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), align=64, offset_factor=1)
    B = T.match_buffer(b, (16, 16), align=64, offset_factor=1)
    C = T.match_buffer(c, (16, 16), align=64, offset_factor=1)
    with T.block("root"):
        T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
        T.writes(C[0:16, 0:16])
        for i, j, k in T.grid(16, 16, 16):
            with T.block("update"):
                vii, vjj, vkk = T.axis.remap("SSR", [i, j, k])
                C[vii, vjj] = C[vii, vjj] + A[vii, vkk] * B[vjj, vkk]
'''

MMA_IMPL = '''
def mma_intrin(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), align=64, offset_factor=1)
    B = T.match_buffer(b, (16, 16), align=64, offset_factor=1)
    C = T.match_buffer(c, (16, 16), align=64, offset_factor=1)
    with T.block("root"):
        T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
        T.writes(C[0:16, 0:16])
        T.evaluate(T.tvm_mma_sync(C.data, C.elem_offset // 256, A.data, A.elem_offset // 256,
                                  B.data, B.elem_offset // 256, C.data, C.elem_offset // 256,
                                  dtype="handle"))
'''

MATMUL = '''
def matmul(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, [128, 128])
    B = T.match_buffer(b, [128, 128])
    C = T.match_buffer(c, [128, 128])
    for i, j, k in T.grid(128, 128, 128):
        with T.block("update"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
'''

# TVM's expected function (its test_tensorize_matmul), with Cuvil's block names
TENSORIZED = '''
def tensorized_matmul(a: T.handle, b: T.handle, c: T.handle) -> None:
    C = T.match_buffer(c, [128, 128], elem_offset=0, align=64, offset_factor=1)
    B = T.match_buffer(b, [128, 128], elem_offset=0, align=64, offset_factor=1)
    A = T.match_buffer(a, [128, 128], elem_offset=0, align=64, offset_factor=1)
    for i_outer, j_outer in T.grid(8, 8):
        for i_inner_init, j_inner_init in T.grid(16, 16):
            with T.block("update_init"):
                vi_init = T.axis.S(128, ((i_outer * 16) + i_inner_init))
                vj_init = T.axis.S(128, ((j_outer * 16) + j_inner_init))
                C[vi_init, vj_init] = T.float32(0)
        for k_outer in T.grid(8):
            with T.block("update_update_o"):
                vi, vj, vk = T.axis.remap("SSR", [i_outer, j_outer, k_outer])
                T.reads([C[vi * 16 : vi * 16 + 16, vj * 16 : vj * 16 + 16],
                         A[vi * 16 : vi * 16 + 16, vk * 16 : vk * 16 + 16],
                         B[vj * 16 : vj * 16 + 16, vk * 16 : vk * 16 + 16]])
                T.writes(C[vi * 16 : vi * 16 + 16, vj * 16 : vj * 16 + 16])
                A_elem_offset = T.int32()
                B_elem_offset = T.int32()
                C_elem_offset = T.int32()
                A_sub = T.match_buffer(A[vi * 16 : vi * 16 + 16, vk * 16 : vk * 16 + 16],
                                       [16, 16], elem_offset=A_elem_offset)
                B_sub = T.match_buffer(B[vj * 16 : vj * 16 + 16, vk * 16 : vk * 16 + 16],
                                       [16, 16], elem_offset=B_elem_offset)
                C_sub = T.match_buffer(C[vi * 16 : vi * 16 + 16, vj * 16 : vj * 16 + 16],
                                       [16, 16], elem_offset=C_elem_offset)
                T.evaluate(T.tvm_mma_sync(
                    C_sub.data, T.floordiv(C_sub.elem_offset, 256),
                    A_sub.data, T.floordiv(A_sub.elem_offset, 256),
                    B_sub.data, T.floordiv(B_sub.elem_offset, 256),
                    C_sub.data, T.floordiv(C_sub.elem_offset, 256), dtype="handle"))
'''


def _mma_schedule(intrin):
    f = T.parse(MATMUL)
    s = S.Schedule(f)
    update = s.get_block("update")
    i, j, k = s.get_loops(update)
    io, ii = s.split(i, factors=[None, 16])
    jo, ji = s.split(j, factors=[None, 16])
    ko, ki = s.split(k, factors=[None, 16])
    s.reorder(io, jo, ko, ii, ji, ki)
    s.decompose_reduction(update, ko)
    s.tensorize(ii, intrin)
    return f, s


def test_tvm_mma_sync_gets_the_whole_buffer_and_the_tiles_fragment_index():
    S.TensorIntrin.register("test.tvm_mma", T.parse(MMA_DESC), T.parse(MMA_IMPL),
                            override=True)
    f, s = _mma_schedule("test.tvm_mma")
    want = T.parse(TENSORIZED).with_attr("global_symbol", "matmul")
    assert T.structural_equal(s.func, want), s.func
    assert s.get("update_update_o").name == "update_update_o"
    verify_trace_roundtrip(s, f)


def test_the_impl_prints_elem_offset_as_tvm_writes_it():
    impl = T.parse(MMA_IMPL)
    assert "T.call_extern(\"handle\", \"tvm_mma_sync\", C[0:16, 0:16], C.elem_offset // " \
           "256, A[0:16, 0:16], A.elem_offset // 256" in str(impl)
    assert T.structural_equal(T.parse(str(impl)), impl)


COPY_DESC = '''
def copy_desc(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (4,), offset_factor=1)
    B = T.match_buffer(b, (4,), offset_factor=1)
    with T.block("root"):
        T.reads(A[0:4])
        T.writes(B[0:4])
        for i in T.serial(4):
            with T.block("copy"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi]
'''


def _copy_impl(tvm_style: bool) -> str:
    """memcpy of the 4 elements: TVM's way (the whole buffer plus elem_offset) or
    Cuvil's (the tile's region)."""
    if tvm_style:
        args = ('T.tvm_access_ptr(T.type_annotation("float32"), B.data, B.elem_offset, 4, 2), '
                'T.tvm_access_ptr(T.type_annotation("float32"), A.data, A.elem_offset, 4, 1)')
    else:
        args = "B.data, A.data"
    return f'''
def copy_impl(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (4,), offset_factor=1)
    B = T.match_buffer(b, (4,), offset_factor=1)
    with T.block("root"):
        T.reads(A[0:4])
        T.writes(B[0:4])
        T.evaluate(T.call_extern("memcpy", {args}, T.int64(16), dtype="handle"))
'''


@pytest.mark.parametrize("tvm_style", [True, False])
def test_both_conventions_copy_the_right_tile_on_llvm(tvm_style):
    name = f"test.memcpy4_{'tvm' if tvm_style else 'cuvil'}"
    S.TensorIntrin.register(name, T.parse(COPY_DESC), T.parse(_copy_impl(tvm_style)),
                            override=True)
    X = T.placeholder((6, 8), name="X")
    f = T.create_prim_func([X, T.compute((6, 8), lambda i, j: X[i, j], name="Y")])
    sch = S.Schedule(f)
    i, j = sch.get_loops("Y")
    _, ji = sch.split(j, [None, 4])
    sch.tensorize(ji, name)
    call = sch.get("Y_o").body.value
    if tvm_style:
        # the address of the tile: the whole of X, at the tile's flat offset
        assert str(call.args[3]) == 'T.tvm_access_ptr(T.type_annotation("float32"), X.data, ' \
            'v_i_o * 8 + v_j_o * 4 * 1, 4, 1)'
    else:
        assert str(call.args[3]) == "X[v_i_o, v_j_o * 4:v_j_o * 4 + 4]"
    x = np.arange(48, dtype="float32").reshape(6, 8)
    got = run_llvm(sch, [x, np.zeros((6, 8), "float32")])[1]
    np.testing.assert_array_equal(got, x)
    verify_trace_roundtrip(sch, f)


def test_elem_offset_is_zero_where_a_function_runs():
    f = T.parse('''
def f(A: T.Buffer((4,), "int32")):
    for i in range(4):
        A[i] = A.elem_offset + i
''')
    assert "A[i] = A.elem_offset + i" in str(f)
    for runner in (lambda a: T.interpret(f, a), lambda a: run_llvm(f, [a])[0]):
        a = np.full(4, 9, "int32")
        out = runner(a)
        np.testing.assert_array_equal(a if out is None else out, np.arange(4))
