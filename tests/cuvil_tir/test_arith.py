"""Arithmetic analysis: exact rewrite results, bounds, and hypothesis soundness checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cuvil_tir as T
from cuvil_tir import arith, dtype as D
from cuvil_tir.arith import Analyzer, bound_of, const_int_bound
from cuvil_tir.arith.fold import fold_binary, fold_call, fold_cast, round_bf16
from cuvil_tir.expr import (Add, And, Call, Cast, Div, EQ, FloatImm, FloorDiv, FloorMod,
                            GE, GT, IntImm, LE, LT, Max, Min, Mod, Mul, NE, Not, Or, Select,
                            Sub, Var)


# an exact reference evaluator with Cuvil's integer semantics -----------------------------

def _wrap(v, dt):
    return D.wrap_int(int(v), dt) if not D.is_bool(dt) else int(bool(v))


def _tdiv(x, y):
    if y == 0:
        return 0
    q = abs(x) // abs(y)
    return q if (x >= 0) == (y > 0) else -q


def evaluate(e, env):
    """Evaluate an integer/bool expression exactly (wrap per op, x//0 == 0)."""
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Var):
        return env[e]
    dt = e.dtype
    if isinstance(e, Select):
        c = evaluate(e.condition, env)
        t, f = evaluate(e.true_value, env), evaluate(e.false_value, env)
        return t if c else f
    if isinstance(e, Call) and e.op == "if_then_else":
        return evaluate(e.args[1] if evaluate(e.args[0], env) else e.args[2], env)
    if isinstance(e, Not):
        return int(not evaluate(e.a, env))
    if isinstance(e, Cast):
        return _wrap(evaluate(e.value, env), dt)
    a, b = evaluate(e.a, env), evaluate(e.b, env)
    ops = {Add: lambda: a + b, Sub: lambda: a - b, Mul: lambda: a * b,
           FloorDiv: lambda: a // b if b else 0, FloorMod: lambda: a % b if b else 0,
           Div: lambda: _tdiv(a, b), Mod: lambda: a - b * _tdiv(a, b) if b else 0,
           Min: lambda: min(a, b), Max: lambda: max(a, b),
           LT: lambda: a < b, LE: lambda: a <= b, GT: lambda: a > b, GE: lambda: a >= b,
           EQ: lambda: a == b, NE: lambda: a != b,
           And: lambda: bool(a) and bool(b), Or: lambda: bool(a) or bool(b)}
    return _wrap(ops[type(e)](), dt)


# random expressions ------------------------------------------------------------------------

VARS = {dt: [Var(n, dt) for n in ("i", "j", "k")] for dt in ("int32", "int8", "uint8")}
LIMITS = {"int32": (-40, 40), "int8": (-20, 20), "uint8": (0, 40)}


def int_exprs(dt):
    lo, hi = LIMITS[dt]
    leaf = st.one_of(st.sampled_from(VARS[dt]),
                     st.integers(D.int_range(dt)[0] if dt != "int32" else -20,
                                 D.int_range(dt)[1] if dt != "int32" else 20)
                     .map(lambda v: IntImm(v, dt)))

    def extend(children):
        const = st.sampled_from([0, 1, 2, 3, 4, 8, 16, -1, -4] if dt != "uint8"
                                else [0, 1, 2, 3, 4, 8, 16]).map(lambda v: IntImm(v, dt))
        binop = st.sampled_from([Add, Sub, Mul, Min, Max, FloorDiv, FloorMod, Div, Mod])
        cmp = st.sampled_from([LT, LE, GT, GE, EQ, NE])
        return st.one_of(
            st.builds(lambda op, a, b: op(a, b), binop, children, children),
            st.builds(lambda op, a, c: op(a, c), binop, children, const),
            st.builds(lambda c, a, b, x, y: Select(c(a, b), x, y), cmp, children, children,
                      children, children),
            st.builds(lambda c, a, b, x, y: Call(dt, "if_then_else", (c(a, b), x, y)), cmp,
                      children, children, children, children),
        )

    return st.recursive(leaf, extend, max_leaves=10), lo, hi


STRATS = {dt: int_exprs(dt)[0] for dt in VARS}
_CMP = st.sampled_from([LT, LE, GT, GE, EQ, NE])
BOOLS = st.recursive(st.builds(lambda c, a, b: c(a, b), _CMP, STRATS["int32"], STRATS["int32"]),
                     lambda ch: st.one_of(st.builds(And, ch, ch), st.builds(Or, ch, ch),
                                          st.builds(Not, ch)), max_leaves=3)


def _check(dt, data, e):
    bounds = {}
    env = {}
    for v in VARS[dt]:
        lo, hi = LIMITS[dt]
        a = data.draw(st.integers(lo, hi))
        b = data.draw(st.integers(a, hi))
        bounds[v] = T.Range(IntImm(a, dt), IntImm(b - a + 1, dt))
        env[v] = data.draw(st.integers(a, b))
    s = arith.simplify(e, bounds)
    want = evaluate(e, env)
    got = evaluate(s, env)
    assert got == want, f"{e}  ->  {s}  at {env}"
    lo, hi = const_int_bound(e, bounds)
    assert lo <= want <= hi, f"bound {lo, hi} of {e} misses {want} at {env}"
    return s


@pytest.mark.parametrize("dt", ["int32", "int8", "uint8"])
@settings(max_examples=100)
@given(data=st.data())
def test_simplify_and_const_bound_are_sound(dt, data):
    _check(dt, data, data.draw(STRATS[dt]))


@settings(max_examples=50)
@given(data=st.data())
def test_simplify_bool_exprs_sound(data):
    _check("int32", data, data.draw(BOOLS))


@settings(max_examples=40)
@given(data=st.data())
def test_affine_index_rules_sound(data):
    # structured index expressions, where the division rules fire most
    i, j, k = VARS["int32"]
    c = data.draw(st.sampled_from([2, 4, 8]))
    a1 = data.draw(st.integers(-3, 3))
    k0 = data.draw(st.integers(-9, 9))
    e = (i * c * a1 + j + k * c + k0)
    for op in (FloorDiv, FloorMod):
        for d in (c, c * 2, 1, 3):
            _check("int32", data, op(e, IntImm(d)))
    _check("int32", data, FloorDiv(FloorDiv(e, IntImm(c)), IntImm(2)))
    # every coefficient a multiple of c: the common factor comes out of the division
    shared = i * c * a1 + k * c + k0
    for d in (c * 2, c * 3, c * 4):
        _check("int32", data, FloorDiv(shared, IntImm(d)))
    for cmp in (LT, LE, GT, GE, EQ, NE):
        _check("int32", data, cmp(shared, j * 2 + k0 - 1))
        _check("int32", data, cmp(IntImm(k0), shared))
    _check("int32", data, FloorMod(FloorMod(e, IntImm(c * 2)), IntImm(c)))


@settings(max_examples=60)
@given(data=st.data())
def test_bound_of_is_sound(data):
    i, j = Var("i"), Var("j")
    io = Var("io")
    strat = st.recursive(
        st.one_of(st.sampled_from([i, j, io]), st.integers(-6, 6).map(IntImm)),
        lambda ch: st.one_of(
            st.builds(lambda a, b: a + b, ch, ch), st.builds(lambda a, b: a - b, ch, ch),
            st.builds(lambda a, c: a * c, ch, st.integers(-3, 3)),
            st.builds(lambda a, b: a * b, ch, ch),
            st.builds(lambda a, c: a // c, ch, st.sampled_from([2, 3, 4, -2])),
            st.builds(lambda a, c: a % c, ch, st.sampled_from([2, 3, 4])),
            st.builds(Min, ch, ch), st.builds(Max, ch, ch)),
        max_leaves=8)
    e = data.draw(strat)
    ei = data.draw(st.integers(1, 6))
    ej = data.draw(st.integers(1, 6))
    # j's range depends on io (a tile), as in compute_at region analysis
    ranges = {i: T.Range(IntImm(0), IntImm(ei)), j: T.Range(io * 2, IntImm(ej))}
    lo, hi = bound_of(e, ranges)
    io_v = data.draw(st.integers(-5, 5))
    lo_v, hi_v = evaluate(lo, {io: io_v}), evaluate(hi, {io: io_v})
    for iv in range(ei):
        for jv in range(io_v * 2, io_v * 2 + ej):
            v = evaluate(e, {i: iv, j: jv, io: io_v})
            assert lo_v <= v <= hi_v, f"{e}: {v} not in [{lo}, {hi}] = [{lo_v}, {hi_v}]"


# exact rewrite results ----------------------------------------------------------------------

i, j, k = Var("i"), Var("j"), Var("k")
R = {i: T.Range.from_extent(4), j: T.Range.from_extent(8), k: T.Range.from_extent(16)}
W = {i: (0, 1000), j: (0, 1000), k: (0, 1000)}     # wide: no comparison is decided


@pytest.mark.parametrize("expr, bounds, want", [
    ((i * 4 + j) - i * 4, None, "j"),
    (i * 1 + 0, None, "i"),
    (0 * i + j, None, "j"),
    ((i + 2) * 3 - 6, None, "i * 3"),
    (i + j - i - j, None, "0"),
    ((i * 8 + j) // 8, R, "i"),
    ((i * 8 + j) % 8, R, "j"),
    ((i * 8 + j + 8) // 8, R, "i + 1"),
    ((i * 8 + j) // 4, R, "i * 2 + j // 4"),
    ((i * 8 + k) // 8, {i: (0, 10), k: (0, 1000)}, "i + k // 8"),
    ((i * 8 + k) % 8, {i: (0, 10), k: (-5, 1000)}, "k % 8"),
    ((i // 4) // 2, None, "i // 8"),
    ((i % 16) % 4, None, "i % 4"),
    (i % 8, R, "i"),
    (i // 8, R, "0"),
    (T.min(i, 16), R, "i"),
    (T.max(i, 16), R, "16"),
    (T.min(i, i + 1), R, "i"),
    (T.max(j * 2, j), R, "j * 2"),
    (i < 16, {i: T.Range.from_extent(16)}, "T.bool(True)"),
    (i >= 16, {i: T.Range.from_extent(16)}, "T.bool(False)"),
    (i + 1 > i, R, "T.bool(True)"),
    (T.truncdiv(k, 4), R, "k // 4"),
    (T.truncmod(k, 4), R, "k % 4"),
    (T.select(i < 8, i, j), R, "i"),
    (T.if_then_else(k < 8, k, 0), R, "T.if_then_else(k < 8, k, 0)"),
    (T.if_then_else(i < 8, i + 1, 0), R, "i + 1"),
    ((i < 4) & (j < 3), R, "j < 3"),
    ((i < 0) | (j < 8), R, "T.bool(True)"),
    (~(i < j), None, "j <= i"),
    (T.if_then_else(i < 2, T.min(i, 2), 5), R, "T.if_then_else(i < 2, i, 5)"),
    (T.FloorDiv(i, T.const(0)), None, "0"),   # run-time semantics of x // 0
    (EQ(i * 4 + j, T.const(0)), R, "i == 0 and j == 0"),
    (EQ(i * 4 + j - 3, T.const(0)), R, "i * 4 + j == 3"),
    (i % 1, None, "0"),
    # the normal form of comparisons (TVM's): < and <=, constants moved to one side
    (i - 16 >= 0, W, "16 <= i"),
    (i > j, W, "j < i"),
    (i * 8 + j - 1 >= 0, W, "1 <= i * 8 + j"),
    (i * 8 + j - 1 < 224, W, "i * 8 + j < 225"),
    (i + 1 < j + 2, W, "i <= j"),
    (i + 1 <= j, W, "i < j"),
    (i < j - 2, W, "i + 2 < j"),
    (EQ(T.const(3), i + j + 1), W, "i + j == 2"),
    (~(i < k + 1), W, "k < i"),
    # a factor common to the divisor and every coefficient
    ((i * 8) // 16, W, "i // 2"),
    ((i * 8 + 7) // 16, W, "i // 2"),
    ((i * 6 + 3) // 4, W, "(i * 3 + 1) // 2"),
    ((i * 16 + j * 8 + 7) // 16, W, "i + j // 2"),
])
def test_rewrite_results(expr, bounds, want):
    got = arith.simplify(expr, bounds)
    assert T.to_text(got) == want


def test_wrap_around_blocks_rules():
    # i + 1 wraps at INT_MAX, so without bounds min(i, i + 1) is not i
    assert T.to_text(arith.simplify(T.min(i, i + 1))) == "T.min(i, i + 1)"
    assert T.to_text(Analyzer(index_no_overflow=True).simplify(T.min(i, i + 1))) == "i"


def test_overflow_blocks_division_rule():
    # x*8 wraps in int8 when x reaches 16: (x*8 + 1) // 8 is not x there
    x = Var("x", "int8")
    e = FloorDiv(x * 8 + 1, IntImm(8, "int8"))
    assert T.to_text(arith.simplify(e, {x: (0, 100)})) == T.to_text(e)
    assert T.to_text(arith.simplify(e, {x: (0, 15)})) == "x"
    ana = Analyzer(index_no_overflow=True)
    y = Var("y")
    assert T.to_text(ana.simplify((y * 8 + 1) // 8)) == "y"


def test_constraint_tightens_bounds():
    ana = Analyzer()
    ana.bind(i, T.Range.from_extent(16))
    ana.bind(j, T.Range.from_extent(16))
    with ana.constraint((i < 10) & (i * 4 + j >= 40)):
        # i*4 >= 40 - 15 forces i >= 7; then j >= 40 - 36
        assert ana.const_int_bound(i) == (7, 9)
        assert ana.const_int_bound(j) == (4, 15)
    with ana.constraint(~(i >= 3)):
        assert ana.const_int_bound(i) == (0, 2)
    assert ana.const_int_bound(i) == (0, 15)
    n = T.size_var("n")
    with ana.constraint(i < n):
        assert ana.can_prove(i < n)
        assert ana.can_prove(n > i)
        assert not ana.can_prove(i + 1 < n)
    assert not ana.can_prove(i < n)


def test_a_not_equal_constraint_trims_an_end_of_the_interval():
    # the else arm of T.if_then_else(i == 1, ...) with i in [0, 1] only sees i = 0
    ana = Analyzer()
    ana.bind(i, T.Range.from_extent(2))
    with ana.constraint(~(i == 1)):
        assert ana.const_int_bound(i) == (0, 0)
    with ana.constraint(i != 0):
        assert ana.const_int_bound(i) == (1, 1)
    ana.bind(j, T.Range.from_extent(8))
    with ana.constraint(j != 3):      # a value inside the interval leaves it whole
        assert ana.const_int_bound(j) == (0, 7)
    with ana.constraint(j * 2 != 14):  # only unit coefficients are trimmed
        assert ana.const_int_bound(j) == (0, 7)


def test_const_int_bound_cases():
    ana = Analyzer()
    ana.bind(i, T.Range(T.const(-3), T.const(7)))   # [-3, 3]
    assert ana.const_int_bound(i * i) == (-9, 9)
    assert ana.const_int_bound(i // 2) == (-2, 1)
    assert ana.const_int_bound(i % 4) == (0, 3)
    assert ana.const_int_bound(T.truncdiv(i, 2)) == (-1, 1)
    assert ana.const_int_bound(T.truncmod(i, 2)) == (-1, 1)
    assert ana.const_int_bound(T.abs(i)) == (0, 3)
    assert ana.const_int_bound(T.cast(i, "float32")) == (arith.NEG_INF, arith.POS_INF)
    assert ana.const_int_bound(T.var("u", "uint8") + 1) == (0, 255)
    assert ana.const_int_bound(T.size_var("n")) == (0, 2**31 - 1)
    assert ana.const_int_bound(i // T.var("d")) == (-3, 3)


@pytest.mark.parametrize("expr, ranges, want", [
    (i * 8 + j, R, ("0", "31")),
    (i * 8 - j, R, ("-7", "24")),
    ((i * 8 + j) // 4, R, ("0", "7")),
    (k % 8, R, ("0", "7")),
    (T.min(k, 9), R, ("0", "9")),
])
def test_bound_of_exact(expr, ranges, want):
    lo, hi = bound_of(expr, ranges)
    assert (T.to_text(lo), T.to_text(hi)) == want


def test_bound_of_symbolic():
    n, io = T.size_var("n"), Var("io")
    lo, hi = bound_of(io * 4 + i, {i: T.Range.from_extent(4)})
    assert (T.to_text(lo), T.to_text(hi)) == ("io * 4", "io * 4 + 3")
    lo, hi = bound_of(i // 4, {i: T.Range(T.const(0), n)})
    assert (T.to_text(lo), T.to_text(hi)) == ("0", "(n - 1) // 4")
    # nested: i ranges inside a tile of io, io ranges over n tiles
    lo, hi = bound_of(i, {i: T.Range(io * 4, T.const(4)), io: T.Range(T.const(0), n)})
    assert (T.to_text(lo), T.to_text(hi)) == ("0", "n * 4 - 1")
    lo, hi = bound_of(T.Ramp(i * 8, T.const(1), 8), {i: T.Range.from_extent(4)})
    assert (T.to_text(lo), T.to_text(hi)) == ("0", "31")


# constant folding ---------------------------------------------------------------------------

@pytest.mark.parametrize("dt", ["int8", "int16", "int32", "int64", "uint8", "uint16",
                                "uint32", "uint64"])
@settings(max_examples=40)
@given(data=st.data())
def test_fold_ints_match_numpy(dt, data):
    lo, hi = D.int_range(dt)
    a, b = data.draw(st.integers(lo, hi)), data.draw(st.integers(lo, hi))
    x, y = np.array([a], dt), np.array([b], dt)
    with np.errstate(all="ignore"):
        want = {"Add": x + y, "Sub": x - y, "Mul": x * y, "FloorDiv": x // y,
                "FloorMod": x % y, "Min": np.minimum(x, y), "Max": np.maximum(x, y)}
    for name, w in want.items():
        if name in ("FloorDiv", "FloorMod") and D.is_int(dt) and a == lo and b == -1:
            continue  # numpy's overflow there is platform-defined; Cuvil wraps
        got = fold_binary(name, IntImm(a, dt), IntImm(b, dt))
        assert got.value == int(w[0]) and got.dtype == dt, (name, a, b)
    assert fold_binary("LT", IntImm(a, dt), IntImm(b, dt)).value == int(a < b)


@pytest.mark.parametrize("dt", ["float16", "float32", "float64"])
@settings(max_examples=40)
@given(a=st.floats(-1e4, 1e4), b=st.floats(-1e4, 1e4))
def test_fold_floats_in_dtype_precision(dt, a, b):
    npt = np.dtype(dt).type
    x, y = npt(a), npt(b)
    with np.errstate(all="ignore"):
        for name, w in {"Add": x + y, "Sub": x - y, "Mul": x * y, "Div": x / y,
                        "Min": np.minimum(x, y)}.items():
            got = fold_binary(name, FloatImm(a, dt), FloatImm(b, dt))
            assert got.dtype == dt
            assert got.value == float(w) or (math.isnan(got.value) and np.isnan(w))
        got = fold_call(dt, "exp", (FloatImm(a / 1e4, dt),))
        assert got.value == float(np.exp(npt(a / 1e4)))


def test_fold_misc():
    assert fold_binary("Add", FloatImm(1.0, "bfloat16"), FloatImm(2**-9, "bfloat16")).value == 1.0
    assert round_bf16(1.0 + 2**-7) == 1.0 + 2**-7
    assert fold_cast("int8", IntImm(200)).value == -56
    assert fold_cast("uint8", FloatImm(-1.5)).value == 255
    assert fold_cast("float16", IntImm(70000)).value == math.inf
    assert fold_cast("bool", IntImm(5)).value == 1
    assert fold_cast("int32", FloatImm(math.nan)) is None
    assert fold_binary("Div", IntImm(-7), IntImm(2)).value == -3
    assert fold_binary("Mod", IntImm(-7), IntImm(2)).value == -1
    assert fold_binary("Mod", IntImm(-7), IntImm(0)).value == 0
    assert fold_call("float32", "fma", (FloatImm(2.0), FloatImm(3.0), FloatImm(1.0))).value == 7.0
    assert fold_call("int32", "abs", (IntImm(-5),)).value == 5
    x = T.var("x", "float32")
    # x + 0.0 is not x for x = -0.0, so it stays
    assert T.to_text(arith.simplify(x + 0.0)) == "x + T.float32(0)"
    assert T.to_text(arith.simplify(x * 1.0 - 0.0)) == "x"
    assert T.to_text(arith.simplify(T.exp(T.const(0.0)) + x)) == "T.float32(1) + x"


def test_vector_rules():
    r = T.Ramp(i, T.const(1), 4)
    e = r * T.Broadcast(T.const(4), 4) + T.Broadcast(j, 4)
    assert T.to_text(arith.simplify(e)) == T.to_text(T.Ramp(i * 4 + j, T.const(4), 4))
    assert T.to_text(arith.simplify(T.Ramp(i, T.const(0), 4))) == \
        T.to_text(T.Broadcast(i, 4))


def test_analyzer_bind_value_and_let():
    ana = Analyzer()
    ana.bind(i, T.const(5))
    assert T.to_text(ana.simplify(i * 2 + j)) == "j + 10"
    x = Var("x")
    e = T.Let(x, j + 1, x * 2 - j)
    assert T.to_text(arith.simplify(T.Let(x, T.const(3), x + j))) == "j + 3"
    assert T.to_text(arith.simplify(e)) == T.to_text(e)


def test_floor_division_and_modulo_by_a_symbol_join_back():
    x, n = T.var("x"), T.size_var("n")
    assert str(arith.simplify(x // n * n + x % n)) == "x"
    assert str(arith.simplify(2 * (x // n * n) + 2 * (x % n) + 1)) == "x * 2 + 1"
    # different coefficients do not join
    assert str(arith.simplify(x // n * n + x % n * 2)) == "x // n * n + x % n * 2"


def test_division_by_a_positive_symbol():
    x, n = T.var("x"), T.var("n")
    pos = {n: (1, 1000)}
    assert str(arith.simplify((n * 32 - 1) // n, pos)) == "31"
    assert str(arith.simplify((n * 32 - 1) % n, pos)) == "n - 1"
    assert str(arith.simplify((n * 4 + 2) // n, {n: (3, 9)})) == "4"
    assert str(arith.simplify((n * 4 + 2) % n, {n: (3, 9)})) == "2"
    # n may be 0 (x // 0 is 0) or the remainder may reach n: left alone
    assert str(arith.simplify((n * 32 - 1) // n, {n: (0, 9)})) == "(n * 32 - 1) // n"
    assert str(arith.simplify((n * 4 + 2) // n, {n: (1, 9)})) == "(n * 4 + 2) // n"
    assert str(arith.simplify(T.const(0) // x)) == "0"
    assert str(arith.simplify(T.const(0) % x)) == "0"


@settings(max_examples=60)
@given(c=st.integers(-4, 4), k=st.integers(-12, 12), lo=st.integers(0, 6),
       width=st.integers(0, 6), data=st.data())
def test_division_by_a_symbol_is_sound(c, k, lo, width, data):
    n = Var("n")
    bounds = {n: (lo, lo + width)}
    nv = data.draw(st.integers(lo, lo + width))
    for e in (FloorDiv(n * c + k, n), FloorMod(n * c + k, n)):
        s = arith.simplify(e, bounds)
        assert evaluate(s, {n: nv}) == evaluate(e, {n: nv}), f"{e} -> {s} at n={nv}"


def test_bound_of_a_fused_loop_over_a_dynamic_extent():
    # for f in range(n * 32): f // n in [0, 31], f % n in [0, n - 1] (when it runs)
    f, n = Var("f"), T.size_var("n")
    fused = {f: T.Range(T.const(0), n * 32)}
    assert [T.to_text(b) for b in bound_of(f // n, fused)] == ["0", "31"]
    assert [T.to_text(b) for b in bound_of(f % n, fused)] == ["0", "n - 1"]
    # over a range n does not size, n may be 0 (f % 0 is 0): only the dtype bounds it
    lo, hi = bound_of(f % n, {f: T.Range.from_extent(5)})
    assert (lo.value, hi.value) == (0, 2**31 - 2)
    # the symbolic bounds hold for every n the loop runs for
    lo, hi = bound_of(f % n, fused)
    for nv in range(1, 5):
        for fv in range(nv * 32):
            assert evaluate(lo, {n: nv}) <= fv % nv <= evaluate(hi, {n: nv})


@settings(max_examples=40)
@given(lo=st.integers(-8, 8), ext=st.integers(1, 8), nv=st.integers(0, 5))
def test_bound_of_division_by_a_size_var_is_sound(lo, ext, nv):
    # x // 0 is 0, and so are both bounds: the bounds hold for n == 0 too
    x, n = Var("x"), T.size_var("n")
    blo, bhi = bound_of(x // n, {x: T.Range(T.const(lo), T.const(ext))})
    for xv in range(lo, lo + ext):
        want = evaluate(x // n, {x: xv, n: nv})
        assert evaluate(blo, {n: nv}) <= want <= evaluate(bhi, {n: nv})


def test_a_select_arm_keeps_the_guard_of_its_load():
    # a Select evaluates both arms: under its condition (i >= 4) the inner guard (i >= 3)
    # looks true, but dropping it would load X[i - 3] for i < 3 too (issue 25, repro 08)
    X = T.decl_buffer((8,), "int32", "X")
    ana = Analyzer()
    ana.bind(i, T.Range.from_extent(8))
    guarded = T.if_then_else(i >= 3, X[i - 3], T.const(0, "int32"))
    e = Select(i >= 4, guarded, T.const(1, "int32"))
    assert "T.if_then_else(3 <= i, X[i - 3], 0)" in T.to_text(ana.simplify(e))
    # an arm that cannot fault is still simplified under the condition
    pure = Select(i < 4, T.min(i, T.const(5)), T.const(0))
    assert T.to_text(ana.simplify(pure)) == "T.Select(i < 4, i, 0)"


def test_a_guarded_load_inside_a_select_builds_and_agrees():
    import targets
    X = T.placeholder((8,), "int32", name="X")
    f = T.create_prim_func([X, T.compute((8,), lambda i: T.select(
        i >= 4, T.if_then_else(i >= 3, X[i - 3], T.const(0, "int32")),
        T.const(1, "int32")), name="Y")])
    x = np.arange(8, dtype="int32")
    want, got = np.zeros(8, "int32"), np.zeros(8, "int32")
    T.interpret(f, x, want)
    targets.build(f, "llvm")(x, got)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(want, [1, 1, 1, 1, 1, 2, 3, 4])
