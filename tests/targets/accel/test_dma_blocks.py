"""3-D DMA commands (``DMA(dims=3)``): a loop of 2-D loads folded into one command
that pays the latency once, for a conv's filter taps and for a layout-converting
(fractal ``zN``) staging of a GEMM's weights; bit-exact, costs as documented."""

import numpy as np
import pytest

import schedules as S
import targets
from tests.workloads import conv2d_nhwc_ref
from targets.accel import DMA, DescriptionError
from targets.accel.examples.toy_npu import toy_npu
from targets.toolkit.npu.conv2d import conv2d, schedule_conv2d
from targets.toolkit.npu.gemm import gemm, tile_gemm_loops


def _events(mod, name):
    return [e["args"]["cycles"] for e in mod.trace()["traceEvents"] if e.get("name") == name]


def test_conv_filter_taps_load_in_one_command():
    targets.register_target(toy_npu, replace=True)
    mod = targets.build(schedule_conv2d(conv2d(1, 18, 18, 8, 24), double=True), "toy-npu",
                        name="taps3d")
    src = mod.get_source("c")
    # the weights' taps as 3-D blocks (each tap's channels padded); the input's three
    # rows, padded only along the channels, are contiguous: one 2-D command of 54 rows
    assert src.count("toy_npu_dma_load_pad_3d(") == 1
    assert "toy_npu_dma_load_pad(&I_npu_inp[cvl_floormod_int32(y, 2) * 8192], &I[y * 144], " \
        "54, 16, 54, 8, 16, 8);" in src
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (1, 18, 18, 8)).astype("int8")
    w = rng.integers(-128, 128, (3, 3, 8, 24)).astype("int8")
    y = np.zeros((1, 16, 16, 24), "int32")
    mod(x, w, y)
    ref = conv2d_nhwc_ref(x, w)
    np.testing.assert_array_equal(y, ref)
    # weights: 9 taps of 16 rows of 32 bytes (1 beat), one latency of 64 cycles; each
    # output row's input: 3 rows of 18 pixels of 16 bytes
    assert _events(mod, "dma_load_pad_3d")[:1] == [64 + 9 * 16]
    assert _events(mod, "dma_load_pad")[0] == 64 + 3 * 18
    assert mod.stats["dma_bytes_in"] == w.size + 16 * 3 * 18 * 8


def test_fractal_zn_weights_are_one_command_per_tile():
    """B staged as ``zN`` blocks ``B_s[j // 16, k, j % 16]`` (each 16-column block
    of the tile contiguous, as a cube unit reads it): the copy is a 3-D transfer."""
    targets.register_target(toy_npu, replace=True)
    n = 64
    sch = S.Schedule(gemm(n))
    blk = sch.get_block("C")
    sch.cache_read(blk, 0, "npu.inp")
    b = sch.reindex_cache_read(blk, 1, "npu.wgt", lambda i, j, k: (j // 16, k, j % 16))
    c = sch.cache_write(blk, 0, "npu.acc")
    jo, ko, ii = tile_gemm_loops(sch, blk, (32, 32, 32), 16)
    a = sch.get_block("A_npu.inp")
    sch.compute_at(a, ko)
    sch.compute_at(b, ko)
    col, row = sch.get_loops(b)[-2:]            # the copy runs over (j, k) of B
    blocks, lane = sch.split(col, [None, 16])
    sch.reorder(blocks, row, lane)              # one 2-D block per 16 columns
    sch.reverse_compute_at(c, jo)
    init = sch.decompose_reduction(blk, ko)
    sch.tensorize(ii, "toy.gemm_16x16x16_i8")
    sch.tensorize(sch.get_loops(init)[-2], "toy.zero_16x16_i32")
    mod = targets.build(sch, "toy-npu", name="zn")
    assert "toy_npu_dma_load_3d(&B_npu_wgt" in mod.get_source("c")
    rng = np.random.default_rng(1)
    a_, b_ = (rng.integers(-128, 128, (n, n)).astype("int8") for _ in range(2))
    out = np.zeros((n, n), "int32")
    mod(a_, b_, out)
    np.testing.assert_array_equal(out, a_.astype("int32") @ b_.astype("int32"))
    # 2 blocks of 32 rows of 16 bytes (one beat each) after one latency
    assert set(_events(mod, "dma_load_3d")) == {64 + 2 * 32}


def test_dims_is_two_or_three():
    with pytest.raises(DescriptionError, match="dims must be 2 or 3"):
        DMA(512, 64, dims=4)
