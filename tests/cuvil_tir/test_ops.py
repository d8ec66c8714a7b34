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
from cuvil_tir.ops.access_ptr import access_ptr
from cuvil_tir.ops.bitwise import BITWISE
from cuvil_tir.printer import INTRIN_ARITY
from targets.cstyle.printer import CPrinter


def test_every_layer_lists_the_registry_ops():
    names = ops.list_ops()
    # the core's ops, then those the backends registered (cuda's tensor-core ops)
    assert names[:len(T.op.INTRINSICS)] == T.op.INTRINSICS
    tensor_cores = {"cuda.wmma_sync", "cuda.wmma_fill", "cuda.wmma_store",
                    "cuda.mma_fp8_sync", "cuda.mma_sync", "cuda.mma_fill", "cuda.mma_store",
                    "cuda.wgmma_sync", "cuda.wgmma_fill", "cuda.wgmma_store",
                    "cuda.wmma_load", "cuda.wmma_mma", "cuda.wgmma_async", "cuda.wgmma_commit",
                    "cuda.wgmma_wait", "cuda.wgmma_epilogue_none", "cuda.wgmma_epilogue_relu",
                    "cuda.wgmma_epilogue_bias_none", "cuda.wgmma_epilogue_bias_relu"}
    dp4a = {"cuda.dp4a_s8s8", "cuda.dp4a_u8s8", "cuda.dp4a_s8u8", "cuda.dp4a_u8u8"}
    # TVM's mma.sync intrinsics with TVM's warp layouts (targets/cuda/tvm_mma.py)
    tensor_cores |= {"cuda.tvm_ldmatrix", "cuda.tvm_mma_fill", "cuda.tvm_mma_store",
                     "cuda.tvm_mma_nn", "cuda.tvm_mma_nt", "cuda.tvm_mma_tn",
                     "cuda.tvm_mma_tt"}
    # a warpgroup's register budget (targets/cuda/setmaxnreg.py)
    registers = {"cuda.setmaxnreg"}
    assert set(names[len(T.op.INTRINSICS):]) == tensor_cores | dp4a | registers
    fixed = {n: ops.get_op(n).arity for n in names if ops.get_op(n).arity >= 0}
    gpu = {n for n in names if ops.get_op(n).collective is not None}
    assert gpu == {"tvm_storage_sync", "warp_sum", "warp_max", "warp_min",
                   "cluster_sync", "cluster_arrive", "cluster_wait"} | tensor_cores | registers
    copies = {n for n in names if ops.get_op(n).asynchronous is not None}
    assert copies == {"async_copy", "async_commit_group", "async_wait_group", "bulk_copy",
                      "mbarrier_init", "mbarrier_arrive", "mbarrier_wait", "tma_load"}
    # a namespaced op (cuda.dp4a_*) prints as T.call_intrin, not as a T.<name> the parser
    # must know
    assert INTRIN_ARITY == {n: a for n, a in fixed.items() if n not in gpu | copies | dp4a}
    assert set(names) - set(fixed) == {"call_extern", "parallel_launch", "device_launch",
                                       "access_ptr", "assume", "elem_offset",
                                       "tma_load"} | tensor_cores
    for n in T.op.UNARY_FLOAT:
        assert callable(getattr(T, n)) and getattr(T, n)(T.var("x", "float32")).op == n


# the math intrinsics (the integer bitwise ops have their own tests, test_bitwise.py)
MATH = [n for n in ops.list_ops()
        if n not in ("if_then_else", "call_extern", "parallel_launch", "device_launch",
                     "access_ptr", "assume", "elem_offset", "q_multiply_shift",
                     "q_multiply_shift_per_axis",
                     # a load of another block's shared memory (ops.cluster)
                     "dsmem_load")
        and n not in BITWISE and ops.get_op(n).collective is None
        and ops.get_op(n).asynchronous is None
        # a CPU's dot-product instruction (ops.dot): one backend writes it
        and ops.get_op(n).lanes_reference is None
        # integer byte dot products defined by their expand (tests/targets/test_cuda_dp4a)
        and not n.startswith("cuda.dp4a_")]


#: the built-in backends' spelling tables (accelerator C writes ops from "c")
BACKENDS = ("llvm", "c", "cuda")


@pytest.mark.parametrize("name", MATH)
def test_every_math_op_is_pure_with_a_reference_and_spelled_by_every_backend(name):
    spec = ops.get_op(name)
    assert spec.effect == "pure" and spec.reference is not None
    for backend in BACKENDS:
        sp = ops.spelling(backend, name)
        assert isinstance(sp, str) or callable(sp) or sp is ops.EXPAND, (backend, sp)


@pytest.mark.parametrize("name", ops.list_ops())
def test_every_op_has_an_effect_semantics_and_a_spelling_or_a_coded_refusal(name):
    spec = ops.get_op(name)
    assert spec.effect in ops.EFFECTS
    # semantics: a rule of the interpreter (the reference for every target), its
    # reference, or its expansion in other expressions
    assert ops.find_spelling("interp", name) is not None or spec.expand is not None
    for backend in ("interp",) + BACKENDS:
        found = ops.find_spelling(backend, name)
        if isinstance(found, ops.Unsupported):
            label = "interpreter" if backend == "interp" else f"{backend} codegen"
            with pytest.raises(CuvilError, match=f"^\\[CVL-E1..\\] {label}: ") as err:
                ops.spelling(backend, name)
            assert err.value.code.startswith("CVL-E") and len(found.reason) > 40
        else:
            assert found is not None or spec.expand is not None, (backend, name)


def test_a_new_backend_adds_its_spellings_without_editing_the_core():
    from targets.cstyle.printer import CPrinter

    class DspPrinter(CPrinter):
        op_table = "test-dsp"

    ops.register_backend("test-dsp", parent="c")
    try:
        ops.register_spelling("test-dsp", "exp", "dsp_exp{f}({0})")
        x = T.decl_buffer((4,), "float32", "x")
        f = T.PrimFunc([x], T.BufferStore(x, T.exp(x[0]) + T.tanh(x[1]), (T.const(0),)))
        src = DspPrinter().print_function(f, "k")
        assert "dsp_expf(" in src and "tanhf(" in src      # its own, then C's
        assert "dsp_exp" not in CPrinter().print_function(f, "k")
    finally:
        ops.unregister_backend("test-dsp")


def test_effects_branches_and_callees_are_registry_queries():
    A = T.decl_buffer((8,), "float32", "A")
    x = T.var("x", "float32")
    assert [ops.call_effect(access_ptr(A, 0, 8, m)) for m in ("r", "w", "rw")] == \
        ["reads", "writes", "opaque"]
    assert ops.call_effect(T.call_extern("int32", "f", A, effect="pure")) == "pure"
    assert ops.call_effect(T.Call("int32", "not_an_op", ())) == "opaque"
    assert not ops.may_write(T.exp(x)) and ops.may_write(T.call_extern("int32", "g", A))
    assert ops.branches(T.if_then_else(x > 0.0, x, 1.0))[1] is x
    assert ops.branches(T.Select(x > 0.0, x, x)) is None
    assert ops.callee(T.call_extern("int32", "npu_go")) == "npu_go"
    assert ops.callee(T.exp(x)) is None
    # a malformed call (no name, no effect) is opaque, never a crash
    bare = T.Call("int32", "call_extern", ())
    assert ops.call_effect(bare) == "opaque" and ops.callee(bare) is None
    assert ops.call_effect(T.Call("handle", "access_ptr", (T.const(0),))) == "opaque"


def test_unsupported_ops_give_coded_errors_when_built():
    A = T.decl_buffer((8,), "float32", "A")
    f = T.PrimFunc([A], T.Evaluate(access_ptr(A, 0, 8, "r")))
    with pytest.raises(T.CodegenError, match=r"c codegen: T.tvm_access_ptr \(a pointer to "
                                             r"a flat range of a buffer\) has no C spelling"):
        CPrinter().print_function(f, "k")
    with pytest.raises(T.LoweringError, match="interpreter: T.parallel_launch runs a "
                                              "task of its module"):
        T.interpret(T.PrimFunc([A], T.Evaluate(T.parallel_launch("t", 0, 4))),
                    np.zeros(8, "float32"))


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
    with pytest.raises(CuvilError, match="effect must be one of"):
        ops.OpDef("bad", 1, effect="sometimes")


def test_spelling_table_errors():
    ops.register_op(ops.OpDef("test_mute", 1, "float"))
    try:
        with pytest.raises(T.CodegenError, match=r"llvm codegen: no spelling of op "
                                                 r"'test_mute' for backend 'llvm'; register "
                                                 r"one from the backend with"):
            ops.spelling("llvm", "test_mute")
    finally:
        ops.unregister_op("test_mute")
    with pytest.raises(T.CodegenError, match="c codegen: unknown op 'nope'"):
        ops.spelling("c", "nope")
    with pytest.raises(T.CodegenError, match="no spelling table for backend 'metal'; known: "):
        ops.spelling("metal", "exp")
    with pytest.raises(CuvilError, match="a spelling is a str, a callable or Unsupported"):
        ops.register_spelling("c", "exp", 3)
    with pytest.raises(CuvilError, match="unknown op 'nope'"):
        ops.register_spelling("c", "nope", "nope({0})")
    with pytest.raises(CuvilError, match="backend 'c' already spells op 'if_then_else'"):
        ops.register_spelling("c", "if_then_else", "x", replace=False)
    with pytest.raises(CuvilError, match="cannot be its own parent"):
        ops.register_backend("loop", parent="loop")


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
