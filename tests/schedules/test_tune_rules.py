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
from cuvil_tir.target import TargetKind, register_target, unregister_target
from schedules.tune.autotensorize import matches
from schedules.tune.errors import TuneError
from schedules.tune.measure import agree, random_args
from schedules.tune.rules import gpu_prune, rule_for, space_for
from schedules.tune.space import run_with_decisions

HASWELL = "llvm -mcpu=haswell"


def gemm(m, n=None, k=None, dtype="float32"):
    n, k = n or m, k or m
    A = T.placeholder((m, k), dtype, name="A")
    B = T.placeholder((k, n), dtype, name="B")
    r = T.reduce_axis((0, k), name="k")
    return T.create_prim_func([A, B, T.compute((m, n), lambda i, j: T.sum(
        A[i, r] * B[r, j], axis=r), name="C")])


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
    for seed in range(2):
        sch = S.Schedule(f, seed=seed)
        space(sch)
        assert gpu_prune(sch.func, "cuda") is None
        text = str(sch.func)
        assert 'thread="blockIdx.x"' in text and 'scope="shared"' in text
        c = np.zeros((16, 16), "float32")
        T.interpret(T.lower(sch, "cuda"), a, b, c, check_races=True)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


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
