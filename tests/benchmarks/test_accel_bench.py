"""``benchmarks/accel.py --quick`` (what CI runs) builds and checks every row."""

from benchmarks.accel import main


def test_accel_benchmark_quick_runs_every_row_bit_exact(capsys):
    rows = main(["--quick"])
    # every workload single and double buffered; each row checked against numpy
    assert len(rows) == 10 and {r["buffering"] for r in rows} == {"single", "double"}
    for single, double in zip(rows[::2], rows[1::2]):
        assert double["cycles"] < single["cycles"], single["label"]
        assert single["dma_out"] == single["min_out"]
    assert "conv 34x34 32->64" in capsys.readouterr().out
