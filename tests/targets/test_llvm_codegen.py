"""Hand-built lowered IR (vectors, loop kinds, lets) through a pass-less target kind."""

import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir import (Allocate, Broadcast, BufferStore, Evaluate, For, IfThenElse, Let,
                       LetStmt, PrimFunc, Ramp, seq)


class _Raw(type(targets.get_target_kind("llvm"))):
    """The llvm backend with no lowering passes: builds IR that is already lowered."""

    name = "llvm-raw-test"
    passes = []


@pytest.fixture(scope="module", autouse=True)
def raw_kind():
    targets.register_target(_Raw(), replace=True)
    yield
    targets.unregister_target(_Raw.name)


def _build(params, body, name="k"):
    return targets.build(PrimFunc(params, body, {"global_symbol": name}), _Raw.name)


def test_contiguous_vector_load_store_and_broadcast():
    A = T.decl_buffer((16,), "float32", "A")
    B = T.decl_buffer((16,), "float32", "B")
    i = T.var("i")
    idx = Ramp(i * 8, T.const(1), 8)
    body = For(i, T.const(0), T.const(2), "serial",
               BufferStore(B, A[idx] * Broadcast(T.const(3.0), 8), (idx,)))
    mod = _build([A, B], body)
    assert "load <8 x float>" in mod.get_source("ll")
    assert "store <8 x float>" in mod.get_source("ll")
    a, b = np.arange(16, dtype="float32"), np.zeros(16, "float32")
    mod(a, b)
    np.testing.assert_array_equal(b, a * 3)


def test_strided_vector_access_is_a_gather():
    A = T.decl_buffer((16,), "int32", "A")
    B = T.decl_buffer((8,), "int32", "B")
    body = BufferStore(B, A[Ramp(T.const(0), T.const(2), 8)], (Ramp(T.const(0), T.const(1), 8),))
    mod = _build([A, B], body)
    a, b = np.arange(16, dtype="int32"), np.zeros(8, "int32")
    mod(a, b)
    np.testing.assert_array_equal(b, a[::2])


@pytest.mark.parametrize("kind, marker", [("unrolled", "llvm.loop.unroll.full"),
                                          ("vectorized", "llvm.loop.vectorize.enable"),
                                          ("parallel", None), ("serial", None)])
def test_loop_kinds(kind, marker):
    A = T.decl_buffer((64,), "float32", "A")
    i = T.var("i")
    mod = _build([A], For(i, T.const(0), T.const(64), kind,
                          BufferStore(A, A[i] + i.astype("float32"), (i,))))
    ll = mod.get_source("ll")
    assert (marker in ll) if marker else "llvm.loop" not in ll
    a = np.ones(64, "float32")
    mod(a)
    np.testing.assert_array_equal(a, 1 + np.arange(64, dtype="float32"))


def test_let_letstmt_if_evaluate_allocate_on_2d_buffers():
    A = T.decl_buffer((3, 4), "int32", "A")
    tmp = T.decl_buffer((4,), "int32", "tmp", scope="local")
    i, j, x, y = T.var("i"), T.var("j"), T.var("x"), T.var("y")
    inner = seq(
        BufferStore(tmp, Let(x, A[i, j] * 2, x + 1), (j,)),
        LetStmt(y, tmp[j] * 10,
                IfThenElse(j % 2 == 0, BufferStore(A, y, (i, j)),
                           BufferStore(A, T.const(-1), (i, j)))),
        Evaluate(T.const(0)))
    body = Allocate(tmp, For(i, T.const(0), T.const(3), "serial",
                             For(j, T.const(0), T.const(4), "serial", inner)))
    mod = _build([A], body)
    a = np.arange(12, dtype="int32").reshape(3, 4)
    want = np.where(np.arange(4) % 2 == 0, (a * 2 + 1) * 10, -1)
    mod(a)
    np.testing.assert_array_equal(a, want)


def test_unlowered_blocks_are_refused():
    f = T.create_prim_func([T.placeholder((2,), name="X")])
    with pytest.raises(targets.CodegenError, match=r"block 'root' was not lowered"):
        targets.build(f, _Raw.name)


def test_thread_binding_is_refused_on_cpu():
    A = T.decl_buffer((4,), "float32", "A")
    i = T.var("i")
    body = For(i, T.const(0), T.const(4), "thread_binding",
               BufferStore(A, T.const(0.0), (i,)), thread_tag="threadIdx.x")
    with pytest.raises(targets.CodegenError, match=r"bound to threadIdx.x; thread "
                                                   r"bindings need a GPU target"):
        _build([A], body)


def test_undefined_variable_is_reported():
    A = T.decl_buffer((4,), "float32", "A")
    with pytest.raises(targets.CodegenError, match=r"variable 'ghost' is used but never "
                                                   r"defined"):
        _build([A], BufferStore(A, T.const(0.0), (T.var("ghost"),)))


@pytest.mark.parametrize("n", [1024, 1000])
def test_pragma_nontemporal_streams_the_vector_stores(n):
    import schedules as S
    A = T.placeholder((n,), name="A")
    B = T.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    sch = S.Schedule(T.create_prim_func([A, B]))
    io, ii = sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 64])
    sch.parallel(io)
    sch.vectorize(ii)
    haswell = targets.Target("llvm", mcpu="haswell")   # 8 lanes, whatever the host
    plain = targets.build(sch.copy(), haswell)
    sch.annotate(io, "pragma_nontemporal", 1)
    mod = targets.build(sch, haswell)
    ll = mod.get_source("ll")
    assert "store <8 x float>" in ll and ", !nontemporal !0" in ll
    assert "!0 = !{i32 1} ; nontemporal" in ll
    assert "!nontemporal" not in plain.get_source("ll")
    a = np.random.default_rng(0).standard_normal(n).astype("float32")
    b = np.zeros(n, "float32")
    mod(a, b)
    np.testing.assert_array_equal(b, a * np.float32(2) + np.float32(1))
