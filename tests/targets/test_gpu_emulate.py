"""``emulate_gpu``: lowered CUDA modules (barriers, shared tiles, warp shuffles, shared
trees, per-thread registers across barriers) compiled for llvm with the interpreter's
GPU semantics give the interpreter's numbers; what it cannot emulate is refused."""

from __future__ import annotations

import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir.errors import LoweringError
from cuvil_tir.transform.gpu_emulate import emulate_gpu, in_global_memory

from .cuda_helpers import rand
from .test_cuda_kernels import GEMM_DB, TC
from .test_cuda_tvm_reduction import ARGMAX_BUILT, BUILT, CASES


def _emulated(lowered):
    emu = emulate_gpu(lowered)
    text = T.to_text(emu)
    assert 'scope="shared"' not in text and "thread_binding" not in text
    mod = targets.build(emu, targets.Target("llvm", bounds_check=True))
    ranks = [len(p.shape) for p in emu.params]

    def run(*args):
        # the lowered parameters are flat: views of the caller's arrays
        mod(*[a.reshape(-1) if a.ndim != r else a for a, r in zip(args, ranks)])
    return run


@pytest.mark.parametrize("name", sorted(CASES))
def test_emulated_cross_thread_reductions_match_numpy(name):
    _, ins, ref, outs = CASES[name]
    run = _emulated(BUILT[name][1])
    args = [rand(s, seed=k) for k, s in enumerate(ins)]
    res = [np.full(s, np.nan, "float32") for s in outs]
    run(*args, *res)
    for got, want in zip(res, ref(*args)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_emulated_argmax_matches_numpy():
    run = _emulated(ARGMAX_BUILT[1])
    val = rand((4, 64), seed=3)
    idx, best = np.zeros(4, "int32"), np.zeros(4, "float32")
    run(val, idx, best)
    np.testing.assert_array_equal(idx, val.argmax(1))
    np.testing.assert_array_equal(best, val.max(1))


def test_emulated_double_buffered_gemm_matches_the_interpreter():
    mod, low = GEMM_DB
    shapes = [tuple(int(d) for d in p.shape) for p in low.functions[0].params]
    args = [rand(s, seed=k) for k, s in enumerate(shapes)]
    want = [a.copy() for a in args]
    T.interpret(low, *want)
    _emulated(low)(*args)
    for got, exp in zip(args, want):
        np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-5)


def test_tile_ops_are_left_to_the_interpreter():
    with pytest.raises(LoweringError, match="is not emulated; run the kernel with "
                       "T.interpret"):
        emulate_gpu(TC[1])


def test_symbolic_block_size_is_refused():
    f = T.parse('''
@T.prim_func
def f(a: T.handle, n: T.int32):
    A = T.match_buffer(a, (n,))
    for tx in T.thread_binding(n, thread="threadIdx.x"):
        A[tx] = T.float32(1)
''')
    with pytest.raises(LoweringError, match="threadIdx.x has the symbolic extent n"):
        emulate_gpu(f)


def test_in_global_memory_keeps_global_buffers():
    A = T.decl_buffer((4,), "float32", "A")
    store = T.BufferStore(A, T.float32(0), (T.const(0),))
    assert in_global_memory(store) is store


def test_kernel_without_barriers_runs_its_blocks_serially():
    # regression: with no collective statement the whole kernel ran per thread and its
    # blockIdx loop reached the llvm build
    f = T.parse('''
@T.prim_func
def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for tx in T.thread_binding(16, thread="threadIdx.x"):
            with T.block("B"):
                v = T.axis.spatial(64, bx * 16 + tx)
                B[v] = A[v] * T.float32(3)
''')
    run = _emulated(targets.build(f, targets.Target("cuda")).lowered)
    a, b = rand((64,)), np.zeros(64, "float32")
    run(a, b)
    np.testing.assert_array_equal(b, a * 3)


def test_emulated_cp_async_pipeline_lands_each_copy_at_once():
    # software_pipeline_async_stages: cp.async of 16 bytes, commit and wait per step
    from cuvil_tir.parser import parse
    from .test_cuda_pipeline_async import _summed
    mod = targets.build(parse(_summed()), "cuda", name="sum_emu")
    assert "async_copy" in T.to_text(mod.lowered)
    a, c = rand((4, 512)), np.zeros((4, 32), "float32")
    _emulated(mod.lowered)(a, c)
    np.testing.assert_allclose(c, a.reshape(4, 4, 4, 32).sum(axis=(1, 2)), rtol=1e-5,
                               atol=1e-5)
