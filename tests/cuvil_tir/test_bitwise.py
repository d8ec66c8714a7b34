"""The bitwise integer ops (T.bitwise_and/or/xor/not, T.shift_left/right): building,
text form, constant folding, the interpreter against an independent reference, and
every error path."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cuvil_tir as T
from cuvil_tir import arith
from cuvil_tir import dtype as D
from cuvil_tir.errors import CuvilError, DTypeError

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
BINARY = ["bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right"]


def reference(op, a, b, dt):
    """The documented semantics, written from the definitions (not from the module)."""
    bits, signed = D.bits(dt), D.is_int(dt)
    mask = (1 << bits) - 1

    def to_dt(v):
        v &= mask
        return v - (1 << bits) if signed and v >> (bits - 1) else v
    if op == "bitwise_not":
        return to_dt(~a)
    if op in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        return to_dt({"bitwise_and": a & b, "bitwise_or": a | b, "bitwise_xor": a ^ b}[op])
    if not 0 <= b < bits:
        return -1 if op == "shift_right" and a < 0 else 0
    if op == "shift_left":
        return to_dt(a * 2 ** b)
    return a // 2 ** b            # floor: arithmetic for signed, logical for unsigned


def test_build_print_and_parse_back():
    x, u = T.var("x"), T.var("u", "uint8")
    e = T.shift_right(T.bitwise_and(x, 0xF0), 4)
    assert str(e) == "T.shift_right(T.bitwise_and(x, 240), 4)" and e.dtype == "int32"
    assert T.bitwise_not(u).dtype == "uint8" and T.shift_left(u, 3).args[1].dtype == "uint8"
    src = '''@T.prim_func
def f(A: T.Buffer((4,), "int32"), B: T.Buffer((4,), "int32")):
    for i in T.serial(4):
        B[i] = T.bitwise_or(T.shift_left(A[i], i), T.bitwise_not(T.bitwise_xor(A[i], 5)))
'''
    f = T.parse(src)
    assert T.to_text(f).strip() == src.strip()
    assert T.structural_equal(T.parse(T.to_text(f)), f)


@pytest.mark.parametrize("op, args, want", [
    ("shift_left", (3, 2), 12), ("shift_right", (-8, 1), -4), ("shift_right", (-8, 40), -1),
    ("shift_left", (1, 31), -2147483648), ("shift_left", (1, -1), 0),
    ("bitwise_and", (12, 10), 8), ("bitwise_or", (12, 10), 14),
    ("bitwise_xor", (12, 10), 6), ("bitwise_not", (0,), -1),
])
def test_constants_fold(op, args, want):
    got = arith.simplify(getattr(T, op)(*(T.const(a) for a in args)))
    assert isinstance(got, T.IntImm) and got.value == want


@settings(max_examples=40, deadline=None)
@given(dt=st.sampled_from(DTYPES), data=st.data())
def test_interpreter_matches_the_definitions(dt, data):
    lo, hi = D.int_range(dt)
    n = 12
    a = data.draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n))
    # shift amounts around the edges: negative (signed), in range, the width and beyond
    bits = D.bits(dt)
    amounts = st.integers(max(lo, -3), min(hi, bits + 3))
    b = data.draw(st.lists(amounts, min_size=n, max_size=n))
    A = T.decl_buffer((n,), dt, "A")
    B = T.decl_buffer((n,), dt, "B")
    outs = [T.decl_buffer((n,), dt, op) for op in BINARY + ["bitwise_not"]]
    i = T.var("i")
    body = T.seq(*[T.BufferStore(o, getattr(T, op)(A[i], B[i]) if op != "bitwise_not"
                                 else T.bitwise_not(A[i]), (i,))
                   for op, o in zip(BINARY + ["bitwise_not"], outs)])
    f = T.PrimFunc((A, B, *outs), T.For(i, T.const(0), T.const(n), "serial", body))
    arrays = [np.array(a, dt), np.array(b, dt)] + [np.zeros(n, dt) for _ in outs]
    T.interpret(f, *arrays)
    for op, got in zip(BINARY + ["bitwise_not"], arrays[2:]):
        want = [reference(op, x, y, dt) for x, y in zip(a, b)]
        assert got.tolist() == want, (op, dt)


@pytest.mark.parametrize("call, match", [
    (lambda: T.shift_left(T.var("f", "float32"), 1),
     r"T.shift_left takes integer operands, found f of dtype float32; cast it first"),
    (lambda: T.bitwise_and(T.var("x"), T.var("y", "int64")),
     r"T.bitwise_and: the operands have dtypes int32 and int64; cast one so they agree"),
    (lambda: T.bitwise_or(T.var("c", "bool"), T.var("d", "bool")),
     r"T.bitwise_or takes integer operands, found c of dtype bool"),
])
def test_bad_operands_are_refused(call, match):
    with pytest.raises(DTypeError, match=match):
        call()


def test_bad_text_is_refused_with_the_place():
    with pytest.raises(CuvilError, match=r"T.shift_right\(..., dtype='int64'\): the "
                       r"operands are int32; cast them first"):
        T.parse('def f(A: T.Buffer((4,), "int32")):\n'
                '    A[0] = T.shift_right(A[1], 2, dtype="int64")\n')
    with pytest.raises(CuvilError, match=r"T.bitwise_xor takes 2 operand\(s\), found 1"):
        T.parse('def f(A: T.Buffer((4,), "int32")):\n    A[0] = T.bitwise_xor(A[1])\n')


def test_python_operators_on_integer_expressions():
    x, y = T.var("x"), T.var("y")
    for got, want in [(x & y, T.bitwise_and(x, y)), (x | 3, T.bitwise_or(x, 3)),
                      (3 ^ x, T.bitwise_xor(3, x)), (~x, T.bitwise_not(x)),
                      (x << 2, T.shift_left(x, 2)), (1 << x, T.shift_left(1, x)),
                      (x >> y, T.shift_right(x, y))]:
        assert T.structural_equal(got, want), (got, want)
    # bool operands keep the logical meaning
    assert type((x < 1) & (y < 2)).__name__ == "And" and type(~(x < 1)).__name__ == "Not"
    # and a te compute reads as TVM's operator overloading does
    W = T.placeholder((2,), "int32", name="W")
    Q = T.compute((16,), lambda t: ((W[t // 8] >> (t % 8 * 4)) & 15) - 8, name="Q")
    f = T.create_prim_func([W, Q])
    w = np.array([0x76543210, -0x10325477], "int32")
    q = np.zeros(16, "int32")
    T.interpret(f, w, q)
    assert q.tolist() == [((int(w[t // 8]) >> (t % 8 * 4)) & 15) - 8 for t in range(16)]
