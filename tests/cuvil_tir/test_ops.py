"""Ops described once: the registry drives the builders, the printer and parser, constant
folding, the interpreter and both CPU backends, and all of them agree."""

import itertools

import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir import ops
from cuvil_tir.arith.fold import fold_binary, fold_call
from cuvil_tir.errors import CuvilError
from cuvil_tir.interp.scalar import binary_op, intrinsic_op
from cuvil_tir.ops import intdiv
from cuvil_tir.ops.bitwise import BITWISE
from cuvil_tir.printer import INTRIN_ARITY


def test_every_layer_lists_the_registry_ops():
    names = ops.list_ops()
    assert T.op.INTRINSICS == names
    fixed = {n: ops.get_op(n).arity for n in names if ops.get_op(n).arity >= 0}
    assert INTRIN_ARITY == fixed and set(names) - set(fixed) == {"call_extern",
                                                                  "parallel_launch",
                                                                  "access_ptr", "assume"}
    for n in T.op.UNARY_FLOAT:
        assert callable(getattr(T, n)) and getattr(T, n)(T.var("x", "float32")).op == n


# the math intrinsics (the integer bitwise ops have their own tests, test_bitwise.py)
MATH = [n for n in ops.list_ops()
        if n not in ("if_then_else", "call_extern", "parallel_launch", "access_ptr",
                     "assume", "q_multiply_shift", "q_multiply_shift_per_axis")
        and n not in BITWISE]


@pytest.mark.parametrize("name", MATH)
def test_every_op_has_semantics_and_a_spelling_per_backend(name):
    spec = ops.get_op(name)
    assert spec.effect == "pure" and spec.reference is not None
    assert spec.llvm or spec.libm or spec.expand, "llvm needs an intrinsic, libm or expansion"
    assert spec.c or spec.libm or spec.expand, "C needs a template, libm or expansion"


@pytest.mark.parametrize("name", MATH)
def test_each_op_prints_and_parses_back(name):
    x = T.decl_buffer((4,), "float32", "x")
    args = [x[0]] * ops.get_op(name).arity
    call = T.Call("float32", name, tuple(args))
    f = T.PrimFunc([x], T.BufferStore(x, call, (T.const(0),)))
    assert f"T.{name}(" in str(f)
    assert T.structural_equal(T.parse(str(f)), f)


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("name", [n for n in MATH if n != "fma"])
def test_folding_and_interpreter_agree_with_the_reference(name, dt):
    spec = ops.get_op(name)
    t = np.dtype(dt).type
    for v in (0.5, 1.75, 3.0):
        vals = [v] * spec.arity
        want = spec.reference(t)(*[t(a) for a in vals])
        folded = fold_call(dt, name, tuple(T.FloatImm(a, dt) for a in vals))
        interp = intrinsic_op(name, dt)(*[t(a) for a in vals])
        np.testing.assert_array_equal(np.array([folded.value, interp], dt),
                                      np.array([want, want], dt), err_msg=f"{name}({v})")


EDGES = [7, -7, 2, -2, 1, -1, 0, 127, -128, 100, -100, 3]


@pytest.mark.parametrize("kind", sorted(intdiv.INT_DIVISIONS))
def test_integer_division_is_one_definition(kind):
    ref = intdiv.INT_DIVISIONS[kind]
    interp = binary_op(kind, "int8")
    for x, y in itertools.product(EDGES, EDGES):
        want = T.IntImm(ref(x, y), "int8").value     # wrapped to int8
        assert fold_binary(kind, T.IntImm(x, "int8"), T.IntImm(y, "int8")).value == want
        assert interp(x, y) == want, (kind, x, y)


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_compiled_integer_division_matches_the_definition(target):
    n = len(EDGES) ** 2
    A = T.placeholder((n,), "int8", name="A")
    B = T.placeholder((n,), "int8", name="B")
    outs = [T.compute((n,), lambda i: T.truncdiv(A[i], B[i]), name="div"),
            T.compute((n,), lambda i: T.truncmod(A[i], B[i]), name="mod"),
            T.compute((n,), lambda i: A[i] // B[i], name="fdiv"),
            T.compute((n,), lambda i: A[i] % B[i], name="fmod")]
    mod = targets.build(T.create_prim_func([A, B, *outs]), target)
    pairs = list(itertools.product(EDGES, EDGES))
    a = np.array([x for x, _ in pairs], "int8")
    b = np.array([y for _, y in pairs], "int8")
    got = [np.zeros(n, "int8") for _ in outs]
    mod(a, b, *got)
    for kind, out in zip(["Div", "Mod", "FloorDiv", "FloorMod"], got):
        want = [T.IntImm(intdiv.INT_DIVISIONS[kind](x, y), "int8").value for x, y in pairs]
        np.testing.assert_array_equal(out, np.array(want, "int8"), err_msg=kind)


def test_registry_errors():
    with pytest.raises(CuvilError, match="unknown op 'nope'; known ops: "):
        ops.get_op("nope")
    with pytest.raises(CuvilError, match="an op named 'exp' is already registered"):
        ops.register_op(ops.OpDef("exp", 1))
    with pytest.raises(CuvilError, match="effect must be one of"):
        ops.OpDef("bad", 1, effect="sometimes")
    with pytest.raises(CuvilError, match="has no C spelling"):
        ops.OpDef("mute", 1).c_spelling(["x"], "float32")


def test_call_extern_names_the_arguments_it_writes():
    from cuvil_tir.op import extern_writes
    A, B = T.decl_buffer((4,), "int8", "A"), T.decl_buffer((4,), "int8", "B")
    c = T.call_extern("int32", "dma", A, B, 4, effect="writes:0")
    assert extern_writes(c) == {0}
    f = T.PrimFunc([A, B], T.Evaluate(c))
    assert T.structural_equal(T.parse(str(f)), f)
    with pytest.raises(T.DTypeError, match=r"effect 'writes:2' says argument 2 is "
                       r"written, but it is not a buffer or region \(the call has 3 "):
        T.call_extern("int32", "dma", A, B, 4, effect="writes:2")
    with pytest.raises(T.DTypeError, match=r"effect must be one of pure, reads, writes, "
                       r"barrier, opaque or 'writes:K,L' .*found 'writes:'"):
        T.call_extern("int32", "dma", A, B, effect="writes:")
