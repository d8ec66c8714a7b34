"""The generated search space and the target-aware pruning of candidates."""

import os

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from schedules.tune.space import (Machine, generated_space, machine_of,
                                   parallel_counts, prune, register_tiles,
                                   run_with_decisions)

HASWELL = targets.Target("llvm", mcpu="haswell")


def _gemm(n=32, m=None, kk=None, dtype="float32"):
    m, kk = m or n, kk or n
    A = T.placeholder((m, kk), dtype, name="A")
    B = T.placeholder((kk, n), dtype, name="B")
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
    """(extent, kind) of the non-unit loops above ``block`` (a reduction's update once
    it is decomposed: TensorIR's ``<block>_update``), outer to inner."""
    from cuvil_tir.analysis import tree
    names = {b.block.name for b in tree.blocks_under(func.body)}
    path = tree.find_block(func, block if block in names else block + "_update")
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


def _point(space, f, label, *tiles):
    """The candidate whose register tile is ``label`` (e.g. "6x16") and whose outer
    tilings are ``tiles``: decisions in the order the space samples them, the parallel
    loop's ``[outer, inner]`` turned into its index among the counts offered."""
    decisions = [label, *tiles]
    for n, d in enumerate(decisions):
        if isinstance(d, list) or n == 0:
            sch = run_with_decisions(space, f, decisions[:n])  # what the n-th offers
            inst = [i for i in sch.trace.insts if i.name.startswith("sample_")][n]
            if inst.name == "sample_categorical":
                decisions[n] = inst.inputs[0].index(d if n == 0 else d[0])
    return run_with_decisions(space, f, decisions)


def test_tutorial04_schedule_is_a_point_of_the_space():
    """Tutorial 04's 6 x 16 micro-kernel on haswell, on sizes it does not divide: A and
    B packed into zero-padded panels, the register tile in a local accumulator,
    parallel over column panels, and its blocks of panels, all as decisions."""
    M, N, K = 50, 60, 16
    Mp, Np = 54, 64
    f = _gemm(N, M, K)
    space = generated_space(f, machine_of(HASWELL))
    t04 = _tutorial("04_fast_matmul_cpu.py")
    ours = _point(space, f, "6x16", [Mp // 6, 1], [Np // 16, 1])
    theirs = t04.gemm_schedule(M, N, K, mr=6, nr=16, jb=1)
    assert prune(ours.func, machine_of(HASWELL)) is None
    assert _nest(ours.func, "C") == _nest(theirs.func, "Cp") == [
        (Np // 16, "parallel"), (Mp // 6, "serial"), (K, "serial"), (6, "unrolled"),
        (16, "vectorized")]
    assert _shapes(ours.func) == _shapes(theirs.func) == [(Np // 16, K, 16), (Mp // 6, K, 6)]
    blocked = _point(space, f, "6x16", [Mp // 6, 1], [Np // 32, 2])
    assert _nest(blocked.func, "C") == _nest(t04.gemm_schedule(M, N, K, 6, 16, jb=2).func,
                                             "Cp")
    mod = targets.build(ours, HASWELL)
    assert 'T.allocate((96,), "float32", scope="local")' in str(mod.get_source("tir"))
    assert "alloca [96 x float]" not in mod.get_source("ll-opt")      # registers
    assert "vfmadd231ps" in mod.get_source("asm")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((M, K), "float32"), rng.standard_normal((K, N), "float32")
    for sch in (ours, blocked):
        c = np.zeros((M, N), "float32")
        targets.build(sch, HASWELL)(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_integer_operands_are_packed_into_panels_too():
    """The pack's pad value takes the operand's dtype (a float 0.0 is refused for an
    int32 buffer, and the rule would be skipped silently)."""
    M, N, K = 50, 60, 16
    Mp, Np = 54, 64
    f = _gemm(N, M, K, dtype="int32")
    space = generated_space(f, machine_of(HASWELL))
    ours = _point(space, f, "6x16", [Mp // 6, 1], [Np // 16, 1])
    assert _shapes(ours.func) == [(Np // 16, K, 16), (Mp // 6, K, 6)]
    rng = np.random.default_rng(2)
    a, b = rng.integers(-50, 50, (M, K), "int32"), rng.integers(-50, 50, (K, N), "int32")
    c = np.zeros((M, N), "int32")
    targets.build(ours, HASWELL)(a, b, c)
    np.testing.assert_array_equal(c, a @ b)


def _allocated(func):
    return {b.name: b.dtype for b in func.body.block.alloc_buffers if b.scope == "global"}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_gemm_packs_may_be_stored_widened_to_float32(dtype):
    """A bf16/fp16 GEMM accumulating in fp32 draws whether its packs store the operands
    already converted (``widen``: the inner loop reads fp32 panels, no conversion per
    load) or as they are; padded panels (50 x 60 on a 6 x 16 tile) are zero-filled
    either way."""
    from schedules.tune.measure import agree, random_args
    from schedules.tune.networks import matmul
    from schedules.tune.space import PACK_DTYPES
    f = matmul(50, 60, 16, dtype, "float32")
    space = generated_space(f, machine_of(HASWELL))
    want = random_args(f, 0)
    T.interpret(f, *want)
    for choice, packs in (("widened", "float32"), ("operand", dtype)):
        ours = _point(space, f, "6x16", PACK_DTYPES.index(choice), [9, 1], [4, 1])
        drawn = [i for i in ours.trace.insts if i.name == "sample_categorical"][1]
        assert list(drawn.inputs[0]) == list(PACK_DTYPES)
        assert _allocated(ours.func) == {"A_global": packs, "B_global": packs}
        assert _shapes(ours.func) == [(4, 16, 16), (9, 16, 6)]
        assert sum(i.name == "widen" for i in ours.trace.insts) == (2 if packs != dtype
                                                                    else 0)
        got = random_args(f, 0)
        targets.build(ours, HASWELL)(*got)
        assert agree(want[2], got[2], "float32")


def test_float32_and_int8_gemm_packs_keep_their_dtype_and_draw_nothing_more():
    from schedules.tune.networks import matmul
    for dtype, acc in (("float32", None), ("int8", "int32")):
        f = matmul(50, 60, 16, dtype, acc)
        ours = _point(generated_space(f, machine_of(HASWELL)), f, "6x16", [9, 1], [4, 1])
        assert _allocated(ours.func) == {"A_global": dtype, "B_global": dtype}
        assert not any(i.name == "widen" for i in ours.trace.insts)


def test_register_tiles_follow_avx2_and_avx512():
    avx2, avx512 = machine_of(HASWELL), machine_of("llvm -mcpu=skylake-avx512")
    on2 = register_tiles([64, 64], [True, True], avx2, 8)
    on512 = register_tiles([64, 64], [True, True], avx512, 16)
    assert (6, 16) in on2 and (4, 24) in on2 and (13, 8) in on2
    assert (8, 16) not in on2 and (7, 16) not in on2              # 19 and 17 registers
    assert (12, 32) in on512 and (8, 16) in on512
    assert (16, 32) not in on512                                  # 35 registers
    assert all(c % 16 == 0 for _, c in on512)                     # whole vectors only
    # an axis that cannot be padded takes divisors
    assert {r for r, _ in register_tiles([12, 64], [False, True], avx2, 8)} == {1, 2, 3, 4, 6,
                                                                                12}
    # a hand-made 8 x 16 tile is what the pruning refuses on AVX2 and keeps on AVX-512
    f = _gemm(64)
    sch = S.Schedule(f)
    i, j, k = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, 8])
    jo, ji = sch.split(j, [None, 16])
    sch.reorder(io, jo, k, ii, ji)
    sch.reverse_compute_at(sch.cache_write(sch.get_block("C"), 0, "local"), jo)
    sch.unroll(ii)
    sch.vectorize(ji)
    assert "needs 19 vector registers, 16 exist" in prune(sch.func, avx2)
    assert prune(sch.func, avx512) is None


def test_sampled_candidates_are_never_pruned():
    """The space draws legal decisions only: nothing a draw makes is refused."""
    for target in (HASWELL, "llvm -mcpu=skylake-avx512"):
        m = machine_of(target)
        for f in (_gemm(1024), _gemm(100, 70, 50)):
            space = generated_space(f, m)
            for seed in range(6):
                sch = S.Schedule(f, seed=seed)
                space(sch)
                assert prune(sch.func, m) is None, sch.trace.decisions


def test_new_decisions_rerun_the_space():
    """The search re-runs the space with a candidate's decisions: the same decisions
    give the same schedule, and a decision that no longer fits (a new register tile
    changes the extent the next tiling divides) is drawn afresh instead of failing."""
    f = _gemm(48, 48, 32)
    space = generated_space(f, machine_of(HASWELL))
    for seed in range(1, 4):
        fresh = S.Schedule(f, seed=seed)
        space(fresh)
        again = run_with_decisions(space, f, fresh.trace.decisions)
        assert T.structural_equal(again.func, fresh.func)
    six = _point(space, f, "6x16", [2, 4], [3, 1])
    other = run_with_decisions(space, f, {**six.trace.decisions, 2: 0})   # 1x8
    assert list(other.trace.decisions.values())[0] == 0
    assert _nest(other.func, "C")[-1] == (8, "vectorized")


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
    sch = _point(space, f, "4x1x8", [1, 2], [6, 1], [1, 1])
    assert prune(sch.func, m) is None
    assert _nest(sch.func, "out")[-2:] == [(4, "unrolled"), (8, "vectorized")]
    assert _shapes(sch.func)[0] == (2, 8, 3, 3, 4)          # weights packed per 4 rows
    y = np.zeros((8, 6, 8), "float32")
    targets.build(sch, HASWELL)(x, w, y)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    # no width of 6 holds a vector of 8: the output channels are vectorised instead,
    # with the accumulator laid out channels-innermost and the weights packed by 16
    f = _conv(c=8, k=16, h=4, w=6)
    sch = _point(generated_space(f, m), f, "1x3x16", [2, 2], [1, 2], [1, 1], 0)
    assert prune(sch.func, m) is None
    assert _nest(sch.func, "out")[-2:] == [(3, "unrolled"), (16, "vectorized")]
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


def test_the_parallel_loop_has_an_iteration_per_core_where_it_can():
    """A loaded machine can time a one-iteration parallel loop as fast as a full one;
    on an idle one it leaves cores idle, so the space does not offer it."""
    assert parallel_counts(12, 4) == [4, 6, 12] and parallel_counts(3, 4) == [1, 3]
    m = Machine(256, 16, 32768, 1 << 20, 4)
    f = _gemm(128)
    for seed in range(6):
        sch = S.Schedule(f, seed=seed)
        generated_space(f, m)(sch)
        first = _nest(sch.func, "C")[0]
        assert first[1] == "parallel" and first[0] >= 4, (seed, first)


def test_space_draws_the_register_tiling_over_a_small_generic_micro_kernel():
    # the fp32 GEMM's categorical offers the register tiling and the 4 x 8
    # cpu.gemm_4x8x4_f32 intrinsic; drawn equally, half of a random search went to
    # the intrinsic, whose candidates ran 13x slower than the best at 512^3
    from schedules.tune.rules import space_for
    f = _gemm(512)
    space = space_for(f, "llvm -mcpu=znver4")
    picks = []
    for seed in range(40):
        sch = S.Schedule(f, seed=seed)
        space(sch)
        first = next(i for i in sch.trace if i.name == "sample_categorical")
        picks.append(sch.trace.decisions[list(sch.trace).index(first)])
    assert picks.count(0) >= 32, picks   # index 0 is "tile"


def test_row_tiles_never_pad_past_the_rows():
    """A GEMV's one row is not padded to a register tile of 16 rows (16 times the
    work); rows pad by at most a quarter of their extent."""
    avx512 = machine_of("llvm -mcpu=skylake-avx512")
    assert {r for r, _ in register_tiles([1, 1024], [True, True], avx512, 16)} == {1}
    assert {r for r, _ in register_tiles([4, 1024], [True, True], avx512, 16)} == {1, 2, 4}
    rows = {r for r, _ in register_tiles([16, 1024], [True, True], avx512, 16)}
    assert {16, 8, 6, 9, 10}.issubset(rows) and not rows & {7, 11, 12, 13, 15}
    # the vector axis still pads up to whole vectors
    assert (1, 64) in register_tiles([1, 1000], [True, True], avx512, 16)


def _labels(sch):
    """The space's decisions, categoricals by their option."""
    return [i.inputs[0][d] if i.name == "sample_categorical" else d
            for k, i in enumerate(sch.trace.insts)
            for d in [sch.trace.decisions.get(k)] if d is not None]


def test_an_operand_read_by_one_register_tile_is_not_packed():
    """A skinny GEMM's B panel is read by one register tile: packing it copies the
    whole operand for nothing (a GEMV ran at 0.23x numpy).  It stays packed where
    several tiles read it, or where its axis is padded (only a pack is zero-filled)."""
    m = machine_of("llvm -mcpu=skylake-avx512")
    rng = np.random.default_rng(3)
    for rows, n in ((1, 256), (1, 200), (4, 256), (32, 256)):
        f = _gemm(n, rows, 32)
        space = generated_space(f, m)
        for seed in range(4):
            sch = S.Schedule(f, seed=seed)
            space(sch)
            tile = _labels(sch)[0]
            r, cols = (int(x) for x in tile.split("x"))
            want = [(-(-rows // r), 32, r)] + ([(-(-n // cols), 32, cols)]
                                               if r < rows or n % cols else [])
            assert _shapes(sch.func) == sorted(want), tile
            a = rng.standard_normal((rows, 32), "float32")
            b = rng.standard_normal((32, n), "float32")
            c = np.zeros((rows, n), "float32")
            targets.build(sch, "llvm -mcpu=skylake-avx512")(a, b, c)
            np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_a_gemv_is_streamed_over_its_columns():
    """A GEMV's reduction sweeps outside a vector loop over the columns (each row of B
    read once, contiguously), the last vector guarded where N has no whole vectors;
    never pruned (one reduction step's operands fit L1, not the sweep's), correct,
    and the prior ranks it above the register tiles (4 vectors of columns at most,
    B read in 256-byte pieces a row apart: 0.27x numpy against 0.85x on 1x1000x2048)."""
    from schedules.tune.rules import space_for
    from schedules.tune.features import features
    target = "llvm -mcpu=skylake-avx512"
    m = machine_of(target)
    rng = np.random.default_rng(4)
    for n, k in ((1000, 64), (256, 2048)):
        f = _gemm(n, 1, k)
        space = space_for(f, target)
        streamed = run_with_decisions(space, f, [{"value": "stream"}, {"value": 16},
                                                 {"value": 2 if n == 256 else 3}])
        tiled = run_with_decisions(space, f, [{"value": "tile"}, {"value": "1x64"},
                                              [1, 1], {"value": 2}])
        assert _labels(streamed)[0] == "stream" and _labels(tiled)[0] == "tile"
        assert prune(streamed.func, m) is None
        assert features(streamed, m)[-1] > features(tiled, m)[-1]
        assert [kind for _, kind in _nest(streamed.func, "C")] == [
            "parallel", "serial", "serial", "vectorized"]
        a, b = rng.standard_normal((1, k), "float32"), rng.standard_normal((k, n), "float32")
        c = np.zeros((1, n), "float32")
        targets.build(streamed, target)(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-3)
    # four rows are a register tile's work: no streaming offered
    four = space_for(_gemm(256, 4, 64), target)
    sch = S.Schedule(_gemm(256, 4, 64), seed=0)
    four(sch)
    assert all("stream" not in i.inputs[0] for i in sch.trace.insts
               if i.name == "sample_categorical")


def test_a_draw_on_the_host_does_not_follow_the_process_affinity(monkeypatch):
    """Regression (issue 24): the host's cores were the process's affinity, which may
    change while the process runs (a daemon pinning niced processes to one CPU a
    second or two after they start): the same seed on ``llvm`` drew other tiles
    before and after, and a replay in a process pinned otherwise built other IR."""
    f = _gemm(64)
    drawn = []
    for cpus in ({0}, {0, 1}):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, cpus=cpus: cpus,
                            raising=False)
        assert machine_of(targets.Target("llvm")).cores == (os.cpu_count() or 1)
        sch = S.Schedule(f, seed=0)
        generated_space(f, targets.Target("llvm"))(sch)    # as a replay builds it
        drawn.append(sch.func)
    assert T.structural_equal(*drawn)
