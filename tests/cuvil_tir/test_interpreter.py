"""The reference interpreter against numpy: workloads, dtypes, intrinsics, hand-built IR."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

import cuvil_tir as T
from cuvil_tir.interp.scalar import bf16_bits, round_bf16
from tests.workloads import ALL

RNG = np.random.default_rng(1234)


def run(func, *arrays):
    T.interpret(func, *arrays)
    return arrays


def unary_func(fn, dtype, n=16, name="B"):
    A = T.placeholder((n,), dtype, name="A")
    B = T.compute((n,), lambda i: fn(A[i]), name=name)
    return T.create_prim_func([A, B])


def binary_func(fn, dtype, n=16):
    A = T.placeholder((n,), dtype, name="A")
    B = T.placeholder((n,), dtype, name="B")
    C = T.compute((n,), lambda i: fn(A[i], B[i]), name="C")
    return T.create_prim_func([A, B, C])


# workloads --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(ALL))
def test_workload_matches_numpy(name):
    w = ALL[name]()
    arrays = w.make_inputs(np.random.default_rng(0))
    T.interpret(w.func, *arrays)
    w.check(arrays)


def test_matmul_16_cubed_is_fast():
    w = ALL["matmul"]()
    arrays = w.make_inputs(np.random.default_rng(0))
    start = time.perf_counter()
    T.interpret(w.func, *arrays)
    assert time.perf_counter() - start < 1.0
    w.check(arrays)


def test_broadcasting_by_index_expressions():
    A = T.placeholder((4, 1), name="A")
    B = T.placeholder((1, 8), name="B")
    C = T.compute((4, 8), lambda i, j: A[i, 0] + B[0, j], name="C")
    a, b = RNG.standard_normal((4, 1), "float32"), RNG.standard_normal((1, 8), "float32")
    c = np.zeros((4, 8), "float32")
    run(T.create_prim_func([A, B, C]), a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_multi_stage_with_intermediate_reduction():
    A = T.placeholder((6, 5), name="A")
    k = T.reduce_axis((0, 5), name="k")
    S = T.compute((6,), lambda i: T.sum(A[i, k] * A[i, k], axis=k), name="S")
    N = T.compute((6,), lambda i: T.sqrt(S[i]), name="N")
    Y = T.compute((6, 5), lambda i, j: A[i, j] / N[i], name="Y")
    a, y = RNG.standard_normal((6, 5), "float32"), np.zeros((6, 5), "float32")
    run(T.create_prim_func([A, Y]), a, y)
    np.testing.assert_allclose(y, a / np.linalg.norm(a, axis=1, keepdims=True), rtol=1e-6)


# math intrinsics --------------------------------------------------------------------------

def _erf(x):
    return np.vectorize(math.erf)(x.astype("float64")).astype(x.dtype)


UNARY_CASES = {
    "exp": (T.exp, np.exp, (-3, 3)),
    "exp2": (T.exp2, np.exp2, (-3, 3)),
    "log": (T.log, np.log, (0.1, 5)),
    "log2": (T.log2, np.log2, (0.1, 5)),
    "log10": (T.log10, np.log10, (0.1, 5)),
    "sqrt": (T.sqrt, np.sqrt, (0, 5)),
    "rsqrt": (T.rsqrt, lambda x: x.dtype.type(1) / np.sqrt(x), (0.1, 5)),
    "tanh": (T.tanh, np.tanh, (-3, 3)),
    "sigmoid": (T.sigmoid, lambda x: x.dtype.type(1) / (x.dtype.type(1) + np.exp(-x)), (-5, 5)),
    "erf": (T.erf, _erf, (-2, 2)),
    "floor": (T.floor, np.floor, (-4, 4)),
    "ceil": (T.ceil, np.ceil, (-4, 4)),
    "round": (T.round, np.round, (-4, 4)),
    "trunc": (T.trunc, np.trunc, (-4, 4)),
    "sin": (T.sin, np.sin, (-3, 3)),
    "cos": (T.cos, np.cos, (-3, 3)),
    "abs": (T.abs, np.abs, (-3, 3)),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(UNARY_CASES))
def test_unary_intrinsic_matches_numpy(name, dtype):
    op, ref, (lo, hi) = UNARY_CASES[name]
    a = RNG.uniform(lo, hi, 16).astype(dtype)
    b = np.zeros(16, dtype)
    run(unary_func(op, dtype), a, b)
    want = ref(a)
    assert want.dtype == np.dtype(dtype)
    np.testing.assert_allclose(b, want, rtol=2e-7 if dtype == "float32" else 1e-15)


@pytest.mark.parametrize("name", ["exp", "sqrt", "tanh", "sigmoid", "floor", "abs"])
def test_unary_intrinsic_float16_rounds_in_float16(name):
    op, ref, (lo, hi) = UNARY_CASES[name]
    a = RNG.uniform(lo, hi, 16).astype("float16")
    b = np.zeros(16, "float16")
    run(unary_func(op, "float16"), a, b)
    np.testing.assert_allclose(b.astype("float32"), ref(a).astype("float32"), rtol=1e-3)


def test_round_is_half_to_even():
    a = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49, 3.5], "float32")
    b = np.zeros(8, "float32")
    run(unary_func(T.round, "float32", n=8), a, b)
    assert b.tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 3.0, 4.0]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pow_and_fma(dtype):
    a, b = RNG.uniform(0.5, 2, 16).astype(dtype), RNG.uniform(-2, 2, 16).astype(dtype)
    c = np.zeros(16, dtype)
    run(binary_func(T.pow, dtype), a, b, c)
    np.testing.assert_allclose(c, np.power(a, b), rtol=1e-6)
    run(binary_func(lambda x, y: T.fma(x, y, x), dtype), a, b, c)
    np.testing.assert_allclose(c, a * b + a, rtol=1e-6)


def test_fma_rounds_once():
    # a*b + c where the separately rounded product loses the answer entirely
    a = np.array([1 + 2.0 ** -12], "float32")
    c = np.zeros(1, "float32")
    A = T.placeholder((1,), name="A")
    C = T.compute((1,), lambda i: T.fma(A[i], A[i], -(A[i] * A[i])), name="C")
    run(T.create_prim_func([A, C]), a, c)
    exact = float(a[0]) * float(a[0]) - float(a[0] * a[0])
    assert c[0] == np.float32(exact) and c[0] != 0


def test_integer_abs_wraps_like_numpy():
    a = np.array([-128, -5, 0, 7], "int8")
    b = np.zeros(4, "int8")
    run(unary_func(T.abs, "int8", n=4), a, b)
    np.testing.assert_array_equal(b, np.abs(a))


# dtypes -----------------------------------------------------------------------------------

INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_arithmetic_wraps_like_numpy(dtype):
    info = np.iinfo(dtype)
    a = RNG.integers(info.min, info.max, 32, dtype=dtype, endpoint=True)
    b = RNG.integers(info.min, info.max, 32, dtype=dtype, endpoint=True)
    c = np.zeros(32, dtype)
    run(binary_func(lambda x, y: x * y + x - y, dtype, n=32), a, b, c)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(c, a * b + a - b)


def test_int8_and_uint8_overflow_examples():
    A = T.placeholder((3,), "int8", name="A")
    B = T.compute((3,), lambda i: A[i] + 100, name="B")
    b = np.zeros(3, "int8")
    run(T.create_prim_func([A, B]), np.array([27, 28, -128], "int8"), b)
    assert b.tolist() == [127, -128, -28]
    U = T.placeholder((3,), "uint8", name="U")
    V = T.compute((3,), lambda i: U[i] * 2 - 1, name="V")
    v = np.zeros(3, "uint8")
    run(T.create_prim_func([U, V]), np.array([0, 128, 200], "uint8"), v)
    assert v.tolist() == [255, 255, 143]


def test_float16_arithmetic_matches_numpy_exactly():
    a, b = RNG.standard_normal(32).astype("float16"), RNG.standard_normal(32).astype("float16")
    c = np.zeros(32, "float16")
    run(binary_func(lambda x, y: x * y + x / y, "float16", n=32), a, b, c)
    np.testing.assert_array_equal(c, a * b + a / b)


def test_float32_arithmetic_is_float32():
    a = np.array([2.0 ** 24, 1.0], "float32")
    b = np.array([1.0, 3.0], "float32")
    c = np.zeros(2, "float32")
    run(binary_func(lambda x, y: (x + y) - x + x / y, "float32", n=2), a, b, c)
    np.testing.assert_array_equal(c, (a + b) - a + a / b)
    assert c[0] == np.float32(2.0 ** 24)  # 2**24 + 1 rounds back to 2**24 in float32


def test_bool_logic():
    a, b, c = (RNG.integers(0, 2, 16).astype(bool) for _ in range(3))
    out = np.zeros(16, bool)
    A, B, C = (T.placeholder((16,), "bool", name=n) for n in "ABC")
    D = T.compute((16,), lambda i: A[i] & (B[i] | ~C[i]), name="D")
    run(T.create_prim_func([A, B, C, D]), a, b, c, out)
    np.testing.assert_array_equal(out, a & (b | ~c))


def test_bool_from_comparison_and_back_to_int():
    A = T.placeholder((5,), "int32", name="A")
    B = T.compute((5,), lambda i: (A[i] > 2).astype("int32") * 10, name="B")
    b = np.zeros(5, "int32")
    run(T.create_prim_func([A, B]), np.arange(5, dtype="int32"), b)
    assert b.tolist() == [0, 0, 0, 10, 10]


def _bf16_ref(x32):
    u = x32.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def test_bfloat16_round_trip_and_rounding():
    vals = np.array([1.0, 1.00390625, 1.01171875, -2.5, 3.1415926, 1e-3, 65504.0, 0.0],
                    "float32")
    bits = np.zeros(8, "uint16")
    back = np.zeros(8, "float32")
    A = T.placeholder((8,), name="A")
    B = T.compute((8,), lambda i: A[i].astype("bfloat16"), name="B")
    C = T.compute((8,), lambda i: B[i].astype("float32"), name="C")
    run(T.create_prim_func([A, B, C]), vals, bits, back)
    np.testing.assert_array_equal(bits, _bf16_ref(vals))
    np.testing.assert_array_equal(back, (bits.astype(np.uint32) << 16).view(np.float32))
    assert bits[1] == 0x3F80 and bits[2] == 0x3F82  # ties to even, both ways


def test_bfloat16_arithmetic_rounds_after_each_op():
    a32 = RNG.standard_normal(16).astype("float32")
    b32 = RNG.standard_normal(16).astype("float32")
    a, b = _bf16_ref(a32), _bf16_ref(b32)
    c = np.zeros(16, "uint16")
    run(binary_func(lambda x, y: x * y + x, "bfloat16"), a, b, c)
    fa = (a.astype(np.uint32) << 16).view(np.float32)
    fb = (b.astype(np.uint32) << 16).view(np.float32)
    prod = (_bf16_ref(fa * fb).astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(c, _bf16_ref(prod + fa))


def test_bfloat16_helpers():
    assert bf16_bits(float("nan")) == 0x7FC0
    assert float(round_bf16(1.00390625)) == 1.0
    assert bf16_bits(-1.0) == 0xBF80


# integer division ------------------------------------------------------------------------

def _div_case(fn):
    a = np.array([7, -7, 7, -7, 0, 5, -5, -2 ** 31], "int32")
    b = np.array([2, 2, -2, -2, 3, 0, 0, -1], "int32")
    c = np.zeros(8, "int32")
    run(binary_func(fn, "int32", n=8), a, b, c)
    return a, b, c


def test_floordiv_floormod_match_numpy_including_zero():
    a, b, c = _div_case(lambda x, y: x // y)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(c, np.floor_divide(a, b))
    assert c.tolist() == [3, -4, -4, 3, 0, 0, 0, -2 ** 31]
    a, b, c = _div_case(lambda x, y: x % y)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(c, np.remainder(a, b))
    assert c.tolist() == [1, 1, -1, -1, 0, 0, 0, 0]


def test_truncdiv_truncmod_are_c_division_and_zero_safe():
    a, b, c = _div_case(T.truncdiv)
    assert c.tolist() == [3, -3, -3, 3, 0, 0, 0, -2 ** 31]
    a, b, c = _div_case(T.truncmod)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(c, np.fmod(a, b))
    assert c.tolist() == [1, -1, 1, -1, 0, 0, 0, 0]


def test_float_floordiv_and_true_division():
    a = np.array([7.5, -7.5, 1.0], "float32")
    b = np.array([2.0, 2.0, 0.0], "float32")
    c = np.zeros(3, "float32")
    run(binary_func(lambda x, y: x // y, "float32", n=3), a, b, c)
    assert c[0] == 3.0 and c[1] == -4.0
    run(binary_func(lambda x, y: x / y, "float32", n=3), a, b, c)
    assert c.tolist() == [3.75, -3.75, math.inf]


@pytest.mark.parametrize("src,dst,vals,want", [
    ("float32", "int32", [-3.7, 3.7, -0.5, 2.0], [-3, 3, 0, 2]),
    ("int32", "uint8", [300, -1, 255, 256], [44, 255, 255, 0]),
    ("int32", "int8", [128, -129, 127, 1000], [-128, 127, 127, -24]),
    ("float32", "bool", [0.0, -0.0, 0.5, -2.0], [False, False, True, True]),
    ("int8", "float32", [-128, 0, 5, 127], [-128.0, 0.0, 5.0, 127.0]),
    ("float64", "float16", [1.0, 65520.0, 1e-8, 0.1], [1.0, math.inf, 0.0, 0.0999755859375]),
])
def test_cast_semantics(src, dst, vals, want):
    a = np.array(vals, src)
    b = np.zeros(4, dst)
    run(unary_func(lambda x: T.cast(x, dst), src, n=4), a, b)
    assert b.tolist() == want


def test_nan_to_int_like_numpy():
    a = np.array([np.nan, np.inf, 1.5, -1.5], "float32")
    for dst in ("int8", "int32", "int64"):
        b = np.zeros(4, dst)
        run(unary_func(lambda x, d=dst: x.astype(d), "float32", n=4), a, b)
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(b, a.astype(dst))


# reductions -------------------------------------------------------------------------------

@pytest.mark.parametrize("combiner,ref", [(T.sum, np.sum), (T.max, np.max),
                                          (T.min, np.min), (T.prod, np.prod)])
def test_reduction_one_axis(combiner, ref):
    A = T.placeholder((4, 6), name="A")
    k = T.reduce_axis((0, 6), name="k")
    R = T.compute((4,), lambda i: combiner(A[i, k], axis=k), name="R")
    a, r = RNG.uniform(0.5, 1.5, (4, 6)).astype("float32"), np.zeros(4, "float32")
    run(T.create_prim_func([A, R]), a, r)
    np.testing.assert_allclose(r, ref(a, axis=1), rtol=1e-6)


@pytest.mark.parametrize("combiner,ref", [(T.sum, np.sum), (T.max, np.max),
                                          (T.min, np.min), (T.prod, np.prod)])
def test_reduction_several_axes_int(combiner, ref):
    A = T.placeholder((3, 4, 5), "int32", name="A")
    k1, k2 = T.reduce_axis((0, 4), name="k1"), T.reduce_axis((0, 5), name="k2")
    R = T.compute((3,), lambda i: combiner(A[i, k1, k2], axis=[k1, k2]), name="R")
    a, r = RNG.integers(-3, 4, (3, 4, 5)).astype("int32"), np.zeros(3, "int32")
    run(T.create_prim_func([A, R]), a, r)
    np.testing.assert_array_equal(r, ref(a, axis=(1, 2)))


@pytest.mark.parametrize("combiner,ref,ident", [(T.sum, np.sum, 0.0), (T.max, np.max, -np.inf),
                                                (T.min, np.min, np.inf),
                                                (T.prod, np.prod, 1.0)])
def test_reduction_with_where(combiner, ref, ident):
    A = T.placeholder((4, 8), name="A")
    k = T.reduce_axis((0, 8), name="k")
    # reduce only over the lower triangle k <= i (row 0 has one element)
    R = T.compute((4,), lambda i: combiner(A[i, k], axis=k, where=k <= i), name="R")
    a, r = RNG.uniform(0.5, 1.5, (4, 8)).astype("float32"), np.zeros(4, "float32")
    run(T.create_prim_func([A, R]), a, r)
    mask = np.arange(8)[None, :] <= np.arange(4)[:, None]
    np.testing.assert_allclose(r, ref(np.where(mask, a, ident), axis=1), rtol=1e-6)


def test_reduction_axis_with_nonzero_start():
    A = T.placeholder((10,), name="A")
    k = T.reduce_axis((3, 7), name="k")
    R = T.compute((1,), lambda i: T.sum(A[k], axis=k), name="R")
    a, r = np.arange(10, dtype="float32"), np.zeros(1, "float32")
    run(T.create_prim_func([A, R]), a, r)
    assert r[0] == 3 + 4 + 5 + 6


# symbolic shapes and arguments ------------------------------------------------------------

def _symbolic():
    n = T.size_var("n")
    A = T.placeholder((n, 3), name="A")
    k = T.reduce_axis((0, 3), name="k")
    B = T.compute((n,), lambda i: T.sum(A[i, k] * 2.0, axis=k), name="B")
    return T.create_prim_func([A, B])


@pytest.mark.parametrize("n", [1, 7])
def test_symbolic_shape_at_two_sizes(n):
    a, b = RNG.standard_normal((n, 3)).astype("float32"), np.zeros(n, "float32")
    run(_symbolic(), a, b)
    np.testing.assert_allclose(b, a.sum(axis=1) * 2, rtol=1e-6)


def test_symbolic_size_must_agree():
    with pytest.raises(T.ShapeError, match=r"argument 1 \(B\): dimension 0 is n = 4 "
                                           r"\(bound by an earlier argument\), found 5"):
        T.interpret(_symbolic(), np.zeros((4, 3), "float32"), np.zeros(5, "float32"))


def test_argument_errors():
    f = _symbolic()
    with pytest.raises(T.ShapeError, match=r"main takes 2 argument\(s\) \(A, B\), found 1"):
        T.interpret(f, np.zeros((4, 3), "float32"))
    with pytest.raises(T.DTypeError, match=r"argument 0 \(A\): expected dtype float32, "
                                           r"found float64"):
        T.interpret(f, np.zeros((4, 3)), np.zeros(4, "float32"))
    with pytest.raises(T.ShapeError, match=r"argument 0 \(A\): dimension 1 must be 3, found 2"):
        T.interpret(f, np.zeros((4, 2), "float32"), np.zeros(4, "float32"))
    with pytest.raises(T.ShapeError, match=r"expected a 2-D array of shape \(n, 3\), found 1-D"):
        T.interpret(f, np.zeros(4, "float32"), np.zeros(4, "float32"))
    with pytest.raises(T.DTypeError, match=r"argument 1 \(B\): expected a numpy array"):
        T.interpret(f, np.zeros((4, 3), "float32"), [0.0] * 4)


def test_bfloat16_argument_dtype_message():
    f = unary_func(lambda x: x, "bfloat16", n=2)
    with pytest.raises(T.DTypeError, match=r"expected dtype uint16 \(bfloat16 tensors are "
                                           r"stored as uint16 bits\), found float32"):
        T.interpret(f, np.zeros(2, "float32"), np.zeros(2, "uint16"))


def test_scalar_params():
    alpha = T.var("alpha", "float32")
    shift = T.var("shift", "int32")
    A = T.placeholder((4,), name="A")
    B = T.compute((4,), lambda i: A[i] * alpha + shift.astype("float32"), name="B")
    f = T.create_prim_func([A, alpha, shift, B])
    b = np.zeros(4, "float32")
    T.interpret(f, np.arange(4, dtype="float32"), 0.5, 3, b)
    assert b.tolist() == [3.0, 3.5, 4.0, 4.5]
    with pytest.raises(T.DTypeError, match=r"argument 2 \(shift\): expected an integer for "
                                           r"the int32 parameter, found the float 1.5"):
        T.interpret(f, np.zeros(4, "float32"), 0.5, 1.5, b)
    with pytest.raises(T.DTypeError, match=r"argument 2 \(shift\): 3000000000 does not fit"):
        T.interpret(f, np.zeros(4, "float32"), 0.5, 3_000_000_000, b)


def test_scalar_size_param_checked_against_shape():
    n = T.var("n")
    A = T.placeholder((n,), name="A")
    B = T.compute((n,), lambda i: A[i] + 1.0, name="B")
    f = T.create_prim_func([n, A, B])
    b = np.zeros(3, "float32")
    T.interpret(f, 3, np.ones(3, "float32"), b)
    assert b.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(T.ShapeError, match=r"argument 1 \(A\): dimension 0 is n = 4"):
        T.interpret(f, 4, np.ones(3, "float32"), b)
