"""``benchmarks/accel.py --quick`` (what CI runs) builds and checks every row."""

from benchmarks.accel import main


def test_accel_benchmark_quick_runs_every_row_bit_exact(capsys):
    rows = main(["--quick"])
    # every workload single and double buffered on each example NPU; each row checked
    # against numpy
    assert len(rows) == 20 and {r["buffering"] for r in rows} == {"single", "double"}
    assert [r["npu"] for r in rows] == ["toy-npu"] * 10 + ["gemmini-like"] * 10
    for single, double in zip(rows[::2], rows[1::2]):
        assert double["cycles"] < single["cycles"], single["label"]
        assert single["dma_out"] == single["min_out"]
        assert single["gemm_util"] < double["gemm_util"] <= 1.0
    assert "conv 34x34 32->64" in capsys.readouterr().out
