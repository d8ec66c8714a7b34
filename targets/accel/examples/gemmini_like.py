"""A Gemmini-like NPU in one file: a 16x16 int8 systolic array that accumulates into an
int32 accumulator memory, a scratchpad for its inputs and weights, and a DMA that does
the rest (Gemmini's ``mvin``/``mvout``): it zero-fills or bias-preloads accumulator
tiles, and applies the activation and requantization on the way out, so no vector
unit is needed.

What makes it Gemmini rather than the toy NPU, all of it data below:

- **scratchpad + accumulator**: ``gem.spad`` (int8 rows of 16 bytes, 4 banks, holds A
  and B tiles side by side) and ``gem.acc`` (int32 rows of 64 bytes, 2 banks);
- **accumulate on write**: the array's result is added to the accumulator tile it
  writes (the matmul intrinsic's desc is ``C += A @ B``; an accumulator tile starts as
  zeros, ``<hal>_dma_fill``, or as the bias repeated down its rows, a broadcast load);
- **activation on read-out**: the DMA's ``store_ops`` turn an int32 accumulator tile
  into int8 on its way to host memory (``requant``, ``relu_requant``), and the
  on-chip move from the accumulator to the scratchpad does the same (``Move``: one
  layer's output becomes the next layer's input without leaving the chip).

Costs: the array takes 16 cycles per 16x16x16 step plus 4 to fill and drain; the DMA
moves 16 bytes per cycle after 32 cycles of latency (reading the int32 accumulator out
counts its 4-byte elements); 1 GHz.

Example::

    >>> import targets
    >>> from targets.accel.examples.gemmini_like import gemmini
    >>> _ = targets.register_target(gemmini, replace=True)
    >>> [m.scope for m in gemmini.memories_only], gemmini.engines
    (['gem.spad', 'gem.acc'], ('load', 'store', 'matrix'))
    >>> [op.name for op in gemmini.dma.store_ops]
    ['requant', 'relu_requant']
"""

from __future__ import annotations

import cuvil_tir as T

from targets.accel import (DMA, Accelerator, DMAOp, HalArg, HalCall, HalWord, Intrinsic,
                           Memory, Move, Queue)
from targets.accel.examples.toy_npu import gemm_desc, requant

DIM = 16
SPAD, ACC = "gem.spad", "gem.acc"


def relu_requant(x):
    """ReLU then requantize (the toy NPU's rule) of an int32 expression."""
    return requant(T.max(x, T.const(0, "int32")))


RELU_REQUANT = DMAOp("relu_requant", relu_requant, "int32", "int8")


def decode_e4m3(byte):
    """The float32 value of an fp8 e4m3 ``byte`` (uint8: sign, 4 exponent bits of bias
    7, 3 mantissa bits; the NaN encodings are not special-cased): ``(8 + man) << exp``
    (``man << 1`` when subnormal) over 1024, exact in float32."""
    x = T.cast(byte, "int32")
    e, man = (x >> 3) & 15, x & 7
    mag = T.cast(T.if_then_else(e == 0, man << 1, (man + 8) << e), "float32") \
        * T.const(1.0 / 1024, "float32")
    return T.if_then_else(x >> 7 == 1, -mag, mag)

def _mv(name, op, mem, row):
    """Gemmini's ``mvin``/``mvout``: one descriptor (``gemmini_dma_t``) by pointer, the
    scratchpad side as a row address (``row`` bytes a row of ``mem``)."""
    sp, dram = ("dst", "src") if op == "dma_load" else ("src", "dst")
    # the DRAM stride is state set by config_ld / config_st, issued once when every
    # move passes the same one
    return HalCall(name, op, (
        HalArg("dram_addr", dram, "const void *" if op == "dma_load" else "void *"),
        HalArg("sp_row", sp, "uint32_t", unit=row, address="bytes"),
        HalArg("rows", "rows", "uint16_t"), HalArg("cols", "row_bytes", "uint16_t"),
        HalArg("sp_stride", f"{sp}_stride", "uint32_t")),
        memories={sp: mem}, struct=f"gemmini_{op[4:]}_t",
        config=HalCall(f"gemmini_config_{'ld' if sp == 'dst' else 'st'}"
                       f"{'_acc' if mem == ACC else ''}", op, (
            HalArg("dram_stride", f"{dram}_stride", "uint32_t"),)))


def _row(name, operand, mem_row):
    """An operand as a row address in its memory (``mem_row`` bytes a row)."""
    return HalArg(name, operand, "uint32_t", unit=mem_row, address="bytes")


def _rs(name, operand, mem_row):
    """A RoCC source register: the operand's row address in bits 0-31, its row stride
    (elements) in bits 32-47."""
    return HalWord(name, "uint64_t", ((_row(f"{name}_addr", operand, mem_row), 0),
                                      (HalArg(f"{name}_stride", f"{operand}_stride",
                                              "uint16_t"), 32)))


# Gemmini's matmul is two instructions: preload (the weights B and the accumulator
# tile C the result goes to) then compute_preloaded (the inputs A), each taking its
# operands packed in 64-bit registers (rs1, rs2)
MATMUL = HalCall("gemmini_preload", "matmul", (_rs("rs1", "B", DIM), _rs("rs2", "C", 4 * DIM)),
                 then=HalCall("gemmini_compute_preloaded", "matmul", (_rs("rs1", "A", DIM),)))

gemmini = Accelerator(
    "gemmini-like",
    memories=[Memory(SPAD, banks=4, bank_bytes=64 << 10, width_bits=8 * DIM,
                     doc="int8 scratchpad: input and weight tiles, one 16-byte row each"),
              Memory(ACC, banks=2, bank_bytes=32 << 10, width_bits=32 * DIM,
                     doc="int32 accumulators: the array adds into them")],
    dma=DMA(width_bits=128, latency_cycles=32, padding=True, broadcast=True, transpose=True,
            im2col=True,     # Gemmini's im2col unit: a conv's patches gathered on the way in
            dims=3,          # a loop of 2-D moves in one command (mvin with a block count)
            store_ops=[DMAOp("requant", requant, "int32", "int8"), RELU_REQUANT]),
    # the accumulator read out into the scratchpad, activated: the next layer's input
    # never leaves the chip
    moves=[Move(ACC, SPAD, engine="store", width_bits=128, latency_cycles=8,
                ops=[RELU_REQUANT])],
    # VTA-style dependence queues between the load, matrix and store engines
    queues=[Queue(s, d, depth=2) for s, d in (("load", "matrix"), ("matrix", "load"),
                                              ("matrix", "store"), ("store", "matrix"))],
    clock_mhz=1000,
    intrinsics=[
        Intrinsic("gemmini.matmul_16x16x16_i8", gemm_desc(scopes=(SPAD, SPAD, ACC)),
                  {"A": SPAD, "B": SPAD, "C": ACC}, "matmul",
                  cycles=lambda s: s["A"][0] + 4, unit="matrix",
                  align_bytes={"A": 16, "B": 16, "C": 64}),
        # fp8 (e4m3) operands, stored as bytes, accumulating in float32
        Intrinsic("gemmini.matmul_16x16x16_e4m3",
                  gemm_desc(in_dtype="uint8", acc_dtype="float32", scopes=(SPAD, SPAD, ACC),
                            decode=decode_e4m3),
                  {"A": SPAD, "B": SPAD, "C": ACC}, "matmul_e4m3",
                  cycles=lambda s: s["A"][0] + 4, unit="matrix",
                  align_bytes={"A": 16, "B": 16, "C": 64}),
    ],
    # the vendor's own moves in and out (docs/accelerators.md, "Vendor HAL signatures")
    hal_calls=[_mv("gemmini_mvin", "dma_load", SPAD, DIM), _mv("gemmini_mvin_acc", "dma_load",
                                                               ACC, 4 * DIM),
               _mv("gemmini_mvout", "dma_store", SPAD, DIM),
               _mv("gemmini_mvout_acc", "dma_store", ACC, 4 * DIM), MATMUL],
    doc="Gemmini-like NPU: 16x16 int8 systolic array, scratchpad + accumulator, a DMA "
        "with zero/bias preload and activation on read-out")

__all__ = ["MATMUL", "decode_e4m3", "gemmini", "relu_requant"]
