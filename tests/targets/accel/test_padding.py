"""GEMM sizes that are not multiples of the intrinsic: ``pad_einsum`` pads the
computation, the DMA zero-fills the edge tiles on load and writes back only their
valid part; exact on the toy NPU and on the second accelerator; every refusal."""

from dataclasses import replace

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from targets.accel import DMA, AccelLoweringError, Accelerator
from targets.toolkit.npu.gemm import gemm, schedule_gemm
from targets.accel.examples.toy_npu import toy_npu
from targets.accel.hal import header
from targets.accel.transfer import dma_transfers

from tests.targets.accel.test_second_accelerator import SCOPES, mac

targets.register_target(toy_npu, replace=True)


def _check(mod, n, m, k, dtype="int8", acc="int32", seed=0):
    rng = np.random.default_rng(seed)
    lo, hi = (-128, 128) if dtype == "int8" else (-4, 5)
    a = rng.integers(lo, hi, (n, k)).astype(dtype)
    b = rng.integers(lo, hi, (k, m)).astype(dtype)
    c = np.full((n, m), 7, acc)          # stale values must be overwritten
    mod(a, b, c)
    np.testing.assert_array_equal(c, a.astype(acc) @ b.astype(acc))


@pytest.mark.parametrize("shape,double", [((100, 70, 50), False), ((256, 200, 130), True)])
def test_non_multiple_gemm_equals_numpy(shape, double):
    n, m, k = shape
    mod = targets.build(schedule_gemm(gemm(n, m, k), double=double), "toy-npu",
                        name=f"pad{n}")
    _check(mod, n, m, k)
    src, st = mod.get_source("c"), mod.stats
    assert "toy_npu_dma_load_pad(" in src and "toy_npu_dma_load_pad(" in mod.get_source("h")
    assert st["dma_bytes_out"] == n * m * 4            # only the valid part goes back
    assert st["bank_conflict_stalls"] == 0
    if double:
        assert st["utilisation"]["gemm"] > 0.9


def test_padded_gemm_on_the_second_accelerator():
    targets.register_target(mac, replace=True)
    sch = schedule_gemm(gemm(40, 20, 12, in_dtype="float16", acc_dtype="float32"), tile=16,
                        t=8, gemm="mac8.mma_8x8x8_f16", zero="mac8.zero_8x8_f32",
                        scopes=SCOPES)
    mod = targets.build(sch, "mac8", name="mac_pad")
    _check(mod, 40, 20, 12, "float16", "float32")
    assert "mac8_dma_load_pad(" in mod.get_source("c")


def test_dma_without_padding_names_what_to_change():
    # its own intrinsic names: the toy NPU's stay bound to the toy NPU's HAL
    nopad = Accelerator("nopad-npu", toy_npu.memories_only,
                        DMA(width_bits=512, latency_cycles=64, padding=False),
                        [replace(it, name="nopad." + it.name) for it in toy_npu.intrinsics])
    targets.register_target(nopad, replace=True)
    sch = schedule_gemm(gemm(40, 32, 32), tile=32, gemm="nopad.toy.gemm_16x16x16_i8",
                        zero="nopad.toy.zero_16x16_i32")
    with pytest.raises(AccelLoweringError, match=r"zero-fills the part of the tile past "
                       r"the edge of 'A'.*DMA of accelerator 'nopad-npu' cannot pad; "
                       r"describe it with DMA\(\.\.\., padding=True\)"):
        targets.build(sch, "nopad-npu")
    assert "dma_load_pad" not in header(nopad)


def test_guard_that_is_not_an_upper_bound():
    S_ = T.decl_buffer((4, 16), "int8", "S", scope="npu.inp")
    G = T.decl_buffer((64, 64), "int8", "G")
    r, c = T.var("r"), T.var("c")
    store = T.IfThenElse(r >= 2, T.BufferStore(S_, G[r, c], (r, c)))
    nest = T.For(r, T.const(0), T.const(4), "serial",
                 T.For(c, T.const(0), T.const(16), "serial", store))
    with pytest.raises(AccelLoweringError, match="is not an upper bound 'row/column"):
        dma_transfers(T.PrimFunc([G], T.Allocate(S_, nest)), toy_npu)


def _staged(n=20, m=20, k=20):
    sch = S.Schedule(gemm(n, m, k))
    blk = sch.get_block("C")
    sch.cache_read(blk, 0, "npu.inp")
    sch.cache_read(blk, 1, "npu.wgt")
    sch.cache_write(blk, 0, "npu.acc")
    return sch, blk


def test_pad_einsum_refusals():
    sch, blk = _staged()
    with pytest.raises(S.ScheduleError, match=r"padding must be 3 positive ints \(one per "
                                              r"iter var of block 'C'"):
        sch.pad_einsum(blk, [16, 16])
    i = sch.get_loops(blk)[0]
    sch.split(i, [None, 4])
    with pytest.raises(S.ScheduleError, match="not to a loop of its own; pad_einsum before "
                                              "splitting"):
        sch.pad_einsum(blk, [16, 16, 16])


def test_pad_einsum_refuses_a_reduction_that_is_not_a_sum_of_products():
    A = T.placeholder((20, 20), "int32", name="A")
    r = T.reduce_axis((0, 20), name="k")
    M = T.compute((20,), lambda i: T.max(A[i, r], axis=r), name="M")
    sch = S.Schedule(T.create_prim_func([A, M]))
    blk = sch.get_block("M")
    sch.cache_read(blk, 0, "global")
    sch.cache_write(blk, 0, "global")
    with pytest.raises(S.ScheduleError, match="is not a sum of products"):
        sch.pad_einsum(blk, [16, 16])


def test_pad_einsum_is_a_no_op_on_whole_tiles_and_replays():
    sch, blk = _staged(32, 32, 32)
    before = sch.func
    sch.pad_einsum(blk, [16, 16, 16])
    assert sch.func is before
    sch, blk = _staged()
    sch.pad_einsum(blk, [16, 16, 16])
    assert [int(d.value) for d in sch.func.body.block.alloc_buffers[0].shape] == [32, 32]
    replayed = S.Trace.from_json(sch.trace.as_json()).apply(gemm(20, 20, 20))
    assert T.structural_equal(replayed.func, sch.func)


def test_pad_einsum_refuses_shared_loops_unit_domains_and_non_affine_indices():
    sch, blk = _staged()
    a = sch.get_producers(blk)[0]
    sch.compute_at(a, sch.get_loops(blk)[0])
    with pytest.raises(S.ScheduleError, match="loop 'i' holds other blocks too"):
        sch.pad_einsum(blk, [16, 16, 16])
    from targets.toolkit.npu.conv2d import conv2d
    sch = S.Schedule(conv2d(1, 6, 6, 8, 8))
    blk = sch.get_block("O")
    sch.cache_read(blk, 0, "npu.inp")
    sch.cache_read(blk, 1, "npu.wgt")
    sch.cache_write(blk, 0, "npu.acc")
    with pytest.raises(S.ScheduleError, match=r"block 'I_npu.inp': iter var 'v0' has no "
                                              r"loop to pad \(a unit domain\)"):
        sch.pad_einsum(blk, [16, 1, 16, 16, 1, 1, 16])
    A = T.placeholder((10,), "int32", name="A")
    B = T.compute((20,), lambda i: A[i // 2], name="B")
    sch = S.Schedule(T.create_prim_func([A, B]))
    blk = sch.get_block("B")
    sch.cache_read(blk, 0, "global")
    sch.cache_write(blk, 0, "global")
    with pytest.raises(S.ScheduleError, match="is not an affine form of its iter vars"):
        sch.pad_einsum(blk, [16])


def test_pad_einsum_needs_a_copy_like_producer():
    A = T.placeholder((20, 20), "int32", name="A")
    r = T.reduce_axis((0, 20), name="r")
    X = T.compute((20,), lambda i: T.sum(A[i, r], axis=r), name="X")
    Y = T.compute((20,), lambda i: X[i] * 2, name="Y")
    sch = S.Schedule(T.create_prim_func([A, Y]))
    blk = sch.get_block("Y")
    sch.cache_write(blk, 0, "global")
    with pytest.raises(S.ScheduleError, match=r"producer 'X' of 'X' must store "
                                              r"X\[v0, v1, \.\.\.\] indexed by its iter vars"):
        sch.pad_einsum(blk, [16])


def test_a_store_never_pads():
    L = T.decl_buffer((4, 16), "int32", "L", scope="npu.acc")
    G = T.decl_buffer((64, 64), "int32", "G")
    r, c = T.var("r"), T.var("c")
    value = T.if_then_else(r < 2, L[r, c], T.const(0, "int32"))
    nest = T.For(r, T.const(0), T.const(4), "serial",
                 T.For(c, T.const(0), T.const(16), "serial", T.BufferStore(G, value, (r, c))))
    with pytest.raises(AccelLoweringError, match="stores zeros past the edge of host memory; "
                                                 "only a load pads"):
        dma_transfers(T.PrimFunc([G], T.Allocate(L, nest)), toy_npu)
