"""A second accelerator of another geometry, described in a few dozen lines: an fp16
8x8x8 MAC array accumulating in fp32, two banks per memory, a 128-bit DMA.  Nothing
in Cuvil is specific to the toy NPU."""

import numpy as np

import cuvil_tir as T
import targets
from targets.accel import DMA, Accelerator, Intrinsic, Memory
from targets.accel.examples.toy_npu import elementwise_desc, gemm_desc

from targets.toolkit.npu.gemm import gemm, schedule_gemm

SCOPES = ("mac.in", "mac.w", "mac.acc")
mac = Accelerator(
    "mac8",
    memories=[Memory("mac.in", banks=2, bank_bytes=4 << 10, width_bits=128),
              Memory("mac.w", banks=2, bank_bytes=4 << 10, width_bits=128),
              Memory("mac.acc", banks=2, bank_bytes=8 << 10, width_bits=256)],
    dma=DMA(width_bits=128, latency_cycles=20),
    intrinsics=[
        Intrinsic("mac8.mma_8x8x8_f16", gemm_desc(8, 8, 8, "float16", "float32", SCOPES),
                  dict(zip("ABC", SCOPES)), "mma", cycles=8, unit="mac"),
        Intrinsic("mac8.zero_8x8_f32",
                  elementwise_desc("zero", lambda: T.const(0.0, "float32"), [],
                                   ("C", "float32", "mac.acc"), shape=(8, 8)),
                  {"C": "mac.acc"}, "zero", cycles=8, unit="mac")])


def test_fp16_mac_array_gemm():
    targets.register_target(mac, replace=True)
    sch = schedule_gemm(gemm(64, in_dtype="float16", acc_dtype="float32"), tile=32, t=8,
                        gemm="mac8.mma_8x8x8_f16", zero="mac8.zero_8x8_f32", scopes=SCOPES,
                        double=True)
    mod = targets.build(sch, "mac8", name="mma_gemm")
    rng = np.random.default_rng(1)
    a = rng.integers(-4, 5, (64, 64)).astype("float16")   # exact in fp16 and fp32
    b = rng.integers(-4, 5, (64, 64)).astype("float16")
    c = np.zeros((64, 64), "float32")
    mod(a, b, c)
    np.testing.assert_array_equal(c, a.astype("float32") @ b.astype("float32"))
    assert set(mod.stats["engine_busy"]) == {"load", "store", "mac"}
    assert mod.stats["bank_conflict_stalls"] == 0
    assert "mac8_mma(" in mod.get_source("c") and "mac.acc: 2 banks" in mod.memory_map()
