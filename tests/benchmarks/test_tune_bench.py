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
