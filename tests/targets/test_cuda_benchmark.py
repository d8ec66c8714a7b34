"""``benchmarks/cuda.py`` is run once, unattended, on a GPU machine: its rows, its
report and its summary must survive any one row failing.  Here: every row name, the
no-GPU check of one row of each family, the isolation of a failing or hanging row,
and the printing of GPU results (synthetic figures, as a GPU run returns them)."""

from __future__ import annotations

import re
import sys

import pytest

from tests.workloads import load_script

B = load_script("benchmarks/cuda.py")


def test_rows_cover_the_issue():
    names = B.row_names()
    for dt in ("float32", "float16", "bfloat16", "float8_e4m3"):
        for shape in ("4096x4096x4096", "8192x8192x8192", "1024x4096x4096",
                      "4096x1024x16384", "512x3072x768"):
            assert f"gemm:{dt}:{shape}" in names
    for kind in ("softmax", "layernorm"):
        assert f"norm:{kind}:4096x4096" in names and f"norm:{kind}:16x262144" in names
    assert "launch" in names


@pytest.mark.parametrize("row", ["gemm:float16:512x3072x768", "norm:softmax:16x262144",
                                 "gemm:float8_e4m3:4096x4096x4096",
                                 "tune:softmax:4096x4096"])
def test_a_row_checks_without_a_gpu(row):
    res = B.run_row(row, True)
    assert res["status"] == "ok", res
    if "float8" in row:
        assert "mma.sync m16n8k32 fp8 64x64x64" in res["detail"]
    if row.startswith("tune"):
        assert res["detail"].startswith("4 candidates of the generated space built and "
                                        "compiled for sm_80 and sm_90")


def test_tuned_rows_print_beside_the_baseline_and_the_hand_schedule(capsys):
    assert {"tune:float16:4096x4096x4096", "tune:softmax:4096x4096"} <= set(B.row_names())
    B.show({"row": "tune:float16:4096x4096x4096", "family": "tune:float16",
            "status": "ok", "ours_s": 0.5e-3, "baseline_s": 0.25e-3, "hand_s": 0.4e-3,
            "baseline": "cupy.matmul fp16 (cuBLAS)", "max_err": 1e-4,
            "tuned_trace": "tensor:cuda.mma_64x64x32_f16f32",
            "report": "32 trials, best 0.50 ms; 3 pruned before building"}, INFO, None)
    out = capsys.readouterr().out
    assert "tuned     0.500 ms | cupy.matmul fp16 (cuBLAS)     0.250 ms | ratio  0.50" in out
    assert "hand schedule     0.400 ms, ratio  0.80" in out


def test_a_failing_or_hanging_row_costs_that_row_only(monkeypatch, tmp_path):
    res = B.run_row("gemm:float64:notashape", True)
    assert res["status"] == "failed" and "ValueError" in res["detail"]
    out = B.run_row_isolated("gemm:float64:notashape", True, 60)
    assert out["status"] == "failed"
    hang = tmp_path / "hang.sh"                     # a child that never answers
    hang.write_text("#!/bin/sh\nsleep 30\n")
    hang.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(hang))
    hung = B.run_row_isolated("launch", True, 0.5)
    assert hung == {"row": "launch", "status": "failed", "detail": "timed out after 0.5 s"}


INFO = {"gpu": "NVIDIA H200", "cc": (9, 0), "sms": 132, "clock_ghz": 1.98}


def _results():
    gemm = {"family": "gemm:float16", "flops": 2.0 * 4096 ** 3, "status": "ok",
            "rel_err": 1e-4, "variant": "wmma", "baseline": "cupy"}
    return [
        dict(gemm, row="gemm:float16:4096x4096x4096", ours_s=0.2e-3 * 1.1, cublas_s=0.2e-3),
        dict(gemm, row="gemm:float16:8192x8192x8192", ours_s=1.0, cublas_s=0.5),
        dict(gemm, row="gemm:float32:4096x4096x4096", family="gemm:float32", ours_s=3e-3,
             cublas_s=2.8e-3),
        {"row": "gemm:bfloat16:4096x4096x4096", "family": "gemm:bfloat16", "status": "failed",
         "flops": 1.0, "cublas_s": 1e-3, "baseline": "torch", "tried": ["wmma: WRONG"]},
        {"row": "gemm:float8_e4m3:4096x4096x4096", "status": "missing", "detail": "no fp8"},
        {"row": "norm:softmax:4096x4096", "family": "norm:softmax", "status": "ok",
         "bytes": 2.0 * 4096 * 4096 * 4, "ours_s": 40e-6, "cupy_s": 120e-6,
         "copy_same_size_s": 36e-6, "kernels": 1, "max_err": 1e-8},
        {"row": "launch", "family": "launch", "status": "ok", "ours_s": 6e-6,
         "ours_stream_s": 6.5e-6, "cupy_s": 4e-6},
        {"row": "norm:layernorm:16x262144", "status": "failed", "detail": "timed out"},
    ]


def test_results_print_with_ratios_peaks_and_targets(capsys):
    for res in _results():
        B.show(res, INFO, 4300.0)
    B.summary(_results(), 4300.0)
    out = capsys.readouterr().out
    assert "ratio  0.91" in out and "% of peak 989" in out
    assert re.search(r"gemm:bfloat16:4096x4096x4096 +FAILED +wmma: WRONG", out)
    assert "MISSING  no fp8" in out and "% of copy" in out
    assert "gemm:float16         geomean ratio  0.67 over 2 shapes" in out
    assert "SGEMM 4096^3 vs cuBLAS" in out and "not met" in out
    assert "softmax 4096x4096: share of copy bandwidth" in out
    assert "layernorm 16x262144: share of copy bandwidth" in out and "n/a" in out


def test_the_peak_comes_from_the_datasheet_or_sms_and_clock():
    assert B.peak_tflops(INFO, "bfloat16") == pytest.approx(989.4)
    a100 = {"gpu": "NVIDIA A100", "cc": (8, 0), "sms": 108, "clock_ghz": 1.41}
    assert B.peak_tflops(a100, "float16") == pytest.approx(2 * 1024 * 108 * 1.41e9 / 1e12)
    assert B.peak_tflops({"gpu": "?", "cc": (7, 5)}, "float16") is None
