"""Vendor HAL signatures (issue 23, What must exist 1): a description declares its
vendor's own C calls; the kernel calls them, the simulator runs them with the results
and cycles of Cuvil's own calls, and an emitted call that does not fit its declared
signature is refused with CVL-E176."""

import numpy as np
import pytest

import cuvil_tir as T
import targets
from targets.accel import (DMA, Accelerator, DescriptionError, HalArg, HalCall,
                           HalSignatureError, Intrinsic, Memory)
from targets.accel.examples.ascend_like import ascend
from targets.accel.examples.toy_npu import elementwise_desc, gemm_desc
from targets.toolkit.npu.gemm import gemm, schedule_gemm
from targets.toolkit.npu.multicore import schedule_gemm_cores
from tests.targets.accel.small_npu import run_gemm

SCOPES = ("vh.in", "vh.w", "vh.acc")
ON = dict(gemm="vh.gemm_16x16x16_i8", zero="vh.zero_16x16_i32", scopes=SCOPES)


def _mvin(name, mem, rows_type="uint16_t", unit=16, fixed=None, col_unit=1):
    """A descriptor-taking load into ``mem`` with a row address (``unit`` bytes a row),
    its row length in ``col_unit``-byte blocks."""
    args = [HalArg("dram", "src", "const void *"),
            HalArg("sp_row", "dst", "uint32_t", unit=unit, address="bytes"),
            HalArg("rows", "rows", rows_type), HalArg("cols", "row_bytes", "uint16_t", unit=col_unit)]
    if fixed is None:
        args += [HalArg("sp_stride", "dst_stride", "uint32_t"),
                 HalArg("dram_stride", "src_stride", "uint32_t")]
    return HalCall(name, "dma_load", tuple(args), memories={"dst": mem}, struct="vh_dma_t",
                   returns="int32_t", fixed=fixed or {})


FLAGS = [HalCall(n, op, (HalArg("from_pipe", "src", "uint8_t"),
                         HalArg("to_pipe", "dst", "uint8_t"), HalArg("event", "id", "uint8_t")))
         for n, op in (("vh_set_flag", "push"), ("vh_wait_flag", "pop"))]
MMAD = HalCall("vh_mmad", "gemm_16x16x16", (
    HalArg("c", "C", "uint32_t", address="elements"), HalArg("a", "A", "uint32_t",
                                                             address="elements"),
    HalArg("b", "B", "uint32_t", address="elements"), HalArg("lda", "A_stride", "uint16_t"),
    HalArg("ldb", "B_stride", "uint16_t"), HalArg("ldc", "C_stride", "uint16_t"),
    HalArg("mode", 3, "uint8_t")))
VENDOR = [_mvin("vh_mvin_in", "vh.in"), _mvin("vh_mvin_w", "vh.w"), *FLAGS, MMAD]


def _device(hal_calls=()):
    """The same small NPU, with or without vendor calls (one name: a rebuild of it)."""
    return Accelerator(
        "vh-npu",
        memories=[Memory("vh.in", banks=2, bank_bytes=16 << 10, width_bits=128),
                  Memory("vh.w", banks=2, bank_bytes=16 << 10, width_bits=128),
                  Memory("vh.acc", banks=4, bank_bytes=16 << 10, width_bits=512)],
        dma=DMA(width_bits=256, latency_cycles=40),
        intrinsics=[
            Intrinsic("vh.gemm_16x16x16_i8", gemm_desc(scopes=SCOPES), dict(zip("ABC", SCOPES)),
                      "gemm_16x16x16", cycles=18, unit="gemm"),
            Intrinsic("vh.zero_16x16_i32",
                      elementwise_desc("zero", lambda: T.const(0, "int32"), [],
                                       ("C", "int32", "vh.acc")),
                      {"C": "vh.acc"}, "zero_16x16", cycles=16, unit="gemm")],
        hal_calls=hal_calls)


def _run(acc, n=64, tile=32):
    targets.register_target(acc, replace=True)
    mod = targets.build(schedule_gemm(gemm(n), tile=tile, double=True, **ON), "vh-npu",
                        name="g")
    run_gemm(mod, n, seed=n)
    return mod


def test_vendor_calls_run_with_cuvils_results_and_cycles():
    plain = _run(_device())
    mod = _run(_device(VENDOR))
    src, hdr = mod.get_source("c"), mod.get_source("h")
    assert "vh_mvin_in(&(vh_dma_t){.dram = &A[" in src and "vh_mmad(" in src
    assert "vh_set_flag(" in src and "vh_wait_flag(" in src
    for cuvil_call in ("vh_npu_dma_load(", "vh_npu_push(", "vh_npu_gemm_16x16x16("):
        assert cuvil_call not in src
    # the B tile at its row address: byte 0 of vh.w in 16-byte rows
    assert hdr.count("typedef struct { const void *dram; uint32_t sp_row;") == 1
    assert "int32_t vh_mvin_w(const vh_dma_t *d);" in hdr
    assert "void vh_set_flag(uint8_t from_pipe, uint8_t to_pipe, uint8_t event);" in hdr
    assert "void vh_mmad(uint32_t c, uint32_t a, uint32_t b, uint16_t lda" in hdr
    # the simulator runs Cuvil's calls behind them: the same cycles, stalls and bytes
    for key in ("cycles", "dma_bytes_in", "dependency_stalls", "engine_busy"):
        assert mod.stats[key] == plain.stats[key]
    # the two builds never share a compiled program
    assert _device().describe(targets.Target("vh-npu")) != \
        _device(VENDOR).describe(targets.Target("vh-npu"))


def test_ascend_like_calls_its_sdk():
    targets.register_target(ascend, replace=True)
    mod = targets.build(schedule_gemm_cores(gemm(64), cores=2), "ascend-like", name="g")
    src, hdr = mod.get_source("c"), mod.get_source("h")
    # A's tile at byte 131072 of L1 (the memory map's placement), 32 rows of 64 bytes
    # with no gap between them on either side
    assert "copy_gm_to_cbuf(131072, &A[i_0_0 * 2048], 0, 32, 64, 0, 0);" in src
    assert "void copy_gm_to_cbuf(uint32_t dst, const void *src, uint8_t sid, " \
        "uint16_t n_burst, uint16_t len_burst, uint32_t src_gap, uint16_t dst_gap);" in hdr
    assert "load_cbuf_to_ca(0, 131072, 32, 64, 64, 64);" in src
    assert "void set_flag(uint8_t pipe, uint8_t tpipe, uint8_t event_id);" in hdr
    assert "ascend_like_push(" not in src and "ascend_like_mmad_16x16x16(" not in src
    # the pipes and event flags by the SDK's names (symbols=), defined unless its own
    # header defines them: the load engine is PIPE_MTE2, mte1 PIPE_MTE1
    assert "set_flag(PIPE_MTE2, PIPE_MTE1, EVENT_ID0);" in src and "set_flag(0," not in src
    assert "#ifndef PIPE_MTE2\n#define PIPE_MTE2 0\n#endif" in hdr
    assert "#define PIPE_MTE1 4" in hdr and "#define EVENT_ID7 7" in hdr
    rng = np.random.default_rng(3)
    a, b = (rng.integers(-128, 128, (64, 64)).astype("int8") for _ in range(2))
    c = np.zeros((64, 64), "int32")
    mod(a, b, c)
    np.testing.assert_array_equal(c, a.astype("int32") @ b.astype("int32"))


@pytest.mark.parametrize("calls,match", [
    # only the input memory has a load: B's tile goes to vh.w
    ([_mvin("vh_mvin_in", "vh.in")],
     r"CVL-E176.*'vh_mvin_in' \(dma_load\) takes 'dst' as a bytes offset in memory 'vh.in', "
     r"but this call's 'dst' is buffer 'B_vh.w' in 'vh.w'.*memories=\{'dst': 'vh.w'\}"),
    # rows of 32 bytes are half a 64-byte block
    ([_mvin("vh_mvin_in", "vh.in", col_unit=64), _mvin("vh_mvin_w", "vh.w")],
     r"CVL-E176.*parameter 'cols' \(row_bytes\) is 32, not a whole number of its unit of 64"),
    # the second copy of a double-buffered tile is one bank (16 KiB) up: not in 48-byte rows
    ([_mvin("vh_mvin_in", "vh.in", unit=48), _mvin("vh_mvin_w", "vh.w")],
     r"CVL-E176.*parameter 'sp_row' \(dst\) is k_0 \* 16384, not a whole number of its "
     r"unit of 48"),
    ([_mvin("vh_mvin_in", "vh.in", rows_type="int8_t"),
      _mvin("vh_mvin_w", "vh.w", rows_type="int8_t")],
     None),
    ([_mvin("vh_mvin_in", "vh.in", fixed={"dst_stride": 16, "src_stride": 64}),
      _mvin("vh_mvin_w", "vh.w", fixed={"dst_stride": 16, "src_stride": 64})],
     r"CVL-E176.*'vh_mvin_in' \(dma_load\) assumes dst_stride = 16, but this call passes 32"),
])
def test_a_call_that_does_not_fit_its_signature_is_refused(calls, match):
    acc = _device(calls)
    if match is None:      # 32 rows fit an int8_t; 128-row tiles do not
        _run(acc)
        acc, match = _device(calls), r"CVL-E176.*'rows' \(rows\) ranges over \[128, 128\], " \
                                     r"beyond int8_t \[-128, 127\]"
        targets.register_target(acc, replace=True)
        with pytest.raises(HalSignatureError, match=match):
            targets.build(schedule_gemm(gemm(128), tile=128, **ON), "vh-npu", name="g")
        return
    with pytest.raises(HalSignatureError, match=match):
        _run(acc)


A = HalArg
BAD = [
    (["not a call"], r"hal_calls takes HalCall\(...\) entries"),
    ([HalCall("vh_x", "dma_copy", ())], r"replaces 'dma_copy', which is no HAL call.*'push'"),
    ([HalCall("vh_npu_push", "push", ())], r"not starting with 'vh_npu_'"),
    ([FLAGS[0], HalCall("vh_set_flag", "pop", FLAGS[0].args)], r"not used twice"),
    ([HalCall("f", "push", (A("a", "src"), A("b", "dst")))], r"missing: \['id'\]"),
    ([HalCall("f", "push", (A("a", "src"), A("b", "src"), A("c", "dst"), A("d", "id")))],
     r"carried twice: \['src'\]"),
    ([HalCall("f", "push", (A("a", "src"), A("b", "dst"), A("c", "iid")))],
     r"'c' carries 'iid': name one of \['src', 'dst', 'id'\]"),
    ([HalCall("f", "push", (A("a", "src", "size_t"), A("b", "dst"), A("c", "id")))],
     r"C type 'size_t'"),
    ([HalCall("f", "push", (A("a", "src", unit=0), A("b", "dst"), A("c", "id")))],
     r"unit must be a positive int"),
    ([HalCall("f", "push", (A("a", "src", "void *"), A("b", "dst"), A("c", "id")))],
     r"a pointer is passed as a pointer type"),
    ([HalCall("f", "dma_fill", (A("d", "dst", "uint32_t", address="bytes"), A("r", "rows"),
                                A("b", "row_bytes"), A("s", "dst_stride")))],
     r"passes 'dst' as bytes.*name it in memories=, found None"),
    ([HalCall("f", "dma_fill", (A("d", "dst", "uint32_t", address="elements"),
                                A("r", "rows"), A("b", "row_bytes"), A("s", "dst_stride")),
              memories={"dst": "vh.in"})], r"'elements' only for an intrinsic's operand"),
    ([HalCall("f", "push", tuple(FLAGS[0].args), returns="int")], r"returns must be"),
    ([HalCall("f", "dma_fill", (A("d", "dst", "void *"), A("r", "rows"),
                                A("b", "row_bytes", minus="dst_stride"),
                                A("s", "dst_stride", minus="rows")))],
     r"'b' subtracts 'dst_stride': minus= names a number .* carries as it is"),
    ([HalCall("f", "push", tuple(FLAGS[0].args), struct="dma t")], r"struct must be a C type"),
    ([_mvin("m", "vh.spad")], r"memories= maps \{'dst': 'vh.spad'\}.*\['dst', 'src'\]"),
    ([HalCall("f", "push", (A("a", "src"), A("b", "dst")), fixed={"id": 0.5})],
     r"fixed= gives \['id'\] a value that is not an int"),
    ([HalCall("f", "dma_fill", (A("r", "rows"), A("b", "row_bytes"), A("s", "dst_stride")),
              fixed={"dst": 0})], r"fixed= gives \['dst'\].*fixes an address"),
    ([_mvin("m1", "vh.in"), _mvin("m2", "vh.w", fixed={"dst_stride": 16, "src_stride": 16})],
     r"struct 'vh_dma_t' is declared by another call with other fields"),
    ([HalCall("f", "push", (A("a", "src", symbols={"mte2": "PIPE_MTE2"}), A("b", "dst"),
                            A("c", "id")))],
     r"'a': symbols= maps numbers it takes \(ints, or engine names of this accelerator: "
     r"\['load', 'store', 'gemm'\]\) to distinct C identifiers"),
    ([HalCall("f", "push", (A("a", "src", symbols={"load": "P", "gemm": "P"}),
                            A("b", "dst"), A("c", "id")))], r"'a': symbols= maps"),
    ([HalCall("f", "push", (A("a", "src", symbols={0: "2x"}), A("b", "dst"), A("c", "id")))],
     r"'a': symbols= maps"),
    ([HalCall("f", "dma_fill", (A("d", "dst", "void *", symbols={0: "Z"}), A("r", "rows"),
                                A("b", "row_bytes"), A("s", "dst_stride")))],
     r"'d': symbols= maps .* only for a number"),
    ([HalCall("f", "push", (A("a", "src"),), then=HalCall("g", "pop", (A("b", "dst"),
                                                                      A("c", "id"))))],
     r"vendor call 'f': then= continues it and config= configures it with another "
     r"HalCall replacing 'push' too"),
    ([HalCall("f", "push", (A("a", "src"), A("b", "dst")), config=HalCall(
        "g", "push", (A("c", "id"),), then=HalCall("h", "push", ())))],
     r"a configuration call without its own config= or then="),
    ([HalCall("f", "push", (A("a", "src"),), then=HalCall("g", "push", (A("b", "dst"),)))],
     r"vendor call 'f' \(with its then= calls\): every argument .*missing: \['id'\]"),
    ([HalCall("f", "push", (A("a", "src"),), then=HalCall("g", "push", (
        A("b", "src"), A("c", "dst"), A("d", "id"))))], r"carried twice: \['src'\]"),
    ([HalCall("f", "push", (A("a", "src"),), then=HalCall("f", "push", (
        A("c", "dst"), A("d", "id"))))], r"vendor call 'f': the name .* not used twice"),
]


@pytest.mark.parametrize("calls,match", BAD)
def test_a_malformed_signature_is_a_description_error(calls, match):
    with pytest.raises(DescriptionError, match=r"CVL-E170.*" + match):
        _device(calls)


def test_a_vendor_call_in_two_parts_runs_with_cuvils_results_and_cycles():
    # the GEMM as Gemmini issues it: preload(B, C, their strides), then
    # compute_preloaded(A, its stride), one after the other for each of Cuvil's calls
    split = HalCall("vh_preload", "gemm_16x16x16", (
        A("b", "B", "uint32_t", address="elements"), A("c", "C", "uint32_t",
                                                       address="elements"),
        A("ldb", "B_stride", "uint16_t"), A("ldc", "C_stride", "uint16_t")),
        then=HalCall("vh_compute", "gemm_16x16x16", (
            A("a", "A", "uint32_t", address="elements"), A("lda", "A_stride", "uint16_t"))))
    plain, mod = _run(_device()), _run(_device([split]))
    src, hdr = mod.get_source("c"), mod.get_source("h")
    assert "(void)(vh_preload(" in src and "), vh_compute(" in src
    assert "vh_npu_gemm_16x16x16(" not in src
    assert "void vh_preload(uint32_t b, uint32_t c, uint16_t ldb, uint16_t ldc);" in hdr
    assert "void vh_compute(uint32_t a, uint16_t lda);" in hdr
    for key in ("cycles", "dependency_stalls", "engine_busy"):
        assert mod.stats[key] == plain.stats[key]


# a load (into either memory) whose DRAM stride is state a configuration call sets
CONFIGURED = HalCall("vh_ld", "dma_load", (
    A("dram", "src", "const void *"), A("sp", "dst", "void *"), A("rows", "rows", "uint16_t"),
    A("cols", "row_bytes", "uint16_t"), A("sp_stride", "dst_stride", "uint32_t")),
    config=HalCall("vh_ld_config", "dma_load", (A("stride", "src_stride", "uint32_t"),)))


@pytest.mark.parametrize("m", [64, 32])
def test_a_configuration_call_is_issued_once_when_every_call_passes_the_same(m):
    # A (64 x 64) and B (64 x m) come in rows of their widths: with m = 64 every load
    # passes the stride 64 and the configuration is issued once, first; with m = 32
    # the loads of B pass 32, so each load is issued after its configuration
    targets.register_target(_device(), replace=True)
    plain = targets.build(schedule_gemm(gemm(64, m, 64), tile=32, **ON), "vh-npu", name="g")
    targets.register_target(_device([CONFIGURED]), replace=True)
    mod = targets.build(schedule_gemm(gemm(64, m, 64), tile=32, **ON), "vh-npu", name="g")
    src, hdr = mod.get_source("c"), mod.get_source("h")
    assert "void vh_ld_config(uint32_t stride);" in hdr
    if m == 64:
        assert src.count("vh_ld_config(") == 1 and "(void)vh_ld_config(64);" in src
    else:
        assert "(void)(vh_ld_config(64), vh_ld(&A[" in src
        assert "(void)(vh_ld_config(32), vh_ld(&B[" in src
    rng = np.random.default_rng(m)
    a, b = rng.integers(-128, 128, (64, 64)).astype("int8"), \
        rng.integers(-128, 128, (64, m)).astype("int8")
    for built in (plain, mod):
        c = np.zeros((64, m), "int32")
        built(a, b, c)
        np.testing.assert_array_equal(c, a.astype("int32") @ b.astype("int32"))
    assert mod.stats["cycles"] == plain.stats["cycles"]


def test_a_value_with_no_symbol_is_refused_when_the_call_is_emitted():
    # the flags name only the load engine as a source; the GEMM unit pushes too
    named = [HalCall(c.name, c.replaces, (
        HalArg("from_pipe", "src", "uint8_t", symbols={"load": "VH_LOAD"}),
        HalArg("to_pipe", "dst", "uint8_t"), HalArg("event", "id", "uint8_t"))) for c in FLAGS]
    with pytest.raises(HalSignatureError, match=r"CVL-E176.*vendor call 'vh_(set|wait)_flag' "
                       r"\((push|pop)\): parameter 'from_pipe' is [12], which has no name in "
                       r"its symbols= \(\[0\] are named\); name every value it can take"):
        _run(_device(named))


def test_an_operand_without_a_planned_address_gets_its_offset_at_run_time():
    """An intrinsic's own implementation (what the tuner builds to see whether a target
    supports it) takes its operands as parameters: no planned address, so the element
    index is computed from the pointer; before, the build failed and the tuner found
    no intrinsic on the Ascend-like NPU."""
    from cuvil_tir.tensor_intrin import TensorIntrin
    targets.register_target(ascend, replace=True)
    mod = targets.build(TensorIntrin.get("asc.mmad_16x16x16_i8").impl, "ascend-like",
                        name="one")
    assert "mmad((uint32_t)(((const uint8_t *)&C[0] - ascend_like_scratch(4)) / 4)" \
        in mod.get_source("c")


def test_a_gap_between_rows_where_cuvil_passes_a_stride():
    """``minus=``: the vendor's gap is Cuvil's stride less the row (Ascend's burst
    gaps); the simulator adds the row back, and a stride shorter than the row (a gap
    below zero) does not fit an unsigned gap."""
    gaps = [HalCall(n, "dma_load", (
        HalArg("dram", "src", "const void *"), HalArg("sp", "dst", "void *"),
        HalArg("rows", "rows", "uint16_t"), HalArg("len", "row_bytes", "uint16_t"),
        HalArg("sp_gap", "dst_stride", "uint16_t", minus="row_bytes"),
        HalArg("dram_gap", "src_stride", "uint16_t", minus="row_bytes")),
        memories={"dst": m}) for n, m in (("vh_in", "vh.in"), ("vh_w", "vh.w"))]
    plain = _run(_device())
    mod = _run(_device(gaps))
    # 32-byte rows of A's tile, 64 bytes apart in A: a gap of 32 there, none in vh.in
    assert "vh_in(&A[(i_0 * 2048) + (k_0 * 32)], &A_vh_in[k_0 * 16384], 32, 32, 0, 32);" \
        in mod.get_source("c")
    assert mod.stats["cycles"] == plain.stats["cycles"]
