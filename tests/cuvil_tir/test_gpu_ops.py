"""GPU ops as entries of the op registry: a barrier, warp reductions and tile ops are
declared data that the interpreter's GPU semantics and the barrier pass read, so a new
collective op needs no core edit."""

from __future__ import annotations

import numpy as np
import pytest

import cuvil_tir as T
from cuvil_tir import ops
from cuvil_tir.ops.gpu import (SYNC_OP, Tile, is_block_barrier, register_warp_reduction,
                               tiles_of, warp_combiner)
from cuvil_tir.transform.gpu_sync import insert_barriers


def _kernel(threads, body_of, *bufs):
    tx = T.var("tx")
    return T.PrimFunc(list(bufs), T.For(tx, T.const(0), T.const(threads), "thread_binding",
                                        body_of(tx), "threadIdx.x"))


def test_a_registered_warp_reduction_runs_with_gpu_semantics():
    register_warp_reduction("test_warp_prod", "Mul")
    try:
        A = T.decl_buffer((8,), "int32", "A")
        f = _kernel(8, lambda tx: T.BufferStore(
            A, T.Call("int32", "test_warp_prod", (tx + 1, T.const(4))), (tx,)), A)
        a = np.zeros(8, "int32")
        T.interpret(f, a)
        assert a.tolist() == [24] * 4 + [1680] * 4        # 1*2*3*4 and 5*6*7*8
        assert warp_combiner(f.body.body.value) == "Mul"
        assert "test_warp_prod" in str(f)                 # printed through T.call_intrin
        assert T.structural_equal(T.parse(str(f)), f)
    finally:
        ops.unregister_op("test_warp_prod")


def _tile_add(args):
    return (Tile(0, 2, 2, access="readwrite"), Tile(1, 2, 2))


def test_a_registered_tile_op_runs_once_per_warp_and_its_writes_get_barriers():
    ops.register_op(ops.OpDef("test.tile_add", 2, "any", effect="opaque", collective="warp",
                              tiles=_tile_add,
                              reference=lambda t: lambda a, b: (a + b,)))
    try:
        A = T.decl_buffer((2, 2), "float32", "A")
        B = T.decl_buffer((2, 2), "float32", "B")
        S = T.decl_buffer((2, 2), "float32", "S", scope="shared")
        z = T.const(0)

        def body_of(tx):
            return T.Allocate(S, T.seq(
                T.IfThenElse(tx < 4, T.BufferStore(S, A[tx // 2, tx % 2], (tx // 2, tx % 2))),
                T.Evaluate(T.Call("int32", "test.tile_add", (S[z, z], B[z, z]))),
                T.IfThenElse(tx < 4, T.BufferStore(A, S[tx // 2, tx % 2], (tx // 2, tx % 2)))))
        f = insert_barriers(_kernel(32, body_of, A, B))
        text = T.to_text(f.body)
        assert text.count(SYNC_OP) == 2              # after the copy in, after the tile op
        a, b = np.arange(4, dtype="float32").reshape(2, 2), np.ones((2, 2), "float32")
        T.interpret(f, a, b, check_races=True)
        np.testing.assert_array_equal(a, np.arange(4).reshape(2, 2) + 1)
        call = f.body.body.body.seq[2].value
        assert [t.arg for t in tiles_of(call) if t.writes] == [0]
    finally:
        ops.unregister_op("test.tile_add")


def test_the_barrier_is_known_by_its_declaration():
    call = T.Call("int32", SYNC_OP, (T.StringImm("shared"),))
    assert is_block_barrier(call) and ops.get_op(SYNC_OP).effect == "barrier"
    assert not is_block_barrier(T.Call("int32", "warp_sum", (T.const(1), T.const(32))))


def test_gpu_op_declaration_errors():
    with pytest.raises(T.CuvilError, match="the combiner must be one of Add, Mul, Max, "
                       "Min, found 'Sub'"):
        register_warp_reduction("test_warp_sub", "Sub")
    with pytest.raises(T.CuvilError, match="collective must be one of"):
        ops.OpDef("test_x", 1, "any", collective="grid")
    with pytest.raises(T.CuvilError, match="Tile: access must be one of"):
        Tile(0, 2, 2, access="update")


def test_gpu_ops_outside_a_gpu_are_refused_with_a_reason():
    import targets
    A = T.decl_buffer((4,), "float32", "A")
    i = T.var("i")
    f = T.PrimFunc([A], T.For(i, T.const(0), T.const(4), "serial", T.BufferStore(
        A, T.Call("float32", "warp_sum", (A[i], T.const(32))), (i,))))
    with pytest.raises(T.LoweringError, match="warp_sum runs across the lanes of a warp "
                       "together; the interpreter runs it only inside a kernel"):
        T.interpret(f, np.zeros(4, "float32"))
    for target in ("llvm", "c"):
        with pytest.raises(targets.CodegenError, match=f"{target} codegen: warp_sum runs "
                           "across the threads of a GPU warp together"):
            targets.build(f, target)
    # a block barrier in one thread orders nothing: the interpreter runs past it
    g = T.PrimFunc([A], T.seq(T.Evaluate(T.Call("int32", SYNC_OP, (T.StringImm("shared"),))),
                              T.BufferStore(A, T.float32(1), (T.const(0),))))
    a = np.zeros(4, "float32")
    T.interpret(g, a)
    assert a[0] == 1
