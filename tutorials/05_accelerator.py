"""Tutorial 05: an int8 GEMM on an accelerator described in one Python file.

Run:  python tutorials/05_accelerator.py

1. **Describe the NPU** (``targets/accel/examples/toy_npu.py``): three banked memories,
   a 512-bit DMA, a 16x16x16 int8 GEMM unit and a vector unit, each intrinsic given by
   what it computes (TIR), its operand memories, its C name and its cost.
2. **Register it** from your own file: ``targets.register_target(toy_npu)``.
3. **Schedule a GEMM for it** (``targets/accel/examples/gemm.py``): stage A and B into
   ``npu.inp``/``npu.wgt`` and C into ``npu.acc`` (``cache_read``/``cache_write``), tile
   by 64, ``compute_at`` the staged copies into the k-tile loop, tensorize the 16x16x16
   update and the accumulator's zeroing.
4. **Build and run on the simulator**: the C against the generated HAL, the memory map,
   exact results and the counters.
5. **Change the schedule**: double-buffer the staged tiles and watch the GEMM unit's
   utilisation rise.
"""

import numpy as np

import targets
from targets.accel.examples.gemm import gemm, schedule_gemm
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
