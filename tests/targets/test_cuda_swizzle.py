"""Swizzled shared layouts (cuvil_tir/swizzle.py, transform_layout, the mma.sync
tiles): the swizzled ``gemm_mma`` computes right through the interpreter (race-checked),
compiles for sm_80 and sm_90a without spills, uses less shared memory than padding and
makes every ldmatrix phase conflict-free; the maps that are not swizzles, or tiles of
ops that cannot take one, are refused."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir.arith import bound_of
from cuvil_tir.errors import CuvilError, LoweringError
from cuvil_tir.swizzle import Swizzle, recognize
from schedules.errors import LayoutError, ScheduleArgumentError
from schedules.primitives.index_eval import eval_np
from targets.cuda.ldmatrix import lane_rows
from targets.cuda.nvcc import resource_usage, sass
from targets.toolkit import cuda_recipes as recipes

from .test_cuda_mma import MODS, build, check_gemm, gemm_func

SWIZZLED = {dt: build(dt, swizzle=True) for dt in ("float16", "bfloat16", "int8")}


@pytest.mark.parametrize("dtype", sorted(SWIZZLED))
def test_swizzled_mma_gemm_computes_right_and_saves_the_padding(dtype):
    check_gemm(SWIZZLED[dtype], dtype)
    src = SWIZZLED[dtype].get_source("cuda")
    sa, sb = (recipes.mma_swizzle(dtype, row).pack()
              for row in ((32, 32) if dtype == "int8" else (32, 64)))
    assert f", {sa}, {sb}>(A_shared, " in src
    # the copy into shared memory writes through the same swizzle, 16 bytes at a time
    assert "^" in src.split("cvl_mma_fill")[-1] and "*(int4*)(&A_shared[" in src
    padded = resource_usage(MODS[dtype].get_source("cuda"), "sm_80")[f"mma_{dtype}_kernel0"]
    for arch in ("sm_80", "sm_90a"):
        usage = resource_usage(src, arch)[f"mma_{dtype}_kernel0"]
        assert usage["spill_stores"] == usage["spill_loads"] == usage["stack"] == 0
        assert usage["shared"] == 4096 * (1 if dtype == "int8" else 2) < padded["shared"]
        assert "LDSM.16.M88.4" in sass(src, arch)[f"mma_{dtype}_kernel0"]


def _bank_groups(fragment, row_bytes, elem_bytes, sw):
    """Per ldmatrix phase (the 8 lanes of one matrix), the 16-byte bank groups (of 8
    per 128 bytes) their rows start in."""
    row = row_bytes // elem_bytes
    out = []
    for m in range(4):
        groups = []
        for lane in range(8 * m, 8 * m + 8):
            r, chunk = lane_rows(fragment, lane)
            col = chunk * (16 // elem_bytes)
            if sw is not None:
                col = sw.apply(r, col)
            groups.append((r * row + col) * elem_bytes // 16 % 8)
        out.append(groups)
    return out


@pytest.mark.parametrize("fragment", ["a", "b", "b_nt"])
@pytest.mark.parametrize("row_bytes", [32, 64, 128, 256])
def test_the_swizzle_makes_every_ldmatrix_phase_conflict_free(fragment, row_bytes):
    for dtype, eb in (("float16", 2), ("int8", 1)):
        sw = recipes.mma_swizzle(dtype, row_bytes // eb)
        assert all(len(set(g)) == 8 for g in _bank_groups(fragment, row_bytes, eb, sw))
    if row_bytes >= 128:        # unswizzled and unpadded, the 8 rows share one group
        assert all(len(set(g)) == 1 for g in _bank_groups(fragment, row_bytes, 2, None))


def _staged(dtype="float16"):
    sch = S.Schedule(gemm_func(128, 128, 64, dtype))
    recipes.gemm_mma(sch, bm=64, bn=64, bk=32, warp_m=32, warp_n=32, pad=0)
    return sch


def test_a_map_that_is_not_a_swizzle_is_refused_on_a_tile_of_mma():
    sch = _staged()
    with pytest.raises(LayoutError, match=r"buffer 'A_shared' is a tile of cuda\.mma_sync "
                                          r".*the map is not an XOR swizzle of the chunks"):
        sch.transform_layout("A_shared", 0, lambda i, j: (i, (j + 8) % 64))


def test_a_swizzle_on_a_wmma_tile_is_refused_not_silently_misread():
    sch = S.Schedule(gemm_func(128, 128, 64, "float16"))
    recipes.gemm_tensorcore(sch, bm=64, bn=64, bk=32, pad=0)
    with pytest.raises(LayoutError, match=r"cuda\.wmma_sync read\(s\) it row-major from the "
                                          r"tile's first element"):
        sch.transform_layout("A_shared", 0, Swizzle(2, 3, 1).index_map())


def test_a_map_that_is_not_one_to_one_is_refused():
    sch = _staged()
    with pytest.raises(LayoutError, match=r"not one-to-one on buffer 'A_shared'"):
        sch.transform_layout("A_shared", 0, lambda i, j: (i, j ^ (j // 8 % 2 * 8)))


def test_swizzle_and_storage_align_together_are_refused():
    sch = S.Schedule(gemm_func(128, 128, 64, "float16"))
    recipes.gemm_mma(sch, bm=64, bn=64, bk=32, warp_m=32, warp_n=32, pad=8, swizzle=True)
    with pytest.raises(LoweringError, match=r"buffer A_shared is both swizzled and padded by "
                                            r"storage_align"):
        targets.build(sch, targets.Target("cuda", arch="sm_80"), name="both")


def _swizzled_a(sw):
    sch = S.Schedule(gemm_func(128, 128, 64, "float16"))
    recipes.gemm_mma(sch, bm=64, bn=64, bk=32, warp_m=32, warp_n=32, pad=0)
    sch.transform_layout("A_shared", 0, sw.index_map())
    return sch


def test_a_swizzle_wider_than_the_tile_keeps_its_whole_group_and_computes_right():
    # chunk groups of 64 columns: the 32-column K slice is staged in a 64-column buffer
    mod = targets.build(_swizzled_a(Swizzle(3, 3, 1)), targets.Target("cuda", arch="sm_80"),
                        name="wide")
    assert "half A_shared[4096];" in mod.get_source("cuda")
    check_gemm(mod, "float16")


def test_a_tile_with_fewer_rows_than_the_pattern_is_refused():
    # the pattern repeats every 128 rows; a block's tile of A has 64: shrunk to it, the
    # copy and the loads would disagree on where a row's chunks are
    with pytest.raises(LoweringError, match=r"swizzled buffer A_shared is shrunk to "
                                            r"\['64', '\d+'\]; its swizzle .* needs rows in "
                                            r"multiples of 128 and columns of 32"):
        targets.build(_swizzled_a(Swizzle(2, 3, 5)), targets.Target("cuda", arch="sm_80"),
                      name="tall")


def test_mma_swizzle_needs_whole_chunks():
    with pytest.raises(ScheduleArgumentError, match=r"rows of 12 float16 elements hold 1\.5 "
                                                    r"16-byte chunks"):
        recipes.mma_swizzle("float16", 12)
    with pytest.raises(CuvilError, match=r"expected 1 <= bits <= 8"):
        Swizzle(0, 3, 0)


@settings(max_examples=40, deadline=None)
@given(bits=st.integers(1, 3), base=st.integers(0, 3), shift=st.integers(0, 3),
       rows=st.sampled_from([16, 32]), groups=st.integers(1, 3))
def test_a_swizzle_is_a_permutation_of_each_row_and_is_recognized(bits, base, shift, rows,
                                                                  groups):
    sw = Swizzle(bits, base, shift)
    i, j = np.divmod(np.arange(rows * sw.cols * groups), sw.cols * groups)
    moved = sw.apply(i, j)
    for r in range(rows):
        assert sorted(moved[i == r].tolist()) == sorted(j[i == r].tolist())
    # the index map computes the same permutation
    vi, vj = T.var("i"), T.var("j")
    _, col = sw.index_map()(vi, vj)
    f = T.PrimFunc([], T.Evaluate(col))
    assert np.array_equal(eval_np(f.body.value, {id(vi): i, id(vj): j}), moved)
    got = recognize(i, j, i, moved)
    assert got is not None and np.array_equal(got.apply(i, j), moved)


def test_the_bounds_of_a_swizzled_index_stay_in_its_chunk_group():
    i, j, k = T.var("i"), T.var("j"), T.var("k")
    col = Swizzle(2, 3, 1).index_map()(i, k * 32 + j)[1]
    lo, hi = bound_of(col, {i: T.Range(T.const(0), T.const(64)),
                            j: T.Range(T.const(0), T.const(32))})
    assert (str(lo), str(hi)) == ("k * 32", "k * 32 + 31")


def test_a_two_stage_pipeline_keeps_two_swizzled_versions_of_each_tile():
    mod = build("float16", swizzle=True, stages=2)
    src = mod.get_source("cuda")
    # two versions of the 64 x 32 slice of A and the 32 x 64 slice of B
    assert "half A_shared[4096];" in src and "half B_shared[4096];" in src
    check_gemm(mod, "float16")
    usage = resource_usage(src, "sm_90a")["mma_float16_kernel0"]
    assert usage["spill_stores"] == usage["spill_loads"] == 0


def test_a_swizzle_on_a_buffer_too_large_to_enumerate_is_taken_as_written():
    """benchmarks/cuda.py's 4096^3 fp16 GEMM: the shared cache is the whole 4096 x 4096
    operand when the swizzle is applied (16M elements, past what transform_layout
    checks element by element), so the map was refused as unprovable.  A map that is a
    Swizzle's index_map as written is one-to-one by construction."""
    from targets.toolkit import cuda_recipes as recipes
    m = n = k = 4096
    A = T.placeholder((m, k), "float16", name="A")
    B = T.placeholder((k, n), "float16", name="B")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((m, n), lambda i, j: T.sum(
        T.Cast("float32", A[i, r]) * T.Cast("float32", B[r, j]), axis=r), name="C")
    sch = S.Schedule(T.create_prim_func([A, B, C]))
    recipes.gemm_mma(sch, bm=128, bn=128, bk=32, warp_m=64, warp_n=64, swizzle=True,
                     stages=2)
    assert "bitwise_xor" in str(sch.func)


def test_a_large_xor_map_that_is_no_swizzle_is_still_refused():
    X = T.placeholder((4096, 4096), "float16", name="X")
    f = T.create_prim_func([X, T.compute((4096, 4096), lambda i, j: X[i, j], name="Y")])
    sch = S.Schedule(f)
    with pytest.raises(S.ScheduleError, match=r"cannot prove the index map .* one-to-one"):
        sch.transform_layout("Y", 0,
                             lambda i, j: (i, T.bitwise_xor(j, i % 4096)))
