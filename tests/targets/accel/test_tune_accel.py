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
