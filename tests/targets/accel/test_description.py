"""Accelerator descriptions are validated when they are built."""

import pytest

import cuvil_tir as T
import targets
from targets.accel import DMA, Accelerator, DescriptionError, Intrinsic, Memory
from targets.accel.description import check_description
from targets.accel.examples.toy_npu import gemm_desc, toy_npu
from targets.toolkit.npu.gemm import gemm, schedule_gemm


def _desc():
    A = T.decl_buffer((4,), "int32", "A")
    return T.PrimFunc([A], T.BufferStore(A, A[0], (T.const(0),)))


def test_memory_capacity_and_width():
    m = Memory("npu.inp", banks=4, bank_bytes=1024, width_bits=128)
    assert (m.capacity_bytes, m.width_bytes) == (4096, 16)


@pytest.mark.parametrize("kw, msg", [
    (dict(scope="global"), "dotted name"),
    (dict(banks=0), "banks must be a positive int"),
    (dict(bank_bytes=100), "not a multiple of the access width"),
    (dict(width_bits=12), "not a whole number of bytes"),
])
def test_memory_errors(kw, msg):
    args = dict(scope="npu.x", banks=2, bank_bytes=1024, width_bits=128) | kw
    with pytest.raises(DescriptionError, match=msg):
        Memory(**args)


def test_dma_cost_and_errors():
    assert DMA(512, 40).cycles(rows=16, row_bytes=16) == 56
    assert DMA(512, 40).cycles(rows=1, row_bytes=256) == 44
    with pytest.raises(DescriptionError, match="latency_cycles must be an int >= 0"):
        DMA(512, -1)


def test_intrinsic_errors():
    with pytest.raises(DescriptionError, match="operands must name each desc parameter"):
        Intrinsic("x.i", _desc(), {"B": "npu.acc"}, "i", cycles=4)
    with pytest.raises(DescriptionError, match="must return a positive int"):
        Intrinsic("x.i", _desc(), {"A": "npu.acc"}, "i", cycles=lambda s: 0)
    with pytest.raises(DescriptionError, match="unit 'load' is the DMA's"):
        Intrinsic("x.i", _desc(), {"A": "npu.acc"}, "i", cycles=4, unit="load")
    assert Intrinsic("x.i", _desc(), {"A": "npu.acc"}, "i", cycles=lambda s: s["A"][0]).cost() == 4


def test_operand_in_unknown_memory():
    it = Intrinsic("x.i", _desc(), {"A": "npu.accc"}, "i", cycles=4)
    mems = [Memory("npu.acc", 2, 1024, 128)]
    with pytest.raises(DescriptionError, match="operand 'A' is in memory 'npu.accc', which is "
                                               "not one of its memories"):
        check_description("npu", mems, DMA(64, 1), [it])
    with pytest.raises(DescriptionError, match="declared twice"):
        check_description("npu", mems + mems, DMA(64, 1), [])


def test_intrinsic_contradicting_its_operand_shapes_is_refused():
    """Issue 23 defect 3: A declared 8x4 but read at k < 8 passed construction and the
    simulator computed a full 8x8x8; the description is verified like T.lower does."""
    good = gemm_desc(8, 8, 8, scopes=("x.inp", "x.wgt", "x.acc"))
    A = good.params[0]
    narrow = A.with_changes(shape=(T.const(8), T.const(4)))
    bad = T.PrimFunc((narrow,) + tuple(good.params[1:]),
                     T.substitute(good.body, {}, {A: narrow}))
    with pytest.raises(DescriptionError, match=r"Intrinsic 'x.bad': desc is not valid IR "
                       r"\(\[CVL-E104\] out-of-bounds load from buffer 'A': index vk of "
                       r"dimension 1 ranges over \[0, 7\] but the extent is 4"):
        Intrinsic("x.bad", bad, {"A": "x.inp", "B": "x.wgt", "C": "x.acc"}, "bad", cycles=8)


def test_a_second_accelerator_cannot_take_over_an_intrinsic_name():
    """Issue 23 defect 4: reusing 'toy.gemm_16x16x16_i8' silently re-registered it, and
    the toy NPU's schedules then called the second device's function."""
    with pytest.raises(DescriptionError, match=r"Accelerator 'other-npu': intrinsic name "
                       r"'toy.gemm_16x16x16_i8' already belongs to accelerator 'toy-npu'; "
                       r"two devices' names must not meet: prefix yours \(e.g. "
                       r"'other.gemm_16x16x16_i8'\)"):
        Accelerator("other-npu", [Memory("o.inp", 4, 8192, 128), Memory("o.wgt", 4, 8192, 128),
                                  Memory("o.acc", 8, 8192, 512)], DMA(512, 64),
                    [Intrinsic("toy.gemm_16x16x16_i8",
                               gemm_desc(scopes=("o.inp", "o.wgt", "o.acc")),
                               {"A": "o.inp", "B": "o.wgt", "C": "o.acc"}, "gemm", cycles=18)])
    targets.register_target(toy_npu, replace=True)
    mod = targets.build(schedule_gemm(gemm(32), tile=32), "toy-npu", name="g")
    assert "toy_npu_gemm_16x16x16(" in mod.get_source("c")
