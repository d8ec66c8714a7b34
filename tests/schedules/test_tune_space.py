"""The generated search space and the target-aware pruning of candidates."""

import numpy as np

import cuvil_tir as T
import schedules as S
import targets
from schedules.tune.space import (Machine, generated_space, machine_of, prune,
                                   run_with_decisions)

HASWELL = targets.Target("llvm", mcpu="haswell")


def _gemm(n=32, m=None, kk=None):
    m, kk = m or n, kk or n
    A = T.placeholder((m, kk), name="A")
    B = T.placeholder((kk, n), name="B")
    k = T.reduce_axis((0, kk), name="k")
    C = T.compute((m, n), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
    return T.create_prim_func([A, B, C])


def _tutorial(filename):
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[2] / "tutorials" / filename
    spec = importlib.util.spec_from_file_location(filename[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _nest(func, block):
    """(extent, kind) of the non-unit loops above ``block``, outer to inner."""
    from cuvil_tir.analysis import tree
    path = tree.find_block(func, block)
    return [(lp.extent.value, lp.kind) for _, lp in tree.loops_above(func, path)
            if lp.extent.value > 1]


def _shapes(func):
    return sorted(tuple(int(d) for d in b.shape) for b in func.body.block.alloc_buffers
                  if b.scope == "global")


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


def test_tutorial04_schedule_is_a_point_of_the_space():
    """Tutorial 04's 6 x 16 micro-kernel on haswell: packed A and B panels, the
    register tile in a local accumulator, parallel over column panels, as decisions."""
    M, N, K = 48, 32, 16
    f = _gemm(N, M, K)
    space = generated_space(f, machine_of(HASWELL))
    ours = run_with_decisions(space, f, [[1, M // 6, 6], [N // 16, 1, 16], [1, K]])
    theirs = _tutorial("04_fast_matmul_cpu.py").gemm_schedule(M, N, K, mr=6, nr=16)
    assert prune(ours.func, machine_of(HASWELL)) is None
    assert _nest(ours.func, "C") == _nest(theirs.func, "Cp") == [
        (N // 16, "parallel"), (M // 6, "serial"), (K, "serial"), (6, "unrolled"),
        (16, "vectorized")]
    assert _shapes(ours.func) == _shapes(theirs.func) == [(N // 16, K, 16), (M // 6, K, 6)]
    mod = targets.build(ours, HASWELL)
    assert 'T.allocate((96,), "float32", scope="local")' in str(mod.get_source("tir"))
    assert "alloca [96 x float]" not in mod.get_source("ll-opt")      # registers
    assert "vfmadd231ps" in mod.get_source("asm")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((M, K), "float32"), rng.standard_normal((K, N), "float32")
    c = np.zeros((M, N), "float32")
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_register_tiles_pruned_for_avx2_and_avx512():
    f = _gemm(64)
    space = generated_space(f, machine_of(HASWELL))
    avx2, avx512 = machine_of(HASWELL), machine_of("llvm -mcpu=skylake-avx512")

    def point(rows, cols):
        return run_with_decisions(space, f, [[1, 64 // rows, rows], [64 // cols, 1, cols],
                                             [4, 16]]).func
    assert "needs 19 vector registers, 16 exist" in prune(point(8, 16), avx2)
    assert prune(point(8, 16), avx512) is None               # 8 accumulators of 32
    assert prune(point(4, 16), avx2) is None
    assert "not a multiple of 16 lanes" in prune(point(4, 8), avx512)
    assert "needs 35 vector registers, 32 exist" in prune(point(16, 32), avx512)


def test_the_space_replays_under_new_decisions():
    """Replaying one candidate's trace with another's decisions (what the search does)
    never fails and gives the same loop nest as running the space with them."""
    f = _gemm(48, 48, 32)
    space = generated_space(f, machine_of(HASWELL))
    base = S.Schedule(f, seed=0)
    space(base)
    for seed in range(1, 6):
        fresh = S.Schedule(f, seed=seed)
        space(fresh)
        again = base.trace.with_decisions(fresh.trace.decisions).apply(f)
        assert _nest(again.func, "C") == _nest(fresh.func, "C")


def _conv(c=8, k=8, h=6, w=8):
    return _tutorial("06_autotune.py").conv2d(c, k, h, w)    # 3x3, pad 1, as benchmarks


def test_conv2d_and_fused_epilogue_are_tuned_by_the_same_rules():
    f = _conv()
    m = machine_of(HASWELL)
    space = generated_space(f, m)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 6, 8), "float32")
    w = rng.standard_normal((8, 8, 3, 3), "float32")
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    want = np.einsum("cyxrs,kcrs->kyx", np.lib.stride_tricks.sliding_window_view(
        xp, (3, 3), axis=(1, 2)), w)
    sch = run_with_decisions(space, f, [[1, 2, 4], [6, 1, 1], [1, 1, 8], [2, 4], [1, 3],
                                        [1, 3]])
    assert prune(sch.func, m) is None
    assert _nest(sch.func, "out")[-2:] == [(4, "unrolled"), (8, "vectorized")]
    assert _shapes(sch.func)[0] == (2, 8, 3, 3, 4)          # weights packed per 4 rows
    y = np.zeros((8, 6, 8), "float32")
    targets.build(sch, HASWELL)(x, w, y)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    # no width of 6 holds a vector of 8: the output channels are vectorised instead,
    # with the accumulator laid out channels-innermost and the weights packed by 16
    f = _conv(c=8, k=16, h=4, w=6)
    sch = run_with_decisions(generated_space(f, m), f, [[2, 2, 1], [1, 1, 6], [1, 1, 16],
                                                        [2, 4], [1, 3], [1, 3], [1, 8]])
    assert prune(sch.func, m) is None
    assert _nest(sch.func, "out")[-2:] == [(6, "unrolled"), (16, "vectorized")]
    local = [tuple(int(d) for d in b.shape) for b in sch.func.body.block.alloc_buffers
             if b.scope == "local"]
    assert local == [(4, 6, 16)] and (1, 8, 3, 3, 16) in _shapes(sch.func)
    x, w = rng.standard_normal((8, 4, 6), "float32"), rng.standard_normal((16, 8, 3, 3),
                                                                          "float32")
    want = np.einsum("cyxrs,kcrs->kyx", np.lib.stride_tricks.sliding_window_view(
        np.pad(x, ((0, 0), (1, 1), (1, 1))), (3, 3), axis=(1, 2)), w)
    y = np.zeros((16, 4, 6), "float32")
    targets.build(sch, HASWELL)(x, w, y)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    # an elementwise consumer is inlined into the accumulator's copy-out
    A, B, bias = (T.placeholder((16, 16), name="A"), T.placeholder((16, 16), name="B"),
                  T.placeholder((16,), name="bias"))
    k = T.reduce_axis((0, 16), name="k")
    C = T.compute((16, 16), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = T.compute((16, 16), lambda i, j: T.max(C[i, j] + bias[j], T.const(0.0)), name="D")
    g = T.create_prim_func([A, B, bias, D])
    sch = S.Schedule(g, seed=0)
    generated_space(g, m)(sch)
    assert 'T.block("D")' not in str(sch.func) and 'T.block("C_local")' in str(sch.func)
    a, b, c = (rng.standard_normal(s, "float32") for s in ((16, 16), (16, 16), (16,)))
    d = np.zeros((16, 16), "float32")
    targets.build(sch, HASWELL)(a, b, c, d)
    np.testing.assert_allclose(d, np.maximum(a @ b + c, 0), rtol=1e-4, atol=1e-4)
