"""The text-form printer: exact text for every node kind, golden files for workloads.

Golden files live in tests/cuvil_tir/golden/; regenerate them after an intended change
of the text form with::

    CUVIL_UPDATE_GOLDEN=1 pytest tests/cuvil_tir/test_printer.py
"""

import os
from pathlib import Path

import pytest

import cuvil_tir as T
from cuvil_tir import (Add, Allocate, Block, BlockRealize, Broadcast, Buffer, BufferRegion,
                       BufferStore, Call, Cast, Div, Evaluate, FloatImm, For, IfThenElse,
                       IntImm, IterVar, Let, LetStmt, Max, Min, Mod, Not, PrimFunc, Ramp,
                       Range, Select, SeqStmt, SizeVar, StringImm, Var, to_text)
from tests import workloads as W

GOLDEN = Path(__file__).with_name("golden")

i, j = Var("i"), Var("j")
x = Var("x", "float32")
A = Buffer((8, 8), "float32", "A")


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("CUVIL_UPDATE_GOLDEN"):
        path.write_text(text + "\n")
    assert path.read_text() == text + "\n", f"golden {path} differs; rerun with " \
                                            "CUVIL_UPDATE_GOLDEN=1 if intended"


EXPRS = [
    (i + 1, "i + 1"),
    (i - j * 2, "i - j * 2"),
    ((i + 1) * 2, "(i + 1) * 2"),
    (i - (j - 1), "i - (j - 1)"),
    (i // 4 % 3, "i // 4 % 3"),
    (i * (j // 2), "i * (j // 2)"),
    (Div(i, j), "T.truncdiv(i, j)"),
    (Mod(i, IntImm(3)), "T.truncmod(i, 3)"),
    (Min(i, IntImm(4)), "T.min(i, 4)"),
    (Max(x, FloatImm(0.0)), "T.max(x, T.float32(0))"),
    (x / 2.0, "x / T.float32(2)"),
    (i + IntImm(-3), "i + -3"),
    (IntImm(5, "int64"), "T.int64(5)"),
    (IntImm(200, "uint8"), "T.uint8(200)"),
    (IntImm(1, "bool"), "T.bool(True)"),
    (FloatImm(0.1), "T.float32(0.1)"),
    (FloatImm(float("inf")), 'T.float32("inf")'),
    (FloatImm(float("-inf"), "float16"), 'T.float16("-inf")'),
    (FloatImm(float("nan"), "float64"), 'T.float64("nan")'),
    (FloatImm(1e-7), "T.float32(1e-07)"),
    (StringImm('a"b'), '"a\\"b"'),
    (Cast("float32", i), 'T.Cast("float32", i)'),
    (Select(i < 4, x, FloatImm(1.0)), "T.Select(i < 4, x, T.float32(1))"),
    (T.if_then_else(i < 4, A[i, j], 0.0), "T.if_then_else(i < 4, A[i, j], T.float32(0))"),
    (T.exp(x), "T.exp(x)"),
    (T.fma(x, x, 1.0), "T.fma(x, x, T.float32(1))"),
    (Call("float32", "my_op", (x, i)), 'T.call_intrin("float32", "my_op", x, i)'),
    (Call("int32", "exp", (x,)), 'T.call_intrin("int32", "exp", x)'),
    ((i < 4) & (j > 0), "i < 4 and j > 0"),
    ((i < 4) | (j > 0) & (i != j), "i < 4 or j > 0 and i != j"),
    (((i < 4) | (j > 0)) & (i != j), "(i < 4 or j > 0) and i != j"),
    (Not(i < 4), "not i < 4"),
    (Not((i < 4) & (j < 2)), "not (i < 4 and j < 2)"),
    ((i < 4) == (j < 2), "(i < 4) == (j < 2)"),
    (A[i, j + 1], "A[i, j + 1]"),
    (Ramp(i * 4, IntImm(1), 4), "T.Ramp(i * 4, 1, 4)"),
    (Broadcast(x, 8), "T.Broadcast(x, 8)"),
    (Let(j, i + 1, j * j), "T.Let(j, i + 1, j * j)"),
    (Add(IntImm(4), IntImm(1)), "4 + 1"),
    (i + Var("i"), "i + i_1"),
]


@pytest.mark.parametrize("expr,text", EXPRS, ids=[t for _, t in EXPRS])
def test_expression_text(expr, text):
    assert to_text(expr) == text
    assert str(expr) == text


def test_reduce_and_parts():
    B = T.placeholder((8, 8), name="B")
    k = T.reduce_axis((0, 8), name="k")
    r = T.sum(B[i, k], axis=k, where=k < 4)
    assert str(r) == "T.sum(B[i, k], axis=[k], where=k < 4)"
    assert str(T.max(B[i, k], axis=[k])) == "T.max(B[i, k], axis=[k])"
    assert str(Range(IntImm(0), IntImm(8))) == "T.Range(0, 8)"
    assert str(IterVar(j, Range(IntImm(0), IntImm(8)), "reduce")) == \
        'T.IterVar(j, T.Range(0, 8), "reduce")'
    region = BufferRegion(A, (Range(i, IntImm(1)), Range(IntImm(2), IntImm(4))))
    assert str(region) == "A[i, 2:6]"
    assert str(BufferRegion(A, (Range(i, IntImm(4)), Range(IntImm(0), j)))) == \
        "A[i:i + 4, 0:j]"
    assert str(Buffer((4,), "int8", "L", strides=(IntImm(1),), scope="local", align=16)) == \
        'T.Buffer((4,), "int8", name="L", strides=(1,), scope="local", align=16)'


def test_statement_text():
    C = Buffer((16,), "float32", "C", scope="shared")
    k, y = Var("k"), Var("y")
    s = SeqStmt((
        For(i, IntImm(0), IntImm(4), "parallel",
            For(j, IntImm(2), IntImm(6), "vectorized",
                BufferStore(A, FloatImm(0.0), (i, j)))),
        For(k, IntImm(0), IntImm(32), "thread_binding",
            Allocate(C, IfThenElse(k < 16, BufferStore(C, x, (k,)),
                                   IfThenElse(k < 20, Evaluate(IntImm(0)),
                                              Evaluate(StringImm("z"))))),
            thread_tag="threadIdx.x", annotations={"unroll": 4}),
        LetStmt(y, i * 2, Evaluate(y)),
        For(Var("u"), IntImm(0), IntImm(2), "unrolled", SeqStmt(())),
    ))
    assert to_text(s) == "\n".join([
        "for i in T.parallel(4):",
        "    for j in T.vectorized(2, 8):",
        "        A[i, j] = T.float32(0)",
        'for k in T.thread_binding(32, thread="threadIdx.x", annotations={"unroll": 4}):',
        '    with T.allocate((16,), "float32", scope="shared") as C:',
        "        if k < 16:",
        "            C[k] = x",
        "        elif k < 20:",
        "            T.evaluate(0)",
        "        else:",
        '            T.evaluate("z")',
        "with T.LetStmt(i * 2) as y:",
        "    T.evaluate(y)",
        "for u in T.unroll(2):",
        "    pass",
    ])
    last = LetStmt(y, i * 2, BufferStore(A, x, (y, i)))
    assert to_text(last).splitlines()[0] == "y: T.int32 = i * 2"


def _add_func():
    X = T.placeholder((128,), name="A")
    Y = T.compute((128,), lambda i: X[i] + 1.0, name="B")
    return T.create_prim_func([X, Y])


def test_prim_func_matches_api_example():
    assert str(_add_func()) == "\n".join([
        "@T.prim_func",
        'def main(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):',
        "    for i in T.serial(128):",
        '        with T.block("B"):',
        '            v_i = T.axis.remap("S", [i])',
        "            T.reads(A[v_i])",
        "            T.writes(B[v_i])",
        "            B[v_i] = A[v_i] + T.float32(1)",
    ])


def test_block_header_forms():
    vi, vk = Var("vi"), Var("vk")
    L = Buffer((4,), "float32", "L", scope="local")
    blk = Block("B", (IterVar(vi, Range(IntImm(0), IntImm(8)), "spatial"),
                      IterVar(vk, Range(IntImm(2), IntImm(4)), "reduce")),
                (BufferRegion(A, (Range(vi, IntImm(1)), Range(IntImm(0), IntImm(8)))),),
                (BufferRegion(L, (Range(IntImm(0), IntImm(4)),)),),
                BufferStore(L, L[vk - 2] + A[vi, vk], (vk - 2,)),
                init=BufferStore(L, FloatImm(0.0), (vk - 2,)), alloc_buffers=(L,),
                annotations={"tag": "x"})
    br = BlockRealize((i * 2, j + 2), i < 4, blk)
    text = to_text(For(i, IntImm(0), IntImm(4), "serial",
                       For(j, IntImm(0), IntImm(4), "serial", br)))
    assert text == "\n".join([
        "for i in T.serial(4):",
        "    for j in T.serial(4):",
        '        with T.block("B"):',
        "            vi = T.axis.spatial(8, i * 2)",
        "            vk = T.axis.reduce((2, 6), j + 2)",
        "            T.where(i < 4)",
        '            L = T.alloc_buffer((4,), "float32", scope="local")',
        "            T.reads(A[vi, 0:8])",
        "            T.writes(L[0:4])",
        '            T.block_attr({"tag": "x"})',
        "            with T.init():",
        "                L[vk - 2] = T.float32(0)",
        "            L[vk - 2] = L[vk - 2] + A[vi, vk]",
    ])


def test_function_header_symbolic_and_attrs():
    n, m = Var("n"), SizeVar("m", "int64")
    X = Buffer((n, m), "float32", "X")
    f = PrimFunc((X, n), Evaluate(IntImm(0)), {"global_symbol": "f", "target": "llvm"})
    assert str(f) == "\n".join([
        "@T.prim_func",
        'def f(X: T.Buffer((n, m), "float32"), n: T.int32):',
        '    T.func_attr({"global_symbol": "f", "target": "llvm"})',
        '    m = T.size_var("m", "int64")',
        "    T.evaluate(0)",
    ])
    # bare int32 literal pairs are typed inside a function so they do not fold on parsing
    g = PrimFunc((), Evaluate(Add(IntImm(1), IntImm(2))), {"global_symbol": "g"})
    assert str(g).splitlines()[-1] == "    T.evaluate(T.int32(1) + 2)"


def test_highlight_marks_the_loop():
    f = W.matmul(4, 4, 4).func
    loop_j = f.body.block.body.body
    lines = to_text(f, highlight=loop_j).splitlines()
    k = lines.index("        for j in T.serial(4):")
    assert lines[k + 1] == "        " + "^" * len("for j in T.serial(4):")
    blk = loop_j.body.body.block
    lines = to_text(f, highlight=blk).splitlines()
    k = lines.index('                with T.block("C"):')
    assert lines[k + 1].strip() == "^" * len('with T.block("C"):')


def test_sanitized_unique_names():
    a, b = Var("a.b"), Var("for")
    assert str(a + b) == "a_b + for_"


@pytest.mark.parametrize("name", ["matmul", "conv2d_nchw", "softmax"])
def test_golden_workloads(name):
    check_golden(name, str(getattr(W, name)().func))
