"""Memories are part of a target: the scopes each kind declares, and the build-time
error for a buffer in any other scope (CVL-E105)."""

import contextlib

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from targets import HOST_MEMORIES, Memory, check_memories


def _matmul_cached(scope):
    A = T.placeholder((8, 8), name="A")
    B = T.placeholder((8, 8), name="B")
    k = T.reduce_axis((0, 8), name="k")
    C = T.compute((8, 8), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = S.Schedule(T.create_prim_func([A, B, C]))
    sch.cache_read(sch.get_block("C"), 0, scope)
    return sch


@pytest.mark.parametrize("kind", ["llvm", "c"])
def test_cpu_targets_have_global_and_local(kind):
    mems = targets.get_target_kind(kind).memories
    assert [m.scope for m in mems] == ["global", "local"]
    assert all(m.capacity_bytes is None for m in mems)


@pytest.mark.parametrize("kind", ["llvm", "c"])
@pytest.mark.parametrize("scope", ["shared"])
def test_a_scope_of_another_target_is_refused_at_build_time(kind, scope):
    with pytest.raises(targets.CodegenError,
                       match=rf"buffer 'A_{scope}' is in scope '{scope}', which target "
                             rf"'{kind}' has no memory for; its memories are: global, "
                             "local") as info:
        targets.build(_matmul_cached(scope), kind)
    assert info.value.code == "CVL-E105"


@pytest.mark.parametrize("kind", ["llvm", "c"])
def test_local_scope_builds_and_runs(kind):
    mod = targets.build(_matmul_cached("local"), kind)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 8, 8)).astype("float32")
    c = np.zeros((8, 8), "float32")
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_a_parameter_in_a_foreign_scope_is_refused():
    X = T.decl_buffer((4,), "float32", "X", scope="npu.wgt")
    f = T.PrimFunc([X], T.Evaluate(T.const(0)))
    with pytest.raises(targets.CodegenError, match="buffer 'X' is in scope 'npu.wgt'"):
        check_memories(f, "llvm")


@contextlib.contextmanager
def _kind_with(name, memory):
    """A target kind ``name`` (llvm's code generator) with global memory and
    ``memory``, registered for the block."""
    class Kind(type(targets.get_target_kind("llvm"))):
        memories = (Memory("global"), memory)

    Kind.name = name
    targets.register_target(Kind())
    try:
        yield
    finally:
        targets.unregister_target(name)


def test_a_kind_declares_its_own_memories():
    with _kind_with("test-npu-mem", Memory("npu.wgt", 64 << 10)):
        X = T.decl_buffer((4,), "float32", "X", scope="npu.wgt")
        f = T.PrimFunc([X], T.Evaluate(T.const(0)))
        check_memories(f, "test-npu-mem")
        Y = T.decl_buffer((4,), "float32", "Y", scope="local")
        with pytest.raises(targets.CodegenError, match="its memories are: global, npu.wgt"):
            check_memories(T.PrimFunc([Y], T.Evaluate(T.const(0))), "test-npu-mem")


def test_a_kind_without_memories_has_the_hosts():
    class Bare(targets.TargetKind):
        name = "bare"

    assert Bare().memories == HOST_MEMORIES


def _elementwise():
    A = T.placeholder((8,), name="A")
    B = T.compute((8,), lambda i: A[i] * 2.0, name="B")
    C = T.compute((8,), lambda i: B[i] + 1.0, name="C")
    return T.create_prim_func([A, C])


@pytest.mark.parametrize("step", [
    lambda sch: sch.cache_read("B", 0, "test_scope"),
    lambda sch: sch.cache_write("B", 0, "test_scope"),
    lambda sch: sch.set_scope("B", 0, "test_scope")])
def test_a_scope_no_target_has_is_refused_by_the_schedule(step):
    # no target could ever build it: refused when scheduled, not only at build time
    sch = S.Schedule(_elementwise())
    before = sch.func
    with pytest.raises(S.ScheduleError, match="expected a storage scope name .*, found "
                                              "'test_scope' \\(str\\): no registered target "
                                              "has a memory 'test_scope' \\(their plain scopes: "
                                              "global, local, shared, warp, warpgroup\\)"):
        step(sch)
    assert sch.func is before


def test_a_plain_scope_a_registered_target_declares_is_accepted():
    with _kind_with("test-scratch-mem", Memory("scratch", 4 << 10)):
        sch = S.Schedule(_elementwise())
        sch.set_scope("B", 0, "scratch")
        assert "scope=\"scratch\"" in str(sch.func)
    with pytest.raises(S.ScheduleError, match="no registered target has a memory 'scratch'"):
        S.Schedule(_elementwise()).set_scope("B", 0, "scratch")
