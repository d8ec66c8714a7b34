"""``S.tune`` on the toy NPU ranks candidates by simulated cycles (the accelerator
kind's own ``measure``): a small user space of staged tile size and single/double
buffering, every point measured, the fewest cycles wins."""

import numpy as np

import schedules as S
import targets
from targets.toolkit.npu.gemm import gemm, schedule_gemm
from targets.accel.examples.toy_npu import toy_npu

targets.register_target(toy_npu, replace=True)
N = 128
FAST = targets.Target("toy-npu", cflags="-O0")


def space(sch):
    """Staged tile 32 or 64, single or double buffered (module level: picklable)."""
    tile = sch.sample_categorical([32, 64], [0.5, 0.5])
    double = sch.sample_categorical([0, 1], [0.5, 0.5])
    schedule_gemm(sch, tile=tile, double=bool(double))


def test_tune_picks_the_candidate_with_the_fewest_simulated_cycles(tmp_path):
    # -O0: the candidates' C compiles faster; the simulated cycles do not depend on it
    res = S.tune(gemm(N), space=space, target=FAST, trials=8,
                 database=str(tmp_path / "npu.jsonl"), timeout_s=120, seed=0,
                 progress=False)
    measured = {s for _, s in res.history if s is not None}
    assert len(measured) == 4                 # the four points of the space, all distinct
    cycles = sorted(round(s * 1e9) for s in measured)
    assert all(abs(c - s * 1e9) < 1e-6 for c, s in zip(cycles, sorted(measured)))
    assert res.best_seconds == min(measured)
    mod = targets.build(res.best_schedule, FAST, name="tuned")
    args = [np.ones((N, N), "int8"), np.ones((N, N), "int8"), np.zeros((N, N), "int32")]
    assert toy_npu.measure(mod, args)[0] == res.best_seconds
    assert mod.stats["cycles"] == cycles[0]


VENDOR = '''
import targets
from targets.accel import DMA, Accelerator, Intrinsic, Memory
from targets.accel.examples.toy_npu import gemm_desc

S = ("vn.inp", "vn.wgt", "vn.acc")
vendor = Accelerator("vendor-npu", [Memory(S[0], 4, 8192, 128), Memory(S[1], 4, 8192, 128),
                                    Memory(S[2], 8, 8192, 512)], DMA(512, 64),
                     [Intrinsic("vendor.gemm", gemm_desc(scopes=S), dict(zip("ABC", S)),
                                "gemm", cycles=18)])
targets.register_target(vendor)          # at import, as docs/accelerators.md shows
'''


def vendor_space(sch):
    """Staged tile 32 or 64 on the vendor's device (module level: picklable)."""
    tile = sch.sample_categorical([32, 64], [0.5, 0.5])
    schedule_gemm(sch, tile=tile, gemm="vendor.gemm", zero=None,
                  scopes=("vn.inp", "vn.wgt", "vn.acc"))


def test_tune_a_device_whose_file_registers_it_beside_the_script(tmp_path, monkeypatch):
    """Issue 23 defect 5: the measurement process imported the vendor's module (which
    registers the device) and registered it again, and did not see the tuner's
    sys.path: every candidate failed as 'replay'."""
    (tmp_path / "vendor_npu_file.py").write_text(VENDOR)
    monkeypatch.syspath_prepend(str(tmp_path))
    import vendor_npu_file
    try:
        res = S.tune(gemm(64), space=vendor_space, target="vendor-npu", trials=2,
                     database=str(tmp_path / "v.jsonl"), timeout_s=120, seed=0,
                     progress=False)
        assert len({s for _, s in res.history if s is not None}) == 2, res
        assert res.best_seconds is not None
    finally:
        targets.unregister_target(vendor_npu_file.vendor.name)


def test_tune_binds_tiles_to_the_cores_of_a_multicore_npu(tmp_path):
    """Issue 24 item 1: on a kind with several cores the generated space binds the
    outer output tile loop to the core axis (how many cores is a decision), staging
    through the hierarchy the description declares (L1 before L0A/L0B, UB after L0C);
    a few trials find a multi-core schedule, the fastest."""
    from targets.accel.examples.ascend_like import ascend
    targets.register_target(ascend, replace=True)
    fast = targets.Target("ascend-like", cflags="-O0")
    res = S.tune(gemm(N), target=fast, trials=6, database=str(tmp_path / "asc.jsonl"),
                 timeout_s=120, seed=0, progress=False)
    assert res.best_seconds is not None, res
    mod = targets.build(res.best_schedule, fast, name="tuned")
    rng = np.random.default_rng(0)
    a, b = (rng.integers(-128, 128, (N, N)).astype("int8") for _ in range(2))
    c = np.zeros((N, N), "int32")
    assert ascend.measure(mod, [a, b, c])[0] == res.best_seconds
    np.testing.assert_array_equal(c, a.astype("int32") @ b.astype("int32"))
    assert mod.stats["cores_used"] > 1
    src = mod.get_source("c")
    assert "ascend_like_core(" in src and "load_cbuf_to_ca(" in src and "mmad(" in src


def test_the_staged_space_spreads_the_same_tiles_over_the_cores():
    """The space's core decision on the Ascend-like NPU: the same 16-row tiles on one
    core and on four (decisions: depth 2, cores, then the tiles), bit-exact, and the
    four-core candidate over twice as fast."""
    from schedules.tune.rules import space_for
    from schedules.tune.space import run_with_decisions
    from targets.accel.examples.ascend_like import ascend
    targets.register_target(ascend, replace=True)
    f = gemm(N)
    space = space_for(f, "ascend-like")
    rng = np.random.default_rng(1)
    a, b = (rng.integers(-128, 128, (N, N)).astype("int8") for _ in range(2))
    cycles = {}
    for cores, pick in ((1, 0), (4, 2)):
        mod = targets.build(run_with_decisions(space, f, [1, pick, 0, 2, 2]), "ascend-like")
        c = np.zeros((N, N), "int32")
        mod(a, b, c)
        np.testing.assert_array_equal(c, a.astype("int32") @ b.astype("int32"))
        assert mod.stats["cores_used"] == cores
        cycles[cores] = mod.stats["cycles"]
    assert cycles[4] * 2 < cycles[1], cycles
