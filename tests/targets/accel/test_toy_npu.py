"""The toy NPU end to end: GEMM on the simulator equals numpy; double buffering keeps
the GEMM unit busy; C and header compile with -Wall -Werror; errors of item 7."""

import shutil
import subprocess

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from targets.accel import AccelLoweringError, AllocationError, Memory
from cuvil_tir.transform.bank_plan import Unit, place
from targets.accel.examples.toy_npu import toy_npu
from targets.accel.transfer import dma_transfers

from targets.toolkit.npu.gemm import gemm, schedule_gemm

targets.register_target(toy_npu, replace=True)


def _run(mod, n, m=None, k=None, seed=0):
    m, k = m or n, k or n
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (n, k)).astype("int8")
    b = rng.integers(-128, 128, (k, m)).astype("int8")
    c = np.zeros((n, m), "int32")
    mod(a, b, c)
    return c, a.astype("int32") @ b.astype("int32")


@pytest.fixture(scope="module")
def gemm256():
    f = gemm(256)
    return (targets.build(schedule_gemm(f), "toy-npu", name="gemm"),
            targets.build(schedule_gemm(f, double=True), "toy-npu", name="gemm"))


def test_gemm_256_exact_and_double_buffering_keeps_unit_busy(gemm256):
    single, double = gemm256
    for mod in (single, double):
        got, want = _run(mod, 256)
        np.testing.assert_array_equal(got, want)
    s, d = single.stats, double.stats
    assert d["utilisation"]["gemm"] >= 0.9
    assert d["bank_conflict_stalls"] == 0
    assert s["utilisation"]["gemm"] < d["utilisation"]["gemm"] - 0.1
    assert s["cycles"] > d["cycles"]
    assert d["dma_bytes_in"] == 2 * 256 * 256 * 4     # each A/B tile once per output tile
    assert d["dma_bytes_out"] == 256 * 256 * 4
    assert d["engine_busy"]["gemm"] == 16 ** 3 * 18
    assert d["peak_bytes"]["npu.acc"] == 2 * 64 * 64 * 4


def test_inputs_are_read_only_and_may_share_one_array(gemm256):
    """A DMA only reads its source: the module writes C alone (issue 25,
    C_accel_inputs_marked_written)."""
    mod = gemm256[0]
    assert [(p.name, p.writes) for p in mod.signature.params] == \
        [("A", False), ("B", False), ("C", True)]
    x = np.arange(256 * 256, dtype="int64").reshape(256, 256).astype("int8")
    x.setflags(write=False)
    c = np.zeros((256, 256), "int32")
    mod(x, x, c)                          # read-only, and one array for both inputs
    np.testing.assert_array_equal(c, x.astype("int32") @ x.astype("int32"))
    c.setflags(write=False)
    with pytest.raises(targets.ArgumentError, match=r"argument 2 'C': the function "
                       r"writes to C but the array is read-only"):
        mod(x, x, c)


def test_rectangular_gemm_with_a_single_tile(gemm256):
    f = gemm(32, 48, 80)
    mod = targets.build(schedule_gemm(f, tile=16), "toy-npu")
    got, want = _run(mod, 32, 48, 80)
    np.testing.assert_array_equal(got, want)


def test_sources_memory_map_and_warning_free_c(gemm256, tmp_path):
    mod = gemm256[1]
    src, hdr = mod.get_source("c"), mod.get_source("h")
    assert '#include "toy_npu_hal.h"' in src and "toy_npu_dma_load(" in src
    assert "toy_npu_pop(" in src and "toy_npu_push(" in src
    assert "int32_t toy_npu_gemm_16x16x16(" in hdr
    mm = mod.memory_map()
    assert "A_npu.inp[0]" in mm and "A_npu.inp[1]" in mm and "bank 1:" in mm
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no system C compiler (cc) to check -Wall -Werror")
    (tmp_path / "toy_npu_hal.h").write_text(hdr)
    (tmp_path / "k.c").write_text(src)
    r = subprocess.run([cc, "-std=c99", "-Wall", "-Werror", "-c", "k.c", "-o", "k.o"],
                       cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_scope_typo_is_refused_at_build():
    sch = schedule_gemm(gemm(64), scopes=("npu.inpt", "npu.wgt", "npu.acc"))
    with pytest.raises(targets.CodegenError, match="scope 'npu.inpt', which target 'toy-npu'"):
        targets.build(sch, "toy-npu")


def test_operand_in_wrong_memory():
    sch = schedule_gemm(gemm(64), scopes=("npu.wgt", "npu.wgt", "npu.acc"))
    with pytest.raises(AccelLoweringError, match="operand 'A' must be in memory 'npu.inp', "
                                                 "found buffer 'A_npu.wgt' in 'npu.wgt'"):
        targets.build(sch, "toy-npu")


def test_intrinsic_shape_mismatch_names_it():
    with pytest.raises(S.ScheduleError, match="toy.gemm_16x16x16_i8"):
        schedule_gemm(gemm(64), t=8)


def test_untensorized_block_touching_scratchpad():
    sch = S.Schedule(gemm(16))
    blk = sch.get_block("C")
    for k, scope in enumerate(("npu.inp", "npu.wgt")):
        sch.cache_read(blk, k, scope)
    sch.cache_write(blk, 0, "npu.acc")
    with pytest.raises(AccelLoweringError, match=r"is (read|written) element by element by "
                                                 r"the host"):
        targets.build(sch, "toy-npu")


def test_accumulator_zeroed_by_the_dma_without_a_zero_intrinsic():
    """A DMA that pads also fills a tile with zeros (``<hal>_dma_fill``)."""
    mod = targets.build(schedule_gemm(gemm(64), tile=32, zero=None), "toy-npu", name="g")
    assert "toy_npu_dma_fill(" in mod.get_source("c")
    rng = np.random.default_rng(3)
    a, b = (rng.integers(-128, 128, (64, 64)).astype("int8") for _ in range(2))
    c = np.full((64, 64), 7, "int32")
    mod(a, b, c)
    np.testing.assert_array_equal(c, a.astype("int32") @ b.astype("int32"))


def test_tile_needing_more_banks_than_exist():
    sch = schedule_gemm(gemm(256), tile=128, double=True)
    with pytest.raises(AllocationError, match=r"buffer 'C_npu.acc' needs 2 copies x 8 "
                                              r"bank\(s\) of 8192 bytes = 16 banks of memory "
                                              r"'npu.acc', which has 8"):
        targets.build(sch, "toy-npu")


def test_capacity_overflow_lists_live_buffers():
    m = Memory("npu.x", banks=2, bank_bytes=1024, width_bits=128)
    units = [Unit("P", 1024, 1, (0, 1), {"load"}), Unit("Q", 1024, 1, (1, 2), {"gemm"}),
             Unit("R", 512, 1, (1, 1), {"gemm"})]
    with pytest.raises(AllocationError, match=r"memory 'npu.x' \(2048 bytes.*at the peak 2560 "
                                              r"bytes are live \[P \(1024 bytes\), Q \(1024 "
                                              r"bytes\), R \(512 bytes\)\].*overflows it by 512"):
        place(m, units, {})


def test_conflict_accepted_is_reported_and_pins_honoured():
    m = Memory("npu.x", banks=1, bank_bytes=1024, width_bits=128)
    out = place(m, [Unit("P", 256, 1, (0, 0), {"load"}), Unit("Q", 256, 1, (0, 0), {"gemm"})], {})
    assert [u.conflicts for u in out] == [(), ("P",)] or [u.conflicts for u in out] == [("Q",), ()]
    m2 = Memory("npu.y", banks=4, bank_bytes=1024, width_bits=128)
    assert place(m2, [Unit("P", 256, 1, (0, 0), {"load"})], {"P": 3})[0].banks == (3,)
    with pytest.raises(AllocationError, match="pinned to bank 7"):
        place(m2, [Unit("P", 256, 1, (0, 0), {"load"})], {"P": 7})


def test_dma_row_that_does_not_fit_the_width():
    S_ = T.decl_buffer((4, 8), "int8", "S", scope="npu.inp")
    G = T.decl_buffer((64, 64), "int8", "G")
    r, c = T.var("r"), T.var("c")
    nest = T.For(r, T.const(0), T.const(4), "serial", T.For(c, T.const(0), T.const(8), "serial",
                                                           T.BufferStore(S_, G[r, c], (r, c))))
    with pytest.raises(AccelLoweringError, match="a row of 8 bytes .* does not fit its access "
                                                 "width of 16 bytes"):
        dma_transfers(T.PrimFunc([G], T.Allocate(S_, nest)), toy_npu)


def test_pinned_bank_through_the_target():
    target = targets.Target("toy-npu", pin_banks={"A_npu.inp": 2})
    mod = targets.build(schedule_gemm(gemm(64)), target, name="pinned")
    bank2 = mod.memory_map().split("npu.wgt")[0].split("bank 2:")[1].split("bank 3:")[0]
    assert "A_npu.inp" in bank2
    got, want = _run(mod, 64)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("pins,message", [
    ({"A_npu_inp": 1}, r"option pin_banks names 'A_npu_inp', which is no buffer of an "
                       r"accelerator memory in this function \(its buffers: \['A_npu.inp', "
                       r"'B_npu.wgt', 'C_npu.acc'\]\); use a name the memory map shows"),
    ({"A_npu.inp": "1"}, r"option pin_banks\['A_npu.inp'\] must be an int \(the first "
                         r"bank\), found '1' \(str\)"),
    ({"A_npu.inp": 1.0}, r"must be an int \(the first bank\), found 1.0 \(float\)"),
    ({"A_npu.inp": True}, r"found True \(bool\)"),
])
def test_pins_are_validated(pins, message):
    """Issue 23 defect 2: a pin naming no buffer was ignored silently, a str bank raised
    a raw TypeError, a float bank gave C the compiler rejected."""
    with pytest.raises(AllocationError, match=message):
        targets.build(schedule_gemm(gemm(64), tile=32), targets.Target("toy-npu", pin_banks=pins))


@pytest.mark.parametrize("n,m,k", [(512, 32, 32), (128, 32, 64)])
def test_a_tile_loop_of_one_iteration_still_shrinks_the_staged_buffers(n, m, k):
    """Issue 23 defect 1: with a dimension equal to the tile, the staged A (B, C) kept
    its whole shape (16 KiB of A for a 512x32x32 GEMM in 32-tiles: CVL-E171, 4 banks
    of 2); each is one 32x32 tile."""
    mod = targets.build(schedule_gemm(gemm(n, m, k), tile=32), "toy-npu", name="g")
    sizes = {d["buffer"]: d["bytes"] for ds in mod.program.memory.values() for d in ds}
    assert sizes == {"A_npu.inp": 1024, "B_npu.wgt": 1024, "C_npu.acc": 4096}
    c, ref = _run(mod, n, m, k)
    np.testing.assert_array_equal(c, ref)


def test_the_previous_release_paths_of_the_example_schedules_still_import():
    """Scripts written against the previous release import the example schedules from
    ``targets.accel.examples``; they moved to ``targets.toolkit.npu``."""
    import targets.accel.examples.conv2d as old_conv2d
    import targets.accel.examples.fused as old_fused
    import targets.accel.examples.gemm as old_gemm
    import targets.toolkit.npu.conv2d as conv2d
    import targets.toolkit.npu.fused as fused
    import targets.toolkit.npu.gemm as gemm

    assert old_gemm.schedule_gemm is gemm.schedule_gemm
    assert old_conv2d.schedule_conv2d is conv2d.schedule_conv2d
    assert old_fused.schedule_fused is fused.schedule_fused
