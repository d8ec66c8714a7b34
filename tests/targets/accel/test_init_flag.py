"""The accumulator-init flag of a matrix instruction (``Intrinsic(init=True)``, issue
23: Ascend's ``mmad`` init bit): the zero fill before a reduction is dropped where the
reduction provably overwrites the whole tile first, kept (the flag 0) otherwise;
results bit-exact."""

import numpy as np
import pytest

import cuvil_tir as T
import targets
from targets.accel import DMA, Accelerator, DescriptionError, HalArg, HalCall, Intrinsic
from targets.accel.examples.ascend_like import ascend
from targets.accel.examples.toy_npu import gemm_desc
from targets.accel.init_flag import init_flags
from targets.toolkit.npu.conv2d import conv2d
from targets.toolkit.npu.multicore import schedule_conv2d_cores, schedule_gemm_cores
from targets.toolkit.npu.gemm import gemm
from tests.targets.accel.small_npu import registered, run_gemm, scopes, small_npu
from tests.workloads import conv2d_nhwc_ref


def _no_flag():
    """The Ascend-like device (same name: a rebuild of it) whose mmad has no init bit."""
    mm = ascend.intrinsics[0]
    plain = Intrinsic(mm.name, mm.desc, mm.operands, mm.c_name, mm.cycles, mm.unit,
                      mm.align_bytes)
    calls = [c for c in ascend.hal_calls if c.name != "mmad"]
    return Accelerator(ascend.name, ascend.memories_only, ascend.dma,
                       [plain] + list(ascend.intrinsics[1:]), doc=ascend.doc,
                       clock_mhz=ascend.clock_mhz, moves=ascend.moves, cores=ascend.cores,
                       hal_calls=calls)


def _conv(acc, cores):
    with registered(acc, ascend):
        mod = targets.build(schedule_conv2d_cores(conv2d(1, 18, 18, 8, 24), cores=cores),
                            ascend.name, name="c")
    rng = np.random.default_rng(cores)
    x = rng.integers(-128, 128, (1, 18, 18, 8)).astype("int8")
    w = rng.integers(-128, 128, (3, 3, 8, 24)).astype("int8")
    y = np.zeros((1, 16, 16, 24), "int32")
    mod(x, w, y)
    np.testing.assert_array_equal(y, conv2d_nhwc_ref(x, w))
    return mod


@pytest.mark.parametrize("cores", [1, 4])
def test_the_init_bit_replaces_the_zero_fill_of_each_rows_accumulators(cores):
    flag, fill = _conv(ascend, cores), _conv(_no_flag(), cores)
    src = flag.get_source("c")
    assert "ascend_like_dma_fill(" not in src and "ascend_like_dma_fill(" in fill.get_source("c")
    # the first tap of each 16x16 part of the row overwrites: (rh, rw) == (0, 0)
    assert ", (rh == 0) && (rw == 0) ? 1 : 0);" in src
    assert "int32_t ascend_like_mmad_16x16x16_init(" in flag.get_source("h")
    # one fill of 32 cycles (16 rows x 128 bytes, its latency overlapped) per output row
    assert fill.stats["engine_busy"]["load"] - flag.stats["engine_busy"]["load"] == 16 * 32
    assert flag.stats["engine_busy"]["cube"] == fill.stats["engine_busy"]["cube"]
    assert flag.stats["cycles"] < fill.stats["cycles"]


def test_a_gemm_on_the_cores_needs_no_fill():
    targets.register_target(ascend, replace=True)
    mod = targets.build(schedule_gemm_cores(gemm(128), cores=4), ascend.name, name="g")
    assert "ascend_like_dma_fill(" not in mod.get_source("c")
    run_gemm(mod, 128)


# the pass on hand-written IR: a 16x32 accumulator tile, two 16x16 parts along j, a
# reduction loop k
INIT = Accelerator("i-flag", small_npu("i-npu", "i").memories_only, DMA(512, 64), [
    Intrinsic("i_flag.gemm", gemm_desc(scopes=scopes("i")), dict(zip("ABC", scopes("i"))),
              "gemm", cycles=18, unit="gemm", init=True)])
A = T.decl_buffer((16, 48), "int8", "A", scope="i.inp")
B = T.decl_buffer((48, 32), "int8", "B", scope="i.wgt")
C = T.decl_buffer((16, 32), "int32", "C", scope="i.acc")
J, K = T.var("j"), T.var("k")


def _mm(j=J, k=K):
    return T.Evaluate(T.call_extern("int32", "i_flag_gemm", A[0:16, k * 16:k * 16 + 16],
                                    B[k * 16:k * 16 + 16, j * 16:j * 16 + 16],
                                    C[0:16, j * 16:j * 16 + 16], 48, 32, 32))


def _loops(body, j_extent=2):
    return T.For(J, T.const(0), T.const(j_extent), "serial",
                 T.For(K, T.const(0), T.const(3), "serial", body))


FILL = T.Evaluate(T.call_extern("int32", "i_flag_dma_fill", C[0:1, 0:32], 16, 128, 128))


def _lowered(*stmts):
    f = init_flags(T.PrimFunc([], T.SeqStmt(tuple(stmts))), INIT)
    return T.to_text(f.body)


def test_the_fill_goes_where_the_first_steps_cover_the_tile():
    text = _lowered(FILL, _loops(_mm()))
    assert "dma_fill" not in text
    assert 'T.call_extern("int32", "i_flag_gemm_init"' in text and \
        "T.if_then_else(k == 0, 1, 0)" in text


@pytest.mark.parametrize("why, stmts", [
    ("half the tile", lambda: (FILL, _loops(_mm(), j_extent=1))),
    ("two call sites", lambda: (FILL, _loops(T.SeqStmt((_mm(), _mm()))))),
    ("a guarded call", lambda: (FILL, _loops(T.IfThenElse(K < 2, _mm(), None)))),
    ("parts that overlap", lambda: (FILL, _loops(_mm(j=J * 0)))),
])
def test_the_fill_stays_where_the_reduction_does_not_overwrite_the_tile_first(why, stmts):
    text = _lowered(*stmts())
    assert "i_flag_dma_fill" in text, why
    assert "i_flag_gemm_init" in text and '"i_flag_gemm"' not in text
    assert "T.if_then_else" not in text, why


def test_init_needs_an_accumulator():
    assert INIT.intrinsics[0].accumulator() == "C"
    from targets.accel.examples.toy_npu import ACC as TOY_ACC, elementwise_desc
    zero = elementwise_desc("zero", lambda: T.const(0, "int32"), [], TOY_ACC)
    with pytest.raises(DescriptionError, match=r"init=True overwrites the accumulator, but "
                       r"the desc has no single operand it both reads and writes"):
        Intrinsic("i_bad.zero", zero, {"C": "npu.acc"}, "zero", cycles=16, init=True)
    with pytest.raises(DescriptionError, match=r"init must be True or False, found 1"):
        Intrinsic("i_bad.gemm", gemm_desc(), dict(zip("ABC", scopes("npu"))), "g", 18,
                  init=1)


def test_the_vendor_call_carries_the_flag():
    mmad = next(c for c in ascend.hal_calls if c.name == "mmad")
    assert mmad.replaces == "mmad_16x16x16_init"
    assert [a.name for a in mmad.args][-1] == "init"
    assert ascend.hal_ops["mmad_16x16x16_init"][-1] == ("int32_t", "init")
    with pytest.raises(DescriptionError, match=r"missing: \['init'\]"):
        Accelerator("i-flag", INIT.memories_only, INIT.dma, INIT.intrinsics, hal_calls=[
            HalCall("gemm", "gemm_init", tuple(HalArg(n.lower(), n, "void *") for n in "ABC")
                    + tuple(HalArg(f"{n.lower()}s", f"{n}_stride") for n in "ABC"))])
