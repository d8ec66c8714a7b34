"""A catalogue of mistakes real users make, each answered by a coded error whose
message says what was expected, what was found and how to fix it.

Every case runs in this process: a crash (segfault, abort, LLVM ERROR) would take the
suite down with it, so passing this file is also the "zero process crashes" check.
Cases that would otherwise give a silent wrong result check that they do not.
"""

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets


@dataclass(frozen=True)
class Mistake:
    what: str
    action: Callable
    error: type
    code: str
    match: str


def _matmul(n=16):
    A = T.placeholder((n, n), name="A")
    B = T.placeholder((n, n), name="B")
    k = T.reduce_axis((0, n), name="k")
    C = T.compute((n, n), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
    return T.create_prim_func([A, B, C])


def _add_one(n=8):
    A = T.placeholder((n,), name="A")
    return T.create_prim_func([A, T.compute((n,), lambda i: A[i] + 1.0, name="B")])


def _symbolic():
    n = T.size_var("n")
    A = T.placeholder((n,), name="A")
    return T.create_prim_func([A, T.compute((n,), lambda i: A[i] * 2.0, name="B")])


def _shifted():
    n = T.size_var("n")
    A = T.placeholder((n,), name="A")
    return T.create_prim_func([A, T.compute((n,), lambda i: A[i + 1] - A[i], name="B")])


def _sch():
    sch = S.Schedule(_matmul())
    blk = sch.get_block("C")
    return sch, blk, sch.get_loops(blk)


def _prim(body: str, params: str = 'A: T.Buffer((4,), "float32")') -> str:
    return f"@T.prim_func\ndef f({params}):\n    for i in T.serial(4):\n        {body}\n"


_MOD = {}


def _mod(kind="add"):
    if kind not in _MOD:
        _MOD[kind] = targets.build(_add_one() if kind == "add" else _symbolic())
    return _MOD[kind]


def _f32(*shape):
    return np.zeros(shape, "float32")


def _split(factors):
    sch, _, (i, _, _) = _sch()
    return sch.split(i, factors)


def _prim_on(fn):
    sch, blk, loops = _sch()
    return fn(sch, blk, *loops)


DT, SH, SC, AR = T.DTypeError, T.ShapeError, S.ScheduleError, targets.ArgumentError
TE, PE, CE = targets.TargetError, T.ParseError, targets.CodegenError

CATALOGUE = [
    # -- dtypes --------------------------------------------------------------------
    Mistake("unknown dtype", lambda: T.placeholder((4,), "float33"), DT, "CVL-E101",
            r"unknown dtype 'float33'; expected one of bool, int8"),
    Mistake("int plus float", lambda: T.var("i") + T.const(1.5), DT, "CVL-E101",
            r"cannot combine int32 with float32.*Cast one side explicitly"),
    Mistake("signed plus unsigned", lambda: T.var("i") + T.var("j", "uint32"), DT,
            "CVL-E101", r"cannot combine int32 with uint32"),
    Mistake("bool in arithmetic", lambda: T.const(True, "bool") + T.const(1), DT, "CVL-E101",
            r"cannot combine bool with int32"),
    Mistake("true division of ints", lambda: T.var("i") / T.var("j"), DT, "CVL-E101",
            r"'/' is true division and needs float operands.*use '//'"),
    Mistake("exp of an int", lambda: T.exp(T.var("i")), DT, "CVL-E101",
            r"T.exp expects a float operand, found int32; cast it first"),
    Mistake("Python if on a symbolic condition", lambda: bool(T.var("i") < 4), DT,
            "CVL-E101", r"has no Python truth value; use T.if_then_else"),
    Mistake("cast to an unknown dtype", lambda: T.cast(T.var("i"), "int3"), DT, "CVL-E101",
            r"unknown dtype 'int3'"),
    Mistake("vectors of different lanes", lambda: T.var("x", "float32x8") + T.var(
        "y", "float32x4"), DT, "CVL-E101", r"vector lanes differ \(8 vs 4\)"),
    Mistake("float placeholder read as int", lambda: T.compute(
        (4,), lambda i: T.placeholder((4,), name="X")[i] + T.var("n"), name="Y"), DT,
        "CVL-E101", r"cannot combine float32 with int32"),
    # -- shapes --------------------------------------------------------------------
    Mistake("too few indices", lambda: T.compute(
        (4,), lambda i: T.placeholder((4, 4), name="X")[i], name="Y"), SH, "CVL-E102",
        r"tensor X has 2 dimension\(s\) but was indexed with 1"),
    Mistake("negative shape", lambda: T.placeholder((-1,)), SH, "CVL-E102",
            r"shape entries must be non-negative, found -1"),
    Mistake("reduction inside an expression", lambda: T.compute(
        (4,), lambda i: T.sum(T.placeholder((4, 4), name="X")[i, T.reduce_axis(
            (0, 4), name="r")], axis=T.reduce_axis((0, 4), name="r2")) + 1.0), SH,
        "CVL-E102", r"a reduction .* must be the whole body of a compute"),
    Mistake("input left out of create_prim_func", lambda: T.create_prim_func([T.compute(
        (4,), lambda i: T.placeholder((4,), name="X")[i] * 2.0, name="Y")]), SH, "CVL-E102",
        r"placeholder X is read by a compute but is not in the argument list; add it"),
    # -- arguments of a built module -------------------------------------------------
    Mistake("too few arguments", lambda: _mod()(_f32(8)), AR, "CVL-E107",
            r"main: expected 2 arguments \(A, B\), got 1"),
    Mistake("float64 array for float32", lambda: _mod()(_f32(8), np.zeros(8)), AR,
            "CVL-E107", r"argument 1 'B': expected dtype float32, got float64"),
    Mistake("wrong rank", lambda: _mod()(_f32(8), _f32(8, 1)), AR, "CVL-E107",
            r"argument 1 'B': expected 1 dimension\(s\), shape \(8,\), got 2"),
    Mistake("wrong shape", lambda: _mod()(_f32(8), _f32(9)), AR, "CVL-E107",
            r"argument 1 'B': expected shape \(8,\), got \(9,\)"),
    Mistake("strided view", lambda: _mod()(_f32(16)[::2], _f32(8)), AR, "CVL-E107",
            r"expected a C-contiguous array.*np.ascontiguousarray\(A\)"),
    Mistake("read-only output", lambda: _mod()(_f32(8), np.frombuffer(bytes(32), "float32")),
            AR, "CVL-E107", r"the function writes to B but the array is read-only"),
    Mistake("a list instead of an array", lambda: _mod()([0.0] * 8, _f32(8)), AR, "CVL-E107",
            r"expected a numpy.ndarray of float32 with shape \(8,\), got list"),
    Mistake("symbolic sizes that disagree", lambda: _mod("sym")(_f32(5), _f32(4)), AR,
            "CVL-E107", r"expected shape \(n,\); n = 5 \(bound by argument 0 'A'"),
    Mistake("output aliasing its input", lambda: (lambda x: _mod()(x, x))(_f32(8)), AR,
            "CVL-E107", r"argument 1 'B': overlaps argument 0 'A' in memory"),
    Mistake("a scalar where an array goes", lambda: _mod()(1.0, _f32(8)), AR, "CVL-E107",
            r"argument 0 'A': expected a numpy.ndarray"),
    # -- schedule primitives -----------------------------------------------------------
    Mistake("negative split factor", lambda: _split([-4, None]), SC, "CVL-E103",
            r"argument 2, 'factors' to split: expected a list of at least 2 positive ints, "
            r"one of which may be None, found \[-4, None\] \(list\): element 0 is -4"),
    Mistake("two inferred factors", lambda: _split([None, None]), SC, "CVL-E103",
            r"argument 2, 'factors' to split: .*: more than one None"),
    Mistake("factors that drop iterations", lambda: _split([3, 3]), SC, "CVL-E103",
            r"multiply to 9 but loop i has extent 16: 7 iterations would be dropped"),
    Mistake("fuse loops that are not adjacent", lambda: _prim_on(
        lambda s, b, i, j, k: s.fuse(i, k)), SC, "CVL-E103",
        r"fuse: loops i and k are not adjacent and perfectly nested"),
    Mistake("reorder the same loop twice", lambda: _prim_on(
        lambda s, b, i, j, k: s.reorder(i, i)), SC, "CVL-E103", r"loop i is given twice"),
    Mistake("parallel reduction loop", lambda: _prim_on(
        lambda s, b, i, j, k: s.parallel(k)), SC, "CVL-E103",
        r"parallel: loop k carries the reduction of block 'C'.*use rfactor first"),
    Mistake("vectorized reduction loop", lambda: _prim_on(
        lambda s, b, i, j, k: s.vectorize(k)), SC, "CVL-E103",
        r"vectorize: loop k carries the reduction"),
    Mistake("unknown thread axis", lambda: _prim_on(
        lambda s, b, i, j, k: s.bind(i, "threadIdx.w")), SC, "CVL-E103",
        r"bind: unknown thread axis 'threadIdx.w'; expected one of blockIdx.x"),
    Mistake("block name typo", lambda: _prim_on(lambda s, b, *l: s.get_block("c")), SC,
            "CVL-E103", r"get_block: Cannot find a block with the name: c; the function has the "
            r"blocks"),
    Mistake("inline a reduction", lambda: _prim_on(lambda s, b, *l: s.compute_inline(b)),
            SC, "CVL-E103", r"compute_inline: block 'C' is a reduction block"),
    Mistake("cache_read index out of range", lambda: _prim_on(
        lambda s, b, *l: s.cache_read(b, 5, "local")), SC, "CVL-E103",
        r"cache_read: read_buffer_index 5 is out of range: block 'C' reads 2 buffer"),
    Mistake("rfactor of a spatial block", lambda: S.Schedule(_add_one()).rfactor(
        S.Schedule(_add_one()).get_loops(S.Schedule(_add_one()).get_block("B"))[0], 0), SC,
        "CVL-E103", r"rfactor:"),
    Mistake("unknown tensor intrinsic", lambda: _prim_on(
        lambda s, b, i, j, k: s.tensorize(k, "no.such.intrin")), SC, "CVL-E103",
        r"tensorize: no tensor intrinsic named 'no.such.intrin'; registered:"),
    Mistake("annotation value the trace cannot record", lambda: _prim_on(
        lambda s, b, i, j, k: s.annotate(i, "key", object())), SC, "CVL-E103",
        r"annotation values must be bool, int, float, str, or lists or str-keyed dicts of "
        r"them"),
    Mistake("a block handle where a loop goes", lambda: _prim_on(
        lambda s, b, *l: s.unroll(b)), SC, "CVL-E103",
        r"argument 1, 'loop' to unroll: expected a loop handle \(from sch.get_loops\), "
        r"found BlockRV\('C'\) \(BlockRV\): a block; pass one of sch.get_loops\(block\)"),
    Mistake("a schedule for a non-function", lambda: S.Schedule("C = A @ B"), SC,
            "CVL-E103", r"expected a PrimFunc \(e.g. from T.create_prim_func\) or an "
            r"IRModule, got str"),
    # -- the text form -------------------------------------------------------------------
    Mistake("syntax error", lambda: T.parse("def f(:\n"), PE, "CVL-E108",
            r"<text>:1:7: invalid syntax: unexpected ':'"),
    Mistake("misspelt intrinsic", lambda: T.parse(_prim("A[i] = T.foo(1)")), PE, "CVL-E108",
            r"unknown name 'T.foo'; did you mean 'T.floor'\?"),
    Mistake("undefined variable", lambda: T.parse(_prim("A[i] = A[j]")), PE, "CVL-E108",
            r"undefined variable 'j': expected a name bound by a parameter, a loop"),
    Mistake("too many indices in text", lambda: T.parse(_prim("A[i, i] = T.float32(0)")),
            PE, "CVL-E108", r"buffer A has 1 dimension\(s\) but was indexed with 2"),
    Mistake("unknown dtype in text", lambda: T.parse(_prim(
        "A[i] = T.float32(0)", 'A: T.Buffer((4,), "float99")')), PE, "CVL-E108",
        r"unknown dtype 'float99'"),
    # -- targets and building ------------------------------------------------------------
    Mistake("unknown target", lambda: targets.Target("nosuch"), TE, "CVL-E106",
            r"unknown target 'nosuch'; registered targets: .*register_target"),
    Mistake("misspelt target option", lambda: targets.Target("llvm", mcpuu="x"), TE,
            "CVL-E106", r"Target 'llvm': unknown option 'mcpuu'; known options:"),
    Mistake("option without a dash", lambda: targets.Target("llvm mcpu"), TE, "CVL-E106",
            r"expected options like -mcpu=native, found 'mcpu'"),
    Mistake("unknown fast-math flag", lambda: targets.build(
        _add_one(), targets.Target("llvm", fast_math="bogus")), TE, "CVL-E106",
        r"unknown fast-math flag 'bogus'; expected some of nnan"),
    Mistake("build a number", lambda: targets.build(42), TE, "CVL-E106",
            r"build: expected a PrimFunc, an IRModule or a Schedule"),
    Mistake("function name that is no symbol", lambda: targets.build(_add_one(), name="a-b"),
            CE, "CVL-E105", r"the function name 'a-b' is not a valid symbol"),
    Mistake("source format of another target", lambda: _mod().get_source("cuda"), TE,
            "CVL-E106", r"has no source format 'cuda'; expected one of ll"),
    Mistake("target kind without a name", lambda: targets.register_target(object()), TE,
            "CVL-E106", r"register_target: expected a TargetKind \(a subclass of "
            r"cuvil_tir.target.TargetKind, see docs/backends.md\)"),
    Mistake("target registered twice", lambda: targets.register_target(
        targets.get_target_kind("llvm")), TE, "CVL-E106",
        r"a target named 'llvm' is already registered; pass replace=True"),
    Mistake("lower for an unknown kind", lambda: T.lower(_add_one(), "nosuchkind"),
            T.CuvilError, "", r"nosuchkind"),
    Mistake("CPU name LLVM does not know", lambda: targets.build(
        _add_one(), "llvm -mcpu=nosuchcpu"), TE, "CVL-E106",
        r"LLVM cannot compile for mcpu='nosuchcpu'.*not a recognized processor"),
    Mistake("an Arm CPU on x86", lambda: targets.build(_add_one(), "llvm -mcpu=cortex-a53"),
            TE, "CVL-E106", r"LLVM cannot compile for mcpu='cortex-a53'"),
    Mistake("bad flag for the C compiler", lambda: targets.build(
        _add_one(), targets.Target("c", cflags="-Onope")), CE, "CVL-E105",
        r"c: the C compiler 'cc' failed on the generated source"),
    Mistake("scope name typo", lambda: S.Schedule(_add_one()).cache_read("B", 0, "locla"),
            SC, "CVL-E103", r"cache_read: expected a storage scope name .*, found 'locla' "
                            r"\(str\): no registered target has a memory 'locla' \(their "
                            r"plain scopes: global, local, shared, warp, warpgroup\)"),
    Mistake("GPU shared memory on a CPU target", lambda: (lambda s: (s.cache_read(
        s.get_block("B"), 0, "shared"), targets.build(s)))(S.Schedule(_add_one())), CE,
        "CVL-E105", r"scope 'shared', which target 'llvm' has no memory for"),
    Mistake("shape past 32-bit indexing", lambda: targets.build(T.create_prim_func(
        [T.placeholder((1 << 20, 1 << 20), name="A")])), T.LoweringError, "CVL-E104",
        r"has 1099511627776 elements, more than 32-bit indexing reaches"),
    # -- literals and constants -------------------------------------------------------
    Mistake("int8 constant out of range", lambda: T.const(300, "int8"), DT, "CVL-E101",
            r"the integer 300 does not fit int8 \(range -128..127\)"),
    Mistake("literal too big for the other operand", lambda: T.placeholder(
        (4,), "int8", name="A")[0] + 300, DT, "CVL-E101",
        r"the literal 300 does not fit int8, the dtype of the other operand"),
    Mistake("integer division by the constant zero", lambda: T.const(4) // T.const(0),
            T.LoweringError, "CVL-E104", r"integer division by zero in 4 // 0"),
    # -- the interpreter -------------------------------------------------------------------
    Mistake("interpret with too few arrays", lambda: T.interpret(_add_one(), _f32(8)), SH,
            "CVL-E102", r"main takes 2 argument\(s\) \(A, B\), found 1"),
    # -- run-time checks ---------------------------------------------------------------------
    Mistake("symbolic read past the end, bounds-checked", lambda: targets.build(
        _shifted(), targets.Target("llvm", bounds_check=True))(_f32(4), _f32(4)),
        T.BoundsCheckError, "CVL-E231", r"out-of-bounds read of A\[4\] \(shape \(4,\)\) in block \"B\""),
    Mistake("bounds_check on a target without it", lambda: targets.Target(
        "cuda", bounds_check=True), TE, "CVL-E106", r"unknown option 'bounds_check'"),
    Mistake("assert message with too few values", lambda: T.assert_(
        T.var("i") < 4, "i = {} of {}", T.var("i")), SH, "CVL-E102",
        r"has 2 '\{\}' placeholder\(s\) but 1 value\(s\)"),
    # -- debugging views -------------------------------------------------------------------
    Mistake("graph of a string", lambda: T.graph("C = A @ B"), T.CuvilError, "CVL-E100",
            r"graph: expected a PrimFunc or a Schedule"),
    Mistake("render to an unknown format", lambda: T.graph(_add_one(), path="g.txt"),
            T.CuvilError, "CVL-E100", r"expected a .dot, .svg, .png or .pdf file name"),
]


@pytest.mark.parametrize("m", CATALOGUE, ids=[m.what for m in CATALOGUE])
def test_mistake_is_a_coded_error_with_a_helpful_message(m):
    with pytest.raises(m.error, match=m.match) as info:
        m.action()
    assert isinstance(info.value, T.CuvilError)
    if m.code:
        assert info.value.code == m.code
    assert str(info.value).startswith(f"[{info.value.code}]")


def test_catalogue_is_large_and_names_are_unique():
    assert len(CATALOGUE) >= 60
    assert len({m.what for m in CATALOGUE}) == len(CATALOGUE)


def test_nan_inputs_flow_through_and_are_not_an_error():
    a = np.array([np.nan, 1.0, np.inf, -np.inf, 0, 0, 0, 0], "float32")
    b = _f32(8)
    _mod()(a, b)
    np.testing.assert_array_equal(b, a + 1)
