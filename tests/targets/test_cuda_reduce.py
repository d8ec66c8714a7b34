"""Cross-thread reductions on the cuda target: warp shuffles plus shared memory,
checked through the interpreter's GPU semantics and compiled by nvcc."""

from __future__ import annotations

import numpy as np
import pytest

import cuvil_tir as T
from targets.toolkit import cuda_recipes as recipes
from tests.workloads import softmax

from .cuda_helpers import build, compile_all, rand, sch_for


def _row(kind, threads, m=3, n=256):
    A = T.placeholder((m, n), name="A")
    k = T.reduce_axis((0, n), name="k")
    red = T.sum if kind == "sum" else T.max
    sch = sch_for(T.create_prim_func([A, T.compute((m,), lambda i: red(A[i, k], axis=k),
                                                   name="R")]))
    recipes.row_reduce(sch, "R", threads=threads)
    return build(sch, f"row_{kind}{threads}")


def _softmax(threads=64):
    sch = sch_for(softmax(3, 256).func)
    recipes.softmax(sch, threads=threads)
    return build(sch, f"softmax{threads}")


CASES = {(kind, th): _row(kind, th) for kind in ("sum", "max") for th in (16, 32, 128)}
SOFTMAX = _softmax()


def test_reduction_kernels_compile_for_sm80_and_sm90():
    ptx = compile_all([m for m, _ in list(CASES.values()) + [SOFTMAX]])
    assert all("shfl.sync.bfly" in text for text in ptx.values())


@pytest.mark.parametrize("kind,threads", sorted(CASES))
def test_row_reduction_matches_numpy(kind, threads):
    mod, low = CASES[(kind, threads)]
    src = mod.get_source("cuda")
    assert f"cvl_warp_{kind}(" in src
    assert ("__syncthreads();" in src) == (threads > 32)
    a, out = rand((3, 256)), np.zeros(3, "float32")
    T.interpret(low, a, out, check_races=True)
    want = a.sum(1) if kind == "sum" else a.max(1)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_fused_softmax_matches_numpy():
    mod, low = SOFTMAX
    src = mod.get_source("cuda")
    assert src.count("extern \"C\" __global__") == 1
    assert src.count("__syncthreads();") == 4   # two per reduction
    a, out = rand((3, 256)), np.zeros((3, 256), "float32")
    T.interpret(low, a, out, check_races=True)
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_any_thread_count_and_a_loop_outside_the_bound_loop_reduce():
    # 48 threads (a tree in shared memory), and the k loop split with its outer part
    # outside the bound loop (in-thread then cross-thread, as TensorIR defines it)
    A = T.placeholder((2, 96), name="A")
    k = T.reduce_axis((0, 96), name="k")
    f = T.create_prim_func([A, T.compute((2,), lambda i: T.sum(A[i, k], axis=k), name="R")])
    sch = sch_for(f)
    recipes.row_reduce(sch, "R", threads=48)
    mods = [build(sch, "row48")]
    sch = sch_for(f)
    i, kk = sch.get_loops(sch.get_block("R"))
    ko, ki = sch.split(kk, [None, 32])
    sch.bind(i, "blockIdx.x")
    sch.bind(ki, "threadIdx.x")
    mods.append(build(sch, "row_split"))
    compile_all([m for m, _ in mods])
    a = rand((2, 96))
    for _, low in mods:
        out = np.zeros(2, "float32")
        T.interpret(low, a, out, check_races=True)
        np.testing.assert_allclose(out, a.sum(1), rtol=1e-5, atol=1e-5)


def test_thread_bound_reduction_read_from_text_is_lowered():
    # no mark on the loop (TensorIR writes none): the reduction is recognised from the IR
    f = T.parse('''
@T.prim_func
def rows(A: T.Buffer((4, 64), "float32"), B: T.Buffer((4,), "float32")):
    for i in T.thread_binding(4, thread="blockIdx.x"):
        for k in T.thread_binding(64, thread="threadIdx.x"):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]
''')
    mod, low = build(sch_for(f), "rows_from_text")
    assert "cvl_warp_sum(" in mod.get_source("cuda")
    a, out = rand((4, 64)), np.zeros(4, "float32")
    T.interpret(low, a, out, check_races=True)
    np.testing.assert_allclose(out, a.sum(1), rtol=1e-5, atol=1e-5)


def test_cross_thread_max_of_minus_infinity_is_minus_infinity():
    # the per-thread partials start at max's identity, -inf (a finite lowest value
    # made a row of -inf reduce to -3.4e38)
    mod, low = CASES[("max", 128)]
    a, out = np.full((3, 256), -np.inf, "float32"), np.zeros(3, "float32")
    T.interpret(low, a, out, check_races=True)
    assert np.all(out == -np.inf)


def test_cross_thread_reduction_of_a_block_without_a_combiner_is_refused():
    f = T.parse('''
@T.prim_func
def rows(A: T.Buffer((4, 64), "float32"), B: T.Buffer((4,), "float32")):
    for i in T.thread_binding(4, thread="blockIdx.x"):
        for k in T.thread_binding(64, thread="threadIdx.x"):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] - A[vi, vk]
''')
    with pytest.raises(T.LoweringError, match=r"cross-thread reduction over k "
                       r"\(threadIdx.x\): block 'B' has no recognised combiner"):
        T.lower(f, "cuda")
