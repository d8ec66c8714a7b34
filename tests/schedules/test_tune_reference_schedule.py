"""The tuner's reference schedule (:mod:`schedules.tune.reference_schedule`): the
untuned function with its reduction loops outside the innermost spatial loop gives the
untuned build's outputs bit for bit, reorders what it should, leaves alone what it
cannot, and is what :func:`~schedules.tune.measure.reference_outputs` builds."""

import tempfile

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from cuvil_tir.analysis import tree
from cuvil_tir.errors import CodegenError
from cuvil_tir.target import build
from schedules.tune import measure
from schedules.tune.measure import agree, random_args, reference_outputs
from schedules.tune.networks import conv2d, matmul
from schedules.tune.reference_schedule import reference_schedule

#: this 2-core Xeon's L1d (48 KiB): panels of 512 fp32 columns by 8 rows
ONE_CORE = "llvm -num-cores=1 -l1d-kb=48"
TWO_CORES = "llvm -num-cores=2 -l1d-kb=48"
#: strict IEEE: no fmul + fadd contracted into fma (the llvm default, ``contract``,
#: leaves each fusion to LLVM, which it makes differently in different nests)
STRICT = "llvm -num-cores=2 -l1d-kb=48 -fast-math=false"


def outputs(func, target="llvm", seed=0):
    args = random_args(func, seed)
    build(func, target)(*args)
    return args


def assert_same_bits(func, target=TWO_CORES):
    ordered = reference_schedule(func, target)
    assert ordered is not func   # reordered: the comparison is of two nests
    want, got = outputs(func, target), outputs(ordered, target)
    for w, g in zip(want, got):
        assert w.dtype == g.dtype and np.array_equal(w, g)
    return want


def nest(func, block):
    """``(loop name, kind)`` of the loops above ``block``, outer to inner."""
    return [(lp.loop_var.name, lp.kind)
            for _, lp in tree.loops_above(func, tree.find_block(func, block))]


def gemm_relu(m, n, k):
    """A GEMM and an elementwise epilogue: two blocks, one a reduction."""
    A = T.placeholder((m, k), name="A")
    B = T.placeholder((k, n), name="B")
    bias = T.placeholder((n,), name="bias")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((m, n), lambda i, j: T.sum(A[i, r] * B[r, j], axis=r), name="C")
    D = T.compute((m, n), lambda i, j: T.max(C[i, j] + bias[j], T.const(0, "float32")),
                  name="D")
    return T.create_prim_func([A, B, bias, D])


def test_fp32_gemm_gives_the_untuned_bits_where_the_order_of_the_sum_matters():
    f = matmul(64, 48, 300)
    assert_same_bits(f, STRICT)
    a, b, c = assert_same_bits(f)
    # the check is of the order: a sum rounded once differs from the k-ordered one
    exact = (a.astype("float64") @ b.astype("float64")).astype("float32")
    assert not np.array_equal(c, exact)


def test_fp32_gemm_in_panels_of_columns_gives_the_untuned_bits():
    # 1040 columns: panels of 260 (its largest divisor up to 512), rows in blocks of 8
    f = matmul(24, 1040, 96)
    assert [n for n, _ in nest(reference_schedule(f, TWO_CORES), "C")] == [
        "i_0", "j_0", "k", "i_1", "j_1"]
    assert_same_bits(f, STRICT)
    assert_same_bits(f)


def test_int8_gemm_into_int32_gives_the_untuned_bits():
    a, b, c = assert_same_bits(matmul(32, 64, 96, dtype="int8", acc="int32"))
    assert np.array_equal(c, a.astype("int32") @ b.astype("int32"))


def test_bf16_gemm_into_fp32_gives_the_untuned_bits():
    assert_same_bits(matmul(16, 48, 200, dtype="bfloat16", acc="float32"))


def test_conv2d_gives_the_untuned_bits_in_strict_ieee():
    f = conv2d(8, 16, 12, 12)
    assert_same_bits(f, STRICT)
    # with contraction allowed, the untuned nest's unrolled rx loop has its products
    # vectorised by LLVM (rounded before the adds) where the reordered one fuses
    # each into an fma: the same order of sums, roundings a few ulp apart
    want, got = outputs(f, TWO_CORES)[2], outputs(reference_schedule(f, TWO_CORES),
                                                   TWO_CORES)[2]
    assert agree(want, got, "float32")


def test_gemm_with_an_elementwise_epilogue_gives_the_untuned_bits():
    f = gemm_relu(24, 40, 160)
    assert_same_bits(f)
    # the epilogue's nest is untouched
    assert nest(reference_schedule(f, TWO_CORES), "D") == nest(f, "D")


def test_gemm_runs_k_outside_a_tile_of_8_rows_with_the_row_blocks_parallel():
    f = matmul(64, 48, 300)
    assert nest(f, "C") == [("i", "serial"), ("j", "serial"), ("k", "serial")]
    assert nest(reference_schedule(f, TWO_CORES), "C") == [
        ("i_0", "parallel"), ("k", "serial"), ("i_1", "serial"), ("j", "serial")]
    assert nest(reference_schedule(f, ONE_CORE), "C") == [
        ("i_0", "serial"), ("k", "serial"), ("i_1", "serial"), ("j", "serial")]


def test_a_wide_gemm_is_cut_into_panels_of_columns_that_fill_a_third_of_l1d():
    # 8 rows x 512 fp32 = 16 KiB of the 48: the k loop sweeps one panel's tile
    f = matmul(16, 2048, 8)
    assert nest(reference_schedule(f, TWO_CORES), "C") == [
        ("i_0", "parallel"), ("j_0", "serial"), ("k", "serial"), ("i_1", "serial"),
        ("j_1", "serial")]
    sizes = {lp.loop_var.name: lp.extent.value for _, lp in tree.loops_above(
        reference_schedule(f, TWO_CORES), tree.find_block(reference_schedule(
            f, TWO_CORES), "C"))}
    assert sizes == {"i_0": 2, "j_0": 4, "k": 8, "i_1": 8, "j_1": 512}


def test_conv2d_keeps_its_reduction_loops_in_order_and_skips_a_unit_loop():
    # batch-free CHW: the reduction (rc, ry, rx) in its own order, outside the rows
    # of the output tile (12 rows: blocks of 6) and their x
    f = conv2d(8, 16, 12, 12)
    assert nest(reference_schedule(f, TWO_CORES), "Y") == [
        ("ko", "parallel"), ("y_0", "serial"), ("rc", "serial"), ("ry", "serial"),
        ("rx", "serial"), ("y_1", "serial"), ("x", "serial")]
    one = matmul(1, 64, 32)   # the extent-1 row is not the parallel loop
    assert nest(reference_schedule(one, TWO_CORES), "C") == [
        ("i", "serial"), ("k", "serial"), ("j", "serial")]


def scaled_gemm_at_j():
    """``E = ((2 A) @ B) @ B2`` with the scaling computed at ``C``'s ``j`` loop:
    ``j`` holds that block beside ``C``'s ``k`` loop, so ``k`` cannot move outside
    ``j``; ``E`` is a plain GEMM."""
    A = T.placeholder((16, 24), name="A")
    B = T.placeholder((24, 8), name="B")
    B2 = T.placeholder((8, 32), name="B2")
    D = T.compute((16, 24), lambda i, k: A[i, k] * 2.0, name="D")
    r = T.reduce_axis((0, 24), name="k")
    C = T.compute((16, 8), lambda i, j: T.sum(D[i, r] * B[r, j], axis=r), name="C")
    r2 = T.reduce_axis((0, 8), name="k")
    E = T.compute((16, 32), lambda i, j: T.sum(C[i, r2] * B2[r2, j], axis=r2), name="E")
    sch = S.Schedule(T.create_prim_func([A, B, B2, E]))
    sch.compute_at(sch.get_block("D"), sch.get_loops(sch.get_block("C"))[1])
    return sch.func


def test_a_nest_the_reorder_refuses_stays_the_untuned_one():
    f = scaled_gemm_at_j()
    assert nest(f, "C") == [("i", "serial"), ("j", "serial"), ("k", "serial")]
    with pytest.raises(S.ScheduleError, match="not a single chain: loop j contains"):
        sch = S.Schedule(f)
        sch.reorder(*[sch.get_loops(sch.get_block("C"))[n] for n in (0, 2, 1)])
    ordered = reference_schedule(f, TWO_CORES)
    # C's 16 rows were split in blocks of 8 before its reorder was refused: the split
    # is dropped with it, not left half done; E is reordered
    assert nest(ordered, "C") == nest(f, "C")
    assert [n for n, _ in nest(ordered, "E")] == ["i_0", "k", "i_1", "j"]
    a, b, b2, e = reference_outputs(f, TWO_CORES, 0)
    np.testing.assert_allclose(e, ((2 * a) @ b) @ b2, rtol=1e-5, atol=1e-4)
    assert np.array_equal(e, outputs(f)[3])


def test_a_row_sum_already_read_along_its_rows_is_left_alone():
    A = T.placeholder((16, 64), name="A")
    r = T.reduce_axis((0, 64), name="k")
    f = T.create_prim_func([A, T.compute((16,), lambda i: T.sum(A[i, r], axis=r),
                                         name="S")])
    assert reference_schedule(f, TWO_CORES) is f


def test_a_gpu_target_gets_the_function_unchanged():
    f = matmul(16, 16, 16)
    assert reference_schedule(f, "cuda") is f


def built_functions(monkeypatch, tmp_path, fail_ordered=False):
    """Record what :func:`reference_outputs` builds (outside the shared cache)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    seen = []
    real = measure.build

    def spy(func, target):
        seen.append((func, str(target)))
        if fail_ordered and len(seen) == 1:
            raise CodegenError("the reordered function does not build")
        return real(func, target)

    monkeypatch.setattr(measure, "build", spy)
    return seen


def test_reference_outputs_builds_the_reference_schedule(monkeypatch, tmp_path):
    # regression: the untuned nest (k innermost) was built, 475 s for 4096^3 fp32
    seen = built_functions(monkeypatch, tmp_path)
    f = matmul(32, 48, 64)
    a, b, c = reference_outputs(f, TWO_CORES, 0)
    assert len(seen) == 1
    assert nest(seen[0][0], "C") == [
        ("i_0", "parallel"), ("k", "serial"), ("i_1", "serial"), ("j", "serial")]
    assert np.array_equal(c, outputs(f, "llvm")[2])


def test_a_gpu_reference_is_reordered_for_the_host(monkeypatch, tmp_path):
    seen = built_functions(monkeypatch, tmp_path)
    f = matmul(32, 16, 8, dtype="float16", acc="float32")
    a, b, c = reference_outputs(f, "cuda", 3)
    assert [(func is f, target.split()[0]) for func, target in seen] == [
        (True, "cuda"), (False, "llvm")]
    assert nest(seen[1][0], "C")[-3:] == [("k", "serial"), ("i_1", "serial"), ("j", "serial")]
    np.testing.assert_allclose(c, a.astype("float32") @ b.astype("float32"), rtol=1e-5)


def test_a_reordered_function_that_does_not_build_falls_back(monkeypatch, tmp_path):
    seen = built_functions(monkeypatch, tmp_path, fail_ordered=True)
    f = matmul(8, 16, 24)
    a, b, c = reference_outputs(f, TWO_CORES, 0)
    assert [func is f for func, _ in seen] == [False, True]
    assert np.array_equal(c, outputs(f, "llvm")[2])
