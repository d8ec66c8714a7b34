"""Lowering passes: exact expected IR, verifier errors, pipelines and numerical checks."""

from __future__ import annotations

import numpy as np
import pytest

import cuvil_tir as T
from cuvil_tir.expr import Broadcast, BufferLoad, EQ, Ramp
from cuvil_tir.target import get_pipeline, register_target, unregister_target
from cuvil_tir.transform import (default_pipeline, flatten_buffers, lower_blocks, simplify,
                                 verify_well_formed)
from tests import workloads as W

f32 = "float32"


def c(v, dt="int32"):
    return T.const(v, dt)


def loop(v, n, body, kind="serial", **kw):
    return T.For(v, c(0), c(n) if isinstance(n, int) else n, kind, body, **kw)


def assert_ir(got, want):
    assert T.structural_equal(got, want), f"got:\n{got}\nwant:\n{want}"


# lower_blocks --------------------------------------------------------------------------------

def test_lower_blocks_reduction_init_guard():
    f = W.matmul(4, 4, 4).func
    A, B, C = f.params
    i, j, k = T.var("i"), T.var("j"), T.var("k")
    body = loop(i, 4, loop(j, 4, loop(k, 4, T.seq(
        T.IfThenElse(EQ(k, c(0)), T.BufferStore(C, c(0.0, f32), (i, j))),
        T.BufferStore(C, C[i, j] + A[i, k] * B[k, j], (i, j))))))
    assert_ir(lower_blocks(f), T.PrimFunc(f.params, body, f.attrs))


def test_lower_blocks_allocates_root_buffers():
    f = W.elementwise_chain(8).func
    A, B, Cb, D = f.params
    E = f.body.block.alloc_buffers[0]
    i, i1 = T.var("i"), T.var("i")
    body = T.Allocate(E, T.seq(
        loop(i, 8, T.BufferStore(E, A[i] * B[i] + Cb[i], (i,))),
        loop(i1, 8, T.BufferStore(D, T.max(E[i1], 0.0), (i1,)))))
    got = lower_blocks(f)
    assert_ir(got, T.PrimFunc(f.params, body, f.attrs))
    assert got.body.buffer is E and E.shape[0].value == 8


def _block_func(predicate_on: bool, reduce_value_const: bool, alloc=()):
    """A hand-built block: B[vi] += A[vi, vk], with an optional predicate."""
    A = T.decl_buffer((10, 4), f32, "A")
    B = T.decl_buffer((10,), f32, "B")
    io, ii, k = T.var("io"), T.var("ii"), T.var("k")
    vi, vk = T.var("vi"), T.var("vk")
    blk = T.Block("B", (T.IterVar(vi, T.Range.from_extent(10), "spatial"),
                        T.IterVar(vk, T.Range.from_extent(4), "reduce")), (), (),
                  T.BufferStore(B, B[vi] + A[vi, vk], (vi,)),
                  init=T.BufferStore(B, c(0.0, f32), (vi,)), alloc_buffers=alloc)
    kval = c(0) if reduce_value_const else k
    pred = (io * 4 + ii < 10) if predicate_on else c(True)
    br = T.BlockRealize((io * 4 + ii, kval), pred, blk)
    inner = br if reduce_value_const else loop(k, 4, br)
    return T.PrimFunc([A, B], loop(io, 3, loop(ii, 4, inner))), (A, B, io, ii, k)


def test_lower_blocks_predicate_becomes_if():
    f, (A, B, io, ii, k) = _block_func(True, False)
    x = io * 4 + ii
    want = loop(io, 3, loop(ii, 4, loop(k, 4, T.IfThenElse(x < 10, T.seq(
        T.IfThenElse(EQ(k, c(0)), T.BufferStore(B, c(0.0, f32), (x,))),
        T.BufferStore(B, B[x] + A[x, k], (x,)))))))
    assert_ir(lower_blocks(f), T.PrimFunc([A, B], want))


def test_lower_blocks_init_without_reduce_loop_is_unconditional():
    T_local = T.decl_buffer((1,), f32, "t", scope="local")
    f, (A, B, io, ii, k) = _block_func(False, True, alloc=(T_local,))
    x = io * 4 + ii
    want = loop(io, 3, loop(ii, 4, T.Allocate(T_local, T.seq(
        T.BufferStore(B, c(0.0, f32), (x,)),
        T.BufferStore(B, B[x] + A[x, c(0)], (x,))))))
    assert_ir(lower_blocks(f), T.PrimFunc([A, B], want))


def test_lower_blocks_keeps_loop_kinds_tags_annotations():
    A = T.placeholder((64,), name="A")
    f = T.create_prim_func([A, T.compute((64,), lambda i: A[i] * 2.0, name="B")])
    outer = f.body.block.body
    tagged = T.For(outer.loop_var, outer.min, outer.extent, "thread_binding", outer.body,
                   thread_tag="threadIdx.x", annotations={"pragma_x": 1})
    f2 = f.with_body(T.BlockRealize((), c(True), T.Block("root", (), (), (), tagged)))
    got = lower_blocks(f2).body
    assert (got.kind, got.thread_tag, got.annotations) == \
        ("thread_binding", "threadIdx.x", (("pragma_x", 1),))


# flatten_buffers ------------------------------------------------------------------------------

def test_flatten_row_major_and_params_positional():
    A = T.decl_buffer((4, 8), f32, "A")
    s = T.var("s")
    i, j = T.var("i"), T.var("j")
    f = T.PrimFunc([s, A], loop(i, 4, loop(j, 8, T.BufferStore(A, A[i, j] * 2.0, (i, j)))))
    got = flatten_buffers(f)
    assert got.params[0] is s
    Af = got.params[1]
    assert (Af.name, Af.dtype, Af.scope, Af.align, Af.shape[0].value) == ("A", f32, "global",
                                                                          64, 32)
    want_A = T.decl_buffer((32,), f32, "A")
    want = T.PrimFunc([s, want_A], loop(i, 4, loop(j, 8, T.BufferStore(
        want_A, want_A[i * 8 + j] * 2.0, (i * 8 + j,)))))
    assert_ir(got, want)


def test_flatten_symbolic_shape_keeps_size_vars():
    n, m = T.size_var("n"), T.size_var("m")
    A = T.decl_buffer((n, m), f32, "A")
    i, j = T.var("i"), T.var("j")
    f = T.PrimFunc([A], loop(i, n, loop(j, m, T.BufferStore(A, c(0.0, f32), (i, j)))))
    got = flatten_buffers(f)
    Af = got.params[0]
    assert T.to_text(Af.shape[0]) == "n * m"
    assert Af.shape[0].a is n and Af.shape[0].b is m
    assert T.to_text(got.body.body.body.indices[0]) == "i * m + j"


def test_flatten_explicit_strides_and_scalar_buffer():
    A = T.decl_buffer((4, 8), f32, "A", strides=(12, 1), scope="shared", align=16)
    S = T.decl_buffer((), f32, "S", scope="local")
    i = T.var("i")
    body = T.Allocate(A, T.Allocate(S, loop(i, 4, T.BufferStore(
        S, A[i, c(3)], ()))))
    got = flatten_buffers(T.PrimFunc([], body))
    Af, Sf = got.body.buffer, got.body.body.buffer
    assert (Af.shape[0].value, Af.scope, Af.align, Af.strides) == (48, "shared", 16, ())
    assert Sf.shape[0].value == 1
    st = got.body.body.body.body
    assert T.to_text(st) == "S[0] = A[i * 12 + 3]"


def test_flatten_vector_ramp_indices():
    A = T.decl_buffer((4, 16), f32, "A")
    i = T.var("i")
    last = T.BufferStore(A, Broadcast(c(1.0, f32), 8), (i, Ramp(c(8), c(1), 8)))
    first = T.BufferStore(A, Broadcast(c(1.0, f32), 4), (Ramp(c(0), c(1), 4),
                                                         Broadcast(i, 4)))
    got = flatten_buffers(T.PrimFunc([A], T.seq(last, first)))
    s0, s1 = got.body.seq
    assert T.structural_equal(s0.indices[0], Ramp(i * 16 + 8, c(1), 8))
    assert T.structural_equal(s1.indices[0], Ramp(i, c(16), 4))


def test_flatten_refuses_blocks():
    with pytest.raises(T.LoweringError, match="run lower_blocks before flatten_buffers"):
        flatten_buffers(W.matmul(2, 2, 2).func)


# simplify pass ----------------------------------------------------------------------------------

def test_simplify_pass_removes_unit_loops_dead_ifs_and_empty_seqs():
    A = T.decl_buffer((16,), f32, "A")
    i, j, k = T.var("i"), T.var("j"), T.var("k")
    body = loop(i, 4, loop(j, 1, T.seq(
        T.IfThenElse(i < 8, T.BufferStore(A, c(0.0, f32), ((i * 4 + j) // 4 * 4,))),
        T.IfThenElse(i >= 4, T.BufferStore(A, c(1.0, f32), (i,))),
        loop(k, 0, T.BufferStore(A, c(2.0, f32), (k,))),
        T.SeqStmt(()))))
    got = simplify(T.PrimFunc([A], body))
    assert_ir(got, T.PrimFunc([A], loop(i, 4, T.BufferStore(A, c(0.0, f32), (i * 4,)))))


def test_simplify_pass_uses_if_conditions_and_keeps_thread_loops():
    A = T.decl_buffer((16,), f32, "A")
    i, t = T.var("i"), T.var("t")
    inner = T.IfThenElse(i < 8, T.BufferStore(A, T.if_then_else(i < 10, c(1.0, f32),
                                                                 c(2.0, f32)), (T.min(i, 15),)))
    body = T.For(t, c(0), c(1), "thread_binding", loop(i, 16, inner), thread_tag="threadIdx.x")
    got = simplify(T.PrimFunc([A], body))
    want = T.For(t, c(0), c(1), "thread_binding",
                 loop(i, 16, T.IfThenElse(i < 8, T.BufferStore(A, c(1.0, f32), (i,)))),
                 thread_tag="threadIdx.x")
    assert_ir(got, T.PrimFunc([A], want))


def test_simplify_pass_else_branch_and_empty_then():
    A = T.decl_buffer((16,), f32, "A")
    i = T.var("i")
    body = loop(i, 16, T.IfThenElse(i < 8, T.IfThenElse(i > 9, T.BufferStore(
        A, c(0.0, f32), (i,))), T.BufferStore(A, c(1.0, f32), (T.max(i, 8),))))
    got = simplify(T.PrimFunc([A], body))
    assert_ir(got, T.PrimFunc([A], loop(i, 16, T.IfThenElse(
        T.LE(c(8), i), T.BufferStore(A, c(1.0, f32), (i,))))))


# verifier ------------------------------------------------------------------------------------------

def _store_func(index_fn, n=16, extent=16, guard=None):
    A = T.decl_buffer((n,), f32, "A")
    i = T.var("i")
    st = T.BufferStore(A, c(0.0, f32), (index_fn(i),))
    if guard is not None:
        st = T.IfThenElse(guard(i), st)
    return T.PrimFunc([A], loop(i, extent, st))


def test_verify_out_of_bounds_store():
    with pytest.raises(T.LoweringError, match=r"out-of-bounds store to buffer 'A': index "
                       r"i \+ 1 of dimension 0 ranges over \[1, 16\] but the extent is 16"):
        verify_well_formed(_store_func(lambda i: i + 1))


def test_verify_negative_index_and_load():
    A = T.decl_buffer((8,), f32, "A")
    B = T.decl_buffer((8,), f32, "B")
    i = T.var("i")
    f = T.PrimFunc([A, B], loop(i, 8, T.BufferStore(B, A[i - 2], (i,))))
    with pytest.raises(T.LoweringError, match=r"out-of-bounds load from buffer 'A': index "
                       r"i - 2 .*\[-2, 5\]"):
        verify_well_formed(f)


def test_verify_guarded_accesses_are_fine():
    verify_well_formed(_store_func(lambda i: i + 1, guard=lambda i: i < 15))
    verify_well_formed(_store_func(lambda i: i * 2, extent=16, guard=lambda i: i < 8))
    A = T.decl_buffer((8,), f32, "A")
    B = T.decl_buffer((16,), f32, "B")
    i = T.var("i")
    guarded = T.if_then_else(i < 8, A[i], c(0.0, f32))
    verify_well_formed(T.PrimFunc([A, B], loop(i, 16, T.BufferStore(B, guarded, (i,)))))
    # the else arm of a guard is checked under the negated condition
    bad = T.if_then_else(i < 8, c(0.0, f32), A[i])
    with pytest.raises(T.LoweringError, match=r"index i of dimension 0 ranges over \[8, 15\]"):
        verify_well_formed(T.PrimFunc([A, B], loop(i, 16, T.BufferStore(B, bad, (i,)))))


def test_verify_reads_the_else_arm_of_an_equality_guard_under_its_negation():
    # B[i] = i == 1 ? 0 : A[i + 5] with i in [0, 1]: the load is A[5], in bounds (the
    # build of an accepted schedule was refused with CVL-E104, issue 25)
    A = T.decl_buffer((6,), f32, "A")
    B = T.decl_buffer((2,), f32, "B")
    i = T.var("i")
    value = T.if_then_else(i == 1, c(0.0, f32), A[i + 5])
    verify_well_formed(T.PrimFunc([A, B], loop(i, 2, T.BufferStore(B, value, (i,)))))
    bad = T.if_then_else(i == 0, c(0.0, f32), A[i + 5])
    with pytest.raises(T.LoweringError, match=r"index i \+ 5 of dimension 0 ranges over "
                       r"\[6, 6\] but the extent is 6"):
        verify_well_formed(T.PrimFunc([A, B], loop(i, 2, T.BufferStore(B, bad, (i,)))))


def test_verify_bounds_the_body_of_a_loop_by_its_extent_being_positive():
    # for io in [0, 2): for ii in [0, max(2 - io * 3, 0)): the inner loop runs for
    # io = 0 only, so A[io * 7 + ii + 7] reaches [7, 8] (a lowered non-dividing split
    # of a fused reduction was refused with "ranges over [7, 20]", issue 25's fuzzer)
    io, ii = T.var("io"), T.var("ii")

    def func(n):
        A = T.decl_buffer((n,), f32, "A")
        extent = T.expr.Max(c(2) - io * 3, c(0))
        st = T.BufferStore(A, c(0.0, f32), (io * 7 + ii + 7,))
        return T.PrimFunc([A], loop(io, 2, loop(ii, extent, st)))

    verify_well_formed(func(9))
    with pytest.raises(T.LoweringError, match=r"index io \* 7 \+ ii \+ 7 of dimension 0 "
                       r"ranges over \[7, 8\] but the extent is 8"):
        verify_well_formed(func(8))


def test_verify_never_reports_an_access_under_a_condition_that_cannot_hold():
    # for io in [0, 2): for ii in [0, max(2 - io * 3, 0)): io is 0 in the body, so the
    # else arm of io == 0 ? 0 : A[io * 12 + ii * 4 + 16] is never reached (a padded
    # layout's partitioned init was refused with "ranges over [16, 23]", fuzz case
    # 3003939395); the same load in the then arm is reached and stays an error
    io, ii = T.var("io"), T.var("ii")
    A = T.decl_buffer((16,), f32, "A")
    B = T.decl_buffer((8,), f32, "B")

    def func(value):
        extent = T.expr.Max(c(2) - io * 3, c(0))
        st = T.BufferStore(B, value, (io * 3 + ii,))
        return T.PrimFunc([A, B], loop(io, 2, loop(ii, extent, st)))

    load = A[io * 12 + ii * 4 + 16]
    verify_well_formed(func(T.if_then_else(io == 0, c(0.0, f32), load)))
    with pytest.raises(T.LoweringError, match=r"ranges over \[16, 20\] but the extent is 16"):
        verify_well_formed(func(T.if_then_else(io == 0, load, c(0.0, f32))))


def test_verify_is_not_fooled_by_over_approximation():
    # i % 4 + (i // 4) * 4 is in bounds; non-affine indices are never reported
    verify_well_formed(_store_func(lambda i: i % 4 + i // 4 * 4))
    # symbolic extent: not provable, no error
    n = T.size_var("n")
    A = T.decl_buffer((n,), f32, "A")
    i = T.var("i")
    verify_well_formed(T.PrimFunc([A], loop(i, n, T.BufferStore(A, c(0.0, f32), (i,)))))
    # a two-variable condition makes bounds inexact: no error reported
    j = T.var("j")
    body = loop(i, 16, loop(j, 16, T.IfThenElse(i + j < 16, T.BufferStore(
        A, c(0.0, f32), (i + j,)))))
    verify_well_formed(T.PrimFunc([A], body))


def test_verify_bounds_a_tile_index_through_the_block_bindings():
    # L[vt - vo * 4] with vt bound to vo * 4 + t is L[t]: in bounds, though vt and vo
    # each range over their whole domains
    text = """
@T.prim_func
def f(X: T.Buffer((16,), "float32")):
    for o in T.serial(4):
        with T.block("tile"):
            vo = T.axis.remap("S", [o])
            L = T.alloc_buffer((4,), "float32")
            for t in T.serial(4):
                with T.block("in"):
                    vt = T.axis.spatial(16, vo * 4 + t)
                    L[vt - vo * 4] = X[vt]
"""
    verify_well_formed(T.parse(text))
    with pytest.raises(T.LoweringError, match=r"index vt - vo \* 3 of dimension 0 ranges "
                       r"over \[0, 6\] but the extent is 4"):
        verify_well_formed(T.parse(text.replace("vt - vo * 4", "vt - vo * 3")))


def test_verify_undefined_variable_and_buffer():
    A = T.decl_buffer((16,), f32, "A")
    i, x = T.var("i"), T.var("x")
    f = T.PrimFunc([A], loop(i, 16, T.BufferStore(A, c(0.0, f32), (x,))))
    with pytest.raises(T.LoweringError, match="variable 'x' is used but not defined"):
        verify_well_formed(f)
    B = T.decl_buffer((16,), f32, "B")
    f = T.PrimFunc([A], loop(i, 16, T.BufferStore(B, A[i], (i,))))
    with pytest.raises(T.LoweringError, match="buffer 'B' is used but not defined"):
        verify_well_formed(f)


def test_verify_loop_var_defined_twice():
    A = T.decl_buffer((16,), f32, "A")
    i = T.var("i")
    f = T.PrimFunc([A], loop(i, 4, loop(i, 4, T.BufferStore(A, c(0.0, f32), (i,)))))
    with pytest.raises(T.LoweringError, match="loop variable 'i' is defined again inside "
                       "its own scope"):
        verify_well_formed(f)


def test_verify_index_count_dtype_and_lanes():
    A = T.decl_buffer((4, 4), f32, "A")
    B = T.decl_buffer((4,), f32, "B")
    i = T.var("i")
    f = T.PrimFunc([A, B], loop(i, 4, T.BufferStore(B, BufferLoad(A, (i,)), (i,))))
    with pytest.raises(T.LoweringError, match=r"load from buffer 'A': expected 2 index"):
        verify_well_formed(f)
    st = T.BufferStore(B, c(0.0, f32), (i,))
    object.__setattr__(st, "value", c(0, "int32"))   # bypass the constructor's check
    with pytest.raises(T.LoweringError, match="the value has dtype int32 but the buffer "
                       "holds float32"):
        verify_well_formed(T.PrimFunc([B], loop(i, 4, st)))
    st = T.BufferStore(B, Broadcast(c(0.0, f32), 4), (i,))
    with pytest.raises(T.LoweringError, match=r"a value of 4 lane\(s\) stored at indices "
                       r"of 1 lane"):
        verify_well_formed(T.PrimFunc([B], loop(i, 4, st)))


def test_verify_block_binding_outside_domain():
    # io*4 + ii reaches 11 > 9 unless the predicate io*4 + ii < 10 guards the block
    verify_well_formed(_block_func(True, False)[0])
    with pytest.raises(T.LoweringError, match=r"iter var 'vi' is bound to io \* 4 \+ ii, "
                       r"which ranges over \[0, 11\]"):
        verify_well_formed(_block_func(False, False)[0])
    A = T.decl_buffer((10,), f32, "A")
    i, vi = T.var("i"), T.var("vi")
    blk = T.Block("C", (T.IterVar(vi, T.Range.from_extent(10)),), (), (),
                  T.BufferStore(A, c(0.0, f32), (vi,)))
    bad = T.PrimFunc([A], loop(i, 10, T.BlockRealize((i + 1,), c(True), blk)))
    with pytest.raises(T.LoweringError, match=r"block 'C': iter var 'vi' is bound to i \+ 1, "
                       r"which ranges over \[1, 10\], outside its domain \[0, 9\]"):
        verify_well_formed(bad)


def test_verify_accepts_all_workloads_before_and_after_lowering():
    for w in (W.matmul(), W.conv2d_nchw(), W.softmax(), W.batch_matmul()):
        verify_well_formed(w.func)
        verify_well_formed(T.lower(w.func))


# pipelines and lower -----------------------------------------------------------------------------

def test_default_pipeline_and_lower_output_form():
    names = [T.transform.pass_name(p) for p in default_pipeline()]
    assert names == ["lower_blocks", "flatten_buffers", "simplify", "verify"]
    f = T.lower(W.matmul(4, 4, 4).func).entry
    A, B, C = f.params
    i, j, k = T.var("i"), T.var("j"), T.var("k")
    want = loop(i, 4, loop(j, 4, loop(k, 4, T.seq(
        T.IfThenElse(EQ(k, c(0)), T.BufferStore(C, c(0.0, f32), (i * 4 + j,))),
        T.BufferStore(C, C[i * 4 + j] + A[i * 4 + k] * B[k * 4 + j], (i * 4 + j,))))))
    assert_ir(f, T.PrimFunc(f.params, want, f.attrs))


def test_lower_accepts_schedule_and_targets():
    f = W.elementwise_chain(8).func

    class Sch:
        func = f

    assert T.structural_equal(T.lower(Sch()), T.lower(f))
    calls = []

    def tag(func):
        calls.append(func.name)
        return func.with_attr("tagged", True)

    class Tagging(type(T.get_target_kind("llvm"))):      # the llvm backend, own passes
        name = "test-kind"

        def pipeline(self, target):
            return [lower_blocks, tag]

    register_target(Tagging(), replace=True)
    try:
        assert T.lower(f, "test-kind").entry.attr("tagged") is True
        assert T.lower(f, T.Target("test-kind")).entry.attr("tagged") is True
        assert len(calls) == 2
    finally:
        unregister_target("test-kind")
    # one registry: a kind nobody registered has no pipeline
    with pytest.raises(T.TargetError, match="unknown target 'unregistered-kind'"):
        get_pipeline("unregistered-kind")
    assert len(get_pipeline(None)) == 4


def test_lower_errors():
    with pytest.raises(T.TargetError, match=r"unknown target 'nope'; registered targets: "
                                            r".*llvm"):
        T.lower(W.matmul(2, 2, 2).func, "nope")
    with pytest.raises(T.LoweringError, match="expected a PrimFunc, an IRModule or a Schedule"):
        T.lower(42)

    def bad(func):
        return 1

    class Bad(type(T.get_target_kind("llvm"))):
        name = "test-bad-pass"

        def pipeline(self, target):
            return [bad]

    register_target(Bad(), replace=True)
    try:
        with pytest.raises(T.LoweringError, match="pass 'bad' returned int"):
            T.lower(W.matmul(2, 2, 2).func, "test-bad-pass")
    finally:
        unregister_target("test-bad-pass")


@pytest.mark.parametrize("make", [W.elementwise_chain, W.matmul, W.matmul_bias_relu,
                                  W.batch_matmul, W.conv2d_nchw, W.softmax])
def test_lowered_matches_unlowered_numerically(make):
    w = make()
    rng = np.random.default_rng(0)
    a = w.make_inputs(rng)
    b = [x.copy() for x in a]
    T.interpret(w.func, *a)
    T.interpret(T.lower(w.func), *b)
    w.check(b)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("pred, const_k", [(True, False), (True, True)])
def test_lowered_predicated_blocks_match_numerically(pred, const_k):
    f, _ = _block_func(pred, const_k)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((10, 4)).astype(f32)
    want = np.zeros(10, f32)
    got = np.zeros(10, f32)
    T.interpret(f, a, want)
    T.interpret(T.lower(f), a, got)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(want, a.sum(axis=1) if not const_k else a[:, 0], rtol=1e-6)
