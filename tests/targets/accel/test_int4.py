"""int4 weights packed two per byte on the toy NPU: a GEMM bit-exact end to end (the
int4 intrinsic's desc unpacks the nibbles, tensorize matches the workload, the DMA
moves half the weight bytes), and an odd reduction refused."""

import numpy as np
import pytest

import targets
from cuvil_tir.errors import ShapeError
from targets.accel.examples.toy_npu import toy_npu
from targets.toolkit.npu.gemm import gemm, gemm_int4, pack_int4, schedule_gemm

INT4 = "toy.gemm_16x16x16_i8xi4"


@pytest.mark.parametrize("n,m,k,double", [(128, 128, 128, True), (64, 128, 192, False)])
def test_int4_weight_gemm_is_exact_and_moves_half_the_weights(n, m, k, double):
    targets.register_target(toy_npu, replace=True)
    mod = targets.build(schedule_gemm(gemm_int4(n, m, k), tile=64, double=double, gemm=INT4),
                        "toy-npu", name="gemm_i4")
    assert "toy_npu_gemm_16x16x16_i4(" in mod.get_source("c")
    rng = np.random.default_rng(2)
    a = rng.integers(-128, 128, (n, k)).astype("int8")
    w = rng.integers(-8, 8, (k, m))
    w[0, 0], w[1, 0] = -8, 7                   # both ends of int4, in both nibbles
    c = np.zeros((n, m), "int32")
    mod(a, pack_int4(w), c)
    np.testing.assert_array_equal(c, a.astype("int32") @ w.astype("int32"))
    # A once per column tile, the packed weights (k/2 x m bytes) once per row tile
    assert mod.stats["dma_bytes_in"] == n * k * (m // 64) + (k // 2) * m * (n // 64)
    int8 = targets.build(schedule_gemm(gemm(n, m, k), tile=64, double=double), "toy-npu",
                         name="gemm_i8")
    int8(a, w.astype("int8"), np.zeros((n, m), "int32"))
    assert mod.stats["dma_bytes_in"] < int8.stats["dma_bytes_in"]


def test_pack_int4_puts_even_rows_in_the_low_nibble():
    w = np.array([[7, -8], [-1, 3]])
    assert pack_int4(w).tolist() == [[(7 | (15 << 4)) - 256, 8 | (3 << 4)]]


def test_odd_reduction_is_refused():
    with pytest.raises(ShapeError, match="k=7 is odd"):
        gemm_int4(16, 16, 7)
