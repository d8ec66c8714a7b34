"""CPU tensor intrinsics: a register-blocked fp32 GEMM micro-kernel.

``cpu.gemm_4x8x4_f32`` computes ``C[0:4, 0:8] += A[0:4, 0:4] @ B[0:4, 0:8]``.  Its impl
keeps the 4x8 tile of C in a local accumulator (four 8-lane vectors, one AVX2 register
each), and for each of the 4 k steps does ``acc[i] += broadcast(A[i, k]) * B[k, 0:8]``
with Ramp vector loads: the LLVM backend turns it into vector multiply-adds.
:func:`gemm_intrin` builds other tile sizes (register them under your own name).

Example::

    >>> desc, impl = gemm_intrin(2, 4, 2)
    >>> [b.name for b in desc.params], [b.name for b in impl.params]
    (['A', 'B', 'C'], ['A', 'B', 'C'])
"""

from __future__ import annotations

from cuvil_tir.buffer import Buffer
from cuvil_tir.expr import Broadcast, Ramp, Var, const
from cuvil_tir.function import PrimFunc
from cuvil_tir.stmt import (Block, BlockRealize, BufferRegion, BufferStore, For, IterVar,
                            Range, seq)

from cuvil_tir.tensor_intrin import TensorIntrin


def _params(m: int, n: int, k: int, dtype: str):
    return (Buffer((m, k), dtype, "A"), Buffer((k, n), dtype, "B"),
            Buffer((m, n), dtype, "C"))


def _desc(m: int, n: int, k: int, dtype: str) -> PrimFunc:
    A, B, C = _params(m, n, k, dtype)
    i, j, r = Var("i"), Var("j"), Var("k")
    vi, vj, vk = Var("vi"), Var("vj"), Var("vk")

    def pt(*xs):
        return tuple(Range(x, const(1)) for x in xs)

    blk = Block("update",
                (IterVar(vi, Range.from_extent(m), "spatial"),
                 IterVar(vj, Range.from_extent(n), "spatial"),
                 IterVar(vk, Range.from_extent(k), "reduce")),
                (BufferRegion(C, pt(vi, vj)), BufferRegion(A, pt(vi, vk)),
                 BufferRegion(B, pt(vk, vj))),
                (BufferRegion(C, pt(vi, vj)),),
                BufferStore(C, C[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj)))
    body = BlockRealize((i, j, r), const(True), blk)
    for v, e in ((r, k), (j, n), (i, m)):
        body = For(v, const(0), const(e), "serial", body)
    return PrimFunc((A, B, C), body, {"global_symbol": f"gemm_{m}x{n}x{k}_desc"})


def _impl(m: int, n: int, k: int, dtype: str) -> PrimFunc:
    A, B, C = _params(m, n, k, dtype)
    acc = Buffer((m, n), dtype, "acc", scope="local")
    lanes = Ramp(const(0), const(1), n)

    def rows(fn):
        i = Var("i")
        return For(i, const(0), const(m), "unrolled", fn(i))

    r = Var("k")
    load = rows(lambda i: BufferStore(acc, C[i, lanes], (i, lanes)))
    update = For(r, const(0), const(k), "unrolled", rows(
        lambda i: BufferStore(acc, acc[i, lanes] + Broadcast(A[i, r], n) * B[r, lanes],
                              (i, lanes))))
    store = rows(lambda i: BufferStore(C, acc[i, lanes], (i, lanes)))
    root = Block("root", (), (), (), seq(load, update, store), None, (acc,))
    return PrimFunc((A, B, C), BlockRealize((), const(True), root),
                    {"global_symbol": f"gemm_{m}x{n}x{k}_impl"})


def gemm_intrin(m: int, n: int, k: int, dtype: str = "float32") -> tuple:
    """``(desc, impl)`` of ``C[0:m, 0:n] += A[0:m, 0:k] @ B[0:k, 0:n]`` (n vector lanes).

    Example::

        >>> desc, impl = gemm_intrin(4, 8, 4)
        >>> impl.body.block.alloc_buffers[0].scope
        'local'
    """
    return _desc(m, n, k, dtype), _impl(m, n, k, dtype)


GEMM_4X8X4_F32 = "cpu.gemm_4x8x4_f32"
TensorIntrin.register(GEMM_4X8X4_F32, *gemm_intrin(4, 8, 4), override=True)

__all__ = ["gemm_intrin", "GEMM_4X8X4_F32"]
