"""benchmarks/tune.py's options (the tuning itself runs in CI's quick mode)."""

import pytest

from benchmarks import tune as B


def test_cores_zero_keeps_the_hosts_target_and_a_negative_count_is_refused():
    assert str(B.use_cores(0)) == "llvm"
    with pytest.raises(SystemExit, match=r"--cores: expected a count of cores >= 1 "
                                         r"\(0: the host's\), found -2"):
        B.use_cores(-2)


def test_a_warm_sample_is_the_mean_of_the_calls_that_fill_it():
    calls = []
    (t,) = B.interleaved([lambda: calls.append(1)], 2)
    assert t < 0.02 and len(calls) > 4   # a warm-up call, then calls filling 20 ms, twice


@pytest.mark.parametrize("dtypes, path", [
    (("int8", "int8", "int32"), "vpdpbusd"),
    (("bfloat16", "bfloat16", "float32"), "vdpbf16ps")])
def test_the_row_names_the_dot_instruction_a_tuned_gemm_runs_on(dtypes, path):
    import schedules as S
    from schedules.intrinsics.x86_gemm import gemm_func
    from schedules.tune.dot_rule import dot_choices
    f = gemm_func(32, 32, 32, *dtypes)
    sch = S.Schedule(f)
    assert B.path_of(sch.func) == "fma"         # unscheduled: no dot product
    (choice,) = dot_choices(f, "C", "llvm -mcpu=znver4")
    choice.apply(sch, "C")
    assert B.path_of(sch.func) == path
    peaks = {"fp32": 400e9, "int8": 1600e9, "bf16": 200e9}
    kind = "int8" if path == "vpdpbusd" else "bf16"
    assert B.share_of_peak(peaks[kind] / 4, dtypes[0], path, peaks).split() == ["25.0%", path]
    # a bf16 GEMM left on FMAs is measured against the FMA's peak
    assert B.share_of_peak(100e9, "bfloat16", "fma", peaks).split() == ["25.0%", "fma"]


def test_the_summary_says_how_many_tuned_gemms_chose_the_dot_product(capsys):
    rows = [{"label": "a", "dtype": "float32", "ratio": 1.0, "rate": 100.0, "path": "fma"},
            {"label": "a", "dtype": "bfloat16", "ratio": 0.8, "rate": 80.0, "path": "fma"},
            {"label": "a", "dtype": "int8", "ratio": 3.0, "rate": 300.0, "path": "vpdpbusd"}]
    B.summary(rows, [], {"fp32": 400.0, "int8": 1600.0, "bf16": 200.0})
    out = capsys.readouterr().out
    assert ("int8 GEMM operation rate / our fp32 rate: geomean 3.00x (goal >= 2.5x with "
            "VNNI); on vpdpbusd 1 of 1 (its peak 4.00x the FMA peak)") in out
    assert ("bfloat16 GEMM operation rate / our fp32 rate: geomean 0.80x; on vdpbf16ps 0 "
            "of 1 (its peak 0.50x the FMA peak)") in out


def test_the_int8_check_is_the_exact_integer_gemm_through_float64():
    import numpy as np
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (7, 300), dtype="int8")
    b = rng.integers(-128, 128, (300, 5), dtype="int8")
    want = a.astype("int64") @ b.astype("int64")
    np.testing.assert_array_equal(B.expected_gemm(a, b, "int8"), want)
    bf = np.array([[0x3F80, 0x4000]], "uint16")     # bfloat16 1.0 and 2.0
    np.testing.assert_array_equal(B.expected_gemm(bf, bf.T, "bfloat16"), [[5.0]])
