"""``offset_to_unsigned``: an int8 x int8 -> int32 reduction as uint8 x int8 plus a
compensation computed once per column, exact against numpy (int32 wraps alike), its
trace replays, every refusal names what it expected; and the init block that
``decompose_reduction`` makes of a reduction starting from another buffer reads it."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir.analysis import tree
from cuvil_tir.interp import interpret
from schedules.intrinsics.x86_gemm import dot_gemm, gemm_func
from schedules.intrinsics.x86_offset import OffsetError
from targets.llvm.cpu import missing_host_features

ZEN4 = targets.Target("llvm", mcpu="znver4")


def _want(a, b):
    return (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 5), st.integers(1, 6), st.integers(1, 7),
       st.sampled_from([-128, 127, None]), st.integers(0, 2**31 - 1))
def test_offset_is_exact_in_the_interpreter(M, N, K, fill, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (M, K)).astype("int8")
    b = rng.integers(-128, 128, (K, N)).astype("int8")
    if fill is not None:                 # the extremes: the largest shifted sums
        a[:], b[:] = fill, -128
    sch = S.Schedule(gemm_func(M, N, K, "int8", "int8", "int32"))
    flip, colsum = sch.offset_to_unsigned("C")
    assert (flip.name, colsum.name) == ("A_u8", "B_sum")
    c = np.zeros((M, N), "int32")
    interpret(sch.func, a, b, c)
    np.testing.assert_array_equal(c, _want(a, b))


def test_offset_wraps_like_numpy_int32():
    """K = 2**17 products of 128 * 128 overflow int32: both sides wrap alike."""
    K = 1 << 17
    a = np.full((1, K), -128, "int8")
    b = np.full((K, 16), -128, "int8")
    sch = S.Schedule(gemm_func(1, 16, K, "int8", "int8", "int32"))
    sch.offset_to_unsigned("C")
    c = np.zeros((1, 16), "int32")
    targets.build(sch, "llvm")(a, b, c)
    with np.errstate(over="ignore"):
        want = a.astype(np.int32) @ b.astype(np.int32)
    np.testing.assert_array_equal(c, want)


def test_scheduled_int8_gemm_runs_u8s8_steps_and_is_exact_compiled():
    M, N, K = 13, 48, 64
    sch = S.Schedule(gemm_func(M, N, K, "int8", "int8", "int32"))
    assert dot_gemm(sch, "C", ZEN4) == "x86.vnni_16x4_u8s8"
    assert "offset_to_unsigned" in [i.name for i in sch.trace]
    mod = targets.build(sch, ZEN4)
    if missing_host_features(ZEN4):
        pytest.skip(f"the host lacks {missing_host_features(ZEN4)}")
    rng = np.random.default_rng(3)
    for fill in (None, -128):
        a = rng.integers(-128, 128, (M, K)).astype("int8")
        b = rng.integers(-128, 128, (K, N)).astype("int8")
        if fill is not None:
            a[:], b[:] = fill, fill
        c = np.zeros((M, N), "int32")
        mod(a, b, c)
        np.testing.assert_array_equal(c, _want(a, b))


def test_trace_replays_and_prints_the_primitive():
    f = gemm_func(8, 32, 16, "int8", "int8", "int32")
    sch = S.Schedule(f)
    dot_gemm(sch, "C", ZEN4)
    again = S.Trace.from_json(sch.trace.as_json()).apply(f)
    assert T.structural_equal(again.func, sch.func)
    assert "sch.offset_to_unsigned(" in str(sch.trace)


def _refused(func, block, match):
    sch = S.Schedule(func)
    before = sch.func
    with pytest.raises(OffsetError, match=match):
        sch.offset_to_unsigned(block)
    assert sch.func is before


@pytest.mark.parametrize("a, b, acc", [("float32", "float32", "float32"),
                                       ("uint8", "int8", "int32"),
                                       ("int8", "int8", "float32")])
def test_refuses_other_dtypes(a, b, acc):
    _refused(gemm_func(4, 16, 8, a, b, acc), "C",
             r"offset_to_unsigned: block 'C' computes .*; expected C = C \+ "
             r"int32\(A\[\.\.\.\]\) \* int32\(B\[\.\.\.\]\) with int8 A and B")


def test_refuses_a_product_of_one_buffer_by_itself():
    A = T.placeholder((8, 8), "int8", name="A")
    k = T.reduce_axis((0, 8), name="k")
    C = T.compute((8, 8), lambda i, j: T.sum(A[i, k].astype("int32") *
                                             A[j, k].astype("int32"), axis=k), name="C")
    _refused(T.create_prim_func([A, C]), "C", r"multiplies 'A' by itself")


def test_refuses_a_block_below_the_root():
    sch = S.Schedule(gemm_func(4, 16, 8, "int8", "int8", "int32"))
    i, _, _ = sch.get_loops("C")
    sch.blockize(i)
    with pytest.raises(OffsetError, match=r"block 'C' is not in the function's root"):
        sch.offset_to_unsigned("C")


def test_refuses_a_decomposed_block():
    sch = S.Schedule(gemm_func(4, 16, 8, "int8", "int8", "int32"))
    sch.decompose_reduction("C", sch.get_loops("C")[2])
    with pytest.raises(OffsetError, match=r"block 'C_update' has no init"):
        sch.offset_to_unsigned("C_update")


def test_refuses_a_predicated_block():
    A = T.placeholder((4, 8), "int8", name="A")
    B = T.placeholder((8, 16), "int8", name="B")
    k = T.reduce_axis((0, 8), name="k")
    C = T.compute((4, 16), lambda i, j: T.sum(A[i, k].astype("int32") *
                                              B[k, j].astype("int32"), axis=k), name="C")
    sch = S.Schedule(T.create_prim_func([A, B, C]))
    i, _, _ = sch.get_loops("C")
    sch.split(i, [3, None])              # 3 x 2 covers 6 > 4 rows: a T.where
    with pytest.raises(OffsetError, match=r"runs under T.where"):
        sch.offset_to_unsigned("C")


def test_init_block_reads_what_the_init_loads():
    """Regression: decompose_reduction's init block listed no reads, though a fused
    epilogue's init loads the bias; dependence analysis trusts the listed reads."""
    A, bias = T.placeholder((2, 3), name="A"), T.placeholder((2,), name="bias")
    k = T.reduce_axis((0, 3), name="k")
    C = T.compute((2,), lambda i: T.sum(A[i, k], axis=k), name="C")
    D = T.compute((2,), lambda i: C[i] + bias[i], name="D")
    sch = S.Schedule(T.create_prim_func([A, bias, D]))
    sch.fuse_reduction_epilogue("C", "D")
    init = sch.decompose_reduction("C", sch.get_loops("C")[1])
    blk = tree.get(sch.func, tree.find_block(sch.func, init.name)).block
    assert [r.buffer.name for r in blk.reads] == ["bias"]
