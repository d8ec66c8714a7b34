"""benchmarks/run.py's peak kernel is as wide as the target's vectors (issue 10 §0)."""
import re

import pytest

import targets
from targets.llvm import cpu_info
from tests.workloads import load_script


def _bench():
    return load_script("benchmarks/run.py")


@pytest.mark.parametrize("mcpu, width", [("x86-64", 4), ("haswell", 8),
                                         ("skylake-avx512", 16)])
def test_peak_kernel_uses_the_targets_widest_vectors(mcpu, width):
    target = targets.Target("llvm", mcpu=mcpu)
    lanes = cpu_info(target).lanes("float32")
    assert lanes == width
    func, flops = _bench().peak_kernel(1, lanes, chains=2, reps=10)
    assert flops == 2.0 * 2 * width * 10
    ir = targets.build(func, target).get_source("ll")
    assert set(re.findall(r"fma\.v(\d+)f32", ir)) == {str(width)}
