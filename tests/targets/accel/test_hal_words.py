"""Vendor parameters packed as bit fields of one word (``HalWord``, issue 23 item 1:
Gemmini's ``rs1``/``rs2``): the kernel packs, the simulator unpacks and runs Cuvil's
call, so results and cycles are Cuvil's; a field too narrow for its values and a
malformed word are refused."""

import pytest

import targets
from targets.accel import (Accelerator, DescriptionError, HalArg, HalCall, HalSignatureError,
                           HalWord)
from targets.accel.examples.gemmini_like import MATMUL, gemmini
from targets.toolkit.npu.gemm import gemm, schedule_gemm
from tests.targets.accel.small_npu import registered, run_gemm

ON = dict(gemm="gemmini.matmul_16x16x16_i8", zero=None, scopes=("gem.spad", "gem.spad",
                                                                 "gem.acc"))


def _gemmini(hal_calls):
    """The Gemmini-like device (same name: a rebuild of it) with these vendor calls."""
    return Accelerator(gemmini.name, gemmini.memories_only, gemmini.dma, gemmini.intrinsics,
                       doc=gemmini.doc, clock_mhz=gemmini.clock_mhz, moves=gemmini.moves,
                       queues=list(gemmini.queues.values()), hal_calls=hal_calls)


def _gemm(acc, n=64):
    with registered(acc, gemmini):
        mod = targets.build(schedule_gemm(gemm(n), tile=32, **ON), gemmini.name, name="g")
    run_gemm(mod, n)
    return mod


def test_packed_registers_run_with_cuvils_results_and_cycles():
    packed, plain = _gemm(gemmini), _gemm(_gemmini(()))
    src, hdr = packed.get_source("c"), packed.get_source("h")
    assert "void gemmini_preload(uint64_t rs1, uint64_t rs2);" in hdr
    assert "void gemmini_compute_preloaded(uint64_t rs1);" in hdr
    # the row address in bits 0-31, the stride of 32 elements (a constant) in 32-47
    call = next(ln for ln in src.splitlines() if "gemmini_preload(" in ln)
    assert call.count("| 0x2000000000ull") == 3 and "gemmini_like_matmul(" not in src
    assert packed.stats["cycles"] == plain.stats["cycles"]


def _rs(name, operand, row, bits):
    return HalWord(name, "uint64_t", ((HalArg(f"{name}_addr", operand, "uint32_t", unit=row,
                                               address="bytes"), 0),
                                      (HalArg(f"{name}_stride", f"{operand}_stride",
                                              "uint16_t"), 32, bits)))


def test_a_field_too_narrow_for_its_values_is_refused():
    narrow = HalCall("gemmini_preload", "matmul", (_rs("rs1", "B", 16, 16),
                                                   _rs("rs2", "C", 64, 16)),
                     then=HalCall("gemmini_compute_preloaded", "matmul",
                                  (_rs("rs1", "A", 16, 5),)))
    with pytest.raises(HalSignatureError, match=(
            r"CVL-E176.*vendor call 'gemmini_compute_preloaded' \(matmul\): field 'rs1_stride' "
            r"\(A_stride\) ranges over \[32, 32\], beyond its 5 bits \[0, 31\]")):
        _gemm(_gemmini([c for c in gemmini.hal_calls if c is not MATMUL] + [narrow]))
    wide = HalCall(narrow.name, "matmul", narrow.args, then=HalCall(
        "gemmini_compute_preloaded", "matmul", (_rs("rs1", "A", 16, 6),)))
    _gemm(_gemmini([c for c in gemmini.hal_calls if c is not MATMUL] + [wide]))


def test_pack_folds_constants_and_masks_narrow_fields():
    w = HalWord("rs", "uint64_t", ((HalArg("a", "A", "uint32_t"), 0),
                                   (HalArg("s", "A_stride", "uint16_t"), 32, 12),
                                   (HalArg("n", 3, "int8_t"), 56)))
    assert w.pack(["7", "16", "-1"]) == hex(7 | 16 << 32 | 0xff << 56) + "ull"
    assert w.pack(["x", "y", "2"]) == ("(uint64_t)(x) | (((uint64_t)(y) & 0xfffu) << 32) | "
                                       "0x200000000000000ull")
    assert w.unpack("r")[1] == "((uint16_t)((r >> 32) & 0xfffull))"


A = HalArg("a", "A", "uint32_t")


@pytest.mark.parametrize("make, message", [
    (lambda: HalWord("rs", "int64_t", ((A, 0),)), r"ctype must be an unsigned integer"),
    (lambda: HalWord("1rs", "uint64_t", ((A, 0),)), r"name must be a C identifier"),
    (lambda: HalWord("rs", "uint64_t", ()), r"needs at least one field"),
    (lambda: HalWord("rs", "uint64_t", (A,)), r"fields takes \(HalArg, shift\)"),
    (lambda: HalWord("rs", "uint64_t", ((A, 0), (HalArg("b", "B", "uint16_t"), 16))),
     r"field 'b' \(bits 16-31\) does not fit a uint64_t \(64 bits\) or overlaps"),
    (lambda: HalWord("rs", "uint64_t", ((HalArg("p", "A", "void *"), 0),)),
     r"field 'p' must be a number of an integer C type"),
    (lambda: HalWord("rs", "uint64_t", ((HalArg("e", "src", "uint8_t",
                                                symbols={"load": "L"}), 0),)),
     r"without symbols"),
    (lambda: _gemmini([HalCall("gemmini_preload", "matmul", (_rs("rs1", "B", 16, 16),),
                               struct="gemmini_pre_t")]),
     r"no HalWord in a struct"),
    (lambda: _gemmini([HalCall("gemmini_preload", "matmul", (_rs("rs1", "B", 16, 16),))]),
     r"every argument of Cuvil's matmul\(A, B, C, A_stride, B_stride, C_stride\) must be "
     r"carried.*missing: \['A', 'C', 'A_stride', 'C_stride'\]"),
])
def test_word_description_errors(make, message):
    with pytest.raises(DescriptionError, match=message):
        make()
