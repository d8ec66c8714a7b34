"""im2col in the DMA: a conv2d whose input patches the Gemmini-like DMA gathers into the
matrix unit's layout (``DMA(im2col=True)``), bit-exact against numpy, its cost and bytes
as the simulator documents them, and refused on a DMA without the mode."""

import numpy as np
import pytest

import cuvil_tir as T
import targets
from tests.workloads import conv2d_nhwc_ref
from targets.accel import AccelLoweringError
from targets.accel.examples.gemmini_like import gemmini
from targets.accel.examples.toy_npu import toy_npu
from targets.accel.im2col import im2col_shape
from targets.toolkit.npu.conv2d import (conv2d, conv2d_im2col, schedule_conv2d,
                                        schedule_conv2d_im2col)

G = dict(gemm="gemmini.matmul_16x16x16_i8", zero=None, scopes=("gem.spad", "gem.spad", "gem.acc"))


def _conv(h, c, k, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (1, h, h, c)).astype("int8")
    w = rng.integers(-128, 128, (3, 3, c, k)).astype("int8")
    ref = conv2d_nhwc_ref(x, w)
    return x, w, ref


@pytest.mark.parametrize("h,c,k,double", [(18, 8, 24, True), (12, 8, 16, False),
                                          (10, 16, 16, True)])
def test_im2col_conv_is_exact(h, c, k, double):
    targets.register_target(gemmini, replace=True)
    mod = targets.build(schedule_conv2d_im2col(conv2d_im2col(1, h, h, c, k), double=double,
                                               **G), "gemmini-like", name="im2col")
    assert "gemmini_like_dma_load_im2col(" in mod.get_source("c")
    x, w, ref = _conv(h, c, k)
    y = np.zeros(ref.shape, "int32")
    mod(x, w.reshape(-1, k), y)
    np.testing.assert_array_equal(y, ref)
    o = h - 2
    # each output pixel's window read once (3 runs of 3*C bytes), the weights once
    assert mod.stats["dma_bytes_in"] == o * o * 9 * c + w.size
    assert mod.stats["bank_conflict_stalls"] == 0


def test_im2col_cost_and_speed_up_over_per_tap_gemms():
    targets.register_target(gemmini, replace=True)
    mod = targets.build(schedule_conv2d_im2col(conv2d_im2col(1, 18, 18, 8, 24), double=True,
                                               **G), "gemmini-like", name="im2col18")
    x, w, ref = _conv(18, 8, 24)
    y = np.zeros(ref.shape, "int32")
    mod(x, w.reshape(-1, 24), y)
    ev = [e for e in mod.trace()["traceEvents"] if e.get("name") == "dma_load_im2col"]
    # 16 rows of 3 runs of 24 bytes (2 beats of 16 bytes each) and an 8-byte zero
    # tail (1 beat), after the DMA's 32 cycles of latency
    assert len(ev) == 16 and {e["args"]["cycles"] for e in ev} == {32 + 16 * (3 * 2 + 1)}
    per_tap = targets.build(schedule_conv2d(conv2d(1, 18, 18, 8, 24), double=True, **G),
                            "gemmini-like", name="taps18")
    per_tap(x, w, np.zeros(ref.shape, "int32"))
    # K = 72 padded to 80 (5 calls) instead of 9 taps of 8 channels padded to 16 each
    assert mod.stats["cycles"] < 0.85 * per_tap.stats["cycles"]


def test_a_dma_without_im2col_refuses_the_gather():
    targets.register_target(toy_npu, replace=True)
    sch = schedule_conv2d_im2col(conv2d_im2col(1, 10, 10, 8, 16))
    with pytest.raises(AccelLoweringError, match=r"CVL-E172.*I -> I_npu\.inp is not a 2-D "
                       r"strided transfer.*needs DMA\(im2col=True\)"):
        targets.build(sch, "toy-npu", name="no_im2col")


def test_only_a_patch_gather_is_recognised():
    q, x, y = T.var("q"), T.var("x"), T.var("y")
    zero = T.const(0)
    assert im2col_shape((zero, y + q // 24, x + q // 8 % 3, q % 8), q, x) == (3, 8)
    assert im2col_shape((zero, y + q // 24, x + q // 8 % 3, q % 16), q, x) is None
    assert im2col_shape((zero, y + x + q // 24, x + q // 8 % 3, q % 8), q, x) is None
    assert im2col_shape((zero, y + q // 24, x * 2 + q // 8 % 3, q % 8), q, x) is None
    assert im2col_shape((y, q), q, x) is None
