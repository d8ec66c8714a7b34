"""IRModule in, Program out (issue 21 item 2): every backend's codegen returns one
Program, the compile cache stores it for every backend (accelerators and CUDA too), and
load runs it the same whether it was just made or read back."""

import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir.target import Program
from targets.accel.examples.toy_npu import toy_npu
from targets.toolkit.npu.gemm import gemm, schedule_gemm


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CUVIL_CACHE", raising=False)
    return tmp_path / "cache"


def _scaled():
    n = T.size_var("n")
    A = T.placeholder((n,), name="A")
    return T.create_prim_func([A, T.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")])


@pytest.mark.parametrize("target, formats, binaries", [
    ("llvm -mcpu=haswell", ["ll", "ll-opt"], ["obj"]),
    ("c", ["c"], ["so"]),
])
def test_a_cpu_program_is_stored_and_loaded_back(cache_dir, target, formats, binaries):
    first = targets.build(_scaled(), target)
    assert isinstance(first.program, Program) and not first.from_cache
    assert list(first.program.sources) == formats
    assert list(first.program.binaries) == binaries
    assert first.program.functions == {"main": "host"}
    again = targets.build(_scaled(), target)
    assert again.from_cache and again.program.sources == first.program.sources
    assert again.program.binaries == first.program.binaries
    assert T.structural_equal(again.lowered, first.lowered)
    a, b = np.arange(5, dtype="float32"), np.zeros(5, "float32")
    again(a, b)
    np.testing.assert_array_equal(b, a * 2 + 1)


def test_an_accelerator_program_carries_its_memory_plan_and_is_cached(cache_dir):
    targets.register_target(toy_npu, replace=True)
    first = targets.build(schedule_gemm(gemm(32), tile=32), "toy-npu", name="g")
    plan = first.program.memory
    assert set(plan) == {"npu.inp", "npu.wgt", "npu.acc"} and all(plan.values())
    assert "cuvil-accel-plan" not in first.get_source("c")      # data, not a comment
    assert sorted(first.program.sources) == ["c", "h", "sim"]
    again = targets.build(schedule_gemm(gemm(32), tile=32), "toy-npu", name="g")
    assert again.from_cache and again.program.memory == plan
    assert again.memory_map() == first.memory_map()
    a = np.arange(32 * 32).reshape(32, 32).astype("int8")
    b = np.ones((32, 32), "int8")
    out = [np.zeros((32, 32), "int32") for _ in range(2)]
    first(a, b, out[0])
    again(a, b, out[1])
    np.testing.assert_array_equal(out[0], a.astype("int32") @ b.astype("int32"))
    np.testing.assert_array_equal(out[1], out[0])
    assert again.stats["cycles"] == first.stats["cycles"] > 0


def test_a_cuda_program_is_cached_with_its_launches(cache_dir):
    import schedules as S
    A = T.placeholder((256,), name="A")
    sch = S.Schedule(T.create_prim_func([A, T.compute((256,), lambda i: A[i] + 1.0,
                                                      name="B")]))
    bx, tx = sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 64])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    first = targets.build(sch, "cuda")
    assert first.program.functions == {"main": "host", "main_kernel0": "device_kernel"}
    again = targets.build(sch, "cuda")
    assert again.from_cache and again.get_source("cuda") == first.get_source("cuda")
    assert again.get_source("host") == first.get_source("host")
    assert again.runtime.launch_plan() == first.runtime.launch_plan() == \
        [("main_kernel0", (4, 1, 1), (64, 1, 1), 0)]


def test_two_accelerators_of_one_name_never_share_a_program(cache_dir):
    from targets.accel import Accelerator
    other = Accelerator("toy-npu", toy_npu.memories_only, toy_npu.dma, toy_npu.intrinsics,
                        clock_mhz=500)
    targets.register_target(toy_npu, replace=True)
    key = targets.describe_target("toy-npu")
    targets.register_target(other, replace=True)
    try:
        assert targets.describe_target("toy-npu") != key
    finally:
        targets.register_target(toy_npu, replace=True)


def test_a_program_round_trips_through_its_blobs():
    f = _scaled().with_attr("global_symbol", "f")
    p = targets.build(f, "c").program
    q = Program.from_blobs(p.to_blobs(), f, "f")
    assert (q.kind, q.entry, q.sources, q.binaries, q.functions) == \
        (p.kind, p.entry, p.sources, p.binaries, p.functions)
    assert q.signature.describe() == p.signature.describe() and q.from_cache
    assert [x.writes for x in q.signature.params] == [False, True]
    assert Program.from_blobs({**p.to_blobs(), "program.json": b"not json"}, f) is None
    with pytest.raises(targets.TargetError, match="must be plain data"):
        Program("k", "f", meta={"x": object()}).to_blobs()
