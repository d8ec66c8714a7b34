"""DMA commands in flight (``DMA(outstanding=N)``) and contiguous rows streamed as one
burst, on the simulator (issue 23 item 1: the Ascend-like conv 18x18 8->24 waited a
DMA latency per command)."""

import pytest

import targets
from targets.accel import DMA
from targets.accel.errors import DescriptionError
from targets.accel.examples.ascend_like import ascend
from targets.toolkit.npu.conv2d import conv2d
from targets.toolkit.npu.multicore import schedule_conv2d_cores
from tests.targets.accel.test_lifetimes import run_small_conv


def _events(mod, core=0):
    tr = mod.trace()["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in tr if e["name"] == "thread_name"}
    return [(names[e["pid"], e["tid"]], e["name"], round(e["ts"] * ascend.clock_mhz),
             e["args"]["cycles"]) for e in tr if e["ph"] == "X" and e["pid"] == core]


@pytest.fixture(scope="module")
def conv1():
    targets.register_target(ascend, replace=True)
    mod = targets.build(schedule_conv2d_cores(conv2d(1, 18, 18, 8, 24), cores=1),
                        "ascend-like", name="conv")
    run_small_conv(mod)
    return mod


def test_a_command_issues_behind_the_transfer_before_it_and_its_latency_overlaps(conv1):
    ev = _events(conv1)
    # the filter (144 rows) issues at 0: its data lands 128..272; the first input rows
    # issue behind its transfer (at 144), their data lands at 272, not 272 + 128
    w = next(e for e in ev if e[1] == "dma_load_pad_3d")
    x = next(e for e in ev if e[1] == "dma_load_pad")
    assert w[2:] == (128, 144) and x[2] == 144 + 128
    # the token to mte1 waits until what the load engine issued has completed
    l0b = next(e for e in ev if e[1] == "move_asc_l1_asc_l0b")
    assert l0b[2] >= w[2] + w[3]
    # each engine's slices add up to its busy cycles (the data phase of each command)
    for engine in ("load", "store", "cube"):
        assert sum(e[3] for e in ev if e[0] == engine) == \
            conv1.stats["core_busy"][0][engine]


def test_contiguous_rows_move_as_one_burst(conv1):
    # the filter in L1 is 144 rows of 32 bytes back to back on both sides: one burst of
    # 4608 bytes at 256 bytes a cycle after the move's 16 cycles (it took one cycle a row)
    l0b = next(e for e in _events(conv1) if e[1] == "move_asc_l1_asc_l0b")
    assert l0b[3] == 16 + 4608 // 256


def test_one_core_runs_the_small_conv_near_its_cube_peak(conv1):
    s = conv1.stats
    assert s["cores_used"] == 1 and s["utilisation"]["cube"] > 0.89
    # 6528 before: one latency per command, one cycle per row, the filter through L2;
    # 5134 with a DMA zero fill of each row's accumulators (mmad's init bit now)
    assert s["cycles"] == 5122


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_outstanding_must_be_a_positive_int(bad):
    with pytest.raises(DescriptionError, match=r"DMA: outstanding must be a positive "
                                               r"int, found " + repr(bad).replace(".", r"\.")):
        DMA(128, 32, outstanding=bad)


def test_outstanding_is_part_of_the_build_key():
    assert DMA(128, 32).describe()["outstanding"] == 1
    assert DMA(128, 32, outstanding=4).describe() != DMA(128, 32).describe()


def test_cores_reading_one_bank_of_the_shared_l2_wait_for_each_other():
    # the four cores move the filter out of the same L2 bank: one at a time, each
    # holding the bank for the whole move (16 cycles of latency, 18 of transfer) and
    # the next core waiting for it, counted as shared-bank stalls; the shared L2 link
    # alone (256 bytes a cycle) spaced them by the transfer only
    mod = targets.build(schedule_conv2d_cores(conv2d(1, 18, 18, 8, 24), cores=4),
                        "ascend-like", name="conv")
    run_small_conv(mod)
    starts = sorted(e[2] for c in range(4) for e in _events(mod, c)
                    if e[1] == "move_asc_l2_asc_l1")
    assert len(starts) == 4 and all(b - a >= 16 + 18 for a, b in zip(starts, starts[1:]))
    assert mod.stats["shared_bank_stalls"] > 0


def test_one_core_never_waits_for_another_cores_bank(conv1):
    assert conv1.stats["shared_bank_stalls"] == 0
