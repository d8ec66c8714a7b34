"""The GPU tuning space on ``mma.sync`` (issue 24): 16 x 16 warp tiles (their fill and
store intrinsics) and several tiles per warp within the accumulator register budget.
Checked through the GPU interpreter (results, races) and nvcc (one call per
architecture for all modules)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir.errors import CodegenError, LoweringError
from cuvil_tir.transform.unroll import unroll_loops
from schedules.tune.gpu_rules import gpu_axes, gpu_prune, gpu_space
from schedules.tune.gpu_tensorcore import (ACC_REGISTERS, candidates, tensor_cores,
                                           tensorcore_tiling)
from schedules.tune.space import run_with_decisions
from targets.cuda.codegen import codegen_cuda, combine
from targets.cuda.nvcc import nvcc_ptx

SM80, SM90 = targets.Target("cuda", arch="sm_80"), targets.Target("cuda", arch="sm_90")


def gemm(n):
    A = T.placeholder((n, n), "float16", name="A")
    B = T.placeholder((n, n), "float16", name="B")
    r = T.reduce_axis((0, n), name="k")
    return T.create_prim_func([A, B, T.compute((n, n), lambda i, j: T.sum(
        A[i, r].astype("float32") * B[r, j].astype("float32"), axis=r), name="C")])


def mma_core(f, m, n, k):
    """The mma.sync tensor core of tile ``m x n x k`` with its own fill and store."""
    return next(tc for tc in candidates(f, "C", "cuda")
                if tc.gemm == f"cuda.mma_{m}x{n}x{k}_f16f32"
                and tc.fill == f"cuda.mma_fill_{m}x{n}_f32")


def check(mod, n, seed=0):
    """``mod`` (C = A @ B on n x n fp16) through the race-checked interpreter."""
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal((n, n)).astype("float16") for _ in range(2))
    c = np.zeros((n, n), "float32")
    T.interpret(mod.lowered, a, b, c, check_races=True)
    np.testing.assert_allclose(c, a.astype("float32") @ b.astype("float32"), rtol=1e-4,
                               atol=1e-3)


#: name: (tile, tiles per warp along rows, along columns), 64^3 on 4 warps
TILED = {"mma16_2x2": ((16, 16, 16), (1, 2, 2), (1, 2, 2), 2),
         "mma32x16_2x1": ((32, 16, 32), (1, 1, 2), (2, 2, 1), 1)}


@functools.lru_cache(maxsize=None)
def tiled_mod(name):
    """A 64^3 fp16 GEMM on several mma.sync tiles per warp (:data:`TILED`)."""
    f = gemm(64)
    tile, rows, cols, stages = TILED[name]
    sch = S.Schedule(f)
    tensorcore_tiling(mma_core(f, *tile), sch, "C", gpu_axes("cuda").tensor_axes,
                      decisions=(rows, cols, stages))
    return targets.build(sch, "cuda", name=name)


@pytest.mark.parametrize("name", sorted(TILED))
def test_several_mma_tiles_per_warp_compute_right_in_the_interpreter(name):
    # before: "an mma.sync accumulator tile must start at a constant offset": the
    # cuda pipeline never unrolled the loops over a warp's tiles
    mod = tiled_mod(name)
    check(mod, 64)
    src = mod.get_source("cuda")
    # one step, fill and store per tile, each on its own registers
    _, rows, cols, _ = TILED[name]
    for op in ("cvl_mma_ldsm<", "cvl_mma_fill<", "cvl_mma_store<"):
        assert src.count(op) == rows[2] * cols[2], op


def test_several_mma_tiles_per_warp_compile_to_tensor_core_code():
    from tests.targets.cuda_helpers import compile_all
    for arch, ptx in compile_all([tiled_mod(n) for n in sorted(TILED)]).items():
        assert ptx.count("mma.sync.aligned.m16n8k16") >= 8 and "ldmatrix" in ptx, arch


def test_a_warp_tile_at_a_symbolic_offset_is_refused_by_the_codegen(monkeypatch):
    # the loops over a warp's tiles left as loops (a pipeline without unroll_loops):
    # the registers of a tile are then at an offset only a loop variable gives
    kind = targets.get_target_kind("cuda")
    monkeypatch.setattr(kind, "passes", [p for p in kind.passes if p is not unroll_loops])
    f = gemm(64)
    sch = S.Schedule(f)
    tile, rows, cols, stages = TILED["mma16_2x2"]
    tensorcore_tiling(mma_core(f, *tile), sch, "C", gpu_axes("cuda").tensor_axes,
                      decisions=(rows, cols, stages))
    with pytest.raises(CodegenError, match=r"an mma\.sync accumulator tile must start at "
                                           r"a constant offset \(unroll the loops over "
                                           r"the warp's tiles\); found .*i_0_2_init.* in "
                                           r"C_warp"):
        codegen_cuda(T.lower(sch, "cuda"), SM80)


def test_the_tensor_cores_offer_16x16_mma_and_several_tiles_per_warp():
    f = gemm(128)
    cores = {tc.gemm: tc for tc in tensor_cores(f, "C", "cuda",
                                                gpu_axes("cuda").tensor_axes)}
    # before: the 16 x 16 fill/store raised IndexError (no 16 x 16 mma.sync core), and
    # every mma.sync core held one tile per warp
    assert cores["cuda.mma_16x16x16_f16f32"].fill == "cuda.mma_fill_16x16_f32"
    assert {tc.fragments for g, tc in cores.items() if g.startswith("cuda.mma_")} == {4}


def _fragments(sch) -> tuple:
    """The tiles per warp (rows, columns) a tensorized candidate drew."""
    tiles = [i.decision for i in sch.trace.insts if i.name == "sample_perfect_tile"]
    return int(tiles[0][1]), int(tiles[1][1])


def test_the_gpu_space_draws_mma_tiles_per_warp_within_the_register_budget():
    f = gemm(128)
    space = gpu_space(f, "cuda")
    sch = S.Schedule(f, seed=0)
    space(sch)
    labels = list(next(i for i in sch.trace.insts
                       if i.name == "sample_categorical").inputs[0])
    drawn, mods = {}, []
    for label, lanes_regs in (("tensor:cuda.mma_16x16x16_f16f32", 8),
                              ("tensor:cuda.mma_32x32x16_f16f32", 32),
                              ("tensor:cuda.mma_64x64x16_f16f32", 128)):
        for seed in range(6):
            cand = run_with_decisions(space, f, [labels.index(label)], seed=seed)
            fi, fj = _fragments(cand)
            assert fi * fj * lanes_regs <= ACC_REGISTERS, (label, fi, fj)
            drawn.setdefault(label, set()).add((fi, fj))
            if fi * fj > 1 and len(mods) < 2 and gpu_prune(cand.func, "cuda") is None:
                mods.append(targets.build(cand, "cuda", name=f"drawn{len(mods)}"))
    assert any(fi * fj > 1 for fi, fj in drawn["tensor:cuda.mma_16x16x16_f16f32"])
    assert drawn["tensor:cuda.mma_64x64x16_f16f32"] == {(1, 1)}
    assert len(mods) == 2
    for mod in mods:
        check(mod, 128, seed=1)
    ptx = nvcc_ptx(combine([m.runtime.program for m in mods]), "sm_80")
    assert ptx.count(".entry drawn") == 2 and "mma.sync.aligned" in ptx


def test_the_sm90_space_keeps_a_candidate_sm80_cannot_hold():
    # 16 warps of one 64 x 64 tile each, three stages of 256 x 64 and 64 x 256 fp16
    # slices: 192 KB of shared memory (207 KB with the rows' padding), more than
    # sm_80's 163 KB, within sm_90's 227 KB
    f = gemm(256)
    space = gpu_space(f, SM90)
    sch = S.Schedule(f, seed=0)
    space(sch)
    labels = list(next(i for i in sch.trace.insts
                       if i.name == "sample_categorical").inputs[0])
    cand = run_with_decisions(space, f, [labels.index("tensor:cuda.mma_64x64x64_f16f32"),
                                         [4, 1], 2, [4, 1], 2, 2])
    assert gpu_prune(cand.func, SM90) is None
    assert gpu_prune(cand.func, SM80) == "196608 bytes of shared memory, 166912 per block"
    ptx = nvcc_ptx(targets.build(cand, SM90, name="big_tc").get_source("cuda"), "sm_90")
    assert "mma.sync.aligned" in ptx
    with pytest.raises(LoweringError, match=r"needs \d+ bytes of shared memory; sm_80 "
                                            r"offers 166912 per block"):
        targets.build(cand, SM80, name="big_tc")
