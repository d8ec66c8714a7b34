"""A complete backend defined in this file alone, registered through the contract
(issue 21 item 6, the proof of docs/backends.md): ``py-numpy`` prints the lowered
IRModule as Python source over numpy arrays and runs it.  It then passes the numerical
matrix the llvm and c backends pass (every dtype and op of tests/targets/
test_llvm_dtypes.py, the shared workloads and the other numerical checks of
tests/targets/test_llvm_workloads.py, all but those reading llvm or C text) and goes
through the compile cache, the build driver, T.lower and T.diff like any other
backend.  No other file knows it.

Its semantics come from the interpreter's scalar functions
(:mod:`cuvil_tir.interp.scalar`: wrapping integers, division by zero is 0, float16 and
bfloat16 rounded after every operation), which the generated source calls the way a C
backend calls libm; it writes scalar code only (a vector expression is refused).
"""

import itertools
import re

import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir import dtype as D
from cuvil_tir.buffer import Buffer
from cuvil_tir.expr import BinaryOp, Var
from cuvil_tir.interp.scalar import load_converter, store_converter
from cuvil_tir.ir_module import single_function
from cuvil_tir.target import Option, Program, TargetKind
from targets.runtime import Module, NativeCode, size_vars_of
from tests.targets import test_llvm_dtypes as DTYPES
from tests.targets import test_llvm_workloads as WORKLOADS

NAME = "py-numpy"


# ---- step 2: codegen, the lowered module as Python source -------------------------
class PythonPrinter:
    """One lowered function as the source of a Python function over flat numpy arrays.
    Helper functions (one per op and dtype) are bound once, at the top of the source."""

    def __init__(self):
        self.lines, self.prelude, self.helpers = [], [], {}
        self.names, self.taken = {}, set()
        self.depth = 1

    def name(self, node, hint: str) -> str:
        if id(node) not in self.names:
            base = re.sub(r"\W", "_", hint) or "v"
            name = next(f"{base}_{k}" if k else base for k in itertools.count()
                        if (f"{base}_{k}" if k else base) not in self.taken)
            self.taken.add(name)
            self.names[id(node)] = name
        return self.names[id(node)]

    def helper(self, call: str) -> str:
        """A prelude name bound to ``call`` (e.g. ``binary_op('Add', 'int8')``)."""
        if call not in self.helpers:
            self.helpers[call] = f"_h{len(self.helpers)}"
            self.prelude.append(f"{self.helpers[call]} = {call}")
        return self.helpers[call]

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    # -- expressions
    def expr(self, e) -> str:
        if D.lanes(e.dtype) != 1:
            raise targets.CodegenError(f"{NAME} codegen: writes scalar code only, found the "
                                       f"vector expression {e} ({e.dtype})")
        kind = type(e).__name__
        if isinstance(e, Var):
            return self.name(e, e.name)
        if kind == "IntImm":
            return repr(bool(e.value)) if e.dtype == "bool" else repr(int(e.value))
        if kind == "FloatImm":
            return self.helper(f"to_dtype({e.dtype!r})(float({str(float(e.value))!r}))")
        if isinstance(e, BinaryOp):
            fn = self.helper(f"binary_op({kind!r}, {e.a.dtype!r})")
            return f"{fn}({self.expr(e.a)}, {self.expr(e.b)})"
        if kind == "Not":
            return f"(not {self.expr(e.a)})"
        if kind == "Select":
            return (f"({self.expr(e.true_value)} if {self.expr(e.condition)} else "
                    f"{self.expr(e.false_value)})")
        if kind == "Cast":
            fn = self.helper(f"cast_op({e.value.dtype!r}, {e.dtype!r})")
            return f"{fn}({self.expr(e.value)})"
        if kind == "BufferLoad":
            (index,) = e.indices
            conv = load_converter(e.buffer.dtype)
            load = f"{self.name(e.buffer, e.buffer.name)}[{self.expr(index)}]"
            return load if conv is None else \
                f"{self.helper(f'load_converter({e.buffer.dtype!r})')}({load})"
        if kind == "Let":
            return f"(lambda {self.name(e.var, e.var.name)}: {self.expr(e.body)})" \
                   f"({self.expr(e.value)})"
        if kind == "Call" and e.op == "if_then_else":
            c, a, b = (self.expr(x) for x in e.args)
            return f"({a} if {c} else {b})"
        if kind == "Call" and e.op != "call_extern":
            fn = self.helper(f"intrinsic_op({e.op!r}, {e.args[0].dtype!r})")
            return f"{fn}({', '.join(self.expr(a) for a in e.args)})"
        raise targets.CodegenError(f"{NAME} codegen: cannot write {kind} `{e}`")

    # -- statements
    def stmt(self, s) -> None:
        kind = type(s).__name__
        if kind == "SeqStmt":
            for c in s.seq:
                self.stmt(c)
        elif kind == "For":
            v, lo = self.name(s.loop_var, s.loop_var.name), self.expr(s.min)
            self.emit(f"for {v} in range({lo}, {lo} + {self.expr(s.extent)}):")
            self.block(s.body)
        elif kind == "IfThenElse":
            self.emit(f"if {self.expr(s.condition)}:")
            self.block(s.then_case)
            if s.else_case is not None:
                self.emit("else:")
                self.block(s.else_case)
        elif kind == "LetStmt":
            self.emit(f"{self.name(s.var, s.var.name)} = {self.expr(s.value)}")
            self.stmt(s.body)
        elif kind == "Allocate":
            size = " * ".join(self.expr(d) for d in s.buffer.shape) or "1"
            storage = np.dtype(D.to_numpy(s.buffer.dtype)).name
            self.emit(f"{self.name(s.buffer, s.buffer.name)} = np.zeros({size}, {storage!r})")
            self.stmt(s.body)
        elif kind == "BufferStore":
            (index,) = s.indices
            value = self.expr(s.value)
            if store_converter(s.buffer.dtype) is not None:
                value = f"{self.helper(f'store_converter({s.buffer.dtype!r})')}({value})"
            self.emit(f"{self.name(s.buffer, s.buffer.name)}[{self.expr(index)}] = {value}")
        elif kind == "Evaluate":
            self.emit(self.expr(s.value))
        elif kind == "AssertStmt":
            vals = ", ".join(self.expr(v) for v in s.values)
            self.emit(f"if not {self.expr(s.condition)}:")
            self.emit(f"    raise check_error({s.kind!r}, {s.message!r}.format({vals}), "
                      f"[{vals}])")
        else:
            raise targets.CodegenError(f"{NAME} codegen: cannot write {kind}")

    def block(self, body) -> None:
        self.depth += 1
        n = len(self.lines)
        self.stmt(body)
        if len(self.lines) == n:
            self.emit("pass")
        self.depth -= 1

    def function(self, func) -> str:
        params = [self.name(p, p.name) for p in func.params]
        sizes = [self.name(v, v.name) for v in size_vars_of(func)]
        for p in func.params:
            if isinstance(p, Buffer):          # flat views of the caller's arrays
                self.emit(f"{self.name(p, p.name)} = {self.name(p, p.name)}.reshape(-1)")
        self.emit("with np.errstate(all='ignore'):")
        self.block(func.body)
        self.emit("return 0")
        head = ["import numpy as np",
                "from cuvil_tir.errors import check_error",
                "from cuvil_tir.interp.scalar import (binary_op, cast_op, intrinsic_op, "
                "load_converter, store_converter, to_dtype)", ""]
        return "\n".join(head + self.prelude + ["", f"def {func.name}("
                         f"{', '.join(params + sizes)}):"] + self.lines) + "\n"


# ---- step 3: load, the source as a callable -----------------------------------------
class PythonCode(NativeCode):
    """The program's source executed once; ``raw`` is its function."""

    source_formats = ("py",)

    def __init__(self, program):
        space: dict = {}
        exec(compile(program.sources["py"], f"<{NAME} {program.entry}>", "exec"), space)  # noqa: S102 - our own generated source
        super().__init__(program.entry, space[program.entry])
        self.source = program.sources["py"]

    def get_source(self, fmt=None) -> str:
        return self.source


# ---- step 1: the kind's data, and its three steps --------------------------------------
class PyNumpyKind(TargetKind):
    """Python + numpy: the default pipeline, a printer, ``exec``."""

    name = NAME
    doc = "the lowered module as Python source over numpy arrays (a test backend)"
    options = {"check_finite": Option(False, bool, doc="unused: shows a declared option")}
    op_spellings = "interp"                     # the interpreter's reference semantics

    def codegen(self, module, target) -> Program:
        entry = single_function(module, NAME)
        return Program(NAME, entry.name, sources={"py": PythonPrinter().function(entry)},
                       functions={entry.name: "host"}, lowered=module)

    def load(self, program, target) -> Module:
        return Module(PythonCode(program), program, target)


# the one call that makes it a backend (a package would declare a `cuvil.targets` entry
# point instead)
KIND = targets.register_target(PyNumpyKind(), replace=True)


@pytest.fixture(scope="module", autouse=True)
def _registered():
    targets.register_target(KIND, replace=True)
    yield
    targets.unregister_target(NAME)


# ---- the numerical matrix --------------------------------------------------------------
MATRIX = (
    [(DTYPES.test_integer_arithmetic_wraps_and_division_by_zero_is_zero, {"dt": dt})
     for dt in DTYPES.INTS]
    + [(DTYPES.test_float_arithmetic, {"dt": dt})
       for dt in ("float16", "float32", "float64", "bfloat16")]
    + [(DTYPES.test_bool_storage_and_logic, {})]
    + [(DTYPES.test_casts_match_numpy_astype, {"src": s, "dst": d}) for s, d in DTYPES.CASTS]
    + [(DTYPES.test_bfloat16_casts_round_to_nearest_even, {})]
    + [(DTYPES.test_every_math_intrinsic, {"dt": dt})
       for dt in ("float32", "float64", "float16")]
    + [(DTYPES.test_integer_abs, {})]
    + [(WORKLOADS.test_shared_workloads, {"name": n}) for n in sorted(WORKLOADS.W.ALL)]
    + [(WORKLOADS.test_elementwise_with_broadcasting, {})]
    + [(WORKLOADS.test_reduction_over_one_and_several_axes, {"combiner": c, "ref": r})
       for c, r in (("sum", np.sum), ("max", np.max))]
    + [(WORKLOADS.test_symbolic_shape_runs_at_two_sizes_with_one_build, {})]
    + [(WORKLOADS.test_scalar_parameter, {})]
)


@pytest.mark.parametrize("case", MATRIX, ids=[
    f"{fn.__name__}[{','.join(str(v) if not callable(v) else v.__name__ for v in kw.values())}]"
    for fn, kw in MATRIX])
def test_the_numerical_matrix_of_llvm_and_c(case):
    fn, kwargs = case
    fn(target=NAME, **kwargs)


# ---- the rest of the contract --------------------------------------------------------
def _add_one():
    A = T.placeholder((8,), name="A")
    return T.create_prim_func([A, T.compute((8,), lambda i: A[i] + 1.0, name="B")])


def test_it_is_a_registered_kind_with_declared_options():
    assert NAME in targets.list_targets()
    assert targets.Target(NAME).options == {"check_finite": False}
    with pytest.raises(targets.TargetError, match="option 'check_finite' expects a bool"):
        targets.Target(NAME, check_finite="yes")


def test_lower_build_source_and_the_compile_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path))
    f = _add_one()
    assert T.structural_equal(T.lower(f, NAME), T.lower(f))        # the default pipeline
    first = targets.build(f, NAME)
    assert "def main(A, B):" in first.get_source() and not first.from_cache
    again = targets.build(f, NAME)
    assert again.from_cache and again.get_source() == first.get_source()
    a, b = np.arange(8, dtype="float32"), np.zeros(8, "float32")
    again(a, b)
    np.testing.assert_array_equal(b, a + 1)
    with pytest.raises(targets.ArgumentError, match="expected shape"):
        again(a, np.zeros(3, "float32"))                            # the shared checks


def test_diff_and_the_interpreter_agree_with_it():
    A = T.placeholder((8,), name="A")
    B = T.compute((8,), lambda i: T.exp(A[i]) * 2.0, name="B")
    C = T.compute((8,), lambda i: B[i] - 1.0, name="C")
    report = T.diff(T.create_prim_func([A, C]), np.linspace(0, 1, 8).astype("float32"),
                    np.zeros(8, "float32"), target=NAME)
    assert report.first_divergent is None and [r.buffer for r in report.rows] == ["B", "C"]


def test_what_it_cannot_write_is_a_codegen_error():
    A = T.placeholder((8,), name="A")
    f = T.create_prim_func([A, T.compute((8,), lambda i: A[i] * 2.0, name="B")])
    sch = __import__("schedules").Schedule(f)
    sch.vectorize(sch.get_loops(sch.get_block("B"))[0])
    lowered = T.lower(sch, "llvm -mcpu=haswell")          # vector code, then printed here
    with pytest.raises(targets.CodegenError, match="py-numpy codegen: writes scalar code "
                                                   "only, found the vector expression"):
        KIND.codegen(lowered, targets.Target(NAME))
