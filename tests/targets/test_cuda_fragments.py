"""Tensor-core accumulators in registers (``wmma.accumulator``,
targets/cuda/fragments.py): the GEMM recipe's C tiles stay in the warp's fragments
for the whole K loop.  Checked through the interpreter (one array per warp), nvcc's
PTX (no ``wmma.load.c``, one ``wmma.store.d`` per fragment), ``ptxas -v`` and SASS
for sm_80 and sm_90, and the refusals."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir.errors import LoweringError, ScheduleArgumentError
from cuvil_tir.interp.scalar import tile_storage, tile_values
from targets.cuda import shared_capacity
from targets.cuda.fragments import ACC_SCOPE, FILL_INTRIN, STORE_INTRIN
from targets.cuda.nvcc import nvcc_ptx, resource_usage, sass
from targets.toolkit import cuda_recipes as recipes

from .cuda_helpers import ARCHS, rand


def _func(m, n, k, dtype="float16"):
    A = T.placeholder((m, k), dtype, name="A")
    B = T.placeholder((k, n), dtype, name="B")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((m, n), lambda i, j: T.sum(A[i, r].astype("float32")
                                             * B[r, j].astype("float32"), axis=r), name="C")
    return T.create_prim_func([A, B, C])


def _build(name, m=128, n=128, k=64, dtype="float16", **tiles):
    sch = S.Schedule(_func(m, n, k, dtype))
    recipes.gemm_tensorcore(sch, **tiles)
    return targets.build(sch, "cuda", name=name)


# 4 warps of 32 x 32 (2 x 2 fragments each), 16-byte copies
WARP_TILES = _build("frag_f16", bm=64, bn=64, bk=32, warp_m=32, warp_n=32, vector=8)
BF16 = _build("frag_bf16", k=32, dtype="bfloat16", bm=64, bn=64, bk=32, warp_m=32,
              warp_n=32)
IN_SHARED = _build("acc_shared", bm=64, bn=64, bk=32, accumulator="shared")


def test_warp_tiles_compute_the_product_with_one_accumulator_array_per_warp():
    a, b = rand((128, 64)).astype("float16"), rand((64, 128), seed=1).astype("float16")
    c = np.zeros((128, 128), "float32")
    T.interpret(WARP_TILES.lowered, a, b, c, check_races=True)
    np.testing.assert_allclose(c, a.astype("float32") @ b.astype("float32"), rtol=1e-4,
                               atol=1e-3)
    src = WARP_TILES.get_source("cuda")
    # the planner sized the fragment array by one warp's 32 x 32 tile
    assert f"{'nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>'} " \
           "C_wmma_accumulator[4];" in src


def test_bf16_accumulates_in_registers_too():
    bits = [tile_storage(rand(s, seed=i), "bfloat16")
            for i, s in enumerate(((128, 32), (32, 128)))]
    c = np.zeros((128, 128), "float32")
    T.interpret(BF16.lowered, *bits, c, check_races=True)
    ref = tile_values(bits[0], "bfloat16") @ tile_values(bits[1], "bfloat16")
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-3)
    assert "cvl_wmma_mma<32, __nv_bfloat16>(" in BF16.get_source("cuda")


@pytest.mark.parametrize("arch", ARCHS)
def test_the_k_loop_never_loads_or_stores_the_accumulator(arch):
    ptx = nvcc_ptx(WARP_TILES.get_source("cuda"), arch)
    assert "wmma.load.c" not in ptx
    assert len(re.findall(r"wmma\.store\.d\.sync", ptx)) == 4      # once per fragment
    assert len(re.findall(r"wmma\.mma\.sync", ptx)) >= 2 * 2 * 2
    # accumulated in shared memory, every K slice reloads C
    assert "wmma.load.c" in nvcc_ptx(IN_SHARED.get_source("cuda"), arch)


@pytest.mark.parametrize("arch", ARCHS)
def test_register_accumulators_need_no_local_memory(arch):
    for mod in (WARP_TILES, BF16):
        src = mod.get_source("cuda")
        kernel = f"{mod.entry_name}_kernel0"
        usage = resource_usage(src, arch)[kernel]
        assert usage["spill_stores"] == usage["spill_loads"] == usage["stack"] == 0
        assert 0 < usage["shared"] <= shared_capacity(arch)
        code = sass(src, arch)[kernel]
        assert re.search(r"\bHMMA\.16816\.F32", code)
        assert "LDL" not in code and "STL" not in code
    # the 16-byte copies into shared memory
    assert "STS.128" in sass(WARP_TILES.get_source("cuda"), arch)["frag_f16_kernel0"]


@pytest.mark.parametrize("arch", ARCHS)
def test_staged_rows_are_padded_against_bank_conflicts(arch):
    # A_shared 64 x (32 + 8), B_shared 32 x (64 + 8) halves: the fragment loads use the
    # padded strides
    src = WARP_TILES.get_source("cuda")
    assert re.search(r"cvl_wmma_mma<32, half>\(&A_shared\[[^;]*, 40, 72\)", src)
    usage = resource_usage(src, arch)["frag_f16_kernel0"]
    assert usage["shared"] == (64 * 40 + 32 * 72) * 2


def test_a_row_stride_wmma_cannot_load_is_refused():
    sch = S.Schedule(_func(128, 128, 32))
    recipes.gemm_tensorcore(sch, bm=64, bn=64, bk=32, pad=4)
    with pytest.raises(LoweringError, match=r"row stride is a multiple of 16 bytes .*"
                                            r"found A_shared"):
        T.lower(sch, "cuda")


def test_big_warp_tiles_fit_in_registers_for_sm80():
    mod = _build("frag_big", m=256, n=256, k=64, bm=128, bn=128, bk=32, warp_m=32,
                 warp_n=64, vector=8)
    usage = resource_usage(mod.get_source("cuda"), "sm_80")["frag_big_kernel0"]
    assert usage["spill_stores"] == usage["stack"] == 0 and usage["registers"] <= 255


def test_an_element_access_to_a_fragment_is_refused():
    sch = S.Schedule(_func(32, 32, 32))
    blk = sch.get_block("C")
    i, j, k = sch.get_loops(blk)
    bx, tx = sch.split(sch.fuse(i, j), [None, 32])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.cache_write(blk, 0, ACC_SCOPE)
    with pytest.raises(LoweringError, match=r"wmma\.accumulator buffer is a tensor-core "
                                            r"fragment: only cuda\.wmma_fill_16x16_f32.*"
                                            r"touches one element"):
        T.lower(sch, "cuda")


def test_fill_and_store_intrinsics_are_registered():
    assert {FILL_INTRIN, STORE_INTRIN} <= set(S.TensorIntrin.names())


@pytest.mark.parametrize("kw, msg", [
    (dict(accumulator="global"), "accumulator must be 'registers' or 'shared', found 'global'"),
    (dict(warp_m=24), "warp_m=24 must be a multiple of 16 dividing the block tile 64"),
    (dict(warp_n=128), "warp_n=128 must be a multiple of 16 dividing the block tile 64"),
])
def test_bad_recipe_arguments_are_refused(kw, msg):
    sch = S.Schedule(_func(64, 64, 32))
    with pytest.raises(ScheduleArgumentError, match=re.escape(msg)):
        recipes.gemm_tensorcore(sch, bm=64, bn=64, bk=32, **kw)


class _Printer:
    def __init__(self):
        self.lines, self.helpers = [], {}

    def use_helper(self, key, text):
        self.helpers[key] = text

    def emit(self, line):
        self.lines.append(line)


def test_fragments_hold_whole_float32_tiles():
    from targets.cuda.fragments import declare_fragments
    from cuvil_tir.errors import CodegenError
    p = _Printer()
    declare_fragments(p, T.decl_buffer((32, 16), "float32", "acc", scope=ACC_SCOPE), "acc", 512)
    assert p.lines[-1].endswith(" acc[2];") and "#include <mma.h>" in p.helpers.values()
    with pytest.raises(CodegenError, match=r"wmma\.accumulator buffer acc must hold whole "
                                           r"16 x 16 float32 tiles; found 256 elements of "
                                           r"float16"):
        declare_fragments(p, T.decl_buffer((16, 16), "float16", "acc", scope=ACC_SCOPE),
                          "acc", 256)


@pytest.mark.parametrize("accumulator", ["registers", "shared"])
def test_debug_mode_checks_the_recipe_step_by_step(accumulator):
    # each step is compared with the one before on the schedule's serial meaning (its
    # binds used to "change the results": the reference interpreter ran the half-bound
    # copies in parallel, without the barriers lowering adds); no step is left to the
    # verifier alone (that warns)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sch = S.Schedule(_func(16, 16, 16), debug=True)
        recipes.gemm_tensorcore(sch, bm=16, bn=16, bk=16, accumulator=accumulator)
    a, b = rand((16, 16)).astype("float16"), rand((16, 16), seed=1).astype("float16")
    c = np.zeros((16, 16), "float32")
    T.interpret(targets.build(sch, "cuda").lowered, a, b, c, check_races=True)
    np.testing.assert_allclose(c, a.astype("float32") @ b.astype("float32"), rtol=1e-4,
                               atol=1e-3)
