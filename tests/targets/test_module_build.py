"""Building modules: ``targets.build`` of ``T.lower``'s module, llvm tasks from the IR."""

from __future__ import annotations

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir.errors import CodegenError
from targets.llvm.codegen import codegen_llvm

HASWELL = targets.Target("llvm", mcpu="haswell")


def scaled(n=64):
    """``B = A * 2 + 1`` over a flat buffer, its outer loop parallel."""
    A = T.placeholder((n,), name="A")
    B = T.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    sch = S.Schedule(T.create_prim_func([A, B]))
    (i,) = sch.get_loops(sch.get_block("B"))
    outer, _ = sch.split(i, [None, 8])
    sch.parallel(outer)
    return sch


def test_build_of_the_lowered_module_equals_build_of_the_function():
    sch = scaled()
    from_func = targets.build(sch, HASWELL)
    mod = T.lower(sch, HASWELL)
    from_mod = targets.build(mod, HASWELL)
    assert from_mod.get_source("ll") == from_func.get_source("ll")
    assert T.structural_equal(from_mod.lowered, from_func.lowered)
    a = np.arange(64, dtype="float32")
    for m in (from_func, from_mod):
        b = np.zeros(64, "float32")
        m(a, b)
        np.testing.assert_array_equal(b, a * 2 + 1)


def test_build_of_an_unlowered_module_and_its_entry_name():
    f = scaled().func
    mod = targets.build(T.IRModule.from_func(f), HASWELL)
    assert mod.entry_name == "main" and mod.lowered.names == ("main", "main_par0")
    assert "define internal i32 @\"main_par0\"(i32 %task" in mod.get_source("ll")
    assert "def main_par0(" in mod.get_source("tir")


def test_tasks_come_from_the_module_not_from_codegen():
    # the codegen emits the module's tasks as they are: a hand-written task runs
    @T.ir_module
    class Mod:
        @T.prim_func
        def main(A: T.Buffer((16,), "float32"), s: T.float32):
            T.func_attr({"calling_conv": "host", "global_symbol": "main"})
            T.evaluate(T.parallel_launch("fill", 4, 12, A, s))

        @T.prim_func
        def fill(A: T.Buffer((16,), "float32"), s: T.float32, i: T.int32):
            T.func_attr({"calling_conv": "parallel_task", "global_symbol": "fill"})
            A[i] = s + T.Cast("float32", i)

    text = codegen_llvm(Mod)
    assert 'define internal i32 @"fill.body"(ptr noalias align 4 %p0, float %p1, i32 %p2)' \
        in text
    assert 'call i32 @cuvil_parallel_launch(ptr @"fill"' in text
    mod = targets.build(Mod, HASWELL)
    a = np.zeros(16, "float32")
    mod(a, 0.5)
    np.testing.assert_array_equal(a, [0] * 4 + [k + 0.5 for k in range(4, 16)])


def test_nested_parallel_runs_in_its_task_and_annotations_reach_the_task():
    A = T.decl_buffer((128,), "float32", "A")
    i, j = T.var("i"), T.var("j")
    inner = T.For(j, T.const(0), T.const(16), "parallel",
                  T.BufferStore(A, T.cast(i * 16 + j, "float32"), (i * 16 + j,)))
    f = T.PrimFunc([A], T.For(i, T.const(0), T.const(8), "parallel", inner))
    text = codegen_llvm(f)
    assert text.count("call i32 @cuvil_parallel_launch") == 1      # the outer loop only
    a = np.zeros(128, "float32")
    targets.build(f, HASWELL)(a)
    np.testing.assert_array_equal(a, np.arange(128, dtype="float32"))
    k = T.var("k")
    B = T.decl_buffer((64,), "float32", "B")
    store = T.BufferStore(B, T.Broadcast(T.float32(1), 8), (T.Ramp(k * 8, T.const(1), 8),))
    g = T.PrimFunc([B], T.For(k, T.const(0), T.const(8), "parallel", store,
                              annotations={"pragma_nontemporal": True}))
    assert "!nontemporal" in codegen_llvm(g)


def test_module_errors_in_codegen():
    f = T.PrimFunc([], T.Evaluate(T.const(0)))
    kernel = f.with_attr("global_symbol", "k").with_attr("calling_conv", "device_kernel")
    with pytest.raises(CodegenError, match="calling_conv 'device_kernel'; the llvm target"):
        codegen_llvm(T.IRModule((T.IRModule.from_func(f).entry, kernel), {"entry": "main"}))
    lowered = T.lower(scaled(), HASWELL)
    with pytest.raises(CodegenError, match=r"c codegen: the module has functions besides "
                                           r"its entry 'main': main_par0 \(parallel_task\)"):
        targets.get_target_kind("c").codegen(lowered, targets.Target("c"))
    from cuvil_tir.ir_module import single_function
    with pytest.raises(CodegenError, match="expected a lowered IRModule or PrimFunc"):
        single_function("text", "c")


def test_the_c_target_keeps_parallel_loops_for_openmp():
    sch = scaled()
    mod = T.lower(sch, "c")
    assert mod.names == ("main",)
    built = targets.build(sch, "c")
    a, b = np.arange(64, dtype="float32"), np.zeros(64, "float32")
    built(a, b)
    np.testing.assert_array_equal(b, a * 2 + 1)


def test_a_task_allocating_a_buffer_of_symbolic_size():
    # the allocation's size (n) is computed in the task: n becomes a task parameter
    n = T.size_var("n")
    A = T.decl_buffer((4, n), "float32", "A")
    B = T.decl_buffer((4, n), "float32", "B")
    tmp = T.decl_buffer((n,), "float32", "tmp")
    i, j, k = T.var("i"), T.var("j"), T.var("k")
    body = T.Allocate(tmp, T.seq(
        T.For(j, T.const(0), n, "serial", T.BufferStore(tmp, A[i, j] + 1.0, (j,))),
        T.For(k, T.const(0), n, "serial", T.BufferStore(B, tmp[n - 1 - k], (i, k)))))
    f = T.PrimFunc([A, B], T.For(i, T.const(0), T.const(4), "parallel", body))
    mod = T.lower(f, HASWELL)
    assert [p.name for p in mod["main_par0"].params] == ["A", "B", "n", "i"]
    a = np.arange(20, dtype="float32").reshape(4, 5)
    want = a[:, ::-1] + 1
    for run in (lambda b: targets.build(f, HASWELL)(a, b), lambda b: T.interpret(mod, a, b)):
        b = np.zeros((4, 5), "float32")
        run(b)
        np.testing.assert_array_equal(b, want)
