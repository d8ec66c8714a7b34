"""Tutorial 05: an int8 GEMM on an accelerator described in one Python file.

Run:  python tutorials/05_accelerator.py

1. **Describe the NPU** (``targets/accel/examples/toy_npu.py``): three banked memories,
   a 512-bit DMA, a 16x16x16 int8 GEMM unit and a vector unit, each intrinsic given by
   what it computes (TIR), its operand memories, its C name and its cost.
2. **Register it** from your own file: ``targets.register_target(toy_npu)``.
3. **Schedule a GEMM for it** (``targets/toolkit/npu/gemm.py``): stage A and B into
   ``npu.inp``/``npu.wgt`` and C into ``npu.acc`` (``cache_read``/``cache_write``), tile
   by 64, ``compute_at`` the staged copies into the k-tile loop, tensorize the 16x16x16
   update and the accumulator's zeroing.
4. **Build and run on the simulator**: the C against the generated HAL, the memory map,
   exact results and the counters.
5. **Change the schedule**: double-buffer the staged tiles and watch the GEMM unit's
   utilisation rise.
6. **Sizes that are not multiples of 16, and a conv2d**: ``pad_einsum`` pads the
   computation to whole tiles; the DMA zero-fills the edge of each staged tile on load
   (``toy_npu_dma_load_pad``) and writes back only the valid part, so the GEMM unit
   always sees full 16x16x16 tiles.  A conv2d with 8 input channels runs on the same
   GEMM unit as one GEMM per filter tap (``targets/toolkit/npu/conv2d.py``).
"""

import numpy as np

import targets
from targets.toolkit.npu.conv2d import conv2d, schedule_conv2d
from targets.toolkit.npu.gemm import gemm, schedule_gemm
from targets.accel.examples.toy_npu import toy_npu

targets.register_target(toy_npu, replace=True)
N = 256
rng = np.random.default_rng(0)
a = rng.integers(-128, 128, (N, N)).astype("int8")
b = rng.integers(-128, 128, (N, N)).astype("int8")
want = a.astype("int32") @ b.astype("int32")


def run(double: bool):
    mod = targets.build(schedule_gemm(gemm(N), double=double), "toy-npu",
                        name="gemm_db" if double else "gemm")
    c = np.zeros((N, N), "int32")
    mod(a, b, c)
    assert np.array_equal(c, want), "the simulator result differs from numpy"
    return mod


single = run(double=False)
print("---- the kernel's C (first lines) ----")
print("\n".join(single.get_source("c").splitlines()[:40]))
print("---- the HAL header it includes ----")
print(single.get_source("h"))
print("---- memory map ----")
print(single.memory_map())
print("---- counters, single buffering ----")
print(single.stats)

double = run(double=True)
print("---- memory map, double buffering: two copies of each tile, in different banks ----")
print(double.memory_map())
print("---- counters, double buffering ----")
print(double.stats)
print(f"GEMM unit busy: {100 * single.stats['utilisation']['gemm']:.1f}% single -> "
      f"{100 * double.stats['utilisation']['gemm']:.1f}% double buffered; cycles "
      f"{single.stats['cycles']} -> {double.stats['cycles']}")

print("---- 6. a 100x70x50 GEMM: padded edge tiles ----")
pad = targets.build(schedule_gemm(gemm(100, 70, 50)), "toy-npu", name="gemm_pad")
a2, b2 = a[:100, :50].copy(), b[:50, :70].copy()
c2 = np.zeros((100, 70), "int32")
pad(a2, b2, c2)
assert np.array_equal(c2, a2.astype("int32") @ b2.astype("int32"))
print("\n".join(line.strip() for line in pad.get_source("c").splitlines() if "dma_" in line))
print(f"exact; DMA bytes out {pad.stats['dma_bytes_out']} = 100 * 70 * 4 (only the valid part)")

print("---- 6. an int8 conv2d 3x3, 8 -> 24 channels, on the GEMM unit ----")
conv = targets.build(schedule_conv2d(conv2d(1, 18, 18, 8, 24), double=True), "toy-npu",
                     name="conv")
x = rng.integers(-128, 128, (1, 18, 18, 8)).astype("int8")
w = rng.integers(-128, 128, (3, 3, 8, 24)).astype("int8")
y = np.zeros((1, 16, 16, 24), "int32")
conv(x, w, y)
ref = sum(np.einsum("nyxc,ck->nyxk", x[:, r:r + 16, s:s + 16].astype("int32"),
                    w[r, s].astype("int32")) for r in range(3) for s in range(3))
assert np.array_equal(y, ref), "the simulated conv2d differs from numpy"
print(f"exact; {conv.stats['cycles']} cycles, GEMM unit "
      f"{100 * conv.stats['utilisation']['gemm']:.1f}% busy")
