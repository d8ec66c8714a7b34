"""Outlining: device kernels as functions of the module launched by real host IR, the
inverse (inlining), launch checks, and thread axes declared as data."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir.thread_axes import ThreadAxis, register_thread_axis, thread_axis
from cuvil_tir.transform.gpu_threads import launch_shape, split_host_device
from cuvil_tir.transform.inline import inline_launches, kernel_of
from cuvil_tir.transform.outline import outline_device, outline_stmt
from cuvil_tir.transform.pass_manager import PassContext

CUDA = targets.Target("cuda")

#: split_host_device of two_kernels() for the cuda target, exactly
TWO_KERNELS = '''\
@T.ir_module
class Module:
    T.module_attrs({"entry": "main"})

    @T.prim_func
    def main(A: T.Buffer((n, 64), "float32"), B: T.Buffer((n, 64), "float32")):
        T.func_attr({"calling_conv": "host"})
        n = T.size_var("n")
        for r in T.serial(2):
            with T.allocate((n, 64), "float32") as Tmp:
                if n > 0:
                    T.assert_(n <= 65535, "the launch of {} blocks along blockIdx.y exceeds the target's limit of 65535; split the loop bound to it", n)
                    T.evaluate(T.device_launch("main_kernel0", {"blockIdx.y": n, "threadIdx.x": 64}, A, Tmp, n, r))
                if n > 0:
                    T.assert_(n <= 65535, "the launch of {} blocks along blockIdx.y exceeds the target's limit of 65535; split the loop bound to it", n)
                    T.evaluate(T.device_launch("main_kernel1", {"blockIdx.y": n, "threadIdx.x": 64}, B, Tmp, n))

    @T.prim_func
    def main_kernel0(A: T.Buffer((n, 64), "float32"), Tmp: T.Buffer((n, 64), "float32"), n: T.size_var("n"), r: T.int32):
        T.func_attr({"calling_conv": "device_kernel", "global_symbol": "main_kernel0"})
        for by in T.thread_binding(n, thread="blockIdx.y"):
            for tx in T.thread_binding(64, thread="threadIdx.x"):
                Tmp[by, tx] = A[by, tx] + T.Cast("float32", r)

    @T.prim_func
    def main_kernel1(B: T.Buffer((n, 64), "float32"), Tmp: T.Buffer((n, 64), "float32"), n: T.size_var("n")):
        T.func_attr({"calling_conv": "device_kernel", "global_symbol": "main_kernel1"})
        for by in T.thread_binding(n, thread="blockIdx.y"):
            for tx in T.thread_binding(64, thread="threadIdx.x"):
                B[by, tx] = Tmp[by, tx] * T.float32(2)'''


def two_kernels(axis="blockIdx.y"):
    """A host loop, a temporary, two kernels: Tmp = A + r, then B = 2 Tmp."""
    n = T.size_var("n")
    A = T.decl_buffer((n, 64), "float32", "A")
    B = T.decl_buffer((n, 64), "float32", "B")
    Tmp = T.decl_buffer((n, 64), "float32", "Tmp")
    r = T.var("r")

    def kernel(out, value):
        by, tx = T.var("by"), T.var("tx")
        return T.For(by, T.const(0), n, "thread_binding", T.For(
            tx, T.const(0), T.const(64), "thread_binding",
            T.BufferStore(out, value(by, tx), (by, tx)), "threadIdx.x"), axis)
    k1 = kernel(Tmp, lambda by, tx: A[by, tx] + T.cast(r, "float32"))
    k2 = kernel(B, lambda by, tx: Tmp[by, tx] * 2.0)
    return T.PrimFunc([A, B], T.For(r, T.const(0), T.const(2), "serial",
                                    T.Allocate(Tmp, T.seq(k1, k2))))


def test_kernels_are_outlined_into_device_functions_launched_by_host_ir():
    with PassContext(target=CUDA):
        mod = split_host_device(two_kernels())
    assert str(mod) == TWO_KERNELS
    assert T.structural_equal(T.parse(str(mod)), mod)
    a = np.random.default_rng(0).standard_normal((3, 64)).astype("float32")
    b = np.zeros_like(a)
    T.interpret(mod, a, b, check_races=True)
    np.testing.assert_allclose(b, (a + 1) * 2, rtol=1e-6)


def test_outline_then_inline_is_the_identity_for_kernels():
    from cuvil_tir.transform.gpu_threads import is_thread_loop, launch_dims
    f = two_kernels()
    mod = outline_device(f, is_thread_loop, launch_dims)
    assert mod.names == ("main", "main_kernel0", "main_kernel1")
    assert T.structural_equal(inline_launches(mod).body, f.body)
    assert outline_device(mod, is_thread_loop, launch_dims) is mod   # nothing left


def test_without_a_target_nothing_but_the_structure_is_checked():
    mod = split_host_device(two_kernels())
    launch = mod.entry.body.body.body.seq[0]
    assert isinstance(launch, T.IfThenElse) and isinstance(launch.then_case, T.Evaluate)


def test_a_launch_over_the_limit_fails_its_check():
    with PassContext(target=CUDA):
        mod = split_host_device(two_kernels())
    a = np.zeros((70000, 64), "float32")
    with pytest.raises(T.RuntimeCheckError, match="the launch of 70000 blocks along "
                       "blockIdx.y exceeds the target's limit of 65535"):
        T.interpret(mod, a, np.zeros_like(a))


def test_outline_stmt_takes_what_the_statement_uses():
    n = T.size_var("n")
    X = T.decl_buffer((n,), "float32", "X")
    Y = T.decl_buffer((n,), "float32", "Y")
    i = T.var("i")
    s = T.For(i, T.const(0), n, "serial", T.BufferStore(Y, X[i], (i,)))
    f, args = outline_stmt(s, "copy", "device_kernel", first=[X, Y], shapes=True)
    assert [p.name for p in f.params] == ["X", "Y", "n"] and args == (X, Y, n)
    assert f.params[2] is not n and f.params[0].shape[0] is f.params[2]
    assert f.attr("calling_conv") == "device_kernel"


def test_a_launch_is_checked_against_its_kernel():
    with PassContext(target=CUDA):
        mod = split_host_device(two_kernels())
    k = mod["main_kernel0"]
    A, Tmp, n, r = k.params
    cases = [
        ("gone", {}, (), "launches device kernel 'gone', which the module does not have"),
        ("main", {}, (), "launches 'main' as a device kernel, but its calling_conv is "
         "'host'"),
        ("main_kernel0", {}, (A,), "with 1 argument\\(s\\); it takes 4"),
        ("main_kernel0", {}, (A, Tmp, T.float32(1), r), "with a value of float32 as "
         "argument 2 \\(n\\); it expects a int32"),
        ("main_kernel0", {"blockIdx.y": n, "threadIdx.x": T.const(32)}, (A, Tmp, n, r),
         "over \\{blockIdx.y: n, threadIdx.x: 32\\}; its thread loops span \\{blockIdx.y: "
         "n, threadIdx.x: 64\\}"),
    ]
    for name, dims, args, msg in cases:
        with pytest.raises(T.LoweringError, match=msg):
            kernel_of(mod, name, dims, args, "main")


def test_device_launch_builder_errors():
    A = T.decl_buffer((8,), "float32", "A")
    with pytest.raises(T.DTypeError, match="the kernel name must be an identifier"):
        T.device_launch("no such", {})
    with pytest.raises(T.DTypeError, match="the launch dimensions are a dict"):
        T.device_launch("k", [8])
    with pytest.raises(T.DTypeError, match="an axis name and a scalar integer extent, "
                       "found 'threadIdx.x': float32"):
        T.device_launch("k", {"threadIdx.x": T.float32(8)})
    with pytest.raises(T.DTypeError, match="argument 0 must be a whole buffer"):
        T.device_launch("k", {}, A[0:4])


def test_interpreting_a_host_function_alone_says_to_interpret_the_module():
    mod = split_host_device(two_kernels())
    with pytest.raises(T.LoweringError, match="T.device_launch runs a kernel of its "
                       "module: interpret the IRModule"):
        T.interpret(mod.entry, np.zeros((1, 64), "float32"), np.zeros((1, 64), "float32"))


def test_a_target_with_its_own_axes_needs_no_core_edit():
    # an NPU with four cores declares its axis; binding, outlining, the launch shape
    # and the interpreter's semantics follow the declaration
    register_thread_axis(ThreadAxis("npu_core.x", "grid", 0, limit=4))
    try:
        assert thread_axis("npu_core.x").launched
        A = T.decl_buffer((4, 8), "float32", "A")
        c, j = T.var("c"), T.var("j")
        body = T.For(c, T.const(0), T.const(4), "thread_binding", T.For(
            j, T.const(0), T.const(8), "serial",
            T.BufferStore(A, T.cast(c * 8 + j, "float32"), (c, j))), "npu_core.x")
        mod = outline_device(T.PrimFunc([A], body), lambda s: s is body,
                             lambda s: {"npu_core.x": s.extent}, suffix="core")
        assert mod.names == ("main", "main_core0")
        assert launch_shape({"npu_core.x": 4}) == ((4, 1, 1), (1, 1, 1))
        a = np.zeros((4, 8), "float32")
        T.interpret(mod, a)
        np.testing.assert_array_equal(a.ravel(), np.arange(32))
    finally:
        from cuvil_tir import thread_axes
        thread_axes._AXES.pop("npu_core.x")


def test_thread_axis_declaration_errors():
    with pytest.raises(T.LoweringError, match="level must be one of grid, thread, virtual"):
        ThreadAxis("x", "warp")
    with pytest.raises(T.LoweringError, match="dim must be 0, 1 or 2"):
        ThreadAxis("x", "grid", 3)
    with pytest.raises(T.LoweringError, match="limit must be a positive int"):
        ThreadAxis("x", "grid", 0, 0)
    with pytest.raises(T.LoweringError, match="'threadIdx.x' is already registered as "
                       "thread dim 0; found grid dim 0"):
        register_thread_axis(ThreadAxis("threadIdx.x", "grid", 0))
    with pytest.raises(T.LoweringError, match="unknown thread axis 'warp.x'; known axes: "
                       "blockIdx.x"):
        thread_axis("warp.x")
    with pytest.raises(T.LoweringError, match="thread_binding loop needs a registered "
                       "thread axis"):
        T.For(T.var("i"), T.const(0), T.const(2), "thread_binding",
              T.Evaluate(T.const(0)), "warp.x")


def test_the_printed_module_reads_back_as_text():
    text = textwrap.dedent(TWO_KERNELS)
    assert str(T.parse(text)) == TWO_KERNELS


def test_a_kind_declares_its_axes_and_they_join_the_vocabulary():
    from cuvil_tir import thread_axes
    from cuvil_tir.target import Axis, TargetKind, register_target, unregister_target

    class Npu(TargetKind):
        name = "test-npu-cores"
        axes = (Axis("test_core.x", "grid", 0, limit=8),)
        max_threads = 1

        def codegen(self, module, target):
            raise NotImplementedError

        def load(self, program, target):
            raise NotImplementedError
    assert not thread_axes.is_thread_axis("test_core.x")
    register_target(Npu())
    try:
        assert thread_axes.thread_axis("test_core.x").level == "grid"
        with PassContext(target=targets.Target("test-npu-cores")):
            from cuvil_tir.transform.gpu_threads import declared_limits
            assert declared_limits() == ({"test_core.x": 8}, 1)
    finally:
        unregister_target("test-npu-cores")
        thread_axes._AXES.pop("test_core.x")

    class Bad(Npu):
        name = "test-npu-bad"
        axes = (("core", 4),)
    with pytest.raises(targets.TargetError, match="'axes' of target kind 'test-npu-bad' "
                       "are ThreadAxis declarations"):
        register_target(Bad())
