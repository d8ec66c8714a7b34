"""Every dtype and math intrinsic of the llvm and c backends, against numpy."""

import math

import numpy as np
import pytest

import cuvil_tir as T
import targets

TARGETS = ["llvm", "c"]


@pytest.fixture(params=TARGETS)
def target(request):
    return request.param


INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def _wrap(values, dt):
    info = np.iinfo(dt)
    span = 1 << info.bits
    out = []
    for v in values:
        v %= span
        if info.min < 0 and v > info.max:
            v -= span
        out.append(v)
    return np.array(out, dtype=dt)


def _trunc_div(x, y):
    if y == 0:
        return 0
    q = abs(x) // abs(y)
    return q if (x >= 0) == (y > 0) else -q


def _build_binary(dt, n, ops, target):
    A = T.placeholder((n,), dt, name="A")
    B = T.placeholder((n,), dt, name="B")
    outs = [T.compute((n,), (lambda op: lambda i: op(A[i], B[i]))(op), name=name)  # noqa: B023 - bound by the outer lambda
            for name, op in ops]
    return targets.build(T.create_prim_func([A, B, *outs]), target)


INT_OPS = [("add", lambda a, b: a + b), ("sub", lambda a, b: a - b),
           ("mul", lambda a, b: a * b), ("floordiv", lambda a, b: a // b),
           ("floormod", lambda a, b: a % b), ("truncdiv", T.truncdiv),
           ("truncmod", T.truncmod), ("min", T.min), ("max", T.max)]


@pytest.mark.parametrize("dt", INTS)
def test_integer_arithmetic_wraps_and_division_by_zero_is_zero(dt, target):
    info = np.iinfo(dt)
    vals_a = [info.max, info.min, 7, 100, 0, 9, info.max - 1, 3]
    vals_b = [1, 3, 0, 7, 5, 2, 2, 0]
    if info.min < 0:
        vals_a += [-7, -7, 7, info.min]
        vals_b += [2, -2, -2, -1]          # INT_MIN / -1 must not trap
    a, b = np.array(vals_a, dt), np.array(vals_b, dt)
    n = len(a)
    mod = _build_binary(dt, n, INT_OPS, target)
    outs = [np.zeros(n, dt) for _ in INT_OPS]
    mod(a, b, *outs)
    xs, ys = [int(v) for v in a], [int(v) for v in b]
    want = {
        "add": [x + y for x, y in zip(xs, ys)], "sub": [x - y for x, y in zip(xs, ys)],
        "mul": [x * y for x, y in zip(xs, ys)],
        "floordiv": [x // y if y else 0 for x, y in zip(xs, ys)],
        "floormod": [x % y if y else 0 for x, y in zip(xs, ys)],
        "truncdiv": [_trunc_div(x, y) for x, y in zip(xs, ys)],
        "truncmod": [x - _trunc_div(x, y) * y if y else 0 for x, y in zip(xs, ys)],
        "min": [min(x, y) for x, y in zip(xs, ys)], "max": [max(x, y) for x, y in zip(xs, ys)],
    }
    for (name, _), got in zip(INT_OPS, outs):
        np.testing.assert_array_equal(got, _wrap(want[name], dt), err_msg=f"{dt} {name}")


def _to_bf16(x):
    bits = np.asarray(x, "float32").view("uint32").astype("uint64")
    r = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("uint16")
    return np.where(np.isnan(x), np.uint16(0x7FC0), r)


def _from_bf16(bits):
    return (bits.astype("uint32") << 16).view("float32")


FLOAT_OPS = [("add", lambda a, b: a + b), ("sub", lambda a, b: a - b),
             ("mul", lambda a, b: a * b), ("div", lambda a, b: a / b),
             ("min", T.min), ("max", T.max), ("floordiv", lambda a, b: a // b),
             ("floormod", lambda a, b: a % b)]
NP_FLOAT = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
            "min": np.minimum, "max": np.maximum, "floordiv": np.floor_divide,
            "floormod": np.mod}


@pytest.mark.parametrize("dt", ["float16", "float32", "float64", "bfloat16"])
def test_float_arithmetic(dt, target):
    rng = np.random.default_rng(5)
    a32 = rng.uniform(-10, 10, 16).astype("float32")
    b32 = rng.uniform(0.5, 4, 16).astype("float32") * np.where(np.arange(16) % 3, 1, -1)
    if dt == "bfloat16":
        a, b = _to_bf16(a32), _to_bf16(b32)
        fa, fb = _from_bf16(a), _from_bf16(b)
    else:
        a, b = a32.astype(dt), b32.astype(dt)
        fa, fb = a, b
    mod = _build_binary(dt, 16, FLOAT_OPS, target)
    store = "uint16" if dt == "bfloat16" else dt
    outs = [np.zeros(16, store) for _ in FLOAT_OPS]
    mod(a, b, *outs)
    for (name, _), got in zip(FLOAT_OPS, outs):
        if dt == "bfloat16":
            want = _to_bf16(NP_FLOAT[name](fa, fb))
            got_f, want_f = _from_bf16(got), _from_bf16(want)
            np.testing.assert_allclose(got_f, want_f, rtol=1e-2, atol=1e-2, err_msg=name)
            if name in ("add", "sub", "mul", "div", "min", "max"):
                np.testing.assert_array_equal(got, want, err_msg=name)
        elif name in ("floordiv", "floormod"):
            np.testing.assert_allclose(got, NP_FLOAT[name](fa, fb), rtol=1e-3, atol=1e-3)
        else:
            np.testing.assert_array_equal(got, NP_FLOAT[name](fa, fb), err_msg=f"{dt} {name}")


def test_bool_storage_and_logic(target):
    A = T.placeholder((6,), "bool", name="A")
    X = T.placeholder((6,), "int32", name="X")
    B = T.compute((6,), lambda i: A[i] & (X[i] > 2) | ~A[i] & (X[i] < 0), name="B")
    C = T.compute((6,), lambda i: T.if_then_else(A[i], X[i], -X[i]), name="C")
    mod = targets.build(T.create_prim_func([A, X, B, C]), target)
    a = np.array([True, False, True, False, True, False])
    x = np.array([3, -1, 1, 5, 4, 0], "int32")
    b, c = np.zeros(6, bool), np.zeros(6, "int32")
    mod(a, x, b, c)
    np.testing.assert_array_equal(b, (a & (x > 2)) | (~a & (x < 0)))
    np.testing.assert_array_equal(c, np.where(a, x, -x))
    if target == "llvm":
        assert "i8" in mod.get_source("ll")


CASTS = [("float32", "int8"), ("float32", "int32"), ("float32", "uint8"),
         ("float64", "int64"), ("int32", "float32"), ("uint32", "float64"),
         ("int32", "int8"), ("int8", "uint8"), ("uint8", "int32"), ("int16", "uint64"),
         ("float32", "float16"), ("float16", "float64"), ("float64", "float32"),
         ("float32", "bool"), ("int32", "bool"), ("bool", "float32"), ("int64", "float16")]


@pytest.mark.parametrize("src, dst", CASTS)
def test_casts_match_numpy_astype(src, dst, target):
    raw = np.array([0.0, 1.0, 2.7, -3.5 if src[0] != "u" else 3.5, 100.25, 0.5, 7.0, 13.0])
    if src == "bool":
        a = raw.astype(bool)
    elif np.dtype(src).kind in "iu":
        a = np.round(raw).astype(src)
        if src == "int32" and dst == "int8":
            a = np.array([300, -200, 127, 128, -129, 0, 5, 1000], "int32")
    else:
        a = raw.astype(src)
        if dst[0] == "u":
            a = np.abs(a)
    A = T.placeholder((8,), src, name="A")
    B = T.compute((8,), lambda i: A[i].astype(dst), name="B")
    mod = targets.build(T.create_prim_func([A, B]), target)
    b = np.zeros(8, dst)
    mod(a, b)
    np.testing.assert_array_equal(b, a.astype(dst))


def test_bfloat16_casts_round_to_nearest_even(target):
    a = np.array([1.0, 1.00390625, 1.01171875, -2.5, 3.4e38, np.inf, np.nan, 1e-3], "float32")
    A = T.placeholder((8,), name="A")
    B = T.compute((8,), lambda i: A[i].astype("bfloat16"), name="B")
    C = T.compute((8,), lambda i: B[i].astype("float32"), name="C")
    mod = targets.build(T.create_prim_func([A, B, C]), target)
    b, c = np.zeros(8, "uint16"), np.zeros(8, "float32")
    mod(a, b, c)
    np.testing.assert_array_equal(b, _to_bf16(a))
    np.testing.assert_array_equal(c, _from_bf16(_to_bf16(a)))


_erf = np.vectorize(math.erf)
UNARY = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "log10": np.log10,
    "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "erf": _erf, "floor": np.floor,
    "ceil": np.ceil, "round": np.round, "trunc": np.trunc, "sin": np.sin, "cos": np.cos,
    "abs": np.abs,
}


@pytest.mark.parametrize("dt", ["float32", "float64", "float16"])
def test_every_math_intrinsic(dt, target):
    x = np.array([0.5, 1.5, 2.5, 3.25, 0.125, 7.5, 2.0, 9.75], dt)
    A = T.placeholder((8,), dt, name="A")
    outs = [T.compute((8,), (lambda fn: lambda i: fn(A[i]))(getattr(T, name)), name=name)
            for name in UNARY]
    P = T.compute((8,), lambda i: T.pow(A[i], 1.5), name="pow")
    F = T.compute((8,), lambda i: T.fma(A[i], A[i], 1.0), name="fma")
    N = T.compute((8,), lambda i: T.abs(0.0 - A[i]), name="negabs")
    mod = targets.build(T.create_prim_func([A, *outs, P, F, N]), target)
    res = [np.zeros(8, dt) for _ in range(len(UNARY) + 3)]
    mod(x, *res)
    tol = 2e-3 if dt == "float16" else 1e-6
    x64 = x.astype("float64")
    for name, got in zip(UNARY, res):
        want = UNARY[name](x64).astype(dt)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"{dt} {name}")
    np.testing.assert_allclose(res[-3], (x64 ** 1.5).astype(dt), rtol=tol)
    np.testing.assert_allclose(res[-2], (x64 * x64 + 1).astype(dt), rtol=tol)
    np.testing.assert_array_equal(res[-1], x)
    # round is half to even, like numpy
    np.testing.assert_array_equal(res[list(UNARY).index("round")], np.round(x))


def test_integer_abs(target):
    A = T.placeholder((4,), "int32", name="A")
    B = T.compute((4,), lambda i: T.abs(A[i]), name="B")
    mod = targets.build(T.create_prim_func([A, B]), target)
    a = np.array([-3, 4, 0, -(2 ** 31)], "int32")
    b = np.zeros(4, "int32")
    mod(a, b)
    np.testing.assert_array_equal(b, np.abs(a))


def test_float16_needs_no_runtime_library_calls():
    A = T.placeholder((16,), "float16", name="A")
    B = T.compute((16,), lambda i: A[i] * A[i] + A[i].astype("float64").astype("float16"),
                  name="B")
    mod = targets.build(T.create_prim_func([A, B]))
    asm = mod.get_source("asm")
    assert "__extendhfsf2" not in asm and "__truncsfhf2" not in asm
    assert "__truncdfhf2" not in asm
    a = np.linspace(-3, 3, 16).astype("float16")
    b = np.zeros(16, "float16")
    mod(a, b)
    # within one fp16 ulp of the exact result: a host with AVX512-FP16 (Sapphire
    # Rapids) contracts the multiply-add into one vfmadd...ph, rounded once where numpy
    # rounds twice
    exact = (a.astype("float64") * a + a).astype("float16")
    np.testing.assert_array_max_ulp(b, exact, maxulp=1)
