"""Several DMA engines per device (issue 23 item 1: "DMA engines, how many, which
queues"): each engine its own timeline and queues in the simulator, a staged copy on
an engine of its direction that reaches its memory, results bit-exact."""

import pytest

import targets
from targets.accel import (DMA, Accelerator, AccelLoweringError, DescriptionError,
                           DMAEngine, Intrinsic, Memory, Queue, QueueDepthError)
from targets.accel.description import check_description
from targets.accel.examples.toy_npu import gemm_desc, toy_npu
from targets.toolkit.npu.gemm import gemm, schedule_gemm
from tests.targets.accel.small_npu import build_gemm, run_gemm, scopes, small_npu

SCOPES = scopes("e")


def _npu(name, engines=(), queues=()):
    """The toy NPU's geometry and DMA with its own intrinsic names and DMA engines."""
    return small_npu(name, "e", DMA(width_bits=512, latency_cycles=64, engines=engines),
                     queues=queues)


def _gemm(acc, double=True):
    return build_gemm(acc, "e", tile=32, double=double)


def _run(mod):
    return run_gemm(mod, seed=5)


TWO_LOADS = (DMAEngine("load", "load", reach=("e.inp", "e.acc")),
             DMAEngine("wload", "load", reach=("e.wgt",)),
             DMAEngine("store", "store"))


def test_two_load_engines_overlap_their_transfers_and_cycles_drop():
    # 32-tiles: per k step two 1 KiB loads (80 cycles each) against 144 GEMM cycles,
    # load-bound on one engine, GEMM-bound on two
    one = _gemm(_npu("e-one"))
    two = _gemm(_npu("e-two", TWO_LOADS))
    s1, s2 = _run(one), _run(two)
    src = two.get_source("c")
    assert "e_two_wload_load(" in src and "e_two_dma_load(" in src
    assert "e_two_wload_load(" in two.get_source("h")
    assert s2["engine_busy"]["wload"] > 0 and s2["engine_busy"]["load"] > 0
    assert s2["engine_busy"]["wload"] + s2["engine_busy"]["load"] == s1["engine_busy"]["load"]
    assert s2["dma_bytes_in"] == s1["dma_bytes_in"]
    assert s2["cycles"] < 0.85 * s1["cycles"], (s1["cycles"], s2["cycles"])
    assert s2["utilisation"]["gemm"] > 0.9 > s1["utilisation"]["gemm"]
    assert set(s2["utilisation"]) == {"gemm", "vector"}
    # each engine is a thread of the timeline
    names = {e["args"]["name"] for e in two.trace()["traceEvents"] if e["ph"] == "M"}
    assert {"load", "wload", "store", "gemm"} <= names


def test_engines_reaching_every_memory_share_the_buffers_out():
    both = (DMAEngine("dma0", "load"), DMAEngine("dma1", "load"), DMAEngine("store", "store"))
    mod = _gemm(_npu("e-deal", both))
    src = mod.get_source("c")
    # A on the first engine, B on the second: each staged buffer stays on one engine
    lines = [ln for ln in src.splitlines() if "_load(" in ln]
    assert lines and all(("dma0" in ln) == ("A_e_inp" in ln) for ln in lines)
    assert all(("dma1" in ln) == ("B_e_wgt" in ln) for ln in lines)
    stats = _run(mod)
    assert stats["engine_busy"]["dma0"] > 0 and stats["engine_busy"]["dma1"] > 0


def test_each_engine_has_its_own_width_latency_and_queues():
    slow = (DMAEngine("load", "load", reach=("e.inp", "e.acc")),
            DMAEngine("wload", "load", reach=("e.wgt",), width_bits=128, latency_cycles=200),
            DMAEngine("store", "store"))
    fast = _run(_gemm(_npu("e-fast", TWO_LOADS)))
    narrow = _run(_gemm(_npu("e-narrow", slow)))
    # 64 loads of a 32x32 B tile, rows of 32 bytes: one 64-byte beat each, or two
    # 16-byte beats at a quarter of the width, after the engine's own latency
    assert fast["engine_busy"]["wload"] == 64 * (64 + 32 * 1)
    assert narrow["engine_busy"]["wload"] == 64 * (200 + 32 * 2)
    assert narrow["engine_busy"]["load"] == fast["engine_busy"]["load"]
    # a queue from the gemm unit back to the second engine, deep enough for single
    # buffering, too shallow for two copies: the proof names that engine
    shallow = _npu("e-shallow", TWO_LOADS, queues=[Queue("gemm", "wload", depth=1)])
    assert set(_run(_gemm(shallow, double=False))["queue_full_stalls"]) >= {"wload"}
    with pytest.raises(QueueDepthError, match=r"CVL-E175.*from engine 'gemm' to engine "
                       r"'wload' has depth 1, but this program holds up to 2 tokens.*"
                       r"B_e\.wgt"):
        _gemm(shallow)


def test_the_description_keys_and_headers_name_the_engines():
    acc = _npu("e-key", TWO_LOADS)
    targets.register_target(acc, replace=True)
    d = acc.describe(targets.Target("e-key"))
    assert [e["name"] for e in d["dma"]["engines"]] == ["load", "wload", "store"]
    assert acc.engines[:3] == ("load", "wload", "store")
    assert acc.dma_direction == {"load": "load", "wload": "load", "store": "store"}
    assert "wload (load ['e.wgt'])" in targets.build(
        schedule_gemm(gemm(32), tile=32, gemm="e_key.gemm", zero="e_key.zero",
                      scopes=SCOPES), "e-key", name="k").get_source("h")
    # the default: one load and one store engine, Cuvil's call names
    assert [(e.name, e.direction) for e in toy_npu.dma.engines] == [("load", "load"),
                                                                    ("store", "store")]


def test_a_copy_no_engine_reaches_is_refused_with_the_engines():
    acc = _npu("e-far", (DMAEngine("load", "load", reach=("e.inp", "e.acc")),
                         DMAEngine("store", "store")))
    with pytest.raises(AccelLoweringError, match=(
            r"CVL-E172.*the copy B -> B_e\.wgt: no load engine of accelerator 'e-far' "
            r"reaches 'e\.wgt' \(load reaches \['e\.inp', 'e\.acc'\]\)")):
        _gemm(acc)


@pytest.mark.parametrize("make, message", [
    (lambda: DMAEngine("x", "both"), r"direction must be 'load'"),
    (lambda: DMAEngine("1x", "load"), r"name must be a C identifier"),
    (lambda: DMAEngine("x", "load", reach=(3,)), r"reach names memory scopes"),
    (lambda: DMAEngine("x", "load", width_bits=12), r"width_bits must be a positive multiple"),
    (lambda: DMAEngine("x", "load", latency_cycles=-1), r"latency_cycles must be an int >= 0"),
    (lambda: DMA(512, 64, engines=[DMAEngine("a", "load")]), r"no store engine"),
    (lambda: DMA(512, 64, engines=[DMAEngine("a", "load"), DMAEngine("a", "store")]),
     r"engine\(s\) \['a'\] declared twice"),
    (lambda: DMA(512, 64, engines=["load"]), r"engines must be DMAEngine objects"),
    (lambda: check_description("n", [Memory("e.inp", 1, 64, 128)],
                               DMA(512, 64, engines=TWO_LOADS), []),
     r"DMAEngine 'load' reach names \['e.acc'\], which are not among its memories"),
    # an engine named "dma" would run its loads as Cuvil's default engine's calls
    (lambda: _npu("e-clash", (DMAEngine("load", "load"), DMAEngine("dma", "load"),
                              DMAEngine("store", "store"))),
     r"HAL function 'e_clash_dma_load' would run load on engines 'load' and 'dma'"),
    (lambda: Accelerator("e-clash2", [Memory("e.inp", 1, 1024, 128)], DMA(512, 64),
                         [Intrinsic("e_clash2.x", gemm_desc(scopes=("e.inp",) * 3),
                                    dict(zip("ABC", ("e.inp",) * 3)), "dma_load", cycles=1)]),
     r"HAL function\(s\) \['e_clash2_dma_load'\] would run two different operations"),
])
def test_engine_description_errors(make, message):
    with pytest.raises(DescriptionError, match=message):
        make()
