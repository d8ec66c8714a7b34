"""Several cores: the Ascend-like NPU (4 cores, L1 -> L0A/L0B -> cube -> L0C -> vector
-> UB, a shared L2) end to end on the simulator, bit-exact against numpy; ``bind`` to
the core axis and its refusals; the per-core memory map; cores running together in
the cycle model, sharing the links to DDR and L2."""

import numpy as np
import pytest

from cuvil_tir.thread_axes import thread_axis
import schedules as S
import targets
from targets.accel import AccelLoweringError, DescriptionError
from targets.accel.cores import Cores, core_section
from targets.accel.examples.ascend_like import ascend
from targets.toolkit.npu.conv2d import conv2d
from tests.workloads import conv2d_nhwc_ref
from targets.toolkit.npu.fused import fused_gemm
from targets.toolkit.npu.gemm import gemm
from targets.toolkit.npu.multicore import (ASCEND, schedule_conv2d_cores, schedule_fused_cores,
                                           schedule_gemm_cores)

targets.register_target(ascend, replace=True)


def _ints(rng, shape, lo=-128, hi=128, dtype="int8"):
    return rng.integers(lo, hi, shape).astype(dtype)


def _run_gemm(n, m, k, **kw):
    mod = targets.build(schedule_gemm_cores(gemm(n, m, k), **kw), "ascend-like", name="g")
    rng = np.random.default_rng(n + m + k)
    a, b = _ints(rng, (n, k)), _ints(rng, (k, m))
    c = np.zeros((n, m), "int32")
    mod(a, b, c)
    np.testing.assert_array_equal(c, a.astype("int32") @ b.astype("int32"))
    return mod


@pytest.mark.parametrize("n,m,k,cores,double", [(64, 64, 64, 4, True),
                                                (128, 64, 96, 2, False),
                                                (100, 72, 40, 4, True),
                                                (17, 33, 50, 3, True)])
def test_gemm_bit_exact_on_the_cores(n, m, k, cores, double):
    mod = _run_gemm(n, m, k, cores=cores, double=double)
    assert mod.stats["cores_used"] == cores
    src = mod.get_source("c")
    for call in ("ascend_like_fork()", "ascend_like_core(", "ascend_like_join()",
                 "ascend_like_move_asc_l2_asc_l1(", "load_cbuf_to_ca(", "load_cbuf_to_cb(",
                 "ascend_like_move_asc_l0c_asc_ub(", "mmad(", "set_flag(", "wait_flag("):
        assert call in src


@pytest.mark.parametrize("h,c,k,cores,double", [(10, 16, 16, 4, True), (9, 8, 24, 2, False),
                                                (12, 32, 16, 3, True)])
def test_int8_conv2d_bit_exact_on_the_cores(h, c, k, cores, double):
    mod = targets.build(schedule_conv2d_cores(conv2d(1, h, h, c, k), cores=cores,
                                              double=double), "ascend-like", name="conv")
    rng = np.random.default_rng(h + c + k)
    x, w = _ints(rng, (1, h, h, c)), _ints(rng, (3, 3, c, k))
    y = np.zeros((1, h - 2, h - 2, k), "int32")
    mod(x, w, y)
    o = h - 2
    want = sum(np.einsum("nyxc,ck->nyxk", x[:, r:r + o, s:s + o].astype("int32"),
                         w[r, s].astype("int32")) for r in range(3) for s in range(3))
    np.testing.assert_array_equal(y, want)
    assert mod.stats["cores_used"] == cores
    # the weights go to the shared L2 once, then to each core's L1 and L0B
    assert "ascend_like_move_asc_l2_asc_l1(" in mod.get_source("c")
    assert mod.stats["dma_bytes_in"] < 2 * (x.nbytes + w.nbytes)


def test_contiguous_row_blocks_are_one_transfer():
    """The filter's 3 x 3 taps of c rows are contiguous in host memory and in L2: one
    DMA of 9c rows (one latency), not nine."""
    mod = targets.build(schedule_conv2d_cores(conv2d(1, 10, 10, 16, 16), cores=4),
                        "ascend-like", name="conv")
    src = mod.get_source("c")
    assert "copy_gm_to_l2(0, &W[0], 0, 144, 16, 16, 16);" in src
    rng = np.random.default_rng(0)
    mod(_ints(rng, (1, 10, 10, 16)), _ints(rng, (3, 3, 16, 16)),
        np.zeros((1, 8, 8, 16), "int32"))
    # the filter enters the shared L2 before the bound loop, on core 0's load engine,
    # and every core's same engine then moves it on to its L1: the engine's queue is
    # in order, so no core starts that move before the filter has arrived
    slices = [e for e in mod.trace()["traceEvents"] if e["ph"] == "X"]
    l2_load = min((e for e in slices if e["name"] == "dma_load"), key=lambda e: e["ts"])
    assert l2_load["pid"] == 0
    for c in range(4):
        first = min(e["ts"] for e in slices if e["pid"] == c and e["name"] ==
                    "move_asc_l2_asc_l1")
        assert first >= l2_load["ts"] + l2_load["dur"] - 1e-9
    assert "ascend_like_move_asc_l2_asc_l1(&W_asc_l2_asc_l1[0], &W_asc_l2[0], 144, 16" in src


@pytest.mark.parametrize("n,m,k,cores,double", [(64, 64, 64, 4, True), (128, 64, 32, 2, False)])
def test_fused_gemm_bias_relu_requant_bit_exact_on_the_cores(n, m, k, cores, double):
    mod = targets.build(schedule_fused_cores(fused_gemm(n, m, k), cores=cores, double=double),
                        "ascend-like", name="fused")
    rng = np.random.default_rng(n + m + k)
    a, b = _ints(rng, (n, k)), _ints(rng, (k, m))
    bias = _ints(rng, (m,), -60000, 60000, "int32")
    q = np.zeros((n, m), "int8")
    mod(a, b, bias, q)
    acc = np.maximum(a.astype("int32") @ b.astype("int32") + bias, 0)
    want = np.clip(acc >> 8, -128, 127).astype("int8")
    assert (want == 127).any() and (want == 0).any()
    np.testing.assert_array_equal(q, want)
    src = mod.get_source("c")
    for call in ("ascend_like_bias_add_16x16(", "ascend_like_relu_16x16(",
                 "ascend_like_requant_16x16(", "ascend_like_move_asc_l0c_asc_ub("):
        assert call in src
    assert mod.stats["dma_bytes_out"] == q.nbytes      # only the int8 result leaves


def test_gemm_reads_a_once_when_its_strip_fits():
    whole = _run_gemm(128, 256, 128, cores=2).stats
    tiles = _run_gemm(128, 256, 128, cores=2, strip_bytes=0).stats   # A per k tile
    a, b = 128 * 128, 128 * 256
    assert whole["dma_bytes_in"] == a + b < tiles["dma_bytes_in"] == 2 * a + b


def test_each_core_runs_its_own_engines():
    mod = _run_gemm(128, 128, 128, cores=4)
    busy = mod.stats["core_busy"]
    assert sorted(busy) == [0, 1, 2, 3]
    assert len({b["cube"] for b in busy.values()}) == 1 and busy[0]["cube"] > 0
    assert sum(b["cube"] for b in busy.values()) == mod.stats["engine_busy"]["cube"]
    # the cores overlap: the run is far shorter than their work one after another
    assert mod.stats["cycles"] < 2 * busy[0]["cube"]
    trace = mod.trace()
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    procs = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["name"] == "process_name"}
    assert procs == {c: f"core {c}" for c in range(4)}
    for c in range(4):
        mine = [e for e in slices if e["pid"] == c and e["name"] == "mmad_16x16x16"]
        assert sum(e["args"]["cycles"] for e in mine) == busy[c]["cube"]


def test_speed_up_is_monotone_in_the_cores():
    cycles = [_run_gemm(256, 256, 256, cores=c).stats["cycles"] for c in (1, 2, 4)]
    assert cycles[0] > cycles[1] > cycles[2]
    assert cycles[0] / cycles[2] > 3.0


def test_shared_links_make_cores_wait_for_each_other():
    one = _run_gemm(128, 512, 64, cores=1, tile=(32, 128, 64)).stats
    four = _run_gemm(128, 512, 64, cores=4, tile=(32, 128, 64)).stats
    # one core's loads and stores share its DDR link too (408 cycles); four cores'
    # loads meet on it (544; 1824 while a DMA fill of the accumulators, mmad's init
    # bit now, held each core's load engine and lined their loads up)
    assert four["bandwidth_stalls"] > one["bandwidth_stalls"]


def test_memory_map_per_core():
    mod = _run_gemm(64, 64, 64, cores=2)
    text = mod.memory_map()
    assert text.startswith("shared (4 cores read them):\nasc.l2:")
    assert "core 0:" in text and "core 1:" in text and "core 2:" not in text
    one = mod.memory_map(core=1)
    assert "core 1:\nasc.l1:" in one and "core 0:" not in one and "B_asc.l2 " in one
    assert one.count("A_asc.l1_asc.l0a[0]") == 1
    with pytest.raises(AccelLoweringError, match=r"expected one of the cores this "
                       r"function runs on, \[0, 1\]; found 3"):
        mod.memory_map(core=3)
    assert core_section(text, 0).count("asc.l1:") == 1


# bind and its refusals -------------------------------------------------------------------



def _build(sch):
    return targets.build(sch, "ascend-like", name="g")


def test_bind_too_many_cores():
    sch = S.Schedule(gemm(64))
    blk = sch.get_block("C")
    sch.bind(sch.get_loops(blk)[0], "asc.core")
    with pytest.raises(AccelLoweringError, match=r"loop 'i' \(extent 64\) is bound to "
                       r"'asc.core', but the device has 4 cores: too many cores; split it "
                       r"\(sch.split\(loop, \[4, None\]\)\) and bind the outer loop"):
        _build(sch)


def test_bind_wrong_axis():
    sch = S.Schedule(gemm(64))
    sch.bind(sch.get_loops(sch.get_block("C"))[0], "blockIdx.x")
    with pytest.raises(AccelLoweringError, match=r"is bound to 'blockIdx.x', which is not "
                       r"an axis of this device: its core axis is 'asc.core' \(4 cores\); "
                       r"bind tile loops to 'asc.core'"):
        _build(sch)


def test_bind_non_divisible():
    sch = S.Schedule(gemm(30))
    blk = sch.get_block("C")
    c, _ = sch.split(sch.get_loops(blk)[0], [4, None])
    sch.bind(c, "asc.core")
    with pytest.raises(AccelLoweringError, match=r"bound to 'asc.core' does not divide its "
                       r"dimension: block 'C' is guarded by a predicate on 'i_0'.*pad the "
                       r"dimension"):
        _build(sch)


def test_parallel_points_to_bind():
    sch = S.Schedule(gemm(64))
    sch.parallel(sch.get_loops(sch.get_block("C"))[0])
    with pytest.raises(AccelLoweringError, match=r"is parallel, but a core's memories are "
                       r"its own.*distribute the tiles with sch.bind\(loop, 'asc.core'\)"):
        _build(sch)


def test_nested_bind_refused():
    sch = S.Schedule(gemm(16))
    i, j, _ = sch.get_loops(sch.get_block("C"))
    io, _ = sch.split(i, [4, None])
    jo, _ = sch.split(j, [4, None])
    sch.bind(io, "asc.core")
    sch.bind(jo, "asc.core")
    with pytest.raises(AccelLoweringError, match="inside another loop bound to it"):
        _build(sch)


def test_per_core_buffer_above_the_bound_loop_refused():
    sch = S.Schedule(gemm(64))
    blk = sch.get_block("C")
    sch.cache_read(blk, 1, "asc.l1")        # B in L1 at the root: core 0's L1 only
    c, _ = sch.split(sch.get_loops(blk)[0], [4, None])
    sch.bind(c, "asc.core")
    with pytest.raises(AccelLoweringError, match=r"buffer 'B_asc.l1' of per-core memory "
                       r"'asc.l1' is staged above the loop bound to 'asc.core'.*stage it "
                       r"under the bound loop \(compute_at\) or in a shared memory "
                       r"\(asc.l2\)"):
        _build(sch)


def test_shared_buffer_inside_the_bound_loop_refused():
    sch = S.Schedule(gemm(64))
    blk = sch.get_block("C")
    a = sch.cache_read(blk, 0, "asc.l2")
    c, _ = sch.split(sch.get_loops(blk)[0], [4, None])
    sch.compute_at(a, c)
    sch.bind(c, "asc.core")
    with pytest.raises(AccelLoweringError, match=r"buffer 'A_asc.l2' of shared memory "
                       r"'asc.l2' is staged inside the loop bound to 'asc.core': every core "
                       r"would write the one copy"):
        _build(sch)


def test_single_core_device_refuses_bind():
    from targets.accel.examples.toy_npu import toy_npu
    targets.register_target(toy_npu, replace=True)
    sch = S.Schedule(gemm(64))
    sch.bind(sch.get_loops(sch.get_block("C"))[0], "asc.core")
    with pytest.raises(AccelLoweringError, match=r"it has one core \(nothing to bind\); "
                       r"remove the bind"):
        targets.build(sch, "toy-npu", name="g")


# the description -------------------------------------------------------------------------

@pytest.mark.parametrize("kw,message", [
    (dict(count=0), r"Cores: count must be a positive int, found 0"),
    (dict(count=2, axis="core"), r"Cores: axis must be a dotted name such as 'npu.core'"),
    (dict(count=2, bandwidth={"global": 0}), r"bandwidth\['global'\] must be a positive int"),
    (dict(count=2, bandwidth=[1]), r"bandwidth must be a dict"),
])
def test_cores_description_errors(kw, message):
    with pytest.raises(DescriptionError, match=message):
        Cores(**kw)


@pytest.mark.parametrize("kw,message", [
    (dict(shared=("asc.l3",)), r"Cores.shared names memory 'asc.l3', which is not one of "
                               r"its memories"),
    (dict(shared=("asc.l2",), bandwidth={"asc.l1": 8}),
     r"Cores.bandwidth names 'asc.l1'; name 'global' \(host memory\) or a shared memory "
     r"\(asc.l2\)"),
])
def test_cores_checked_against_the_memories(kw, message):
    with pytest.raises(DescriptionError, match=message):
        Cores(4, axis="asc.core", **kw).check("Accelerator 'x'", list(ASCEND))


def test_core_axis_is_a_target_axis():
    assert [(a.tag, a.level, a.limit) for a in ascend.axes] == [("asc.core", "grid", 4)]
    assert ascend.describe(targets.Target("ascend-like"))["cores"] == {
        "count": 4, "axis": "asc.core", "shared": ["asc.l2"],
        "bandwidth": [("asc.l2", 256), ("global", 128)]}
    assert thread_axis("asc.core").level == "grid"


def test_each_core_has_its_own_per_core_memories():
    """The simulator swaps a core's per-core memories in with its state: what core 0
    wrote into its L1 is not in core 1's; the shared L2 is one for all."""
    import ctypes
    mod = _run_gemm(64, 64, 64, cores=2)
    lib = mod.runtime.library
    lib.ascend_like_scratch.restype = ctypes.POINTER(ctypes.c_uint8)
    l1, l2 = (ascend.memories_only.index(ascend.scopes[s]) for s in ("asc.l1", "asc.l2"))
    lib.cvl_sim_reset()
    lib.ascend_like_fork()
    seen = []
    for core, value in ((0, 7), (1, 9), (0, None), (1, None)):
        lib.ascend_like_core(core)
        mine, shared = lib.ascend_like_scratch(l1), lib.ascend_like_scratch(l2)
        if value is not None:
            mine[0], shared[0] = value, value
        seen.append((mine[0], shared[0]))
    lib.ascend_like_join()
    assert seen == [(7, 7), (9, 9), (7, 9), (9, 9)]


def test_shared_buffer_written_by_the_cores_refused():
    """The result accumulated in the shared L2 by every core: one copy, four writers."""
    sch = S.Schedule(gemm(64))
    blk = sch.get_block("C")
    sch.cache_write(blk, 0, "asc.l2")
    c, _ = sch.split(sch.get_loops(blk)[0], [4, None])
    sch.bind(c, "asc.core")
    with pytest.raises(AccelLoweringError, match=r"buffer 'C_asc.l2' of shared memory "
                       r"'asc.l2' is written inside the loop bound to 'asc.core': every "
                       r"core would write the one copy"):
        _build(sch)


def test_a_small_conv_loads_each_row_block_in_one_command():
    """The 4-core conv 18x18 8->24 (issue 23, Done means): the weights' nine padded taps
    are one 3-D command into L2, and with four output rows a core (fewer than the
    pipeline's five stages) each core's six input rows one command into L1 (padded only
    along the channels, contiguous on both sides), each input byte read once; it took
    4370 cycles at 26% of the cube, three commands a row and nine for the weights, then
    2280 (50.5%) before its DMA kept several commands in flight, 1980 before mmad's
    init bit replaced the accumulators' zero fill."""
    mod = targets.build(schedule_conv2d_cores(conv2d(1, 18, 18, 8, 24), cores=4),
                        "ascend-like", name="conv")
    src = mod.get_source("c")
    assert src.count("ascend_like_dma_load_pad_3d(&W_asc_l2[0], &W[0], 16, 32, 8, 24, ") == 1
    assert "ascend_like_dma_load_pad(&I_asc_l1[0], &I[y_0 * 576], 108, 16, 108, 8, 16, 8);" \
        in src
    rng = np.random.default_rng(5)
    x, w = _ints(rng, (1, 18, 18, 8)), _ints(rng, (3, 3, 8, 24))
    y = np.zeros((1, 16, 16, 24), "int32")
    mod(x, w, y)
    np.testing.assert_array_equal(y, conv2d_nhwc_ref(x, w))
    assert mod.stats["cycles"] == 1924 and mod.stats["cores_used"] == 4
    assert mod.stats["dma_bytes_in"] == 4 * 6 * 18 * 8 + w.size


def test_a_strip_per_core_or_rows_per_row_is_one_choice_and_both_are_exact():
    rng = np.random.default_rng(6)
    x, w = _ints(rng, (1, 18, 18, 8)), _ints(rng, (3, 3, 8, 24))
    for strip in (False, True):
        mod = targets.build(schedule_conv2d_cores(conv2d(1, 18, 18, 8, 24), cores=2,
                                                  strip=strip), "ascend-like", name="conv")
        y = np.zeros((1, 16, 16, 24), "int32")
        mod(x, w, y)
        np.testing.assert_array_equal(y, conv2d_nhwc_ref(x, w))
        assert mod.stats["dma_bytes_in"] == (2 * 10 if strip else 16 * 3) * 18 * 8 + w.size
