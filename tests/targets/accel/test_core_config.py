"""A vendor's configuration call on a multi-core device (issue 23 item 1, "optional
vendor HAL signatures"): each core has its own configuration, so a configuration
every call passes the same constants is issued once per core, after the switch to
it, and the simulator keeps what it set per core."""

import re

import pytest

import targets
from cuvil_tir.errors import TargetError
from targets.accel import Accelerator, HalArg, HalCall
from targets.accel.examples.ascend_like import L1, ascend
from targets.toolkit.npu.gemm import gemm
from targets.toolkit.npu.multicore import schedule_gemm_cores
from tests.targets.accel.small_npu import registered, run_gemm

# MTE2's DDR -> L1 copy with the stride between source rows set by a configuration
GAP = HalCall("set_mte2_src_stride", "dma_load", (HalArg("stride", "src_stride", "uint32_t"),))
CBUF = HalCall("copy_gm_to_cbuf", "dma_load", (
    HalArg("dst", "dst", "uint32_t", address="bytes"), HalArg("src", "src", "const void *"),
    HalArg("sid", 0, "uint8_t"), HalArg("n_burst", "rows", "uint16_t"),
    HalArg("len_burst", "row_bytes", "uint16_t"),
    HalArg("dst_gap", "dst_stride", "uint16_t", minus="row_bytes")),
    memories={"dst": L1}, config=GAP)


def _configured():
    """The Ascend-like device (same name: a rebuild of it) with that copy."""
    calls = [CBUF] + [c for c in ascend.hal_calls if c.name != "copy_gm_to_cbuf"]
    return Accelerator(ascend.name, ascend.memories_only, ascend.dma, ascend.intrinsics,
                       doc=ascend.doc, clock_mhz=ascend.clock_mhz, moves=ascend.moves,
                       cores=ascend.cores, hal_calls=calls)


def _gemm(acc, cores, n=64):
    with registered(acc, ascend):
        mod = targets.build(schedule_gemm_cores(gemm(n), cores=cores), ascend.name, name="g")
    run_gemm(mod, n, seed=cores)
    return mod


@pytest.mark.parametrize("cores", [2, 4])
def test_a_configuration_is_issued_once_per_core(cores):
    plain, mod = _gemm(ascend, cores), _gemm(_configured(), cores)
    src = mod.get_source("c")
    assert "void set_mte2_src_stride(uint32_t stride);" in mod.get_source("h")
    # every load of A passes a stride of 64: configured once, after each core switch
    assert src.count("set_mte2_src_stride(") == 1
    switch = src.index("ascend_like_core(i_0_0);")
    assert src.index("(void)set_mte2_src_stride(64);") == src.index("\n", switch) + 9
    assert re.search(r"\(void\)copy_gm_to_cbuf\(\d+, &A\[i_0_0 \* \d+\], 0, \d+, 64, 0\);", src)
    assert mod.stats["cycles"] == plain.stats["cycles"]


def test_a_core_never_configured_is_a_simulator_error(monkeypatch):
    # issued only before the cores start (as on a one-core device), the configuration
    # is core 0's: the loads on core 1 find none
    monkeypatch.setenv("CUVIL_CACHE", "0")
    monkeypatch.setattr("targets.accel.codegen._core_loops", lambda body, switch: [])
    with pytest.raises(TargetError, match=r"simulator of 'ascend-like': a vendor call ran "
                       r"on a core its configuration call \(or first part\) was not issued"):
        _gemm(_configured(), 2)
