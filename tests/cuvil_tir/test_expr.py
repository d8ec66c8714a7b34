"""Expression building: operators, promotion at the operator level, folding, casts, errors."""

from __future__ import annotations

import pytest

import cuvil_tir as T
from cuvil_tir.node import same

i, j = T.var("i"), T.var("j")
x, y = T.var("x", "float32"), T.var("y", "float32")
h = T.var("h", "float16")


@pytest.mark.parametrize("build,cls,dtype", [
    (lambda: i + j, T.Add, "int32"), (lambda: i - j, T.Sub, "int32"),
    (lambda: i * j, T.Mul, "int32"), (lambda: i // j, T.FloorDiv, "int32"),
    (lambda: i % j, T.FloorMod, "int32"), (lambda: x / y, T.Div, "float32"),
    (lambda: T.truncdiv(i, j), T.Div, "int32"), (lambda: T.truncmod(i, j), T.Mod, "int32"),
    (lambda: T.min(i, j), T.Min, "int32"), (lambda: T.max(x, y), T.Max, "float32"),
    (lambda: i < j, T.LT, "bool"), (lambda: i <= j, T.LE, "bool"),
    (lambda: i > j, T.GT, "bool"), (lambda: i >= j, T.GE, "bool"),
    (lambda: i == j, T.EQ, "bool"), (lambda: i != j, T.NE, "bool"),
    (lambda: (i < j) & (j < 4), T.And, "bool"), (lambda: (i < j) | (j < 4), T.Or, "bool"),
    (lambda: ~(i < j), T.Not, "bool"), (lambda: x.astype("int8"), T.Cast, "int8"),
])
def test_operators_build_nodes(build, cls, dtype):
    e = build()
    assert type(e) is cls and e.dtype == dtype


def test_reflected_operators_put_the_literal_first():
    e = 7 // i
    assert type(e) is T.FloorDiv and isinstance(e.a, T.IntImm) and e.a.value == 7 and e.b is i
    e = 2.0 - x
    assert type(e) is T.Sub and e.a.value == 2.0 and e.a.dtype == "float32"
    e = 3 % i
    assert type(e) is T.FloorMod and e.a.value == 3


def test_literals_take_the_other_operands_dtype():
    assert (T.var("n", "int64") + 1).b.dtype == "int64"
    assert (h * 2.0).b.dtype == "float16"
    assert (T.var("u", "uint8") + 1).dtype == "uint8"


def test_mixed_width_operands_promote_with_casts():
    e = h + x
    assert e.dtype == "float32" and type(e.a) is T.Cast and e.a.value is h and e.b is x
    e = T.var("a", "int8") * T.var("b", "int64")
    assert e.dtype == "int64" and type(e.a) is T.Cast


def test_scalar_and_vector_operands_broadcast():
    v = T.var("v", "float32x4")
    e = v + x
    assert e.dtype == "float32x4" and type(e.b) is T.Broadcast and e.b.value is x
    assert (v * 2.0).b.dtype == "float32x4"


def test_negation():
    assert (-i).dtype == "int32" and type(-i) is T.Sub
    assert (-T.const(3)).value == -3 and (-T.const(1.5)).value == -1.5
    with pytest.raises(T.DTypeError, match=r"cannot negate an expression of dtype uint8"):
        -T.var("u", "uint8")


@pytest.mark.parametrize("build,msg", [
    (lambda: i + x, r"'\+': cannot combine int32 with float32; Cuvil does not guess"),
    (lambda: i + 1.5, r"cannot combine the float literal 1.5 with an expression of dtype int32"),
    (lambda: i * 2.0, r"the float literal 2.0 .* write an int literal or cast"),
    (lambda: i / 2, r"'/' is true division and needs float operands, found int32; use '//'"),
    (lambda: (i < 1) + (j < 1), r"'\+' is not defined on bool operands"),
    (lambda: ~x, r"'~' expects a bool or integer expression, found float32"),
    (lambda: i & (j < 1), r"T.bitwise_and takes integer operands, found j < 1 of dtype "
                          r"bool; .* compare the integer first, e.g. \(x > 0\) & c"),
    (lambda: (i < 1) | j, r"T.bitwise_or takes integer operands, found i < 1 of dtype bool"),
    (lambda: x >> 1, r"T.shift_right takes integer operands, found x of dtype float32"),
    (lambda: (i < 1) ^ (j < 1), r"T.bitwise_xor takes integer operands, found i < 1"),
    (lambda: i + T.var("u", "uint32"), r"cannot combine int32 with uint32"),
    (lambda: T.exp(i), r"T.exp expects a float operand, found int32; cast it first"),
    (lambda: T.if_then_else(i, 1, 2), r"T.if_then_else: the condition must be bool, found int32"),
    (lambda: T.select(x, 1.0, 2.0), r"T.select: the condition must be bool, found float32"),
    (lambda: T.abs(i < 2), r"T.abs expects a number, found bool"),
    (lambda: T.truncdiv(x, y), r"T.truncdiv expects integers, found float32"),
    (lambda: T.const("a"), r"const: expected a Python bool, int or float, found 'a'"),
    (lambda: T.const(1.5, "int32"), r"const: 1.5 is not an integer but dtype is int32"),
    (lambda: T.IntImm(1, "float32"), r"IntImm: expected a scalar integer or bool dtype"),
    (lambda: T.FloatImm(1.0, "int32"), r"FloatImm: expected a scalar float dtype, found int32"),
    (lambda: T.Add(i, x), r"Add: operands must have one dtype, found int32 and float32"),
    (lambda: T.Select(i < 1, i, x), r"Select: branches must have one dtype"),
    (lambda: T.Select(i, i, i), r"Select: condition must be bool, found int32"),
    (lambda: T.Not(i), r"Not: expected a bool operand, found int32"),
    (lambda: T.And(i, j), r"And: expected bool operands, found int32"),
    (lambda: T.Cast("float32x4", i), r"Cast: cannot change lanes \(int32 -> float32x4\)"),
    (lambda: T.cast(T.var("v", "float32x4"), "int32x8"),
     r"cast: cannot change lanes \(float32x4 -> int32x8\)"),
    (lambda: T.var("v", "float32x4") + T.var("w", "float32x8"), r"vector lanes differ"),
    (lambda: i + "a", r"expected an expression or a Python number, found str 'a'"),
])
def test_dtype_errors(build, msg):
    with pytest.raises(T.DTypeError, match=msg):
        build()


def test_bool_of_symbolic_expression_raises():
    with pytest.raises(T.DTypeError, match=r"a symbolic expression \(i < 3\) has no Python "
                                           r"truth value; use T.if_then_else"):
        bool(i < 3)
    with pytest.raises(T.DTypeError, match=r"no Python truth value"):
        x if x else y  # noqa: B018 - the conditional itself must raise


def test_eq_truth_value_is_structural_equality():
    assert bool(i + 1 == i + 1) and not bool(i + 1 == j + 1)
    assert (i + 1) in [j, i + 1]
    assert bool(i != j) and not bool(i != i)
    assert (i == x) is False and (i != x) is True  # incompatible dtypes: plain bools


@pytest.mark.parametrize("build,want", [
    (lambda: T.const(3) + 4, 7), (lambda: T.const(3) * T.const(-5), -15),
    (lambda: T.const(-7) // 2, -4), (lambda: T.const(-7) % 2, 1),
    (lambda: T.truncdiv(-7, 2), -3), (lambda: T.truncmod(-7, 2), -1),
    (lambda: T.truncmod(7, -2), 1), (lambda: T.min(3, 5), 3), (lambda: T.max(3, 5), 5),
    (lambda: T.const(100, "int8") + T.const(100, "int8"), -56),
    (lambda: T.const(2 ** 62 + 1, "int64") // 1, 2 ** 62 + 1),
    (lambda: T.truncdiv(T.const(2 ** 62 + 1, "int64"), 1), 2 ** 62 + 1),
    (lambda: T.truncmod(T.const(-(2 ** 62) - 3, "int64"), 2 ** 62), -3),
])
def test_integer_constant_folding(build, want):
    e = build()
    assert isinstance(e, T.IntImm) and e.value == want


def test_comparison_and_logic_folding():
    e = T.const(3) < 4
    assert isinstance(e, T.IntImm) and e.dtype == "bool" and e.value == 1
    assert (T.const(True) & T.const(False)).value == 0
    assert (T.const(True) | T.const(False)).value == 1
    assert T.all().value == 1 and T.any().value == 0
    assert same(T.all(i < 2), i < 2)
    assert T.if_then_else(True, 1, 2).value == 1
    assert T.select(False, 1.0, x) is x
    assert T.logical_not(T.const(True)).value == 0


def test_float_arithmetic_is_not_folded():
    e = T.const(1.5) + 2.0
    assert type(e) is T.Add and e.dtype == "float32"


@pytest.mark.parametrize("build,text", [
    (lambda: T.const(7) // 0, "7 // 0"), (lambda: i // 0, "i // 0"),
    (lambda: i % T.const(0), "i % 0"), (lambda: T.floordiv(i, 0), "i // 0"),
    (lambda: T.truncdiv(i, 0), r"T.truncdiv\(i, 0\)"),
    (lambda: T.truncmod(7, 0), r"T.truncmod\(7, 0\)"),
])
def test_constant_division_by_zero_is_a_coded_error_at_build_time(build, text):
    # before: a ZeroDivisionError outside the hierarchy when both sides were constant,
    # and no error at all for a symbolic dividend
    with pytest.raises(T.DivisionByZeroError, match=r"integer division by zero in " + text):
        build()
    assert issubclass(T.DivisionByZeroError, T.LoweringError)


def test_division_by_zero_at_run_time_folds_to_zero():
    # the node built directly (as passes do) keeps the run-time semantics: x // 0 == 0
    assert T.arith.simplify(T.FloorDiv(T.const(7), T.const(0))).value == 0


@pytest.mark.parametrize("build,dt", [
    (lambda: T.var("a", "int8") + 300, "int8"), (lambda: 300 + T.var("a", "int8"), "int8"),
    (lambda: T.var("u", "uint8") - (-1), "uint8"), (lambda: T.var("a", "int32") * (1 << 31),
                                                    "int32"),
])
def test_out_of_range_literal_is_refused_not_wrapped(build, dt):
    # before: A_int8[i] + 300 became + T.int8(44)
    with pytest.raises(T.DTypeError, match=rf"literal .* does not fit {dt}.*range.*astype"):
        build()


@pytest.mark.parametrize("build", [
    lambda: T.const(300, "int8"), lambda: T.int8(300), lambda: T.const(-1, "uint32"),
    lambda: T.const(1 << 64, "int64"),
])
def test_out_of_range_const_is_refused(build):
    with pytest.raises(T.DTypeError, match=r"does not fit .*T\.cast"):
        build()


def test_in_range_literals_and_explicit_wrapping_still_work():
    a = T.var("a", "int8")
    assert str(a + 127) == "a + T.int8(127)" and str(a + -128) == "a + T.int8(-128)"
    assert T.const(255, "uint8").value == 255 and T.cast(300, "int8").value == 44


def test_vector_lanes_mismatch_is_refused_for_vector_buffers():
    # before: loads of float32x8/float32x4 buffers had dtype float32 and added silently
    X = T.placeholder((4,), "float32x8", name="X")
    Y = T.placeholder((4,), "float32x4", name="Y")
    assert X[0].dtype == "float32x8"
    with pytest.raises(T.DTypeError, match=r"float32x8 with float32x4: vector lanes differ"):
        T.compute((4,), lambda k: X[k] + Y[k], name="C")
    with pytest.raises(T.DTypeError, match=r"vector lanes differ"):
        T.var("a", "float32x8") + T.var("b", "float32x4")


@pytest.mark.parametrize("value,dt,want", [
    (3.7, "int32", 3), (-3.7, "int32", -3), (300, "int8", 44), (-1, "uint8", 255),
    (2, "bool", 1), (0.0, "bool", 0), (5, "float16", 5.0), (True, "int32", 1),
])
def test_cast_constants_with_c_semantics(value, dt, want):
    e = T.cast(value, dt)
    assert e.dtype == dt and e.value == want


def test_cast_expressions():
    assert T.cast(i, "int32") is i
    c = T.cast(i, "float32")
    assert type(c) is T.Cast and c.value is i
    b = T.cast(x, "float32x4")
    assert type(b) is T.Broadcast and b.lanes == 4 and b.value is x
    assert T.cast(float("nan"), "int32").dtype == "int32"  # left to run time: no fold
    assert type(T.cast(float("nan"), "int32")) is T.Cast


def test_intimm_wraps_and_vector_const_broadcasts():
    assert T.IntImm(300, "uint8").value == 44
    assert T.const(2 ** 40).dtype == "int64"
    v = T.const(1.0, "float32x4")
    assert type(v) is T.Broadcast and v.dtype == "float32x4"


def test_intrinsics_keep_dtype():
    assert T.exp(h).dtype == "float16" and T.sigmoid(x).op == "sigmoid"
    assert T.abs(T.var("u", "uint8")).name == "u"  # unsigned abs is the identity
    assert T.pow(x, 2.0).args[1].dtype == "float32"
    assert T.fma(x, y, 1.0).op == "fma"
    assert T.min_value("int8").value == -128 and T.max_value("uint8").value == 255
    assert T.max_value("float16").value == 65504.0
    assert T.infinity("float32").value == float("inf")


def test_ramp_broadcast_let_dtypes():
    r = T.Ramp(i, T.const(2), 8)
    assert r.dtype == "int32x8" and r.lanes == 8
    assert T.Broadcast(x, 4).dtype == "float32x4"
    v = T.var("v")
    assert T.Let(v, T.const(1), v * 3).dtype == "int32"
    A = T.decl_buffer((16,), "float32", "A")
    assert A[r].dtype == "float32x8"
