"""TVM's wmma schedules ported line by line (targets/cuda/tvm_wmma.py): operand
fragments in ``wmma.matrix_a``/``wmma.matrix_b``, TVM's intrinsic names for
``tensorize``, the K loop on fragments only.  Checked through the interpreter (with
races), nvcc's PTX for sm_80 and sm_90, and the refusals."""

from __future__ import annotations

import re

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir.errors import CodegenError, LoweringError
from cuvil_tir.transform.serial_threads import serial_threads
from targets.cuda.fragments import declare_fragments
from targets.cuda.nvcc import nvcc_ptx
from targets.cuda.tvm_wmma import TVM_NAMES

from .cuda_helpers import ARCHS

#: a 32 x 32 x 32 fp16 GEMM as MetaSchedule's tensor-core rule writes it: two warps
#: (threadIdx.y) of a 16 x 32 C stripe each, A and B staged in shared memory by a
#: cooperative fetch (each warp's copy, spread over the block's 64 threads by the
#: lowering: the tensor-core blocks say warp_execution), 16 x 16 tiles loaded into
#: fragments, accumulated in fragments and stored to global memory; its blocks carry
#: MetaSchedule's auto_tensorize names
SKETCH = '''
@T.prim_func
def mm(A: T.Buffer((32, 32), "float16"), B: T.Buffer((32, 32), "float16"),
       C: T.Buffer((32, 32), "float32")):
    A_s = T.alloc_buffer((32, 32), "float16", scope="shared")
    B_s = T.alloc_buffer((32, 32), "float16", scope="shared")
    A_a = T.alloc_buffer((32, 32), "float16", scope="wmma.matrix_a")
    B_b = T.alloc_buffer((32, 32), "float16", scope="wmma.matrix_b")
    C_acc = T.alloc_buffer((32, 32), "float32", scope="wmma.accumulator")
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for ty in T.thread_binding(2, thread="threadIdx.y"):
            for f in range(1024):
                with T.block("A_s"):
                    v0 = T.axis.spatial(32, f // 32)
                    v1 = T.axis.spatial(32, f % 32)
                    T.block_attr({"meta_schedule.cooperative_fetch": 1})
                    A_s[v0, v1] = A[v0, v1]
            for f in range(1024):
                with T.block("B_s"):
                    v0 = T.axis.spatial(32, f // 32)
                    v1 = T.axis.spatial(32, f % 32)
                    T.block_attr({"meta_schedule.cooperative_fetch": 1})
                    B_s[v0, v1] = B[v0, v1]
            for k0 in range(2):
                with T.block("A_a_o"):
                    vi = T.axis.spatial(2, ty)
                    vk = T.axis.spatial(2, k0)
                    T.block_attr({"meta_schedule.auto_tensorize": "wmma_load_16x16x16_f16_a_shared"})
                    for ii, kk in T.grid(16, 16):
                        with T.block("A_a"):
                            vii, vkk = T.axis.remap("SS", [ii, kk])
                            A_a[vi * 16 + vii, vk * 16 + vkk] = A_s[vi * 16 + vii, vk * 16 + vkk]
                for j0 in range(2):
                    with T.block("B_b_o"):
                        vk = T.axis.spatial(2, k0)
                        vj = T.axis.spatial(2, j0)
                        T.block_attr({"meta_schedule.auto_tensorize": "wmma_load_16x16x16_f16_b_shared"})
                        for kk, jj in T.grid(16, 16):
                            with T.block("B_b"):
                                vkk, vjj = T.axis.remap("SS", [kk, jj])
                                B_b[vk * 16 + vkk, vj * 16 + vjj] = B_s[vk * 16 + vkk, vj * 16 + vjj]
                for j0 in range(2):
                    with T.block("C_o"):
                        vi = T.axis.spatial(2, ty)
                        vj = T.axis.spatial(2, j0)
                        vk = T.axis.reduce(2, k0)
                        T.block_attr({"meta_schedule.auto_tensorize": "wmma_sync_16x16x16_f16f16f32",
                                      "meta_schedule.auto_tensorize_init": "wmma_fill_16x16x16_f32",
                                      "warp_execution": 1})
                        with T.init():
                            for ii, jj in T.grid(16, 16):
                                with T.block("C_init"):
                                    vii, vjj = T.axis.remap("SS", [ii, jj])
                                    C_acc[vi * 16 + vii, vj * 16 + vjj] = T.float32(0)
                        for ii, jj, kk in T.grid(16, 16, 16):
                            with T.block("C"):
                                vii, vjj, vkk = T.axis.remap("SSR", [ii, jj, kk])
                                C_acc[vi * 16 + vii, vj * 16 + vjj] = C_acc[vi * 16 + vii, vj * 16 + vjj] + T.Cast("float32", A_a[vi * 16 + vii, vk * 16 + vkk]) * T.Cast("float32", B_b[vk * 16 + vkk, vj * 16 + vjj])
            for j0 in range(2):
                with T.block("C_acc_o"):
                    vi = T.axis.spatial(2, ty)
                    vj = T.axis.spatial(2, j0)
                    T.block_attr({"meta_schedule.auto_tensorize": "wmma_store_16x16x16_f32_global"})
                    for ii, jj in T.grid(16, 16):
                        with T.block("C_acc"):
                            vii, vjj = T.axis.remap("SS", [ii, jj])
                            C[vi * 16 + vii, vj * 16 + vjj] = C_acc[vi * 16 + vii, vj * 16 + vjj]
'''


def _tensorized(text=SKETCH):
    """The sketch tensorized by hand, as a TVM user writes it."""
    sch = S.Schedule(T.parse(text))
    init = sch.decompose_reduction(sch.get_block("C_o"), sch.get_loops(sch.get_block("C_o"))[2])
    for block, intrin in (("A_a_o", "wmma_load_16x16x16_f16_a_shared"),
                          ("B_b_o", "wmma_load_16x16x16_f16_b_shared"),
                          (init, "wmma_fill_16x16x16_f32"),
                          ("C_o", "wmma_sync_16x16x16_f16f16f32"),
                          ("C_acc_o", "wmma_store_16x16x16_f32_global")):
        sch.tensorize(sch.get_block(block) if isinstance(block, str) else block, intrin)
    return sch.func


MOD = targets.build(_tensorized(), targets.Target("cuda", arch="sm_80"), name="tvm_wmma")


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(-3, 4, (32, 32)).astype("float16") for _ in range(2)]


def test_a_tensorized_function_means_what_its_serial_run_computes():
    # the tile ops outside a kernel, once each (cuvil_tir/interp/tile_ops.py)
    a, b = _inputs(1)
    c = np.zeros((32, 32), "float32")
    T.interpret(serial_threads(_tensorized()), a, b, c)
    np.testing.assert_array_equal(c, a.astype("float32") @ b.astype("float32"))


def test_tvm_names_are_registered_aliases():
    names = set(S.TensorIntrin.names())
    assert set(TVM_NAMES) <= names and set(TVM_NAMES.values()) <= names


def test_a_tvm_schedule_computes_the_product_on_fragments():
    a, b = _inputs()
    c = np.zeros((32, 32), "float32")
    T.interpret(MOD.lowered, a, b, c, check_races=True)
    np.testing.assert_array_equal(c, a.astype("float32") @ b.astype("float32"))
    src = MOD.get_source("cuda")
    # one warp holds its 16 x 32 stripe of A's K slice, B's slice and C: two of each
    assert re.search(r"fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, "
                     r"nvcuda::wmma::row_major> A_a\[1\];", src)
    assert re.search(r"fragment<nvcuda::wmma::matrix_b, [^>]*> B_b\[2\];", src)
    assert "fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> C_acc[2];" in src
    assert "nvcuda::wmma::mma_sync(C_acc[" in src


@pytest.mark.parametrize("arch", ARCHS)
def test_the_k_loop_runs_on_fragments_only(arch):
    ptx = nvcc_ptx(MOD.get_source("cuda"), arch)
    assert re.search(r"wmma\.load\.a\.sync\.aligned\.row", ptx)
    assert re.search(r"wmma\.load\.b\.sync\.aligned\.row", ptx)
    assert "wmma.load.c" not in ptx               # the accumulator never leaves registers
    assert len(re.findall(r"wmma\.mma\.sync", ptx)) >= 1
    assert len(re.findall(r"wmma\.store\.d\.sync", ptx)) >= 1


def test_an_element_access_to_an_operand_fragment_is_refused():
    sch = S.Schedule(T.parse(SKETCH))
    sch.tensorize(sch.get_block("B_b_o"), "wmma_load_16x16x16_f16_b_shared")
    with pytest.raises(LoweringError, match=r"a wmma\.matrix_a buffer is a tensor-core "
                                            r"fragment: only .*A_a\[.*touches one element"):
        T.lower(sch, "cuda")


def test_a_fragment_load_into_shared_memory_is_refused():
    func = _tensorized(SKETCH.replace('scope="wmma.matrix_a"', 'scope="shared"'))
    with pytest.raises(LoweringError, match=r"cuda\.wmma_load.*each tile must be a 2-D "
                                            r"buffer in wmma\.matrix_a or wmma\.matrix_b "
                                            r".*found A_a"):
        T.lower(func, "cuda")


def test_a_fragment_of_another_dtype_is_refused():
    buf = T.decl_buffer((16, 16), "float32", "F", scope="wmma.matrix_a")
    with pytest.raises(CodegenError, match=r"wmma\.matrix_a buffer F must hold whole "
                                           r"16 x 16 float16 or bfloat16 tiles; found "
                                           r"256 elements of float32"):
        declare_fragments(None, buf, "F", 256)


def test_a_pipelined_k_loop_versions_the_fragments_its_loads_fill():
    # the fragment loads in stage 0, the steps in stage 1: a load of step k + 1 runs
    # before the step of k reads its fragments, so each needs two versions (the
    # pipeline pass saw a tile op's written tile as read only: one version, WRONG
    # numbers)
    text = SKETCH.replace("for k0 in range(2):", 'for k0 in T.serial(2, annotations={'
                          '"software_pipeline_stage": [0, 0, 1], '
                          '"software_pipeline_order": [0, 1, 2]}):')
    mod = targets.build(_tensorized(text), targets.Target("cuda", arch="sm_80"))
    assert re.search(r'T.allocate\(\(512,\), "float16", scope="wmma.matrix_a"\) as A_a',
                     T.to_text(mod.lowered))
    a, b = _inputs(2)
    c = np.zeros((32, 32), "float32")
    T.interpret(mod.lowered, a, b, c, check_races=True)
    np.testing.assert_array_equal(c, a.astype("float32") @ b.astype("float32"))
