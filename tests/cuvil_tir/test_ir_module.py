"""IRModule: lowering to a module, parallel outlining as a pass, text form, fingerprints."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir.transform.inline import inline_launches, task_of
from cuvil_tir.transform.outline import outline_parallel

HASWELL = targets.Target("llvm", mcpu="haswell")

#: T.lower of row_scale() for HASWELL, exactly
ROW_SCALE_MODULE = '''\
@T.ir_module
class Module:
    T.module_attrs({"entry": "main"})

    @T.prim_func
    def main(A: T.Buffer((32,), "float32"), B: T.Buffer((32,), "float32")):
        T.func_attr({"calling_conv": "host", "global_symbol": "main"})
        T.evaluate(T.parallel_launch("main_par0", 0, 4, A, B))

    @T.prim_func
    def main_par0(A: T.Buffer((32,), "float32"), B: T.Buffer((32,), "float32"), i: T.int32):
        T.func_attr({"calling_conv": "parallel_task", "global_symbol": "main_par0"})
        for j in T.serial(8):
            B[i * 8 + j] = A[i * 8 + j] * T.float32(2)'''


def row_scale(n=4, m=8, parallel=True):
    A = T.placeholder((n, m), name="A")
    B = T.compute((n, m), lambda i, j: A[i, j] * 2.0, name="B")
    sch = S.Schedule(T.create_prim_func([A, B]))
    if parallel:
        sch.parallel(sch.get_loops(sch.get_block("B"))[0])
    return sch


def two_parallel_stages():
    """Two parallel stages over a symbolic size, the second reading a scalar."""
    n = T.size_var("n")
    A = T.placeholder((n, 16), name="A")
    B = T.compute((n, 16), lambda i, j: A[i, j] + 1.0, name="B")
    C = T.compute((n, 16), lambda i, j: B[i, j] * T.cast(n, "float32"), name="C")
    sch = S.Schedule(T.create_prim_func([A, C]))
    for blk in ("B", "C"):
        sch.parallel(sch.get_loops(sch.get_block(blk))[0])
    return sch


def test_lower_gives_the_exact_module_of_a_parallel_function():
    mod = T.lower(row_scale(), HASWELL)
    assert isinstance(mod, T.IRModule)
    assert str(mod) == ROW_SCALE_MODULE
    assert mod.names == ("main", "main_par0") and mod.entry is mod["main"]
    assert [f.attr("calling_conv") for f in mod] == ["host", "parallel_task"]


def test_module_text_round_trips_and_keeps_its_fingerprint():
    for sch in (row_scale(), two_parallel_stages()):
        mod = T.lower(sch, HASWELL)
        back = T.parse(str(mod))
        assert isinstance(back, T.IRModule)
        assert T.structural_equal(back, mod) and str(back) == str(mod)
        assert T.fingerprint(back) == T.fingerprint(mod)
        assert T.structural_hash(back) == T.structural_hash(mod)


def test_fingerprint_of_a_module_is_stable():
    # the same digest in every process and session: a literal, not a recomputation
    assert T.fingerprint(T.lower(row_scale(), HASWELL)) == \
        "5f7f2ad1743df604546f043c4d60fcbbbde24476dbbe219df330a537e81ee0e9"
    assert T.fingerprint(T.lower(row_scale(), HASWELL)) == \
        T.fingerprint(T.lower(row_scale(), HASWELL))
    # the task is part of it: a different task body is a different module
    assert T.fingerprint(T.lower(row_scale(m=16), HASWELL)) != \
        T.fingerprint(T.lower(row_scale(), HASWELL))


def test_functions_are_compared_on_their_own():
    # a task reusing the host's variable objects equals one with its own
    mod = T.lower(two_parallel_stages(), HASWELL)
    host, *tasks = mod.functions
    n = next(p for p in tasks[1].params if p.name == "n")
    shared = tasks[1].with_body(T.substitute(tasks[1].body, {n: n}))
    assert T.structural_equal(T.IRModule((host, tasks[0], shared), mod.attrs), mod)


def test_two_stages_and_a_scalar_become_two_tasks_that_run_like_the_function():
    sch = two_parallel_stages()
    mod = T.lower(sch, HASWELL)
    assert mod.names == ("main", "main_par0", "main_par1")
    launch = mod.entry.body.body.seq[1].value   # inside the Allocate of B
    assert launch.op == "parallel_launch"
    assert [getattr(a, "name", None) or a.buffer.name for a in launch.args[3:]] == \
        ["C", "B", "n"]
    a = np.random.default_rng(0).standard_normal((3, 16)).astype("float32")
    want = (a + 1) * 3
    got = np.zeros_like(a)
    T.interpret(mod, a, got)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_outline_then_inline_is_the_identity():
    A = T.decl_buffer((8, 4), "float32", "A")
    i, j, k = T.var("i"), T.var("j"), T.var("k")
    inner = T.For(j, T.const(0), T.const(4), "parallel",          # nested: stays a loop
                  T.BufferStore(A, T.cast(i + j, "float32"), (i, j)))
    body = T.seq(T.For(i, T.const(0), T.const(8), "parallel", inner,
                       annotations={"pragma_nontemporal": True}),
                 T.For(k, T.const(1), T.const(3), "parallel",
                       T.BufferStore(A, T.float32(0), (k, T.const(0)))))
    f = T.PrimFunc([A], body)
    mod = outline_parallel(f)
    assert mod.names == ("main", "main_par0", "main_par1")
    assert mod["main_par0"].attr("loop_annotations") == {"pragma_nontemporal": True}
    assert isinstance(mod["main_par0"].body, T.For) and mod["main_par0"].body.kind == "parallel"
    assert T.structural_equal(inline_launches(mod).body, f.body)
    assert outline_parallel(mod) is mod          # nothing left to outline


def test_a_module_is_verified_through_its_tasks():
    mod = T.lower(row_scale(), HASWELL)
    task = mod["main_par0"]
    B = task.params[1]
    wrong = task.with_body(T.BufferStore(B, T.float32(0), (task.params[2] * 8 + 8,)))
    with pytest.raises(T.LoweringError, match="out-of-bounds store .* buffer 'B'"):
        T.transform.verify(mod.with_function(wrong))


def test_the_default_pipeline_gives_a_module_of_one_function():
    mod = T.lower(row_scale())
    assert mod.names == ("main",) and mod.entry.body.kind == "parallel"


def test_ir_module_decorator_and_module_attrs():
    @T.ir_module
    class Mod:
        T.module_attrs({"entry": "main", "origin": "hand"})

        @T.prim_func
        def main(A: T.Buffer((8,), "float32")):
            T.func_attr({"calling_conv": "host", "global_symbol": "main"})
            T.evaluate(T.parallel_launch("main_par0", 0, 8, A))

        @T.prim_func
        def main_par0(A: T.Buffer((8,), "float32"), i: T.int32):
            T.func_attr({"calling_conv": "parallel_task", "global_symbol": "main_par0"})
            A[i] = T.Cast("float32", i)

    assert Mod.attr("origin") == "hand" and Mod.names == ("main", "main_par0")
    a = np.zeros(8, "float32")
    T.interpret(Mod, a)
    assert a.tolist() == list(range(8))
    assert T.structural_equal(T.parse(str(Mod)), Mod)


def test_module_structure_errors():
    f = T.PrimFunc([], T.Evaluate(T.const(0)))
    with pytest.raises(T.LoweringError, match="two functions are named 'main'"):
        T.IRModule((f, f))
    with pytest.raises(T.LoweringError, match="calling_conv 'gpu'; expected one of host"):
        T.IRModule((f.with_attr("calling_conv", "gpu"),))
    with pytest.raises(T.LoweringError, match="the entry 'g' is not one of its functions"):
        T.IRModule((f,), {"entry": "g"})
    with pytest.raises(T.LoweringError, match="at least one function"):
        T.IRModule(())
    with pytest.raises(T.LoweringError, match="functions are PrimFuncs, found int"):
        T.IRModule((3,))
    with pytest.raises(T.LoweringError, match="no function named 'nope'; it has main"):
        T.IRModule.from_func(f)["nope"]
    with pytest.raises(AttributeError, match=r"no 'body'.*use mod.entry .*mod.entry.body"):
        getattr(T.lower(f), "body")  # noqa: B009 - the attribute access is the test


def test_launch_errors():
    A = T.decl_buffer((8,), "float32", "A")
    with pytest.raises(T.DTypeError, match="task name must be an identifier"):
        T.parallel_launch("no such", 0, 8)
    with pytest.raises(T.DTypeError, match="the extent must be a scalar integer"):
        T.parallel_launch("t", 0, T.float32(8))
    with pytest.raises(T.DTypeError, match="argument 0 must be a whole buffer"):
        T.parallel_launch("t", 0, 8, A[0:4])
    with pytest.raises(T.DTypeError, match="argument 0 must be an expression, a buffer region or a buffer"):
        T.parallel_launch("t", 0, 8, object())
    mod = T.lower(row_scale(), HASWELL)
    task = mod["main_par0"]
    with pytest.raises(T.LoweringError, match="with 1 argument.*takes 2 plus the iteration"):
        task_of(mod, "main_par0", (task.params[0],), "main")
    with pytest.raises(T.LoweringError, match=r"with a value of float32 as argument 0 \(A\)"):
        task_of(mod, "main_par0", (T.float32(1), task.params[1]), "main")
    with pytest.raises(T.LoweringError, match="calling_conv is 'host'"):
        task_of(mod, "main", (), "main")
    bad = mod.with_function(mod.entry.with_body(T.Evaluate(T.parallel_launch("gone", 0, 4))))
    with pytest.raises(T.LoweringError, match="launches parallel task 'gone', which the "
                                              "module does not have"):
        T.interpret(bad, np.zeros(32, "float32"), np.zeros(32, "float32"))


def test_module_parse_errors():
    with pytest.raises(T.ParseError, match="holds T.module_attrs"):
        T.parse(textwrap.dedent('''
            @T.ir_module
            class Module:
                x = 3
                @T.prim_func
                def main():
                    T.evaluate(0)
            '''))
    with pytest.raises(T.ParseError, match="two functions are named 'f'"):
        T.parse(textwrap.dedent('''
            @T.ir_module
            class Module:
                def f():
                    T.evaluate(0)
                def f():
                    T.evaluate(1)
            '''))
    with pytest.raises(T.ParseError, match="no @T.prim_func function"):
        T.ir_module(type("Empty", (), {}))
    with pytest.raises(T.ParseError, match="decorates a class"):
        T.ir_module(3)
    with pytest.raises(T.ParseError, match="expected a dict"):
        T.module_attrs([1])
