"""``benchmarks/accel.py --quick`` (what CI runs) builds and checks every row."""

from benchmarks.accel import main


def test_accel_benchmark_quick_runs_every_row_bit_exact(capsys):
    every = main(["--quick"])
    rows = [r for r in every if r["npu"] != "ascend-like"]
    # every workload single and double buffered on each example NPU (the Gemmini-like
    # one's conv2d also through its DMA's im2col); each row checked against numpy
    assert len(rows) == 26 and {r["buffering"] for r in rows} == {"single", "double"}
    assert [r["npu"] for r in rows] == ["toy-npu"] * 12 + ["gemmini-like"] * 14
    for single, double in zip(rows[::2], rows[1::2]):
        assert double["cycles"] < single["cycles"], single["label"]
        assert single["dma_out"] == single["min_out"]
        assert single["gemm_util"] < double["gemm_util"] <= 1.0
    out = capsys.readouterr().out
    assert "conv 34x34 32->64" in out and "im2col 18x18 8->24" in out and "qfull" in out
    assert "gemm 128 int4" in out
    assert all(r["qfull"] >= 0 and r["stalls"] == 0 for r in rows)
    # the multi-core NPU: every workload on 4 cores (the small conv also on one), then
    # GEMM on 1, 2, 4 cores; no row beats its bound
    cores = [r for r in every if r["npu"] == "ascend-like"]
    assert [r["cores"] for r in cores] == [4, 4, 4, 1, 4, 1, 2, 4]
    assert all(r["gemm_util"] <= r["bound"] <= 1.0 for r in cores)
    assert "bound" in out and "l2bank" in out
    speed = [r["speedup"] for r in cores if "speedup" in r]
    assert speed[0] == 1.0 < speed[1] < speed[2]
    assert all(r["dma_out"] == r["min_out"] for r in cores)
