"""The tensor-intrinsic registry (cuvil_tir.tensor_intrin): what registration checks,
and that the schedule layer's public name is the same registry."""

import pytest

import cuvil_tir as T
import schedules as S
from cuvil_tir.errors import ScheduleArgumentError, UnknownTensorIntrinError
from cuvil_tir.tensor_intrin import TensorIntrin
from schedules.intrinsics.cpu import gemm_intrin
from tests import workloads


def test_schedules_reexports_the_core_registry():
    assert S.TensorIntrin is TensorIntrin
    assert "cpu.gemm_4x8x4_f32" in TensorIntrin.names()   # shipped, registered by schedules


def test_register_checks_params_and_desc_init():
    desc, impl = gemm_intrin(4, 8, 4)
    other, _ = gemm_intrin(4, 4, 4)
    with pytest.raises(ScheduleArgumentError, match=r"parameter 1 differs: desc B "
                                                    r"float32\[4, 8\] vs impl B float32\[4, 4\]"):
        TensorIntrin.register("test.bad", desc, T.PrimFunc(other.params, impl.body))
    with pytest.raises(ScheduleArgumentError, match="desc has 3 buffer parameters but impl "
                                                    "has 2"):
        TensorIntrin.register("test.bad", desc, T.PrimFunc(impl.params[:2], impl.body))
    w = workloads.matmul(4, 8, 4)
    with pytest.raises(ScheduleArgumentError, match="desc block 'C' has an init"):
        TensorIntrin.register("test.bad", w.func, w.func)
    with pytest.raises(ScheduleArgumentError, match="impl parameter 'n' is a scalar"):
        n = T.var("n")
        TensorIntrin.register("test.bad", desc, T.PrimFunc([n], impl.body))
    assert "test.bad" not in TensorIntrin.names()
    TensorIntrin.register("test.gemm_once", desc, impl, override=True)
    with pytest.raises(ScheduleArgumentError, match="'test.gemm_once' is already registered"):
        TensorIntrin.register("test.gemm_once", desc, impl)
    assert TensorIntrin.get("test.gemm_once").impl is impl


def test_unknown_intrinsic_is_a_coded_value_error():
    with pytest.raises(UnknownTensorIntrinError, match=r"no tensor intrinsic named "
                                                       r"'test.nope'; registered: \["):
        TensorIntrin.get("test.nope")
    assert issubclass(UnknownTensorIntrinError, ValueError)
