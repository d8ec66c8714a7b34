"""Which memories a DMA reaches (``DMA(reach=...)``, issue 23 item 4): the Ascend-like
MTE2 loads into L1 and UB (and the L2), never straight into the cube's L0A/L0B."""

import pytest

import schedules as S
import targets
from targets.accel import DMA, Memory
from targets.accel.description import check_description
from targets.accel.errors import AccelLoweringError, DescriptionError
from targets.accel.examples.ascend_like import L0A, L1, ascend
from targets.toolkit.npu.gemm import gemm
from targets.toolkit.npu.multicore import schedule_gemm_cores


def test_a_copy_from_host_memory_into_a_memory_the_dma_cannot_reach_is_refused():
    targets.register_target(ascend, replace=True)
    sch = S.Schedule(gemm(64))
    sch.cache_read(sch.get_block("C"), 0, L0A)
    with pytest.raises(AccelLoweringError, match=(
            r"CVL-E172.*the copy A -> A_asc.l0a: no load engine of accelerator 'ascend-like' "
            r"reaches 'asc.l0a' \(load reaches \['asc.l2', 'asc.l1', 'asc.l0c', 'asc.ub'\]\); "
            r"stage it through a memory one of them reaches")):
        targets.build(sch, "ascend-like", name="g")
    # through L1 (DMA) then L0A (the mte1 move) it builds
    assert "load_cbuf_to_ca(" in targets.build(schedule_gemm_cores(gemm(64), cores=1),
                                               "ascend-like", name="g").get_source("c")


def test_reach_names_memories_of_the_device():
    assert DMA(128, 8, reach="a.b").reach == ("a.b",) and DMA(128, 8).reach == ()
    with pytest.raises(DescriptionError, match=r"DMA: reach names memory scopes"):
        DMA(128, 8, reach=(1,))
    mem = Memory(L1, banks=2, bank_bytes=1024, width_bits=128)
    with pytest.raises(DescriptionError, match=r"Accelerator 'n': DMA reach names "
                                               r"\['asc.l0a'\], which are not among its "
                                               r"memories \(asc.l1\)"):
        check_description("n", [mem], DMA(128, 8, reach=(L0A,)), [])
    assert DMA(128, 8, reach=(L1,)).describe()["reach"] == [L1]
