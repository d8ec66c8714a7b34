"""The interpreter's race checker on global memory: several threads storing different
(per-thread or uninitialised) values at one address, a read of what another thread
wrote with no barrier between, and what is not a race (the same value stored by
every thread, accesses a barrier orders); a removed barrier of a cross-thread
reduction caught naming both statements."""

import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir.transform.gpu_sync import is_barrier


def _kernel(body_of, grid=2, threads=4):
    A = T.decl_buffer((8,), "float32", "A")
    B = T.decl_buffer((8,), "float32", "B")
    bx, tx = T.var("bx"), T.var("tx")
    inner = T.For(tx, T.const(0), T.const(threads), "thread_binding",
                  body_of(A, B, bx, tx), "threadIdx.x")
    return T.PrimFunc([A, B], T.For(bx, T.const(0), T.const(grid), "thread_binding",
                                    inner, "blockIdx.x"))


def _run(f):
    a = np.arange(8, dtype="float32")
    b = np.zeros(8, "float32")
    T.interpret(f, a, b, check_races=True)
    return b


def test_per_thread_values_stored_at_one_global_address_race():
    f = _kernel(lambda A, B, bx, tx: T.BufferStore(B, A[tx], (bx,)))
    with pytest.raises(T.RaceError, match=r"data race on global buffer B at address 0: "
                       r"thread \(0, 0, 0\) of block \(0, 0, 0\) writes it in `B\[bx\] = "
                       r"A\[tx\]` and thread \(1, 0, 0\) of block \(0, 0, 0\) writes "
                       r"different values \(0.0 and 1.0") as info:
        _run(f)
    assert info.value.code == "CVL-E200" and info.value.buffer == "B"


def test_uninitialised_value_stored_by_several_threads_races():
    L = T.decl_buffer((1,), "float32", "L", scope="local")

    def body(A, B, bx, tx):
        # only thread 0 fills its local copy; every thread stores its own
        fill = T.IfThenElse(T.EQ(tx, T.const(0)), T.BufferStore(L, A[bx], (T.const(0),)))
        return T.Allocate(L, T.seq(fill, T.BufferStore(B, L[T.const(0)], (bx,))))
    with pytest.raises(T.RaceError, match=r"different values \(0.0 and nan: a value each "
                       r"thread computes for itself, or one nothing initialised\)"):
        _run(_kernel(body))


def test_same_value_from_every_thread_is_not_a_race():
    b = _run(_kernel(lambda A, B, bx, tx: T.BufferStore(B, A[bx] * 2.0, (bx,))))
    np.testing.assert_array_equal(b[:2], [0.0, 2.0])


def test_read_of_another_blocks_write_races():
    def body(A, B, bx, tx):
        return T.IfThenElse(T.EQ(tx, T.const(0)), T.BufferStore(B, B[1 - bx] + A[bx], (bx,)))
    # block 0 writes B[0], which block 1 reads: blocks are not ordered
    with pytest.raises(T.RaceError, match=r"block \(0, 0, 0\) writes it in `B\[bx\] = "
                       r"B\[1 - bx\] \+ A\[bx\]` and thread \(0, 0, 0\) of block \(1, 0, "
                       r"0\) reads it"):
        _run(_kernel(body))


def test_a_barrier_orders_global_accesses_of_one_block():
    def body(A, B, bx, tx):
        sync = T.Evaluate(T.Call("int32", "tvm_storage_sync", (T.StringImm("global"),)))
        write = T.IfThenElse(T.EQ(tx, T.const(0)), T.BufferStore(B, A[tx] + 1.0, (tx,)))
        read = T.IfThenElse(T.EQ(tx, T.const(1)), T.BufferStore(B, B[0] * 3.0, (tx,)))
        return T.seq(write, sync, read)
    b = _run(_kernel(body, grid=1))
    np.testing.assert_array_equal(b[:2], [1.0, 3.0])


class _DropBarriers(T.Mutator):
    def visit_SeqStmt(self, s):
        s = self.generic_visit(s)
        if not isinstance(s, T.SeqStmt):
            return s
        return T.seq(*[x for x in s.seq if not is_barrier(x)])


def test_removed_barrier_of_a_tree_reduction_is_caught_naming_both_statements():
    f = T.parse('''
@T.prim_func
def f(A: T.Buffer((16, 4), "float32"), B: T.Buffer((4,), "float32")):
    for tx in T.thread_binding(4, thread="threadIdx.x"):
        for ty in T.thread_binding(16, thread="threadIdx.y"):
            with T.block("B"):
                vj, vk = T.axis.remap("SR", [tx, ty])
                with T.init():
                    B[vj] = T.float32(0)
                B[vj] = B[vj] + A[vk, vj]
''')
    low = targets.build(f, "cuda").lowered
    a, b = np.ones((16, 4), "float32"), np.zeros(4, "float32")
    T.interpret(low, a, b, check_races=True)
    np.testing.assert_array_equal(b, [16.0] * 4)
    broken = low.map_functions(lambda g: g.with_body(_DropBarriers().visit(g.body)))
    with pytest.raises(T.RaceError, match="data race on shared buffer B_cross_thread_tree0") \
            as info:
        T.interpret(broken, a, b, check_races=True)
    first, second = info.value.statements
    assert first != second and all("B_cross_thread_tree0[" in s for s in (first, second))
