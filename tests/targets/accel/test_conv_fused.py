"""int8 conv2d lowered to the GEMM intrinsic and a fused GEMM + bias + ReLU +
requantize on the toy NPU's vector unit: both equal numpy bit for bit; the
accelerator kind's own ``measure`` (simulated cycles over the clock)."""

import numpy as np
import pytest

import targets
from targets.accel import Accelerator, DescriptionError
from targets.toolkit.npu.conv2d import conv2d, schedule_conv2d
from targets.toolkit.npu.fused import fused_gemm, schedule_fused
from targets.toolkit.npu.gemm import gemm, schedule_gemm
from targets.accel.examples.toy_npu import SHIFT, toy_npu

targets.register_target(toy_npu, replace=True)


def _conv_ref(x, w):
    kh, kw = w.shape[:2]
    oh, ow = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    return sum(np.einsum("nyxc,ck->nyxk", x[:, r:r + oh, s:s + ow].astype("int32"),
                         w[r, s].astype("int32")) for r in range(kh) for s in range(kw))


@pytest.mark.parametrize("shape,double", [((1, 18, 18, 8, 24), False),
                                          ((2, 10, 10, 16, 32), True)])
def test_conv2d_equals_numpy(shape, double):
    n, h, w, c, k = shape
    mod = targets.build(schedule_conv2d(conv2d(n, h, w, c, k), double=double), "toy-npu",
                        name=f"conv{c}_{k}")
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (n, h, w, c)).astype("int8")
    wt = rng.integers(-128, 128, (3, 3, c, k)).astype("int8")
    out = np.full((n, h - 2, w - 2, k), 5, "int32")
    mod(x, wt, out)
    np.testing.assert_array_equal(out, _conv_ref(x, wt))
    st = mod.stats
    assert st["bank_conflict_stalls"] == 0
    assert st["dma_bytes_out"] == out.nbytes            # each output written once
    assert st["dma_bytes_in"] >= x.nbytes + wt.nbytes
    assert st["engine_busy"]["gemm"] > 0 and "toy_npu_gemm_16x16x16(" in mod.get_source("c")


@pytest.fixture(scope="module")
def fused():
    n, m, k = 64, 128, 128
    return n, m, k, targets.build(schedule_fused(fused_gemm(n, m, k)), "toy-npu",
                                  name="fused")


def test_fused_gemm_bias_relu_requantize_equals_numpy(fused):
    n, m, k, mod = fused
    rng = np.random.default_rng(4)
    a = rng.integers(-128, 128, (n, k)).astype("int8")
    b = rng.integers(-128, 128, (k, m)).astype("int8")
    bias = rng.integers(-60000, 60000, (m,)).astype("int32")
    q = np.zeros((n, m), "int8")
    mod(a, b, bias, q)
    acc = np.maximum(a.astype("int32") @ b.astype("int32") + bias, 0)
    want = np.clip(np.floor_divide(acc, 1 << SHIFT), -128, 127).astype("int8")
    np.testing.assert_array_equal(q, want)
    assert (want == 127).any() and (want == 0).any()    # clipping and ReLU both exercised
    st = mod.stats
    assert st["dma_bytes_out"] == n * m                  # only the int8 result leaves
    assert st["engine_busy"]["vector"] > 0 and st["bank_conflict_stalls"] == 0
    src = mod.get_source("c")
    for call in ("bias_add_16x16", "relu_16x16", "requant_16x16"):
        assert f"toy_npu_{call}(" in src


def test_measure_is_simulated_cycles_over_the_clock(fused):
    n, m, k, mod = fused
    args = [np.ones((n, k), "int8"), np.ones((k, m), "int8"), np.zeros((m,), "int32"),
            np.zeros((n, m), "int8")]
    assert toy_npu.measure(mod, args)[0] == mod.stats["cycles"] / 1e9
    f = gemm(128)
    single = targets.build(schedule_gemm(f), "toy-npu", name="m1")
    double = targets.build(schedule_gemm(f, double=True), "toy-npu", name="m2")
    ab = [np.ones((128, 128), "int8"), np.ones((128, 128), "int8"),
          np.zeros((128, 128), "int32")]
    assert toy_npu.measure(double, ab) < toy_npu.measure(single, ab)
    assert toy_npu.cost_unit == "seconds"


def test_clock_must_be_positive():
    with pytest.raises(DescriptionError, match="clock_mhz must be a positive number"):
        Accelerator("bad-clock", toy_npu.memories_only, toy_npu.dma, clock_mhz=0)


def test_conv2d_batch_one_stages_only_the_rows_a_row_of_outputs_reads():
    # compute_at binds the batch loop (one iteration) as 0 in the copy and as ``b`` in
    # the GEMM; staging took that for two different tiles and kept the whole input
    # (5 of 4 banks: CVL-E171 in benchmarks/accel.py since 25db55e)
    mod = targets.build(schedule_conv2d(conv2d(1, 34, 34, 32, 64), double=True),
                        "toy-npu", name="conv_b1")
    line = next(x for x in mod.memory_map().splitlines() if "I_npu.inp" in x)
    assert "size   3264" in line                    # each copy: 3 rows x 34 x 32 int8

