"""The text-form parser and @T.prim_func: round trips, errors with positions, decorator.

Every round trip checks ``T.parse(str(f))`` is structurally equal to ``f`` and prints
back to the very same text.
"""

import inspect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cuvil_tir as T
from cuvil_tir import (Add, Allocate, And, Block, BlockRealize, Broadcast, Buffer,
                       BufferRegion, BufferStore, Call, Cast, Div, EQ, Evaluate, FloatImm,
                       FloorDiv, FloorMod, For, GE, GT, IfThenElse, IntImm, IterVar, LE, LT,
                       Let, LetStmt, Max, Min, Mod, Mul, NE, Not, Or, PrimFunc, Ramp, Range,
                       Select, SeqStmt, SizeVar, StringImm, Sub, Var)
from tests import workloads as W


def roundtrip(f):
    text = str(f)
    g = T.parse(text)
    assert T.structural_equal(f, g), f"round trip differs:\n{text}\n---\n{g}"
    assert str(g) == text
    return g


# ---- workloads ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["elementwise_chain", "matmul", "matmul_bias_relu",
                                  "batch_matmul", "conv2d_nchw", "softmax"])
def test_roundtrip_workloads(name):
    roundtrip(getattr(W, name)().func)


def test_roundtrip_symbolic_shape_keeps_size_var():
    n = T.size_var("n")
    m = T.var("m")
    A = T.placeholder((n, m), name="A")
    k = T.reduce_axis((0, m), name="k")
    B = T.compute((n,), lambda i: T.max(A[i, k], axis=k), name="B")
    g = roundtrip(T.create_prim_func([A, B, m]))
    assert type(g.params[0].shape[0]) is SizeVar and type(g.params[0].shape[1]) is Var
    assert g.params[2] is g.params[0].shape[1]


def test_roundtrip_int64_and_reduction_init():
    A = T.placeholder((T.const(4, "int64"),), "int8", name="A")
    k = T.reduce_axis((0, T.const(4, "int64")), name="k")
    B = T.compute((1,), lambda i: T.sum(A[k].astype("int32"), axis=k), name="B")
    roundtrip(T.create_prim_func([A, B]))


# ---- hand-built IR: lowered forms and every statement kind ----------------------------

def test_roundtrip_lowered_ir():
    n = Var("n")
    A = Buffer((n * 8,), "float32", "A")
    B = Buffer((1024,), "float32", "B", strides=(IntImm(1),), align=128)
    C = Buffer((16,), "int8", "C", scope="local")
    io, ii, tx, x, y, z = Var("io"), Var("ii"), Var("tx"), Var("x"), Var("y"), Var("z")
    jj = Var("jj", "int64")
    m = SizeVar("m", "int64")
    ramp = Ramp(io * 8, IntImm(1), 8)
    body = SeqStmt((
        For(io, IntImm(0), n, "parallel",
            BufferStore(A, A[ramp] + Broadcast(FloatImm(1.0), 8), (ramp,)),
            annotations={"pragma": 1, "tag": "x"}),
        For(tx, IntImm(0), IntImm(32), "thread_binding", Allocate(C, SeqStmt((
            LetStmt(x, tx * 2, BufferStore(C, Cast("int8", x), (Div(tx, IntImm(2)),))),
            IfThenElse((tx < 16) & (Mod(tx, IntImm(3)) == 0),
                       BufferStore(B, Select(tx > 3, FloatImm(float("inf")),
                                             FloatImm(float("nan"))), (tx,)),
                       IfThenElse(Min(tx, IntImm(4)) != Max(tx, IntImm(2)),
                                  Evaluate(Call("float32", "exp", (FloatImm(1.0),))),
                                  Evaluate(Call("handle", "my_extern",
                                                (StringImm("hi"), tx))))),
            LetStmt(y, Let(z, tx + 1, z * z),
                    BufferStore(B, Cast("float32", y) / FloatImm(2.0), (y,))),
        ))), thread_tag="threadIdx.x"),
        For(ii, IntImm(2), IntImm(10), "unrolled",
            BufferStore(B, FloatImm(-0.0), (ii - 2,))),
        For(jj, IntImm(0, "int64"), m, "vectorized", Evaluate(Add(IntImm(1), IntImm(2)))),
        Evaluate(Or(And(IntImm(1, "bool"), n > 0), Not(n < 4))),
    ))
    f = PrimFunc((A, B, n), body, {"global_symbol": "lowered", "target": "llvm"})
    g = roundtrip(f)
    assert g.body.seq[1].thread_tag == "threadIdx.x"
    assert g.attr("target") == "llvm"


def test_roundtrip_blocks_explicit_root_where_opaque():
    A, B = Buffer((64, 64), "float32", "A"), Buffer((64,), "float32", "B")
    i, j, k, vi, vj, vk = (Var(n) for n in ("i", "j", "k", "vi", "vj", "vk"))
    L = Buffer((4,), "float32", "L", scope="local")
    blk = Block("B", (IterVar(vi, Range(IntImm(0), IntImm(64)), "spatial"),
                      IterVar(vj, Range(IntImm(0), IntImm(64)), "reduce")),
                (BufferRegion(A, (Range(vi, IntImm(1)), Range(IntImm(0), IntImm(64)))),),
                (BufferRegion(B, (Range(vi, IntImm(1)),)),),
                SeqStmt((BufferStore(L, A[vi, vj], (IntImm(0),)),
                         BufferStore(B, B[vi] + L[IntImm(0)], (vi,)))),
                init=BufferStore(B, FloatImm(0.0), (vi,)), alloc_buffers=(L,),
                annotations={"meta": "x", "k": 2})
    opaque = Block("O", (IterVar(vk, Range(IntImm(1), IntImm(8)), "opaque"),), (), (),
                   Evaluate(IntImm(0)))
    root = Block("root", (), (), (), SeqStmt((
        For(i, IntImm(0), IntImm(64), "serial", For(j, IntImm(0), IntImm(64), "serial",
                                                    BlockRealize((i * 2 // 2, j), i < 60, blk))),
        For(k, IntImm(0), IntImm(7), "serial",
            BlockRealize((k + 1,), IntImm(1, "bool"), opaque)))),
        annotations={"root_attr": True})
    f = PrimFunc((A, B), BlockRealize((), IntImm(1, "bool"), root), {"global_symbol": "main"})
    text = str(f)
    assert '    with T.block("root"):' in text and "T.where(i < 60)" in text
    roundtrip(f)


def test_roundtrip_function_without_root_or_blocks():
    A = Buffer((4,), "float32", "A")
    i = Var("i")
    f = PrimFunc((A,), For(i, IntImm(0), IntImm(4), "serial",
                           BufferStore(A, A[i] * 2.0, (i,))), {})
    g = roundtrip(f)
    assert isinstance(g.body, For) and g.attrs == ()


@pytest.mark.parametrize("expr_fn", [
    lambda i, x: i + 1, lambda i, x: Sub(i, IntImm(-2)), lambda i, x: Mul(i, i),
    lambda i, x: FloorDiv(i, IntImm(3)), lambda i, x: FloorMod(i, IntImm(3)),
    lambda i, x: Div(i, IntImm(3)), lambda i, x: Mod(i, IntImm(3)),
    lambda i, x: Min(i, IntImm(3)), lambda i, x: Max(x, FloatImm(0.5)),
    lambda i, x: Cast("float16", x), lambda i, x: Select(i > 2, x, FloatImm(2.0)),
    lambda i, x: T.if_then_else(i < 2, x, 1.0), lambda i, x: T.sqrt(x),
    lambda i, x: T.pow(x, 2.0), lambda i, x: T.fma(x, x, x),
    lambda i, x: Call("float32", "custom", (x, StringImm("s"))),
    lambda i, x: Let(*_let(i)),
    lambda i, x: Ramp(i, IntImm(2), 4), lambda i, x: Broadcast(x, 4),
    lambda i, x: IntImm(7, "uint16"), lambda i, x: FloatImm(3.25, "bfloat16"),
    lambda i, x: FloatImm(float("-inf"), "float64"),
    lambda i, x: EQ(i, IntImm(1)) | NE(i, IntImm(2)) & Not(LE(i, IntImm(3))),
    lambda i, x: GE(Add(IntImm(1), IntImm(2)), i), lambda i, x: GT(x, x) & LT(i, i),
], ids=lambda f: str(f(Var("i"), Var("x", "float32"))))
def test_roundtrip_each_expression_kind(expr_fn):
    i, x = Var("i"), Var("x", "float32")
    roundtrip(PrimFunc((i, x), Evaluate(expr_fn(i, x)), {"global_symbol": "f"}))


def _let(i):
    t = Var("t")
    return t, i * 2, t + i


# ---- hypothesis: random well-typed expressions ------------------------------------------

_I, _J = Var("i"), Var("j")
_X, _Y = Var("x", "float32"), Var("y", "float32")
_BUF = Buffer((16,), "float32", "M")

ints = st.deferred(lambda: st.one_of(
    st.sampled_from([_I, _J]), st.integers(-50, 50).map(IntImm),
    st.tuples(st.sampled_from([Add, Sub, Mul, FloorDiv, FloorMod, Div, Mod, Min, Max]),
              ints, ints).map(lambda t: t[0](t[1], t[2])),
    st.tuples(bools, ints, ints).map(lambda t: Select(*t)),
    floats.map(lambda f: Cast("int32", f))))
floats = st.deferred(lambda: st.one_of(
    st.sampled_from([_X, _Y]),
    st.floats(allow_nan=True, allow_infinity=True, width=32).map(FloatImm),
    st.tuples(st.sampled_from([Add, Sub, Mul, Div, Min, Max]), floats, floats)
    .map(lambda t: t[0](t[1], t[2])),
    st.tuples(st.sampled_from(["exp", "tanh", "sqrt"]), floats)
    .map(lambda t: Call("float32", t[0], (t[1],))),
    st.tuples(bools, floats, floats).map(lambda t: Call("float32", "if_then_else", t)),
    ints.map(lambda e: _BUF[e]), ints.map(lambda e: Cast("float32", e))))
bools = st.deferred(lambda: st.one_of(
    st.booleans().map(lambda b: IntImm(int(b), "bool")),
    st.tuples(st.sampled_from([EQ, NE, LT, LE, GT, GE]), ints, ints)
    .map(lambda t: t[0](t[1], t[2])),
    st.tuples(st.sampled_from([LT, GE]), floats, floats).map(lambda t: t[0](t[1], t[2])),
    st.tuples(st.sampled_from([And, Or]), bools, bools).map(lambda t: t[0](t[1], t[2])),
    bools.map(Not)))


@settings(max_examples=60)
@given(st.one_of(ints, floats, bools))
def test_hypothesis_expression_roundtrip(e):
    f = PrimFunc((_BUF, _I, _J, _X, _Y), Evaluate(e), {"global_symbol": "f"})
    roundtrip(f)


# ---- errors -------------------------------------------------------------------------------

_HEAD = 'def f(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4,), "int32")):\n'


@pytest.mark.parametrize("body,line,column,message", [
    ("    for i in T.serial(4)\n        pass\n", 2, 25,
     "invalid syntax: unexpected end of line; expected ':'"),
    ("    for i in T.serail(4):\n        pass\n", 2, 14,
     r"unknown name 'T.serail'; did you mean 'T.serial'\?"),
    ("    B[0] = y\n", 2, 12, "undefined variable 'y'"),
    ("    for i in T.serial(4):\n        A[i] = T.float32(0)\n", 3, 9,
     r"buffer A has 2 dimension\(s\) but was indexed with 1 index\(es\); expected 2"),
    # a block with axes sees loops only through them (an opaque block may use them)
    ('    for i in T.serial(4):\n        with T.block("B"):\n'
     '            vj = T.axis.spatial(4, i)\n            B[i] = 0\n', 5, 15,
     "block uses the loop variable 'i' directly.*v_i = T.axis.spatial"),
    ("    B[0] = T.float32(1)\n", 2, 5,
     "store to B: expected a value of dtype int32, found float32"),
    ("    for i in T.serial(4):\n        B[i] = i / 2\n", 3, 18,
     r"'/' is true division and needs float operands, found int32; use '//'"),
    ("    for i in T.serial(4):\n        B[i] = i + T.int64(2)\n", 3, 18,
     "operands must have one dtype, found int32 and int64"),
    ("    for i in T.serial(4):\n        pass\n      pass\n", 4, 7,
     "inconsistent indentation"),
    ('    X = T.alloc_buffer((4,), "float33")\n', 2, 9, "unknown dtype 'float33'"),
    ("    T.reads(A[0, 0])\n", 2, 5, r"T.reads must be directly inside a 'with T.block"),
    ("    B[0] = (1 +\n", 2, 16, "expected an expression"),
])
def test_parse_errors(body, line, column, message):
    with pytest.raises(T.ParseError, match=message) as info:
        T.parse(_HEAD + body)
    err = info.value
    assert (err.line, err.column) == (line, column)
    assert err.source_line == (_HEAD + body).splitlines()[line - 1]
    assert str(err).startswith(f"[CVL-E108] <text>:{line}:{column}: ")
    assert str(err).endswith("\n    " + " " * (column - 1) + "^")


def test_parse_error_filename_and_wrong_input():
    with pytest.raises(T.ParseError, match="kernel.tir:1:7: parameter 'A' needs an "
                                           "annotation"):
        T.parse("def f(A):\n    pass\n", filename="kernel.tir")
    with pytest.raises(T.ParseError, match="T.parse expects the text of a function"):
        T.parse(W.matmul().func)


# ---- @T.prim_func -------------------------------------------------------------------------

N_GLOBAL = 32


def _te_matmul(n):
    A = T.placeholder((n, n), name="A")
    B = T.placeholder((n, n), name="B")
    k = T.reduce_axis((0, n), name="k")
    C = T.compute((n, n), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
    return T.create_prim_func([A, B, C], name="matmul")


def test_decorator_matmul_with_init_equals_te():
    N = 16    # a closure size used in annotations and loops

    @T.prim_func
    def matmul(A: T.Buffer((N, N), "float32"), B: T.Buffer((N, N), "float32"),
               C: T.Buffer((N, N), "float32")):
        for i in T.serial(N):
            for j in T.serial(N):
                for k in T.serial(N):
                    with T.block("C"):
                        vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                        T.reads(A[vi, vk], B[vk, vj])
                        T.writes(C[vi, vj])
                        with T.init():
                            C[vi, vj] = T.float32(0)
                        C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    assert isinstance(matmul, PrimFunc) and matmul.name == "matmul"
    assert T.structural_equal(matmul, _te_matmul(16))
    assert not T.structural_equal(matmul, _te_matmul(8))
    roundtrip(matmul)


def test_decorator_elementwise_global_size_and_inferred_regions():
    @T.prim_func
    def main(A: T.Buffer((N_GLOBAL,), "float32"), B: T.Buffer((N_GLOBAL,), "float32"),
             C: T.Buffer((N_GLOBAL,), "float32")):
        for i in T.serial(N_GLOBAL):
            with T.block("C"):
                vi = T.axis.spatial(N_GLOBAL, i)
                C[vi] = A[vi] + B[vi]       # reads/writes inferred

    A = T.placeholder((32,), name="A")
    B = T.placeholder((32,), name="B")
    C = T.compute((32,), lambda i: A[i] + B[i], name="C")
    assert T.structural_equal(main, T.create_prim_func([A, B, C]))


SIZE_N = T.size_var("n")


def test_decorator_symbolic_shape_from_global_size_var():
    @T.prim_func
    def main(A: T.Buffer((SIZE_N,), "float32"), B: T.Buffer((SIZE_N,), "float32")):
        for i in T.serial(SIZE_N):
            with T.block("B"):
                vi = T.axis.spatial(SIZE_N, i)
                B[vi] = T.exp(A[vi])

    A = T.placeholder((SIZE_N,), name="A")
    B = T.compute((SIZE_N,), lambda i: T.exp(A[i]), name="B")
    assert T.structural_equal(main, T.create_prim_func([A, B]))
    roundtrip(main)


def test_decorator_error_points_into_this_file():
    def build():
        @T.prim_func
        def broken(A: T.Buffer((4,), "float32")):
            for i in T.serial(4):
                A[i] = A[i] + undefined_name  # noqa: F821 - the error under test

    with pytest.raises(T.ParseError, match="undefined variable 'undefined_name'") as info:
        build()
    err = info.value
    lines, start = inspect.getsourcelines(build)
    want = start + next(k for k, s in enumerate(lines) if "undefined_name" in s)
    assert err.filename == __file__ and err.line == want
    assert err.column == err.source_line.index("undefined_name") + 1


def test_text_helpers_outside_the_text_form():
    from cuvil_tir import script
    assert list(script.serial(3)) == [0, 1, 2] and list(script.grid(1, 2)) == [(0, 0), (0, 1)]
    assert script.int64(3).dtype == "int64" and script.float32("inf").value == float("inf")
    with pytest.raises(T.ParseError, match=r"T.block only has a meaning inside a "
                                           r"@T.prim_func"):
        script.block("B")
    with pytest.raises(T.ParseError, match="T.serial only has a meaning"):
        script.serial(T.var("n"))


def test_a_slice_whose_bounds_differ_by_a_constant_has_a_constant_extent():
    f = T.parse('''@T.prim_func
def main(A: T.Buffer((10,), "float32"), B: T.Buffer((8,), "float32")):
    for i in T.serial(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi - 1 + 1:vi + 2])
            T.writes(B[vi])
            B[vi] = A[vi] + A[vi + 1]
''')
    (read,) = f.body.block.body.body.block.reads
    assert read.region[0].extent.value == 2
    assert T.structural_equal(T.parse(str(f)), f)
