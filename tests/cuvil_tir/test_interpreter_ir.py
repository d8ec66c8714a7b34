"""The reference interpreter on hand-built (lowered-style) IR, block semantics, and
``interpret(lower(f)) == interpret(f)`` over the workloads."""

from __future__ import annotations

import numpy as np
import pytest

import cuvil_tir as T
from tests.workloads import ALL

RNG = np.random.default_rng(4321)


# hand-built IR ----------------------------------------------------------------------------

def _loop(var, extent, body, kind="serial", tag=None):
    return T.For(var, T.const(0), T.const(extent), kind, body, thread_tag=tag)


def test_lowered_style_ir_allocate_let_if_and_flat_params():
    # flat params viewing 2-D caller arrays; a local scratch; LetStmt; IfThenElse
    A = T.decl_buffer((12,), "float32", "A")
    B = T.decl_buffer((12,), "float32", "B")
    tmp = T.decl_buffer((1,), "float32", "tmp", scope="local")
    i, x = T.var("i"), T.var("x")
    zero = T.const(0)
    body = _loop(i, 12, T.LetStmt(x, i * 2, T.seq(
        T.BufferStore(tmp, A[i] * 2.0, (zero,)),
        T.IfThenElse(T.truncmod(x, 4) == 0,
                     T.BufferStore(B, tmp[zero], (i,)),
                     T.BufferStore(B, -tmp[zero] + T.cast(x, "float32"), (i,))))))
    f = T.PrimFunc((A, B), T.Allocate(tmp, body))
    a, b = RNG.standard_normal((3, 4)).astype("float32"), np.zeros((3, 4), "float32")
    T.interpret(f, a, b)
    flat = a.reshape(-1)
    idx = np.arange(12)
    want = np.where((2 * idx) % 4 == 0, 2 * flat, -2 * flat + 2 * idx).reshape(3, 4)
    np.testing.assert_array_equal(b, want.astype("float32"))


def test_flat_param_needs_contiguous_array():
    A = T.decl_buffer((4,), "float32", "A")
    f = T.PrimFunc((A,), T.Evaluate(T.const(0)))
    with pytest.raises(T.ShapeError, match=r"needs a C-contiguous array"):
        T.interpret(f, np.zeros((4, 2), "float32")[:, :1].reshape(2, 2)[:, ::1].T)


def test_vector_ramp_broadcast_loads_and_stores():
    A = T.decl_buffer((16,), "float32", "A")
    B = T.decl_buffer((16,), "float32", "B")
    io = T.var("io")
    base = io * 4
    vec = A[T.Ramp(base, T.const(1), 4)] * T.Broadcast(T.const(3.0), 4)
    body = _loop(io, 4, T.BufferStore(B, vec + A[T.Ramp(base, T.const(1), 4)],
                                      (T.Ramp(base, T.const(1), 4),)))
    f = T.PrimFunc((A, B), body)
    a, b = RNG.standard_normal(16).astype("float32"), np.zeros(16, "float32")
    T.interpret(f, a, b)
    np.testing.assert_array_equal(b, a * np.float32(3) + a)


def test_strided_vector_load_and_broadcast_store():
    A = T.decl_buffer((8,), "int32", "A")
    B = T.decl_buffer((4,), "int32", "B")
    C = T.decl_buffer((4,), "int32", "C")
    s = T.seq(T.BufferStore(B, A[T.Ramp(T.const(1), T.const(2), 4)],
                            (T.Ramp(T.const(0), T.const(1), 4),)),
              T.BufferStore(C, T.Broadcast(T.const(7), 4), (T.Ramp(T.const(0), T.const(1), 4),)))
    a, b, c = np.arange(8, dtype="int32"), np.zeros(4, "int32"), np.zeros(4, "int32")
    T.interpret(T.PrimFunc((A, B, C), s), a, b, c)
    assert b.tolist() == [1, 3, 5, 7] and c.tolist() == [7, 7, 7, 7]


def test_vector_guarded_load_reads_only_the_lanes_it_takes():
    # the tail of a vectorized loop over 6 elements in lanes of 4: lanes 6, 7 are guarded
    A = T.decl_buffer((6,), "float32", "A")
    B = T.decl_buffer((8,), "float32", "B")
    io = T.var("io")
    idx = T.Ramp(io * 4, T.const(1), 4)
    guard = idx < T.Broadcast(T.const(6), 4)
    value = T.if_then_else(guard, A[idx], T.Broadcast(T.const(-1.0), 4))
    body = _loop(io, 2, T.BufferStore(B, value, (idx,)))
    a, b = np.arange(1, 7, dtype="float32"), np.zeros(8, "float32")
    T.interpret(T.PrimFunc((A, B), body), a, b)
    assert b.tolist() == [1, 2, 3, 4, 5, 6, -1, -1]
    unguarded = _loop(io, 2, T.BufferStore(B, T.Select(guard, A[idx], T.Broadcast(
        T.const(-1.0), 4)), (idx,)))
    with pytest.raises(T.LoweringError, match=r"out-of-bounds load from buffer A: index \[6\]"):
        T.interpret(T.PrimFunc((A, B), unguarded), a, b)


def test_vector_cast_compare_and_select():
    A = T.decl_buffer((4,), "int32", "A")
    B = T.decl_buffer((4,), "float32", "B")
    r = T.Ramp(T.const(0), T.const(1), 4)
    v = A[r]
    cond = v > T.Broadcast(T.const(1), 4)
    value = T.Select(cond, T.cast(v, "float32x4") * T.Broadcast(T.const(0.5), 4),
                     T.Broadcast(T.const(9.0), 4))
    a, b = np.array([-3, 1, 2, 7], "int32"), np.zeros(4, "float32")
    T.interpret(T.PrimFunc((A, B), T.BufferStore(B, value, (r,))), a, b)
    assert b.tolist() == [9.0, 9.0, 1.0, 3.5]


def test_let_expression():
    A = T.placeholder((5,), name="A")
    x = T.var("x", "float32")
    B = T.compute((5,), lambda i: T.Let(x, A[i] + 1.0, x * x), name="B")
    a, b = np.arange(5, dtype="float32"), np.zeros(5, "float32")
    T.interpret(T.create_prim_func([A, B]), a, b)
    np.testing.assert_array_equal(b, (a + 1) ** 2)


def test_if_then_else_is_lazy_and_select_is_not():
    A = T.placeholder((4,), name="A")
    guarded = T.compute((6,), lambda i: T.if_then_else(i < 4, A[T.min(i, 9)], -1.0), name="G")
    b = np.zeros(6, "float32")
    T.interpret(T.create_prim_func([A, guarded]), np.arange(4, dtype="float32"), b)
    assert b.tolist() == [0.0, 1.0, 2.0, 3.0, -1.0, -1.0]
    sel = T.compute((6,), lambda i: T.select(i < 4, A[T.min(i, 9)], -1.0), name="S")
    with pytest.raises(T.LoweringError, match=r"out-of-bounds load from buffer A: index \[4\] "
                                              r"is outside its shape \(4\)"):
        T.interpret(T.create_prim_func([A, sel]), np.zeros(4, "float32"), b)


def test_out_of_bounds_negative_index_never_wraps():
    A = T.placeholder((4,), name="A")
    B = T.compute((4,), lambda i: A[i - 1], name="B")
    with pytest.raises(T.LoweringError, match=r"out-of-bounds load from buffer A: index \[-1\]"):
        T.interpret(T.create_prim_func([A, B]), np.zeros(4, "float32"), np.zeros(4, "float32"))


def test_out_of_bounds_store_2d():
    A = T.decl_buffer((2, 3), "float32", "A")
    i = T.var("i")
    f = T.PrimFunc((A,), _loop(i, 3, T.BufferStore(A, T.const(1.0), (i, i))))
    with pytest.raises(T.LoweringError, match=r"out-of-bounds store to buffer A: index \[2, 2\] "
                                              r"is outside its shape \(2, 3\)"):
        T.interpret(f, np.zeros((2, 3), "float32"))


@pytest.mark.parametrize("kind,tag", [("parallel", None), ("vectorized", None),
                                      ("unrolled", None), ("thread_binding", "threadIdx.x")])
def test_every_loop_kind_runs_serially(kind, tag):
    A = T.decl_buffer((8,), "int32", "A")
    i = T.var("i")
    f = T.PrimFunc((A,), _loop(i, 8, T.BufferStore(A, i * i - 3, (i,)), kind, tag))
    a = np.zeros(8, "int32")
    T.interpret(f, a)
    np.testing.assert_array_equal(a, np.arange(8) ** 2 - 3)


def test_undefined_variable_and_buffer_are_lowering_errors():
    A = T.decl_buffer((2,), "int32", "A")
    ghost = T.decl_buffer((2,), "int32", "ghost")
    j = T.var("j")
    with pytest.raises(T.LoweringError, match=r"variable j is used but not defined"):
        T.interpret(T.PrimFunc((A,), T.BufferStore(A, j, (T.const(0),))), np.zeros(2, "int32"))
    with pytest.raises(T.LoweringError, match=r"buffer ghost is used .* but is neither a "
                                              r"parameter nor allocated"):
        T.interpret(T.PrimFunc((A,), T.BufferStore(A, ghost[T.const(0)], (T.const(0),))),
                    np.zeros(2, "int32"))


# block semantics --------------------------------------------------------------------------

def _block(name, iter_vars, body, init=None, allocs=()):
    return T.Block(name, tuple(iter_vars), (), (), body, init, tuple(allocs))


def test_init_runs_when_reduce_vars_reach_domain_minimum():
    # reduce var domain [2, 6): init must run at vk == 2, not at loop index 0 twice
    A = T.decl_buffer((6,), "float32", "A")
    S = T.decl_buffer((2,), "float32", "S")
    i, k = T.var("i"), T.var("k")
    vi, vk = T.var("vi"), T.var("vk")
    blk = _block("S", [T.IterVar(vi, T.Range.from_extent(2), "spatial"),
                       T.IterVar(vk, T.Range(T.const(2), T.const(4)), "reduce")],
                 T.BufferStore(S, S[vi] + A[vk], (vi,)),
                 init=T.BufferStore(S, T.const(100.0), (vi,)))
    nest = _loop(i, 2, _loop(k, 4, T.BlockRealize((i, k + 2), T.const(True), blk)))
    s = np.full(2, -7.0, "float32")
    T.interpret(T.PrimFunc((A, S), nest), np.arange(6, dtype="float32"), s)
    assert s.tolist() == [114.0, 114.0]


def test_block_predicate_and_domain_check():
    A = T.decl_buffer((6,), "int32", "A")
    i, vi = T.var("i"), T.var("vi")
    blk = _block("A", [T.IterVar(vi, T.Range.from_extent(6), "spatial")],
                 T.BufferStore(A, vi + 1, (vi,)))
    ok = _loop(i, 8, T.BlockRealize((i,), i < 6, blk))
    a = np.zeros(6, "int32")
    T.interpret(T.PrimFunc((A,), ok), a)
    assert a.tolist() == [1, 2, 3, 4, 5, 6]
    bad = _loop(i, 8, T.BlockRealize((i,), T.const(True), blk))
    with pytest.raises(T.LoweringError, match=r"block A: iter var vi is bound to 6, outside "
                                              r"its domain \[0, 6\)"):
        T.interpret(T.PrimFunc((A,), bad), a)


def test_block_alloc_buffers_are_fresh_per_execution():
    A = T.decl_buffer((4,), "float32", "A")
    B = T.decl_buffer((4,), "float32", "B")
    L = T.decl_buffer((1,), "float32", "L", scope="local")
    i, vi = T.var("i"), T.var("vi")
    zero = T.const(0)
    # only the first execution writes L: the later ones read a fresh, poisoned L
    inner = _block("B", [T.IterVar(vi, T.Range.from_extent(4), "spatial")],
                   T.seq(T.IfThenElse(vi == 0, T.BufferStore(L, A[vi], (zero,))),
                         T.BufferStore(B, L[zero], (vi,))), allocs=[L])
    root = _block("root", [], _loop(i, 4, T.BlockRealize((i,), T.const(True), inner)))
    f = T.PrimFunc((A, B), T.BlockRealize((), T.const(True), root))
    a, b = np.arange(1, 5, dtype="float32"), np.zeros(4, "float32")
    T.interpret(f, a, b)
    assert b[0] == 1.0 and np.isnan(b[1:]).all()


def test_fresh_integer_buffers_refuse_reads_of_unwritten_elements():
    A = T.decl_buffer((4,), "int32", "A")
    B = T.decl_buffer((4,), "int32", "B")
    L = T.decl_buffer((2,), "int32", "L", scope="local")
    i, vi = T.var("i"), T.var("vi")
    zero, one = T.const(0), T.const(1)
    inner = _block("B", [T.IterVar(vi, T.Range.from_extent(4), "spatial")],
                   T.seq(T.BufferStore(L, A[vi], (zero,)),
                         T.BufferStore(B, L[zero] + L[one], (vi,))), allocs=[L])
    root = _block("root", [], _loop(i, 4, T.BlockRealize((i,), T.const(True), inner)))
    f = T.PrimFunc((A, B), T.BlockRealize((), T.const(True), root))
    with pytest.raises(T.LoweringError, match=r"read of uninitialised memory: buffer "
                                              r"L\[1\] is read before any store wrote it"):
        T.interpret(f, np.arange(4, dtype="int32"), np.zeros(4, "int32"))


def test_root_alloc_buffers_persist_across_stages():
    A = T.decl_buffer((4,), "float32", "A")
    acc = T.decl_buffer((1,), "float32", "acc")
    B = T.decl_buffer((1,), "float32", "B")
    i = T.var("i")
    zero = T.const(0)
    root = _block("root", [], T.seq(
        T.BufferStore(acc, T.const(0.0, "float32"), (zero,)),
        _loop(i, 4, T.BufferStore(acc, acc[zero] + A[i], (zero,))),
        T.BufferStore(B, acc[zero], (zero,))), allocs=[acc])
    b = np.zeros(1, "float32")
    T.interpret(T.PrimFunc((A, B), T.BlockRealize((), T.const(True), root)),
                np.arange(4, dtype="float32"), b)
    assert b[0] == 6.0


# interpret(lower(f)) == interpret(f) ------------------------------------------------------

@pytest.mark.parametrize("name", sorted(ALL))
def test_lowered_workload_matches_unlowered(name):
    w = ALL[name]()
    inputs = w.make_inputs(np.random.default_rng(3))
    before = [a.copy() for a in inputs]
    after = [a.copy() for a in inputs]
    T.interpret(w.func, *before)
    T.interpret(T.lower(w.func), *after)
    for x, y in zip(before, after):
        np.testing.assert_allclose(y, x, rtol=1e-6, atol=1e-6)
    w.check(after)


def test_a_thread_loop_inside_a_nested_block_runs_every_thread():
    # the launch dimensions are read through blocks too: a reduction over threadIdx.x
    # under an outer block used to run thread 0 only
    f = T.parse('''@T.prim_func
def main(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4,), "float32")):
    for i in T.thread_binding(4, thread="blockIdx.x"):
        with T.block("outer"):
            vi = T.axis.spatial(4, i)
            T.reads(A[vi, 0:8])
            T.writes(B[vi])
            for j in T.thread_binding(8, thread="threadIdx.x"):
                with T.block("inner"):
                    vj = T.axis.reduce(8, j)
                    T.reads(A[vi, vj])
                    T.writes(B[vi])
                    with T.init():
                        B[vi] = T.float32(0)
                    B[vi] = B[vi] + A[vi, vj]
''')
    a = np.arange(32, dtype="float32").reshape(4, 8)
    b = np.zeros(4, "float32")
    T.interpret(f, a, b)
    np.testing.assert_array_equal(b, a.sum(axis=1))
