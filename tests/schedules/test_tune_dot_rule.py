"""The generated space's x86 dot-product rule: int8 and bfloat16 GEMMs offered the
packed-B VNNI / AVX512-BF16 recipe where the target (pinned mcpu, never the host) has
the instruction, candidates that compute the GEMM exactly (int8) or within bfloat16
tolerance."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir.errors import HostFeatureError
from cuvil_tir.interp import interpret
from schedules.intrinsics.x86_gemm import gemm_func
from schedules.tune.dot_rule import dot_choices
from schedules.tune.measure import agree, random_args
from schedules.tune.networks import matmul
from schedules.tune.rules import space_for
from schedules.tune.space import run_with_decisions, prune, machine_of
from targets.llvm.cpu import missing_host_features

ZEN4 = targets.Target("llvm", mcpu="znver4")


@pytest.mark.parametrize("a, b, acc, name", [
    ("int8", "int8", "int32", "dot:x86.vnni_16x4_s8s8"),
    ("uint8", "int8", "int32", "dot:x86.vnni_16x4_u8s8"),
    ("bfloat16", "bfloat16", "float32", "dot:x86.bf16_16x2")])
def test_offered_for_matching_dtypes_on_a_target_with_the_instruction(a, b, acc, name):
    (choice,) = dot_choices(gemm_func(64, 64, 64, a, b, acc), "C", ZEN4)
    assert choice.name == name
    registers = machine_of(ZEN4).vector_registers
    for rows, vectors in choice.tiles:   # accumulators, B vectors, broadcast fit
        assert rows * vectors + vectors + 1 <= registers and 4 % vectors == 0
    assert choice.groups == (1,)         # int8 x int8 runs u8s8 steps (the offset)


@pytest.mark.parametrize("func, target", [
    (gemm_func(64, 64, 64, "int8", "int8", "int32"), "llvm -mcpu=haswell"),  # no VNNI
    (gemm_func(64, 64, 64, "float32", "float32", "float32"), ZEN4),
    (gemm_func(64, 20, 64, "int8", "int8", "int32"), ZEN4),   # N: no multiple of 8
    (gemm_func(64, 64, 6, "int8", "int8", "int32"), ZEN4)])   # K: no multiple of 4
def test_not_offered_where_the_recipe_cannot_apply(func, target):
    assert dot_choices(func, "C", target) == []


def test_not_offered_for_a_transposed_operand():
    A = T.placeholder((16, 32), "int8", name="A")
    B = T.placeholder((32, 32), "int8", name="B")   # read as B[j, k]
    k = T.reduce_axis((0, 32), name="k")
    C = T.compute((16, 32), lambda i, j: T.sum(
        A[i, k].astype("int32") * B[j, k].astype("int32"), axis=k), name="C")
    assert dot_choices(T.create_prim_func([A, B, C]), "C", ZEN4) == []


def _dot_candidates(func, target, n):
    space = space_for(func, target)
    out = []
    for seed in range(40):
        sch = S.Schedule(func, seed=seed)
        space(sch)
        if any(inst.name == "tensorize" for inst in sch.trace):
            out.append(sch)
        if len(out) == n:
            return space, out
    raise AssertionError("the space drew no dot-product candidate in 40 draws")


def test_generated_space_draws_exact_int8_candidates_that_replay():
    f = gemm_func(7, 32, 32, "int8", "int8", "int32")   # a partial row tile
    space, cands = _dot_candidates(f, ZEN4, 3)
    want = random_args(f, 0)
    want[2] = want[0].astype(np.int64) @ want[1].astype(np.int64)
    for sch in cands:
        assert prune(sch.func, machine_of(ZEN4)) is None
        got = random_args(f, 0)
        interpret(sch.func, *got)
        np.testing.assert_array_equal(got[2], want[2])
        again = run_with_decisions(space, f, sch.trace.decisions)
        assert T.structural_equal(again.func, sch.func)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "bfloat16"])
def test_dot_candidates_of_a_deep_k_are_not_pruned(dtype):
    """Regression: the int8 column sums (a streaming reduction over all K rows of a
    panel) read as an inner tile of K x 16 int32 (4 bytes for an int8 operand) and
    the L1 rule pruned every VNNI candidate of K >= 512: the tuner never measured one."""
    acc = "float32" if dtype == "bfloat16" else "int32"
    b = "bfloat16" if dtype == "bfloat16" else "int8"
    f = gemm_func(16, 768, 3072, dtype, b, acc)
    _, cands = _dot_candidates(f, ZEN4, 2)
    for sch in cands:
        assert prune(sch.func, machine_of(ZEN4)) is None


def test_a_bf16_candidate_builds_and_agrees_where_the_host_can_run_it():
    f = gemm_func(8, 32, 16, "bfloat16", "bfloat16", "float32")
    _, (sch,) = _dot_candidates(f, ZEN4, 1)
    mod = targets.build(sch, ZEN4)
    want, got = random_args(f, 0), random_args(f, 0)
    interpret(f, *want)
    if missing_host_features(ZEN4):
        with pytest.raises(HostFeatureError):
            mod(*got)
        return
    mod(*got)
    assert agree(want[2], got[2], "float32")


def _numpy_gemm(args):
    """A @ B in float64 (exact for these int8 sums); bfloat16 is stored as the high
    16 bits of a float32."""
    a, b = ((x.astype(np.uint32) << 16).view(np.float32) if x.dtype == np.uint16 else x
            for x in args[:2])
    return a.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.parametrize("target", [ZEN4, targets.Target("llvm")], ids=["znver4", "host"])
@pytest.mark.parametrize("dtype, acc", [("int8", "int32"), ("bfloat16", "float32")])
def test_gemms_of_a_few_rows_draw_without_an_error(target, dtype, acc):
    """Regression (issue 24): the int8 offset's flip of a one-row A has one loop (the
    unit row has none) and ``dot_gemm`` fused it as if it had two: a draw of an M = 1
    int8 GEMM raised ``fuse: expected at least 2 loops, got 1``."""
    for m, n, k in ((1, 32, 8), (1, 16, 64), (2, 32, 8), (3, 16, 8), (4, 32, 4)):
        f = matmul(m, n, k, dtype, acc)
        space = space_for(f, target)
        dots = 0
        for seed in range(8):
            sch = S.Schedule(f, seed=seed)
            space(sch)
            dots += any(inst.name == "tensorize" for inst in sch.trace)
        assert dots or not dot_choices(f, "C", target)   # the rule was drawn


@pytest.mark.parametrize("m", [1, 3])
@pytest.mark.parametrize("dtype, acc", [("int8", "int32"), ("bfloat16", "float32")])
def test_dot_candidates_of_a_few_rows_agree_with_numpy(m, dtype, acc):
    f = matmul(m, 32, 16, dtype, acc)
    _, (sch,) = _dot_candidates(f, ZEN4, 1)
    got = random_args(f, 0)
    want = _numpy_gemm(got)
    if missing_host_features(ZEN4):
        interpret(sch.func, *got)
    else:
        targets.build(sch, ZEN4)(*got)
    if dtype == "int8":
        np.testing.assert_array_equal(got[2], want)
    else:
        np.testing.assert_allclose(got[2], want, rtol=1e-5)


def test_the_benchmark_gemv_of_int8_draws_on_the_host():
    """The reported draw: ``matmul(1, 1024, 1024, "int8", "int32")``, seed 0, on the
    host (``llvm``) raised from ``dot_gemm``."""
    f = matmul(1, 1024, 1024, "int8", "int32")
    space = space_for(f, "llvm")
    for seed in range(4):
        space(S.Schedule(f, seed=seed))
