"""``benchmarks/accel.py --quick`` (what CI runs) builds and checks every row."""

from benchmarks.accel import main


def test_accel_benchmark_quick_runs_every_row_bit_exact(capsys):
    rows = main(["--quick"])
    # every workload single and double buffered on each example NPU (the Gemmini-like
    # one's conv2d also through its DMA's im2col); each row checked against numpy
    assert len(rows) == 24 and {r["buffering"] for r in rows} == {"single", "double"}
    assert [r["npu"] for r in rows] == ["toy-npu"] * 10 + ["gemmini-like"] * 14
    for single, double in zip(rows[::2], rows[1::2]):
        assert double["cycles"] < single["cycles"], single["label"]
        assert single["dma_out"] == single["min_out"]
        assert single["gemm_util"] < double["gemm_util"] <= 1.0
    out = capsys.readouterr().out
    assert "conv 34x34 32->64" in out and "im2col 18x18 8->24" in out and "qfull" in out
    assert all(r["qfull"] >= 0 and r["stalls"] == 0 for r in rows)
