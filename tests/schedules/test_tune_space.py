"""The generated search space and the target-aware pruning of candidates."""

import numpy as np

import cuvil_tir as T
import schedules as S
import targets
from schedules.tune.space import Machine, generated_space, machine_of, prune


def _gemm(n=32):
    A = T.placeholder((n, n), name="A")
    B = T.placeholder((n, n), name="B")
    k = T.reduce_axis((0, n), name="k")
    C = T.compute((n, n), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
    return T.create_prim_func([A, B, C])


def _vector_schedule(f, inner):
    sch = S.Schedule(f)
    i, j, _ = sch.get_loops(sch.get_block("C"))
    _, ji = sch.split(j, [None, inner])
    sch.vectorize(ji)
    return sch


def test_machine_from_pinned_targets():
    avx2 = machine_of(targets.Target("llvm", mcpu="haswell", num_cores=4, l1d_kb=32))
    avx512 = machine_of(targets.Target("llvm", mcpu="skylake-avx512"))
    assert (avx2.lanes("float32"), avx2.vector_registers, avx2.cores, avx2.l1d_bytes) \
        == (8, 16, 4, 32768)
    assert (avx512.lanes("float32"), avx512.vector_registers) == (16, 32)


def test_pruning_follows_the_target():
    f = _gemm()
    avx2 = machine_of("llvm -mcpu=haswell")
    avx512 = machine_of("llvm -mcpu=skylake-avx512")
    eight = _vector_schedule(f, 8).func
    assert prune(eight, avx2) is None
    assert "not a multiple of 16 lanes" in prune(eight, avx512)
    assert prune(_vector_schedule(f, 16).func, avx512) is None


def test_register_tile_and_l1_pruning():
    f = _gemm(64)
    m = Machine(256, 16, 32768, 1 << 20, 1)
    sch = S.Schedule(f)
    i, j, k = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, 16])
    jo, ji = sch.split(j, [None, 64])
    sch.reorder(io, jo, k, ii, ji)
    acc = sch.cache_write(sch.get_block("C"), 0, "local")
    sch.reverse_compute_at(acc, jo)
    sch.unroll(ii)
    sch.vectorize(ji)
    assert "vector registers" in prune(sch.func, m)
    tiny = Machine(256, 256, 1024, 1 << 20, 1)
    assert "L1 holds 1024" in prune(sch.func, tiny)


def test_generated_space_candidates_are_correct():
    f = _gemm()
    m = machine_of("llvm")
    space = generated_space(f, m)
    a, b = (np.random.default_rng(0).standard_normal((32, 32)).astype("float32")
            for _ in range(2))
    kept = 0
    for seed in range(4):
        sch = S.Schedule(f, seed=seed)
        space(sch)
        assert sch.trace.decisions
        again = S.Trace.from_json(sch.trace.as_json()).apply(f)
        assert T.structural_equal(again.func, sch.func)
        if prune(sch.func, m) is None:
            kept += 1
            c = np.zeros((32, 32), "float32")
            targets.build(sch, "llvm")(a, b, c)
            np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    assert kept >= 1


def test_tune_from_the_generated_space(tmp_path):
    f = _gemm(16)
    res = S.tune(f, None, target="llvm -mcpu=haswell", trials=2, database=tmp_path / "t.jsonl",
                 timeout_s=60, progress=False)
    assert res.trials == 2 and res.best_schedule is not None and res.pruned >= 0
    assert not res.failures.get("wrong")
    best = S.apply_best(tmp_path / "t.jsonl", f, "llvm -mcpu=haswell")
    assert T.structural_equal(best.func, res.best_schedule.func)
