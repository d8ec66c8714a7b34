"""Tensor copies through tensor maps (``tma_load``: Hopper's ``cp.async.bulk.tensor``):
exact semantics in the interpreter (a box lands at its mbarrier phase, zero outside
the tensor, through the destination's swizzle), a removed wait caught as a race
naming the copy and the read, the ``CUtensorMap`` parameter and its encoding at
launch (checked through the recorder's injectable encoder: element type, dims,
strides, box, swizzle, interleave), the refusals, and CUDA C that nvcc compiles for
sm_90a into the tensor engine's ``UTMALDG``."""

from __future__ import annotations

import re

import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir.errors import CodegenError, LoweringError, TargetError
from cuvil_tir.parser import parse
from cuvil_tir.swizzle import SWIZZLE_KEY, Swizzle
from targets.cuda.nvcc import resource_usage, sass

from .cuda_helpers import rand

WAIT = 'T.evaluate(T.call_intrin("int32", "mbarrier_wait", M[0], ko % 2))'
SW = Swizzle(3, 3, 0)


def _kernel(rows: int = 128, wait: str = WAIT, read: str = "S[r, tx % 64]",
            box: str = "64, 64", tx_bytes: int = 8192) -> str:
    """Each block copies its 64 rows of A, 64 columns at a time, through one shared
    tile (one tensor copy of thread 0 a slice) and writes twice the values to C."""
    return f'''
def tma(A: T.Buffer(({rows}, 128), "float16"), C: T.Buffer(({rows}, 128), "float32")):
    for bx in T.thread_binding({(rows + 63) // 64}, thread="blockIdx.x"):
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            with T.allocate((64, 64), "float16", scope="shared") as S:
                with T.allocate((1,), "uint64", scope="shared") as M:
                    if tx == 0:
                        T.evaluate(T.call_intrin("int32", "mbarrier_init", M[0], 1))
                    for ko in T.serial(2):
                        if tx == 0:
                            T.evaluate(T.call_intrin("int32", "mbarrier_arrive", M[0],
                                                     {tx_bytes}))
                            T.evaluate(T.call_intrin("int32", "tma_load", S[0, 0],
                                                     A[bx * 64, ko * 64], M[0], {box}))
                        {wait}
                        for i in T.serial(32):
                            r = i * 2 + tx // 64
                            if bx * 64 + r < {rows}:
                                C[bx * 64 + r, ko * 64 + tx % 64] = T.Cast("float32",
                                                                          {read}) * 2.0
'''


SWIZZLED_READ = "S[r, T.bitwise_xor(tx % 64 // 8, r % 8) * 8 + tx % 8]"


def _build(src: str, name: str, arch: str = "sm_90a", swizzle: Swizzle | None = None):
    f = parse(src)
    if swizzle is not None:
        # what transform_layout records for a swizzled shared tile
        f = f.with_attr(SWIZZLE_KEY, (("S", swizzle.pack()),))
    return targets.build(f, targets.Target("cuda", arch=arch), name=name)


PLAIN = _build(_kernel(), "tma_plain")
SWIZZLED = _build(_kernel(read=SWIZZLED_READ), "tma_swz", swizzle=SW)
RAGGED = _build(_kernel(rows=100), "tma_ragged")


def _run(mod, rows=128, check=True):
    a = rand((rows, 128)).astype("float16")
    c = np.zeros((rows, 128), "float32")
    T.interpret(mod.lowered, a, c, check_races=check)
    return a, c


@pytest.mark.parametrize("mod", [PLAIN, SWIZZLED], ids=["plain", "swizzled"])
def test_tensor_copies_land_at_their_phase_and_compute_right(mod):
    a, c = _run(mod)
    np.testing.assert_array_equal(c, a.astype("float32") * 2)


def test_a_box_past_the_tensor_is_zero_filled_and_the_map_holds_its_dims():
    a, c = _run(RAGGED, rows=100)
    np.testing.assert_array_equal(c, a.astype("float32") * 2)
    rec = RAGGED.runtime.record()
    ((dtype, rank, address, dims, strides, box, steps, inter, swz, l2, fill),) = \
        rec.encodings
    assert (dtype, rank, dims, strides, box, steps, inter, swz, l2, fill) == \
        (6, 2, (128, 100), (256,), (64, 64), (1, 1), 0, 0, 2, 0)
    assert address == rec.launches[0].args[0]


def test_the_swizzled_tile_is_laid_out_as_the_engine_writes_it():
    # the tile as the engine leaves it: 16-byte chunks of row r XORed by r % 8
    src = _kernel(read="S[r, tx % 64]")
    a, c = _run(_build(src, "tma_raw", swizzle=SW))
    for r in (0, 1, 7, 9):
        for j in (0, 8, 56):
            col = (j // 8 ^ r % 8) * 8
            assert c[r, col] == a[r, j].astype("float32") * 2


def test_a_removed_wait_is_a_race_naming_the_copy_and_the_read():
    with pytest.raises(T.RaceError, match="still in flight") as err:
        _run(_build(_kernel(wait=""), "tma_no_wait"))
    copy, read = err.value.statements
    assert '"tma_load", S[0], A[bx * 8192 + ko * 64], M[0], 64, 64' in copy
    assert "C[" in read and "S[" in read and err.value.buffer == "S"


def test_a_phase_missing_the_box_bytes_is_reported():
    with pytest.raises(LoweringError, match=r"waits for phase 0 of mbarrier M, which still "
                                            r"lacks 0 of 1 arrivals and 4096 bytes"):
        _run(_build(_kernel(tx_bytes=12288), "tma_short"))


def test_the_kernel_takes_a_grid_constant_tensor_map_encoded_at_launch():
    src = SWIZZLED.get_source("cuda")
    assert re.search(r"const __grid_constant__ cvl_tmap cvl_tmap_A_0\)", src)
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes" \
        in src
    # the box corner innermost first: (column, row)
    assert re.search(r"cvl_tma_load_2d\(&S\[0\], &cvl_tmap_A_0, ko \* 64, \(int32_t\)\("
                     r"\(uint32_t\)bx \* \(uint32_t\)64\), &M\[0\]\)", src)
    assert "__shared__ __align__(1024) half S[4096];" in src
    rec = SWIZZLED.runtime.record()
    (launch,) = rec.launches
    ((dtype, rank, address, dims, strides, box, steps, inter, swz, l2, fill),) = \
        rec.encodings
    assert (dtype, dims, strides, box, swz) == (6, (128, 128), (256,), (64, 64), 3)
    # the launch passes the map the encoder filled (its number, the tensor's address)
    assert launch.args[0] == address and launch.args[-1][:2] == (1, address)
    assert SWIZZLED.runtime.program.kernels["tma_swz_kernel0"].tensor_maps[0].swizzle == 3


def test_a_failed_encoding_is_reported_with_the_driver_error():
    from targets.cuda.launcher import HostProgram, Recorder
    prog = PLAIN.runtime.program
    rec = Recorder(prog, fail_encode=1)
    with pytest.raises(TargetError, match=r"could not encode a tensor map .*CUDA error 1"):
        HostProgram(prog).run(rec.table(), [0x1000, 0x2000], [])
    assert rec.launches == []


def test_tensor_copies_compile_to_the_tensor_engine():
    for mod in (PLAIN, SWIZZLED):
        src = mod.get_source("cuda")
        name = next(iter(mod.runtime.program.kernels))
        code = sass(src, "sm_90a")[name]
        assert "UTMALDG.2D" in code and "SYNCS.PHASECHK" in code
        usage = resource_usage(src, "sm_90a")[name]
        assert usage["spill_stores"] == 0 and usage["shared"] >= 64 * 64 * 2 + 8


def test_tensor_copies_need_hopper():
    with pytest.raises(LoweringError, match=r"needs sm_90 \(Hopper.s bulk and tensor "
                                            r"copies.* the target is sm_80"):
        _build(_kernel(), "tma_old", arch="sm_80")


@pytest.mark.parametrize("box, match", [
    ("64, 4", r"a box row of 4 float16 elements is 8 bytes"),
    ("64, 300", r"the box must be two constants in 1\.\.256, found 64 x 300"),
])
def test_boxes_the_engine_cannot_move_are_refused(box, match):
    with pytest.raises(LoweringError, match=match):
        _build(_kernel(box=box), "tma_bad_box")


def test_a_destination_with_rows_other_than_the_box_is_refused():
    with pytest.raises(LoweringError, match=r"tma_load writes rows of 32 elements one after "
                                            r"another; S's rows hold 64"):
        _build(_kernel(box="64, 32", tx_bytes=4096), "tma_rows")


def test_a_swizzle_the_engine_does_not_have_is_refused():
    with pytest.raises(CodegenError, match=r"tma_load writes rows of 128 bytes through "
                                           r"Swizzle\(bits=2, base=3, shift=1\)"):
        _build(_kernel(read=SWIZZLED_READ), "tma_bad_swz", swizzle=Swizzle(2, 3, 1))
