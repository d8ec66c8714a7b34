"""The staged rule: an accelerator's space from its declarations (memories and the
operand memories of its intrinsics), staged tiles that fit, buffering depth, tuned on
the simulator's cycles and checked exactly."""

from concurrent.futures import Executor, Future

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir.target import Memory
from schedules.tune.errors import TuneError
from schedules.tune.measure import run_candidate
from schedules.tune.rules import space_for
from schedules.tune.space import run_with_decisions
from schedules.tune.staged import Sizes, _footprints, staged_match, staged_space
from targets.accel.examples.toy_npu import toy_npu
from targets.toolkit.npu.gemm import gemm

NPU = "toy-npu"


@pytest.fixture(autouse=True, scope="module")
def npu():
    targets.register_target(toy_npu, replace=True)


def run(f, sch):
    rng = np.random.default_rng(0)
    m, k = (int(d.value) for d in f.params[0].shape)
    n = int(f.params[1].shape[1].value)
    a = rng.integers(-128, 128, (m, k)).astype("int8")
    b = rng.integers(-128, 128, (k, n)).astype("int8")
    c = np.zeros((m, n), "int32")
    mod = targets.build(sch, NPU)
    mod(a, b, c)
    np.testing.assert_array_equal(c, a.astype("int32") @ b.astype("int32"))
    return toy_npu.measure(mod, [a, b, c])[0]


def test_the_space_stages_tiles_into_the_intrinsics_memories_and_runs_exactly():
    f = gemm(64, 32, 48)
    assert dict(staged_match(f, NPU)[1].scopes) == {"A": "npu.inp", "B": "npu.wgt",
                                                    "C": "npu.acc"}
    space = space_for(f, NPU)
    # depth 2, then the largest tile of each loop: 64 of 64, 32 of 32, 48 of 48
    sch = run_with_decisions(space, f, [1, 2, 1, 1])
    text = str(sch.func)
    assert "toy_npu_gemm_16x16x16" in str(targets.build(sch, NPU).get_source("c"))
    assert "software_pipeline_stage" in text and "npu.wgt" in text
    run(f, sch)


def test_double_buffering_the_same_tiles_takes_fewer_simulated_cycles():
    f = gemm(128)
    space = space_for(f, NPU)
    single = run(f, run_with_decisions(space, f, [0, 2, 2, 2]))   # 64^3 tiles
    double = run(f, run_with_decisions(space, f, [1, 2, 2, 2]))
    assert double < single


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2 ** 31 - 1), st.sampled_from([(256, 256, 256), (64, 512, 128),
                                                      (16, 1024, 32)]))
def test_every_drawn_tile_divides_its_loop_and_fits_the_memories(seed, shape):
    m, n, k = shape
    f = gemm(m, n, k)
    sizes = Sizes(f, *staged_match(f, NPU), NPU)
    tiles, depth, cores = sizes.sample(S.Schedule(f, seed=seed))
    assert all(t % 16 == 0 and e % t == 0 for t, e in zip(tiles, (m, n, k)))
    assert sizes.fits(tiles, depth) and cores == 1     # the toy NPU has one core


class InProcess(Executor):
    """Measures each candidate here (run_candidate without the isolating child)."""

    _max_workers = 1

    def submit(self, fn, payload):
        out = []
        run_candidate(payload, out.append)
        kind, value, info = out[-1]
        fut = Future()
        fut.set_result({"kind": kind, "seconds": value if kind == "ok" else None,
                        "error": None if kind == "ok" else value, "info": info})
        return fut


def test_tuning_on_the_simulator_checks_every_candidate_and_keeps_the_fastest():
    f = gemm(64)
    res = S.tune(f, None, target=NPU, trials=4, executor=InProcess(), progress=False,
                 remeasure=0)
    assert res.failures == {} and res.trials == 4
    assert res.best_seconds == min(s for _, s in res.history)
    assert run(f, res.best_schedule) == res.best_seconds
    assert "sch.cache_read(" in res.best_python()


def test_memories_too_small_for_the_intrinsics_tile_are_a_tune_error(monkeypatch):
    monkeypatch.setattr(toy_npu, "memories", tuple(
        Memory(m.scope, 512) if m.scope == "npu.acc" else m for m in toy_npu.memories))
    f = gemm(32)
    with pytest.raises(TuneError, match=r"no tile of block 'C' fits the memories of "
                       r"'toy-npu' \(even the intrinsic's own tile\)"):
        staged_space(f, NPU, *staged_match(f, NPU))


def test_an_operand_not_indexed_by_block_iterators_is_a_tune_error():
    A = T.placeholder((8, 16), "int8", name="A")
    r = T.reduce_axis((0, 8), name="k")
    f = T.create_prim_func([A, T.compute((8,), lambda i: T.sum(
        T.cast(A[i, 2 * r], "int32"), axis=r), name="C")])
    block = f.body.block.body.body.body.block
    with pytest.raises(TuneError, match=r"operand 'A' of block 'C' is indexed by .*not "
                       r"by one block iterator"):
        _footprints(block, {"A": "npu.inp", "C": "npu.acc"})


def test_a_target_with_no_memories_of_its_own_has_no_staged_match():
    assert staged_match(gemm(32), "llvm") is None
