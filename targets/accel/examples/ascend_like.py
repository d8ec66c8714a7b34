"""A multi-core NPU in the Ascend style, in one file: four cores, each with a cube
(matrix unit), a vector unit and its own memory hierarchy, sharing an L2 and host
memory (DDR).

Per core, data flows as on Ascend's AI cores:

- **L1** (``asc.l1``, 512 KiB): tiles arrive from DDR (the ``load`` engine, Ascend's
  MTE2) or from the shared L2 (the same engine, an on-chip move);
- **L0A / L0B** (``asc.l0a``, ``asc.l0b``, 64 KiB each): the cube's left and right
  operands, moved from L1 by the ``mte1`` engine (Ascend's MTE1);
- **the cube** (unit ``cube``): ``C[16, 16] += A[16, 16] @ B[16, 16]`` in int8 with
  int32 products, 16 cycles a call (a 16x16 array of MACs), accumulating in **L0C**
  (``asc.l0c``, 256 KiB);
- **the vector unit** (unit ``vector``) moves L0C to the unified buffer **UB**
  (``asc.ub``, 256 KiB) and runs the epilogues there (bias add, ReLU, requantize);
- the ``store`` engine (MTE3) writes UB back to DDR.

Shared by the four cores: **L2** (``asc.l2``, 4 MiB: weights loaded once and read by
every core) and the links to DDR (128 bytes per cycle for all cores together) and to
L2 (256 bytes per cycle), so four cores loading at once wait for each other.

Costs: the DMA moves up to 128 bytes per cycle after 128 cycles of latency; on-chip
moves 256 bytes per cycle after 16; vector instructions one 16-element row per cycle;
1 GHz.  Schedules: :mod:`targets.toolkit.npu.multicore` (``sch.bind(loop,
"asc.core")`` spreads tiles over the cores).

Example::

    >>> import targets
    >>> from targets.accel.examples.ascend_like import ascend
    >>> _ = targets.register_target(ascend, replace=True)
    >>> ascend.cores.count, ascend.cores.shared, ascend.engines
    (4, ('asc.l2',), ('load', 'store', 'cube', 'vector', 'mte1'))
    >>> [(mv.src, mv.dst, mv.engine) for mv in ascend.moves][:2]
    [('asc.l2', 'asc.l1', 'load'), ('asc.l1', 'asc.l0a', 'mte1')]
"""

from __future__ import annotations

import cuvil_tir as T

from targets.accel import (DMA, Accelerator, Cores, DMAEngine, HalArg, HalCall, Intrinsic,
                           Memory, Move)
from targets.accel.examples.toy_npu import elementwise_desc, gemm_desc, requant

TILE = 16
L2, L1, L0A, L0B, L0C, UB = ("asc.l2", "asc.l1", "asc.l0a", "asc.l0b", "asc.l0c", "asc.ub")
CORE_AXIS = "asc.core"


def _move(src, dst, engine):
    """An on-chip move at 256 bytes per cycle after 16 cycles."""
    return Move(src, dst, engine=engine, width_bits=2048, latency_cycles=16)


def _vector(name, fn, inputs, out, c_name):
    """A vector-unit instruction over one 16x16 tile of UB, a row a cycle."""
    scopes = {x[0]: x[2] for x in list(inputs) + [out]}
    return Intrinsic(f"asc.{name}", elementwise_desc(name, fn, inputs, out), scopes, c_name,
                     cycles=TILE, unit="vector")


#: the SDK's names of the pipes (engines) and of the event flags between them
PIPES = {"load": "PIPE_MTE2", "store": "PIPE_MTE3", "cube": "PIPE_M", "vector": "PIPE_V",
         "mte1": "PIPE_MTE1"}
EVENTS = {k: f"EVENT_ID{k}" for k in range(8)}


def _flag(name, replaces):
    """Ascend's event flags between pipes: ``set_flag(PIPE_MTE2, PIPE_M, EVENT_ID0)``."""
    return HalCall(name, replaces, (HalArg("pipe", "src", "uint8_t", symbols=PIPES),
                                    HalArg("tpipe", "dst", "uint8_t", symbols=PIPES),
                                    HalArg("event_id", "id", "uint8_t", symbols=EVENTS)))


def _copy_gm(name, mem, gaps=False):
    """MTE2's DDR -> ``mem`` copy: ``n_burst`` rows of ``len_burst`` bytes, strides or
    (``gaps``) the bytes skipped between rows, the destination a byte address in
    ``mem``."""
    less = "row_bytes" if gaps else None
    return HalCall(name, "dma_load", (
        HalArg("dst", "dst", "uint32_t", address="bytes"), HalArg("src", "src", "const void *"),
        HalArg("sid", 0, "uint8_t"), HalArg("n_burst", "rows", "uint16_t"),
        HalArg("len_burst", "row_bytes", "uint16_t"),
        HalArg("src_gap" if gaps else "src_stride", "src_stride", "uint32_t", minus=less),
        HalArg("dst_gap" if gaps else "dst_stride", "dst_stride", "uint16_t", minus=less)),
        memories={"dst": mem})


def _load_l0(name, replaces):
    """MTE1's L1 -> L0 copy: byte addresses in the two buffers, rows of n bytes."""
    return HalCall(name, replaces, (
        HalArg("dst", "dst", "uint32_t", address="bytes"),
        HalArg("src", "src", "uint32_t", address="bytes"),
        HalArg("repeat", "rows", "uint16_t"), HalArg("n_bytes", "n", "uint16_t"),
        HalArg("dst_stride", "dst_stride", "uint16_t"),
        HalArg("src_stride", "src_stride", "uint16_t")))


# the vendor's own C API for the calls its SDK has (docs/accelerators.md, "Vendor HAL
# signatures"); every other operation keeps Cuvil's call
HAL_CALLS = [
    _flag("set_flag", "push"), _flag("wait_flag", "pop"),
    _copy_gm("copy_gm_to_cbuf", L1, gaps=True), _copy_gm("copy_gm_to_ubuf", UB),
    _copy_gm("copy_gm_to_l2", L2),
    _load_l0("load_cbuf_to_ca", "move_asc_l1_asc_l0a"),
    _load_l0("load_cbuf_to_cb", "move_asc_l1_asc_l0b"),
    HalCall("mmad", "mmad_16x16x16_init", (
        HalArg("c", "C", "uint32_t", address="elements"),
        HalArg("a", "A", "uint32_t", address="elements"),
        HalArg("b", "B", "uint32_t", address="elements"),
        HalArg("a_stride", "A_stride", "uint16_t"), HalArg("b_stride", "B_stride", "uint16_t"),
        HalArg("c_stride", "C_stride", "uint16_t"), HalArg("init", "init", "uint8_t")),
        doc="C[16,16] += A @ B (init: C = A @ B), operands as element indices in "
            "L0A/L0B/L0C"),
]
I32_UB = ("X", "int32", UB)
ascend = Accelerator(
    "ascend-like",
    memories=[Memory(L2, banks=8, bank_bytes=512 << 10, width_bits=128,
                     doc="shared by all cores: weights loaded once"),
              Memory(L1, banks=8, bank_bytes=64 << 10, width_bits=128,
                     doc="per core: tiles from DDR or L2"),
              Memory(L0A, banks=2, bank_bytes=32 << 10, width_bits=128,
                     doc="per core: the cube's left operand (int8)"),
              Memory(L0B, banks=2, bank_bytes=32 << 10, width_bits=128,
                     doc="per core: the cube's right operand (int8)"),
              Memory(L0C, banks=4, bank_bytes=64 << 10, width_bits=512,
                     doc="per core: the cube's int32 accumulators"),
              Memory(UB, banks=4, bank_bytes=64 << 10, width_bits=256,
                     doc="per core: the vector unit's operands and results")],
    # MTE2 takes a repeat count: a loop of 2-D copies (a filter's padded taps) is one
    # command paying the latency once; L0A/L0B fill from L1 only (MTE1, a Move)
    # two DMA engines: MTE2 ("load") from DDR into L2, L1, UB (and L0C for a zero fill:
    # its accumulators start at zero), MTE3 ("store") from UB back to DDR
    dma=DMA(width_bits=1024, latency_cycles=128, padding=True, dims=3, outstanding=4,
            engines=(DMAEngine("load", "load", reach=(L2, L1, L0C, UB)),
                     DMAEngine("store", "store", reach=(UB,)))),
    moves=[_move(L2, L1, "load"), _move(L1, L0A, "mte1"), _move(L1, L0B, "mte1"),
           _move(L0C, UB, "vector")],
    cores=Cores(4, axis=CORE_AXIS, shared=(L2,), bandwidth={"global": 128, L2: 256}),
    clock_mhz=1000,
    intrinsics=[
        Intrinsic("asc.mmad_16x16x16_i8", gemm_desc(scopes=(L0A, L0B, L0C)),
                  {"A": L0A, "B": L0B, "C": L0C}, "mmad_16x16x16",
                  cycles=lambda s: s["A"][0], unit="cube",
                  align_bytes={"A": 16, "B": 16, "C": 64},
                  init=True),   # mmad's init bit: the first step overwrites L0C
        _vector("bias_add_16x16_i32", lambda a, b: a + b,
                [I32_UB, ("Y", "int32", UB, "row")], ("Z", "int32", UB), "bias_add_16x16"),
        _vector("relu_16x16_i32", lambda a: T.max(a, T.const(0, "int32")), [I32_UB],
                ("Z", "int32", UB), "relu_16x16"),
        _vector("requant_16x16_i8", requant, [I32_UB], ("Z", "int8", UB), "requant_16x16"),
    ],
    hal_calls=HAL_CALLS,
    doc="Ascend-like NPU: 4 cores, each L1 -> L0A/L0B -> cube -> L0C -> vector -> UB, "
        "a shared L2 and shared DDR/L2 bandwidth")

__all__ = ["CORE_AXIS", "L0A", "L0B", "L0C", "L1", "L2", "UB", "ascend"]
