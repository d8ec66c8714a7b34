"""The tuner's space by what the target declares (CPU, GPU, nothing), auto-tensorization
through the TensorIntrin registry, and the user-facing edges: a TuneError that says why
(symbolic sizes, a space that raises, a target that cannot run here), a best schedule
printed as Python that replays, candidate checks with a tolerance per dtype."""

from concurrent.futures import Executor, Future

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir.errors import LoweringError
from cuvil_tir.target import Axis, Memory, TargetKind, register_target, unregister_target
from schedules.tune.autotensorize import matches
from schedules.tune.errors import TuneError
from schedules.tune.measure import agree, random_args, reference_outputs
from schedules.tune.gpu_rules import gpu_axes
from schedules.tune.gpu_tensorcore import tensor_cores
from schedules.tune.rules import gpu_prune, rule_for, space_for
from schedules.tune.space import run_with_decisions
from tests.workloads import softmax

HASWELL = "llvm -mcpu=haswell"


def gemm(m, n=None, k=None, dtype="float32", acc=None):
    n, k = n or m, k or m
    A = T.placeholder((m, k), dtype, name="A")
    B = T.placeholder((k, n), dtype, name="B")
    r = T.reduce_axis((0, k), name="k")
    cast = (lambda x: x.astype(acc)) if acc else (lambda x: x)
    return T.create_prim_func([A, B, T.compute((m, n), lambda i, j: T.sum(
        cast(A[i, r]) * cast(B[r, j]), axis=r), name="C")])


class Instant(Executor):
    """Every candidate 'measures' at once, faster the more decisions it has."""

    _max_workers = 1

    def submit(self, fn, payload):
        fut = Future()
        fut.set_result({"kind": "ok", "seconds": 1e-3 / (1 + len(payload["trace"])),
                        "error": None, "info": {}})
        return fut


def test_the_rule_comes_from_the_declarations():
    assert rule_for("llvm") == rule_for("c") == "cpu"
    assert rule_for("cuda") == "gpu"   # thread axes and a shared memory


def test_gpu_candidates_run_correctly_under_the_gpu_interpreter():
    f = gemm(16)
    space = space_for(f, "cuda")
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((16, 16)).astype("float32") for _ in range(2))
    stages = set()
    for seed in range(4):     # virtual threads in each, 1 to 3 pipeline stages
        sch = S.Schedule(f, seed=seed)
        space(sch)
        assert gpu_prune(sch.func, "cuda") is None
        text = str(sch.func)
        assert 'thread="blockIdx.x"' in text and 'scope="shared"' in text
        assert 'thread="vthread.x"' in text
        stages.add("software_pipeline_stage" in text)
        c = np.zeros((16, 16), "float32")
        T.interpret(T.lower(sch, "cuda"), a, b, c, check_races=True)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    assert stages == {True, False}


def _labels(sch) -> list:
    """The labels of the first categorical of ``sch``'s trace (tile / tensor cores)."""
    first = next(i for i in sch.trace.insts if i.name == "sample_categorical")
    return list(first.inputs[0])


def test_an_fp16_gemm_is_offered_tensor_cores_found_by_description():
    f = gemm(32, dtype="float16", acc="float32")
    names = [tc.gemm for tc in tensor_cores(f, "C", "cuda", gpu_axes("cuda").tensor_axes)]
    # the wmma steps of every depth dividing K, the mma.sync warp tiles that fit
    assert {"cuda.wmma_16x16x16_f16f32", "cuda.wmma_16x16x32_f16f32",
            "cuda.mma_32x32x32_f16f32"} <= set(names)
    sch = S.Schedule(f, seed=0)
    space_for(f, "cuda")(sch)
    assert _labels(sch) == ["tile"] + [f"tensor:{n}" for n in names]
    # fp32 operands: no tensor-core step computes them
    assert tensor_cores(gemm(32), "C", "cuda", gpu_axes("cuda").tensor_axes) == []


def _tensorized(f, label, seed):
    """A candidate of the generated space whose first decision is ``label``."""
    sch = S.Schedule(f, seed=0)
    space = space_for(f, "cuda")
    space(sch)
    return run_with_decisions(space, f, [_labels(sch).index(label)], seed=seed)


@pytest.mark.parametrize("label,seed,n", [("tensor:cuda.wmma_16x16x16_f16f32", 0, 64),
                                          ("tensor:cuda.wmma_16x16x16_f16f32", 3, 64),
                                          ("tensor:cuda.mma_32x32x16_f16f32", 1, 64),
                                          ("tile", 2, 32)])
def test_fp16_gemm_candidates_run_correctly_under_the_gpu_interpreter(label, seed, n):
    f = gemm(n, dtype="float16", acc="float32")
    sch = _tensorized(f, label, seed)
    assert gpu_prune(sch.func, "cuda") is None
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal((n, n)).astype("float16") for _ in range(2))
    c = np.zeros((n, n), "float32")
    T.interpret(T.lower(sch, "cuda"), a, b, c, check_races=True)
    np.testing.assert_allclose(c, a.astype("float32") @ b.astype("float32"), rtol=1e-4,
                               atol=1e-3)


def test_tensorized_candidates_compile_through_nvcc():
    from tests.targets.cuda_helpers import compile_all
    f = gemm(128, dtype="float16", acc="float32")
    mods = [targets.build(_tensorized(f, label, seed), "cuda", name=f"tc{n}")
            for n, (label, seed) in enumerate([("tensor:cuda.wmma_16x16x32_f16f32", 0),
                                               ("tensor:cuda.mma_64x64x32_f16f32", 1)])]
    for arch, ptx in compile_all(mods).items():
        assert "wmma.mma.sync" in ptx and "mma.sync.aligned" in ptx, arch


def test_the_plain_gpu_tiling_has_vthreads_and_pipeline_stages():
    f = gemm(64)
    seen = set()
    for seed in range(6):
        sch = S.Schedule(f, seed=seed)
        space_for(f, "cuda")(sch)
        text = str(sch.func)
        assert 'thread="vthread.x"' in text      # the cuda kind declares vthread.x
        if "software_pipeline_stage" in text:
            seen.add(text.split("software_pipeline_stage\": (")[1].split(")")[0])
    assert seen == {"0, 0, 1", "0, 0, 2"}     # 2 and 3 stages of the two fetches


def test_softmax_candidates_fetch_for_each_reduction_and_run_correctly():
    # regression: the first reduction's shared copy of A was read by the second
    # reduction too, so it could not move into either kernel (CVL-E104 at lowering)
    w = softmax(8, 64)
    for seed in range(2):
        sch = S.Schedule(w.func, seed=seed)
        space_for(w.func, "cuda")(sch)
        arrays = w.make_inputs(np.random.default_rng(seed))
        T.interpret(T.lower(sch, "cuda"), *arrays, check_races=True)
        w.check(arrays)


def shared_copy(row_bytes: int):
    """``B = 2 * A`` on two float32 rows of ``row_bytes`` each, one block per row, the
    row staged in ``shared`` by 1024 threads."""
    A = T.placeholder((2, row_bytes // 4), name="A")
    f = T.create_prim_func([A, T.compute((2, row_bytes // 4), lambda i, j: A[i, j] * 2.0,
                                         name="B")])
    sch = S.Schedule(f)
    blk = sch.get_block("B")
    i, j = sch.get_loops(blk)
    _, tx = sch.split(j, [None, 1024])
    sch.bind(i, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.compute_at(sch.cache_read(blk, 0, "shared"), i)
    return sch


def test_gpu_prune_counts_each_pipeline_version_of_a_shared_tile():
    sch = shared_copy(128 * 1024)
    assert gpu_prune(sch.func, "cuda") is None              # one 128 KB tile fits
    sch.annotate(sch.get_loops(sch.get_block("B"))[0], "software_pipeline_stage", [0, 1])
    # a version for the tile being read, one for the next being written
    assert gpu_prune(sch.func, "cuda") == ("262144 bytes of shared memory, 166912 per "
                                           "block")


def test_the_gpu_rules_take_the_shared_capacity_of_the_targets_architecture():
    assert [gpu_axes(targets.Target("cuda", arch=a)).shared // 1024
            for a in ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_120")] \
        == [163, 99, 99, 227, 227, 227, 99]
    sm80, sm86, sm90 = (targets.Target("cuda", arch=a) for a in ("sm_80", "sm_86", "sm_90"))
    sch = shared_copy(200 * 1024)     # more than sm_80 offers, less than sm_90
    # before: the rules read the kind's declared 163 KB whatever the architecture
    assert gpu_prune(sch.func, sm90) is None
    assert gpu_prune(sch.func, sm80) == "204800 bytes of shared memory, 166912 per block"
    # the lowering refuses and accepts the same candidates
    targets.build(sch, sm90, name="big_shared")
    with pytest.raises(LoweringError, match=r"needs 204800 bytes of shared memory; sm_80 "
                                            r"offers 166912 per block"):
        targets.build(sch, sm80, name="big_shared")
    assert gpu_prune(shared_copy(128 * 1024).func, sm86) == ("131072 bytes of shared "
                                                              "memory, 101376 per block")


def test_gpu_prune_reads_each_axis_limit():
    A = T.placeholder((4096,), name="A")
    f = T.create_prim_func([A, T.compute((4096,), lambda i: A[i] + 1.0, name="B")])
    sch = S.Schedule(f)
    i, = sch.get_loops(sch.get_block("B"))
    bx, tz = sch.split(i, [None, 128])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tz, "threadIdx.z")
    assert gpu_prune(sch.func, "cuda") == "128 threads along threadIdx.z, at most 64"


def test_a_gpu_tuning_reference_is_computed_on_the_host():
    # regression: the untuned function was built for cuda, which refuses computation
    # outside kernels, so every GPU candidate failed its check before it ran
    f = gemm(32, 16, 8, dtype="float16", acc="float32")
    a, b, c = reference_outputs(f, "cuda", seed=3)
    np.testing.assert_allclose(c, a.astype("float32") @ b.astype("float32"), rtol=1e-5)


def test_gpu_prune_reads_the_declared_thread_limit():
    A = T.placeholder((4096,), name="A")
    f = T.create_prim_func([A, T.compute((4096,), lambda i: A[i] + 1.0, name="B")])
    sch = S.Schedule(f)
    i, = sch.get_loops(sch.get_block("B"))
    bx, tx = sch.split(i, [2, 2048])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    assert gpu_prune(sch.func, "cuda") == "2048 threads per block, at most 1024"


class Bare(TargetKind):
    """A kind that declares nothing a space could be generated from."""

    name = "test-tune-bare"

    def codegen(self, module, target):
        raise NotImplementedError   # never reached: the space is refused first

    def load(self, program, target):
        raise NotImplementedError


def test_a_target_that_declares_nothing_gets_a_tune_error():
    register_target(Bare(), replace=True)
    try:
        with pytest.raises(TuneError, match="declares nothing a space can be generated "
                           "from.*Pass space=your_schedule_function"):
            S.tune(gemm(8), None, target="test-tune-bare", trials=1, progress=False)
    finally:
        unregister_target("test-tune-bare")


class NoVirtual(Bare):
    """A GPU-like kind with one grid and one thread axis, shared memory, no vthread."""

    name = "test-tune-no-vthread"
    axes = (Axis("blockIdx.x", "grid", 0, 65535), Axis("threadIdx.x", "thread", 0, 256))
    max_threads = 256
    memories = (Memory("global"), Memory("shared", 16384), Memory("local"))


def test_the_gpu_levels_are_the_axes_a_kind_declares():
    register_target(NoVirtual(), replace=True)
    try:
        assert gpu_axes("test-tune-no-vthread").virtual is None
        f = gemm(32)
        sch = S.Schedule(f, seed=0)
        space_for(f, "test-tune-no-vthread")(sch)
        text = str(sch.func)
        assert 'thread="threadIdx.x"' in text and "vthread" not in text
        assert "tensor:" not in str(sch.trace)  # no per-warp memory, no tensor core
    finally:
        unregister_target("test-tune-no-vthread")


def test_symbolic_sizes_get_a_tune_error():
    n = T.size_var("n")
    A = T.placeholder((n,), name="A")
    f = T.create_prim_func([A, T.compute((n,), lambda i: A[i] + 1.0, name="B")])
    with pytest.raises(TuneError, match=r"parameter 'A' has the symbolic shape \(n,\)"):
        S.tune(f, None, trials=1, progress=False)


def raising_space(sch):
    raise ValueError("my space is broken")


def test_a_space_that_raises_gets_a_tune_error_with_the_message(capsys):
    with pytest.raises(TuneError, match=r"(?s)no candidate of 'main'.*replay: \d+, e\.g\. "
                       r"ValueError: my space is broken"):
        S.tune(gemm(8), raising_space, trials=2, executor=Instant(), progress=True)
    assert "ValueError: my space is broken" in capsys.readouterr().err  # printed too


class Failing(Executor):
    """Candidates fail to build, as a CUDA build does on a machine with no GPU."""

    _max_workers = 1

    def submit(self, fn, payload):
        fut = Future()
        fut.set_result({"kind": "build", "seconds": None, "info": {},
                        "error": "TargetError: no CUDA device"})
        return fut


def test_every_failure_kind_is_reported_with_an_example():
    with pytest.raises(TuneError, match=r"build: 2, e\.g\. TargetError: no CUDA device"):
        S.tune(gemm(16), None, target="cuda", trials=2, executor=Failing(),
               progress=False, remeasure=0)


def test_auto_tensorization_picks_up_a_registered_intrinsic(monkeypatch):
    # only the built-in intrinsics: other tests register their own (test.*) for good
    monkeypatch.setattr(S.TensorIntrin, "_REGISTRY", {
        k: v for k, v in S.TensorIntrin._REGISTRY.items() if not k.startswith("test.")})
    f = gemm(32)
    assert [m.name for m in matches(f, "C", HASWELL)] == ["cpu.gemm_4x8x4_f32"]
    space = space_for(f, HASWELL)
    sch = run_with_decisions(space, f, [1], seed=0)   # the first decision: 'tile' or the intrinsic
    assert sch.trace.decisions[min(sch.trace.decisions)] == 1
    text = str(sch.func)
    assert "T.Ramp(0, 1, 8)" in text and "T.parallel(" in text
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((32, 32)).astype("float32") for _ in range(2))
    c = np.zeros((32, 32), "float32")
    targets.build(sch, HASWELL)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_no_intrinsic_matches_another_computation():
    assert matches(gemm(32, dtype="float64"), "C", HASWELL) == []   # desc is float32
    assert matches(gemm(30), "C", HASWELL) == []                      # 30 % 4 != 0


def test_the_printed_best_schedule_replays_when_pasted():
    f = gemm(64)
    # random draws (seed 0): their best packs an operand (transform_layout's index map)
    res = S.tune(f, None, target=HASWELL, trials=3, executor=Instant(), progress=False,
                 remeasure=0, guided=False)
    code = res.best_python()
    assert "lambda" in code and ": ..." not in code   # index maps in full
    sch = S.Schedule(f)
    exec(code, {"sch": sch, "S": S, "T": T})
    assert T.structural_equal(sch.func, res.best_schedule.func)


def test_the_result_reports_failures_with_examples():
    res = S.TuneResult(trials=3, failures={"wrong": 1}, errors={"wrong": "output 'C'"},
                       best_schedule=object(), best_seconds=1e-3)
    assert res.report().splitlines() == ["3 trials, best 1.00 ms; 0 pruned before "
                                         "building", "  wrong: 1, e.g. output 'C'"]


@pytest.mark.parametrize("dtype,delta,ok", [
    ("float32", 1e-5, True), ("float32", 1e-2, False),
    ("float16", 5e-3, True), ("float16", 5e-2, False),
    ("float64", 1e-11, True), ("float64", 1e-6, False)])
def test_candidate_checks_use_a_tolerance_per_dtype(dtype, delta, ok):
    want = np.array([1.0, -2.0, 0.5], dtype)
    assert agree(want, want + np.asarray(delta, dtype), dtype) is ok


def test_bfloat16_outputs_compare_as_values_not_bits():
    f = T.create_prim_func([T.placeholder((4,), name="A", dtype="bfloat16")])
    bits, = random_args(f, 0)
    assert bits.dtype == np.uint16
    assert agree(bits, bits, "bfloat16")
    assert agree(bits, bits + np.uint16(1), "bfloat16")         # one ulp of bfloat16
    assert not agree(bits, bits ^ np.uint16(0x8000), "bfloat16")  # the sign flipped
