"""A small NPU of the toy NPU's geometry with its own memory scopes and intrinsic
names, for tests that vary one part of the description (queues, DMA engines)."""

import contextlib

import numpy as np

import cuvil_tir as T
import targets
from targets.accel import DMA, Accelerator, Intrinsic, Memory
from targets.accel.examples.toy_npu import elementwise_desc, gemm_desc
from targets.toolkit.npu.gemm import gemm, schedule_gemm


def scopes(prefix: str) -> tuple:
    """The input, weight and accumulator memories of a small NPU."""
    return (f"{prefix}.inp", f"{prefix}.wgt", f"{prefix}.acc")


def small_npu(name, prefix, dma=None, queues=(), queue_depth=2):
    """Memories ``<prefix>.inp/.wgt/.acc``, a GEMM (18 cycles) and a zero (16 cycles)
    intrinsic named after the accelerator, the toy NPU's DMA unless ``dma``."""
    p, (inp, wgt, acc) = name.replace("-", "_"), scopes(prefix)
    return Accelerator(
        name,
        memories=[Memory(inp, banks=4, bank_bytes=8 << 10, width_bits=128),
                  Memory(wgt, banks=4, bank_bytes=8 << 10, width_bits=128),
                  Memory(acc, banks=8, bank_bytes=8 << 10, width_bits=512)],
        dma=dma or DMA(width_bits=512, latency_cycles=64),
        intrinsics=[
            Intrinsic(f"{p}.gemm", gemm_desc(scopes=scopes(prefix)),
                      dict(zip("ABC", scopes(prefix))), "gemm", cycles=18, unit="gemm"),
            Intrinsic(f"{p}.zero", elementwise_desc("zero", lambda: T.const(0, "int32"), [],
                                                    ("C", "int32", acc)),
                      {"C": acc}, "zero", cycles=16, unit="vector")],
        queues=queues, queue_depth=queue_depth)


@contextlib.contextmanager
def registered(acc, restore):
    """``acc`` registered for the block (a rebuild of a shipped device under its name),
    ``restore`` registered again after it."""
    targets.register_target(acc, replace=True)
    try:
        yield acc
    finally:
        targets.register_target(restore, replace=True)


def build_gemm(acc, prefix, n=128, tile=64, double=True, **options):
    """GEMM ``n^3`` in ``tile``-tiles on small NPU ``acc`` (registered)."""
    targets.register_target(acc, replace=True)
    p = acc.name.replace("-", "_")
    sch = schedule_gemm(gemm(n), tile=tile, gemm=f"{p}.gemm", zero=f"{p}.zero",
                        scopes=scopes(prefix), double=double)
    return targets.build(sch, targets.Target(acc.name, **options), name="sgemm")


def run_gemm(mod, n=128, seed=3):
    """Run a built ``n^3`` GEMM on random int8 inputs, check it against numpy, and
    return the simulator's counters."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (n, n)).astype("int8")
    b = rng.integers(-128, 128, (n, n)).astype("int8")
    c = np.zeros((n, n), "int32")
    mod(a, b, c)
    np.testing.assert_array_equal(c, a.astype("int32") @ b.astype("int32"))
    return mod.stats
