"""Bad arguments to public constructors and builders raise coded errors of the hierarchy
(before: raw AttributeError, TypeError, ValueError or ZeroDivisionError)."""

import pytest

import cuvil_tir as T

A = T.decl_buffer((4,), "float32", "A")
i = T.var("i")


@pytest.mark.parametrize("build,cls,message", [
    (lambda: T.Add(None, None), T.DTypeError, r"Add: malformed node \('NoneType' object"),
    (lambda: T.LT(i, "x"), T.DTypeError, r"LT: malformed node"),
    (lambda: T.Not(None), T.DTypeError, r"Not: malformed node"),
    (lambda: T.Select(None, i, i), T.DTypeError, r"Select: malformed node"),
    (lambda: T.IntImm("x"), T.LoweringError, r"IntImm: malformed node \(invalid literal"),
    (lambda: T.FloatImm(None), T.DTypeError, r"FloatImm: malformed node"),
    (lambda: T.BufferLoad(A, None), T.DTypeError, r"BufferLoad: malformed node"),
    (lambda: T.BufferStore(None, T.const(1.0), (i,)), T.DTypeError,
     r"BufferStore: malformed node"),
    (lambda: T.SeqStmt(None), T.DTypeError, r"SeqStmt: malformed node"),
    (lambda: T.PrimFunc(None, None), T.DTypeError, r"PrimFunc: malformed node"),
    (lambda: T.PrimFunc([i + 1], T.Evaluate(T.const(0))), T.LoweringError,
     r"PrimFunc parameters are Buffers or Vars, found i \+ 1"),
    (lambda: T.For(i, T.const(0), T.const(4), "sequential", T.Evaluate(T.const(0))),
     T.LoweringError, r"For kind must be one of .*found 'sequential'"),
    (lambda: T.IterVar(i, T.Range.from_extent(4), "spatiall"), T.LoweringError,
     r"IterVar kind must be one of"),
    (lambda: T.reduce_axis(()), T.ShapeError, r"reduce_axis rv: expected a domain \(lo, hi\)"),
    (lambda: T.compute((4,), None, name="B"), T.ShapeError,
     r"compute B: expected a function of the 1 indices"),
    (lambda: T.create_prim_func(None), T.ShapeError,
     r"create_prim_func: expected a list of tensors"),
    (lambda: T.interpret(None), T.DTypeError,
     r"interpret: expected a PrimFunc or an IRModule, found NoneType"),
    (lambda: T.const(7) // 0, T.DivisionByZeroError, r"integer division by zero in 7 // 0"),
])
def test_bad_arguments_raise_coded_errors(build, cls, message):
    with pytest.raises(cls, match=message) as info:
        build()
    assert isinstance(info.value, T.CuvilError) and info.value.code.startswith("CVL-E1")
