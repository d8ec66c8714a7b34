"""x86 tensor intrinsics: int8 dot products (AVX512-VNNI / AVX-VNNI ``vpdpbusd``) and
bfloat16 pair products (AVX512-BF16 ``vdpbf16ps``), for the ``llvm`` target.

Each computes one vector of ``L`` accumulators (L = 16: 512-bit, L = 8: 256-bit) from a
group of ``G`` elements of a row of A (G = 4 int8, or 2 bfloat16) and a packed panel of
B, ``C[j] += sum(A[k] * B[k, j] for k in 0..G-1)``, with B packed so that the ``G``
values of one column are adjacent::

    Bp[j // L, k // G, (j % L) * G + k % G] = B[k, j]      # (N/L, K/G, L*G) panels

which is what the instruction reads (``transform_layout`` of a ``cache_read`` makes
it: :func:`pack_b`).  The descriptions:

===========================  ==============================  ===========================
name                         computes (int32 / float32 C)    requires
===========================  ==============================  ===========================
``x86.vnni_16x4_u8s8``       uint8 A x int8 B                avx512vnni
``x86.vnni_8x4_u8s8``        uint8 A x int8 B                avxvnni, or avx512vnni+vl
``x86.vnni_16x4_s8s8``       int8 A x int8 B                 avx512vnni
``x86.vnni_8x4_s8s8``        int8 A x int8 B                 avxvnni, or avx512vnni+vl
``x86.bf16_16x2``            bfloat16 A x bfloat16 B         avx512bf16
``x86.bf16_8x2``             bfloat16 A x bfloat16 B         avx512bf16+vl
===========================  ==============================  ===========================

Signedness: ``vpdpbusd`` multiplies *unsigned* bytes of A by *signed* bytes of B, the
convention of quantized inference (uint8 activations, int8 weights), and the
``u8s8`` intrinsics are that one instruction.  For int8 A (``s8s8``) the impl uses
the identity ``a * b = (a + 128) * b - 128 * b``: A's bytes are flipped into
``a + 128`` (an ``xor`` with 0x80, which is exact for every int8) and the
compensation ``128 * sum(b)`` of the group, one more ``vpdpbusd`` of B by the bytes
``0x80``, is subtracted on every call (LLVM shares it between the rows of a register
tile, which load the same B vector).  The GEMM schedules avoid that cost:
``offset_to_unsigned`` (:mod:`.x86_offset`) computes the compensation once per
column, as oneDNN and TVM do with the packed B, and the steps run ``u8s8``.  Results
are exact in every case (int32 wraps only past 2**31).

``x86.bf16_*`` agree with their description up to the order of the pair's two float32
additions and the flushing of denormals (:mod:`cuvil_tir.ops.dot`): within float32
rounding.

Example::

    >>> from cuvil_tir.tensor_intrin import TensorIntrin
    >>> TensorIntrin.get("x86.vnni_16x4_s8s8").requires
    (('avx512vnni',),)
    >>> TensorIntrin.get("x86.vnni_16x4_s8s8").available("llvm -mcpu=haswell")
    False
"""

from __future__ import annotations

from cuvil_tir.buffer import Buffer
from cuvil_tir.expr import Broadcast, Cast, Ramp, Var, const
from cuvil_tir.function import PrimFunc
from cuvil_tir.ops import bitwise
from cuvil_tir.ops.dot import DPBF16PS, DPBUSD, ISA, dpbf16ps, dpbusd
from cuvil_tir.stmt import (Block, BlockRealize, BufferRegion, BufferStore, For, IterVar,
                            Range)
from cuvil_tir.tensor_intrin import TensorIntrin

#: ``(A dtype, B dtype, C dtype, group)`` of each family
KINDS = {"u8s8": ("uint8", "int8", "int32", 4), "s8s8": ("int8", "int8", "int32", 4),
         "bf16": ("bfloat16", "bfloat16", "float32", 2)}


def _ramp(n: int):
    return Ramp(const(0), const(1), n)


def _params(kind: str, lanes: int, groups: int):
    a, b, c, g = KINDS[kind]
    return (Buffer((g * groups,), a, "A"), Buffer((1, groups, lanes * g), b, "B"),
            Buffer((lanes,), c, "C"))


def _desc(kind: str, lanes: int, groups: int) -> PrimFunc:
    A, B, C = _params(kind, lanes, groups)
    g = KINDS[kind][3]
    j, k, vj, vk = Var("j"), Var("k"), Var("vj"), Var("vk")
    bidx = (vj // lanes, vk // g, vj % lanes * g + vk % g)
    acc = C.dtype
    value = C[vj] + Cast(acc, A[vk]) * Cast(acc, B[bidx])
    blk = Block("update",
                (IterVar(vj, Range.from_extent(lanes), "spatial"),
                 IterVar(vk, Range.from_extent(g * groups), "reduce")),
                (BufferRegion(C, (Range(vj, const(1)),)),
                 BufferRegion(A, (Range(vk, const(1)),)),
                 BufferRegion(B, tuple(Range(x, const(1)) for x in bidx))),
                (BufferRegion(C, (Range(vj, const(1)),)),),
                BufferStore(C, value, (vj,)))
    body = For(j, const(0), const(lanes), "serial",
               For(k, const(0), const(g * groups), "serial",
                   BlockRealize((j, k), const(True), blk)))
    return PrimFunc((A, B, C), body, {"global_symbol": f"x86_{kind}_{lanes}_desc"})


def _value(kind: str, lanes: int, groups: int, A, B, C):
    """The impl's new value of ``C[0:lanes]``: one instruction per group (and for
    ``s8s8`` one compensation per group, subtracted once)."""
    g = KINDS[kind][3]
    acc = C[_ramp(lanes)]
    parts = [(A[Ramp(const(q * g), const(1), g)], B[0, q, _ramp(lanes * g)])
             for q in range(groups)]
    fn = dpbf16ps if kind == "bf16" else dpbusd
    if kind == "s8s8":
        flip = Broadcast(const(0x80, "uint8"), g)
        comp = Broadcast(const(0, "int32"), lanes)
        for _, b in parts:
            comp = dpbusd(comp, flip, b)
        parts = [(bitwise.make("bitwise_xor", Cast(f"uint8x{g}", a), flip), b)
                 for a, b in parts]
    for a, b in parts:
        acc = fn(acc, a, b)
    return acc - comp if kind == "s8s8" else acc


def _impl(kind: str, lanes: int, groups: int) -> PrimFunc:
    A, B, C = _params(kind, lanes, groups)
    store = BufferStore(C, _value(kind, lanes, groups, A, B, C), (_ramp(lanes),))
    root = Block("root", (), (), (), store)
    return PrimFunc((A, B, C), BlockRealize((), const(True), root),
                    {"global_symbol": f"x86_{kind}_{lanes}_impl"})


def dot_intrin(kind: str, lanes: int = 16, groups: int = 1) -> tuple:
    """``(desc, impl)`` of the ``kind`` (``"u8s8"``, ``"s8s8"``, ``"bf16"``) intrinsic
    on ``lanes`` accumulators over ``groups`` consecutive groups of k (module doc).

    Example::

        >>> desc, impl = dot_intrin("u8s8", 16)
        >>> [str(b.dtype) for b in desc.params], [int(x) for x in desc.params[1].shape]
        (['uint8', 'int8', 'int32'], [1, 1, 64])
    """
    return _desc(kind, lanes, groups), _impl(kind, lanes, groups)


def intrin_name(kind: str, lanes: int = 16, groups: int = 1) -> str:
    """The registered name of the ``kind`` intrinsic on ``lanes`` accumulators and
    ``groups`` groups of k.

    Example::

        >>> intrin_name("s8s8", 8), intrin_name("bf16"), intrin_name("s8s8", 16, 4)
        ('x86.vnni_8x4_s8s8', 'x86.bf16_16x2', 'x86.vnni_16x16_s8s8')
    """
    k = KINDS[kind][3] * groups
    return f"x86.bf16_{lanes}x{k}" if kind == "bf16" else f"x86.vnni_{lanes}x{k}_{kind}"


def pack_map(lanes: int, group: int):
    """The index map ``(k, j) -> (j // lanes, k // group, (j % lanes) * group + k %
    group)`` that packs a ``(K, N)`` B for an intrinsic (module doc).

    Example::

        >>> pack_map(16, 4)(5, 17)
        (1, 1, 5)
    """
    return lambda k, j: (j // lanes, k // group, j % lanes * group + k % group)


def pack_b(sch, block, index: int, lanes: int, group: int, transposed: bool = False,
           consumers=None):
    """Pack read ``index`` of ``block`` (a ``(K, N)`` B, or ``(N, K)`` when
    ``transposed``) into the intrinsic's panels: a ``cache_read`` into ``global``
    memory whose layout is :func:`pack_map`, read by ``consumers`` (default: every
    reader of B); returns the packing block.

    Example::

        >>> import cuvil_tir as T, schedules as S
        >>> A = T.placeholder((4, 8), "uint8", name="A")
        >>> B = T.placeholder((8, 16), "int8", name="B")
        >>> k = T.reduce_axis((0, 8), name="k")
        >>> C = T.compute((4, 16), lambda i, j: T.sum(A[i, k].astype("int32") *
        ...               B[k, j].astype("int32"), axis=k), name="C")
        >>> sch = S.Schedule(T.create_prim_func([A, B, C]))
        >>> pk = pack_b(sch, sch.get_block("C"), 1, 16, 4)
        >>> [int(x) for x in sch.func.body.block.alloc_buffers[0].shape]
        [1, 2, 64]
    """
    pack = sch.cache_read(block, index, "global", *([consumers] if consumers else []))
    m = pack_map(lanes, group)
    sch.transform_layout(pack, 0, (lambda j, k: m(k, j)) if transposed else m)
    return pack


def _register():
    for kind, (_, _, _, g) in KINDS.items():
        op = DPBF16PS if kind == "bf16" else DPBUSD
        for lanes in (16, 8):
            for groups in (1, 4):
                TensorIntrin.register(intrin_name(kind, lanes, groups),
                                      *dot_intrin(kind, lanes, groups), override=True,
                                      requires=ISA[op][lanes])


_register()

__all__ = ["KINDS", "dot_intrin", "intrin_name", "pack_b", "pack_map"]
