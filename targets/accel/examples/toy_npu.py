"""A toy NPU described in one file: an int8 16x16x16 GEMM unit accumulating in int32,
a vector unit (zero, add, bias add, ReLU, requantize), three banked memories, a 512-bit
DMA that can zero-fill the edge of a tile, and a 1 GHz clock.

Costs are those of a plausible small device, not chosen to flatter it: the GEMM unit
does 16x16 MACs per cycle, so a 16x16x16 call takes 16 cycles plus 2 to drain; the
vector unit does one 16-element row per cycle; the DMA moves at most 64 bytes per
cycle after 64 cycles of latency; each memory holds 32-64 KB, so a 256^3 GEMM does not
fit at once and must be tiled.

Use it from your own file::

    import targets
    from targets.accel.examples.toy_npu import toy_npu
    targets.register_target(toy_npu)

Example::

    >>> toy_npu.name, [m.capacity_bytes for m in toy_npu.memories_only]
    ('toy-npu', [32768, 32768, 65536])
    >>> toy_npu.clock_mhz
    1000
"""

from __future__ import annotations

import cuvil_tir as T
from cuvil_tir.buffer import Buffer
from cuvil_tir.expr import Var
from cuvil_tir.function import PrimFunc
from cuvil_tir.stmt import Block, BlockRealize, BufferRegion, BufferStore, For, IterVar, Range

from targets.accel import DMA, Accelerator, Intrinsic, Memory, Queue

TILE = 16


def _point(*xs):
    return tuple(Range(x, T.const(1)) for x in xs)


def _nest(loops, block):
    body = BlockRealize(tuple(v for v, _ in loops), T.const(True), block)
    for v, n in reversed(loops):
        body = For(v, T.const(0), T.const(n), "serial", body)
    return body


def gemm_desc(m=TILE, n=TILE, k=TILE, in_dtype="int8", acc_dtype="int32",
              scopes=("npu.inp", "npu.wgt", "npu.acc")):
    """``C[0:m, 0:n] += A[0:m, 0:k] @ B[0:k, 0:n]`` with products in ``acc_dtype``."""
    A = Buffer((m, k), in_dtype, "A", scope=scopes[0])
    B = Buffer((k, n), in_dtype, "B", scope=scopes[1])
    C = Buffer((m, n), acc_dtype, "C", scope=scopes[2])
    i, j, r, vi, vj, vk = (Var(x) for x in ("i", "j", "k", "vi", "vj", "vk"))
    blk = Block("update", (IterVar(vi, Range.from_extent(m), "spatial"),
                           IterVar(vj, Range.from_extent(n), "spatial"),
                           IterVar(vk, Range.from_extent(k), "reduce")),
                (BufferRegion(C, _point(vi, vj)), BufferRegion(A, _point(vi, vk)),
                 BufferRegion(B, _point(vk, vj))),
                (BufferRegion(C, _point(vi, vj)),),
                BufferStore(C, C[vi, vj] + T.cast(A[vi, vk], acc_dtype)
                            * T.cast(B[vk, vj], acc_dtype), (vi, vj)))
    return PrimFunc((A, B, C), _nest([(i, m), (j, n), (r, k)], blk))


def elementwise_desc(name, fn, inputs, out, shape=(TILE, TILE)):
    """A block ``out[i, j] = fn(*(x[i, j] for x in inputs))`` over one tile;
    ``inputs``/``out`` are ``(name, dtype, scope)``; an input ``(name, dtype, scope,
    "row")`` is one row ``x[j]`` broadcast over the tile's rows (a bias)."""
    ins = [Buffer(shape[1:] if x[3:] == ("row",) else shape, x[1], x[0], scope=x[2])
           for x in inputs]
    o = Buffer(shape, out[1], out[0], scope=out[2])
    i, j, vi, vj = Var("i"), Var("j"), Var("vi"), Var("vj")
    at = [(vj,) if len(b.shape) == 1 else (vi, vj) for b in ins]
    blk = Block(name, (IterVar(vi, Range.from_extent(shape[0]), "spatial"),
                       IterVar(vj, Range.from_extent(shape[1]), "spatial")),
                tuple(BufferRegion(b, _point(*x)) for b, x in zip(ins, at)),
                (BufferRegion(o, _point(vi, vj)),),
                BufferStore(o, fn(*[b[x] for b, x in zip(ins, at)]), (vi, vj)))
    params = tuple(ins) + ((o,) if all(b.name != o.name for b in ins) else ())
    return PrimFunc(params, _nest([(i, shape[0]), (j, shape[1])], blk))


ACC = ("C", "int32", "npu.acc")
SHIFT = 8      # requantize: int8(clip(floor(x / 2**SHIFT), -128, 127))


def requant(x):
    """The requantize rule of the vector unit, on an int32 expression."""
    return T.cast(T.max(T.min(T.floordiv(x, 1 << SHIFT), T.const(127, "int32")),
                        T.const(-128, "int32")),
                  "int8")


toy_npu = Accelerator(
    "toy-npu",
    memories=[Memory("npu.inp", banks=4, bank_bytes=8 << 10, width_bits=128,
                     doc="int8 activations"),
              Memory("npu.wgt", banks=4, bank_bytes=8 << 10, width_bits=128,
                     doc="int8 weights"),
              Memory("npu.acc", banks=8, bank_bytes=8 << 10, width_bits=512,
                     doc="int32 accumulators (and the vector unit's operands)")],
    dma=DMA(width_bits=512, latency_cycles=64, padding=True, dims=3),
    # token queues between the engines: two deep, enough for double buffering
    queues=[Queue("load", "gemm", depth=2), Queue("gemm", "load", depth=2),
            Queue("gemm", "store", depth=2), Queue("store", "gemm", depth=2)],
    queue_depth=2,
    clock_mhz=1000,
    intrinsics=[
        Intrinsic("toy.gemm_16x16x16_i8", gemm_desc(),
                  {"A": "npu.inp", "B": "npu.wgt", "C": "npu.acc"}, "gemm_16x16x16",
                  cycles=lambda s: s["A"][1] + 2, unit="gemm",
                  align_bytes={"A": 16, "B": 16, "C": 64}),
        Intrinsic("toy.zero_16x16_i32",
                  elementwise_desc("zero", lambda: T.const(0, "int32"), [], ACC),
                  {"C": "npu.acc"}, "zero_16x16", cycles=TILE, unit="vector"),
        Intrinsic("toy.add_16x16_i32",
                  elementwise_desc("add", lambda a, b: a + b,
                                   [("X", "int32", "npu.acc"), ("Y", "int32", "npu.acc")],
                                   ("Z", "int32", "npu.acc")),
                  {"X": "npu.acc", "Y": "npu.acc", "Z": "npu.acc"}, "add_16x16",
                  cycles=TILE, unit="vector"),
        Intrinsic("toy.bias_add_16x16_i32",
                  elementwise_desc("bias_add", lambda a, b: a + b,
                                   [("X", "int32", "npu.acc"), ("Y", "int32", "npu.acc", "row")],
                                   ("Z", "int32", "npu.acc")),
                  {"X": "npu.acc", "Y": "npu.acc", "Z": "npu.acc"}, "bias_add_16x16",
                  cycles=TILE, unit="vector"),
        Intrinsic("toy.relu_16x16_i32",
                  elementwise_desc("relu", lambda a: T.max(a, T.const(0, "int32")),
                                   [("X", "int32", "npu.acc")], ("Z", "int32", "npu.acc")),
                  {"X": "npu.acc", "Z": "npu.acc"}, "relu_16x16", cycles=TILE, unit="vector"),
        Intrinsic("toy.requant_16x16_i8",
                  elementwise_desc("requant", requant, [("X", "int32", "npu.acc")],
                                   ("Z", "int8", "npu.acc")),
                  {"X": "npu.acc", "Z": "npu.acc"}, "requant_16x16", cycles=TILE,
                  unit="vector"),
    ],
    doc="toy NPU: int8 16x16x16 GEMM unit, vector unit, banked scratchpads, 512-bit DMA")

__all__ = ["elementwise_desc", "gemm_desc", "requant", "toy_npu"]
