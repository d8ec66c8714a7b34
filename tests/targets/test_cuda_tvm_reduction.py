"""Cross-thread reductions as TensorIR (and TVM's schedules) write them: the in-thread
+ cross-thread split, threadIdx.y and several bound loops, several blocks under one
loop, tuple reductions (argmax, layernorm's sums), the broadcast of a result every
thread then uses, kernels without a blockIdx loop; checked by the interpreter's GPU
semantics against numpy and compiled by nvcc."""

from __future__ import annotations

import numpy as np
import pytest

import cuvil_tir as T
import targets

from .cuda_helpers import compile_all, rand


def _build(text, name):
    f = T.parse(text)
    mod = targets.build(f, targets.Target("cuda"), name=name)
    return mod, mod.lowered


SPLIT = '''
@T.prim_func
def split(A: T.Buffer((4, 256), "float32"), B: T.Buffer((4,), "float32")):
    for i in T.thread_binding(4, thread="blockIdx.x"):
        for ko in T.serial(4):
            for ki in T.thread_binding(64, thread="threadIdx.x"):
                with T.block("B"):
                    vi = T.axis.spatial(4, i)
                    vk = T.axis.reduce(256, ko * 64 + ki)
                    with T.init():
                        B[vi] = T.float32(0)
                    B[vi] = B[vi] + A[vi, vk]
'''

OVER_Y = '''
@T.prim_func
def over_y(A: T.Buffer((16, 8), "float32"), B: T.Buffer((8,), "float32")):
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for tx in T.thread_binding(4, thread="threadIdx.x"):
            for ty in T.thread_binding(16, thread="threadIdx.y"):
                with T.block("B"):
                    vj = T.axis.spatial(8, bx * 4 + tx)
                    vk = T.axis.reduce(16, ty)
                    with T.init():
                        B[vj] = T.float32(0)
                    B[vj] = B[vj] + A[vk, vj]
'''

TWO_AXES = '''
@T.prim_func
def two_axes(A: T.Buffer((2, 128), "float32"), B: T.Buffer((2,), "float32")):
    for i in T.serial(2):
        for ko in T.thread_binding(4, thread="threadIdx.x"):
            for ki in T.thread_binding(32, thread="threadIdx.y"):
                with T.block("B"):
                    vi = T.axis.spatial(2, i)
                    vk = T.axis.reduce(128, ko * 32 + ki)
                    with T.init():
                        B[vi] = T.float32(0)
                    B[vi] = B[vi] + A[vi, vk]
'''

ODD = '''
@T.prim_func
def odd(A: T.Buffer((2, 96), "float32"), B: T.Buffer((2,), "float32")):
    for i in T.thread_binding(2, thread="blockIdx.x"):
        for ko in T.serial(2):
            for ki in T.thread_binding(48, thread="threadIdx.x"):
                with T.block("B"):
                    vi = T.axis.spatial(2, i)
                    vk = T.axis.reduce(96, ko * 48 + ki)
                    with T.init():
                        B[vi] = T.float32(0)
                    B[vi] = B[vi] + A[vi, vk]
'''

TWO_BLOCKS = '''
@T.prim_func
def two_blocks(A: T.Buffer((4, 8, 16), "float32"), B: T.Buffer((4,), "float32")):
    rf = T.alloc_buffer((8, 4), scope="local")
    for i in T.thread_binding(4, thread="blockIdx.x"):
        for k0o in T.thread_binding(4, thread="threadIdx.x"):
            for k0i, k1 in T.grid(2, 16):
                with T.block("rf"):
                    vk0 = T.axis.spatial(8, k0o * 2 + k0i)
                    vi, vk1 = T.axis.remap("SR", [i, k1])
                    with T.init():
                        rf[vk0, vi] = T.float32(0)
                    rf[vk0, vi] = rf[vk0, vi] + A[vi, vk0, vk1]
            for k0i in T.serial(2):
                with T.block("B"):
                    vk0 = T.axis.reduce(8, k0o * 2 + k0i)
                    vi = T.axis.spatial(4, i)
                    with T.init():
                        B[vi] = T.float32(0)
                    B[vi] = B[vi] + rf[vk0, vi]
'''

ARGMAX = '''
@T.prim_func
def argmax(val: T.Buffer((4, 64), "float32"), idx: T.Buffer((4,), "int32"),
           best: T.Buffer((4,), "float32")):
    for i in T.thread_binding(4, thread="blockIdx.x"):
        for ko in T.serial(2):
            for ki in T.thread_binding(32, thread="threadIdx.x"):
                with T.block("argmax"):
                    vi = T.axis.spatial(4, i)
                    vk = T.axis.reduce(64, ko * 32 + ki)
                    with T.init():
                        idx[vi] = -1
                        best[vi] = T.float32(-3.4028234663852886e38)
                    keep: T.bool = best[vi] >= val[vi, vk]
                    new_idx: T.int32 = T.Select(keep, idx[vi], vk)
                    new_val: T.float32 = T.Select(keep, best[vi], val[vi, vk])
                    idx[vi] = new_idx
                    best[vi] = new_val
'''

MOMENTS = '''
@T.prim_func
def moments(A: T.Buffer((4, 128), "float32"), S: T.Buffer((4,), "float32"),
            Q: T.Buffer((4,), "float32")):
    for i in T.thread_binding(4, thread="blockIdx.x"):
        for ko in T.serial(4):
            for ki in T.thread_binding(32, thread="threadIdx.x"):
                with T.block("moments"):
                    vi = T.axis.spatial(4, i)
                    vk = T.axis.reduce(128, ko * 32 + ki)
                    with T.init():
                        S[vi] = T.float32(0)
                        Q[vi] = T.float32(0)
                    s: T.float32 = S[vi] + A[vi, vk]
                    q: T.float32 = Q[vi] + A[vi, vk] * A[vi, vk]
                    S[vi] = s
                    Q[vi] = q
'''

BROADCAST = '''
@T.prim_func
def broadcast(A: T.Buffer((8, 64), "float32"), B: T.Buffer((8,), "float32")):
    acc = T.alloc_buffer((8,), scope="local")
    for i in T.thread_binding(8, thread="blockIdx.x"):
        for k in T.thread_binding(64, thread="threadIdx.x"):
            with T.block("sum"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    acc[vi] = T.float32(0)
                acc[vi] = acc[vi] + A[vi, vk]
        with T.block("add"):
            vi = T.axis.spatial(8, i)
            B[vi] = acc[vi] + T.float32(1)
'''

NO_GRID = '''
@T.prim_func
def no_grid(A: T.Buffer((256,), "float32"), B: T.Buffer((1,), "float32")):
    for k in T.thread_binding(256, thread="threadIdx.x"):
        with T.block("B"):
            vk = T.axis.reduce(256, k)
            with T.init():
                B[0] = T.float32(0)
            B[0] = B[0] + A[vk]
'''

SIBLINGS = '''
@T.prim_func
def siblings(A: T.Buffer((4, 64), "float32"), B: T.Buffer((4, 64), "float32")):
    m = T.alloc_buffer((4,), scope="shared")
    for i in T.serial(4):
        for k in T.thread_binding(64, thread="threadIdx.x"):
            with T.block("max"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    m[vi] = T.float32(-3.4028234663852886e38)
                m[vi] = T.max(m[vi], A[vi, vk])
        for j in T.thread_binding(64, thread="threadIdx.x"):
            with T.block("sub"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] - m[vi]
'''


def _moments_ref(a):
    return a.sum(1), (a * a).sum(1)


CASES = {
    "split": (SPLIT, [(4, 256)], lambda a: [a.sum(1)], [(4,)]),
    "over_y": (OVER_Y, [(16, 8)], lambda a: [a.sum(0)], [(8,)]),
    "two_axes": (TWO_AXES, [(2, 128)], lambda a: [a.sum(1)], [(2,)]),
    "odd": (ODD, [(2, 96)], lambda a: [a.sum(1)], [(2,)]),
    "two_blocks": (TWO_BLOCKS, [(4, 8, 16)], lambda a: [a.sum((1, 2))], [(4,)]),
    "moments": (MOMENTS, [(4, 128)], lambda a: list(_moments_ref(a)), [(4,), (4,)]),
    "broadcast": (BROADCAST, [(8, 64)], lambda a: [a.sum(1) + 1], [(8,)]),
    "no_grid": (NO_GRID, [(256,)], lambda a: [a.sum(keepdims=True)], [(1,)]),
    "siblings": (SIBLINGS, [(4, 64)], lambda a: [a - a.max(1, keepdims=True)], [(4, 64)]),
}
BUILT = {name: _build(text, name) for name, (text, *_rest) in CASES.items()}
ARGMAX_BUILT = _build(ARGMAX, "argmax")


def test_reduction_kernels_compile_for_sm80_and_sm90():
    ptx = compile_all([m for m, _ in list(BUILT.values()) + [ARGMAX_BUILT]])
    assert all(".entry" in text for text in ptx.values())


@pytest.mark.parametrize("name", sorted(CASES))
def test_cross_thread_reduction_matches_numpy(name):
    _, ins, ref, outs = CASES[name]
    _, low = BUILT[name]
    args = [rand(s, seed=k) for k, s in enumerate(ins)]
    res = [np.full(s, np.nan, "float32") for s in outs]
    T.interpret(low, *args, *res, check_races=True)
    for got, want in zip(res, ref(*args)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_split_reduction_reduces_in_thread_then_across_threads():
    # the loop outside the bound loop runs inside each thread: one warp shuffle
    src = BUILT["split"][0].get_source("cuda")
    assert src.count("= cvl_warp_sum(") == 2 and "__syncthreads();" in src


def test_tree_reduction_for_threadidx_y_and_odd_group_sizes():
    # a group that is not consecutive lanes, or not a power of two, goes through a tree
    # in shared memory: no shuffle
    for name in ("over_y", "odd"):
        assert "= cvl_warp_sum(" not in BUILT[name][0].get_source("cuda")


def test_argmax_tuple_reduction_matches_numpy():
    _, low = ARGMAX_BUILT
    val = rand((4, 64), seed=3)
    idx, best = np.zeros(4, "int32"), np.zeros(4, "float32")
    T.interpret(low, val, idx, best, check_races=True)
    np.testing.assert_array_equal(idx, val.argmax(1))
    np.testing.assert_array_equal(best, val.max(1))


def test_broadcast_result_written_once_not_uninitialised():
    # regression: the result of a cross-thread reduction stayed in thread 0's registers
    # and every thread wrote its own (uninitialised: NaN) copy to B
    mod, low = BUILT["broadcast"]
    text = T.to_text(low)
    assert "if k == 0" in text or "== 0 and" in text
    a, b = rand((8, 64)), np.full(8, np.nan, "float32")
    T.interpret(low, a, b, check_races=True)
    assert not np.isnan(b).any()


def test_one_block_kernels_get_a_grid_and_siblings_share_one_block():
    text = T.to_text(BUILT["siblings"][1])
    assert "siblings_kernel0" in text and "siblings_kernel1" not in text
    assert 'thread="blockIdx.x"' in T.to_text(BUILT["no_grid"][1])


REFUSED = {
    "blockIdx": ('''
@T.prim_func
def f(A: T.Buffer((4, 64), "float32"), B: T.Buffer((4,), "float32")):
    for k in T.thread_binding(64, thread="blockIdx.x"):
        for i in T.thread_binding(4, thread="threadIdx.x"):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]
''', "threads of different blocks cannot combine their values"),
    "not_innermost": ('''
@T.prim_func
def f(A: T.Buffer((4, 64), "float32"), B: T.Buffer((4,), "float32")):
    for k in T.thread_binding(64, thread="threadIdx.x"):
        for i in T.serial(4):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]
''', "its reduction loops must be the innermost statements"),
    "combiner": ('''
@T.prim_func
def f(A: T.Buffer((4, 64), "float32"), B: T.Buffer((4,), "float32")):
    for i in T.thread_binding(4, thread="blockIdx.x"):
        for k in T.thread_binding(64, thread="threadIdx.x"):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] - A[vi, vk]
''', "has no recognised combiner"),
    "identity": ('''
@T.prim_func
def f(A: T.Buffer((4, 64), "float32"), B: T.Buffer((4,), "float32")):
    for i in T.thread_binding(4, thread="blockIdx.x"):
        for k in T.thread_binding(64, thread="threadIdx.x"):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(5)
                B[vi] = B[vi] + A[vi, vk]
''', "which is not the identity of its sum"),
    "indices": ('''
@T.prim_func
def f(A: T.Buffer((4, 64), "float32"), B: T.Buffer((4, 4), "float32")):
    for i in T.thread_binding(4, thread="blockIdx.x"):
        for k in T.thread_binding(64, thread="threadIdx.x"):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi, 0] = T.float32(0)
                B[vi, 1] = B[vi, 1] + A[vi, vk]
''', "the init and the update must store at the same indices"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_cross_thread_reduction_refusals(case):
    text, match = REFUSED[case]
    with pytest.raises(T.LoweringError, match=match):
        T.lower(T.parse(text), "cuda")
