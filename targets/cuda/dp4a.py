"""``dp4a``: the four-way byte dot product of CUDA cores (sm_61+), as ops and as TVM's
tensor intrinsics ``dp4a_{s8s8s32,u8s8s32,s8u8s32,u8u8u32}``.

``cuda.dp4a_<a><b>(a0, a1, a2, a3, b0, b1, b2, b3, c)`` is
``c + a0 * b0 + a1 * b1 + a2 * b2 + a3 * b3`` in 32 bits (wrapping), the bytes widened
with their own signedness: one ``dp4a.<a>32.<b>32`` instruction (IDP.4A in SASS).  The
op takes the eight bytes as scalars, so nothing assumes the operands are 4-byte
aligned in memory; the printed CUDA packs them into registers for the instruction.
Every other backend, and the interpreter, computes the op's definition (its
``expand``).

The tensor intrinsics are TVM's (``python/tvm/tir/tensor_intrin/dot_product_common.py``),
so a MetaSchedule sketch annotated ``meta_schedule.auto_tensorize = "dp4a_s8s8s32"``
tensorizes as written: ``C[0] += sum(A[k] * B[k] for k in 0..3)`` with A and B four
bytes in shared memory and C one 32-bit accumulator in ``local`` registers.

Example::

    >>> from cuvil_tir.tensor_intrin import TensorIntrin
    >>> [str(b.dtype) for b in TensorIntrin.get("dp4a_s8s8s32").desc.params]
    ['int8', 'int8', 'int32']
    >>> "dp4a_u8u8u32" in TensorIntrin.names()
    True
"""

from __future__ import annotations

from cuvil_tir.buffer import Buffer
from cuvil_tir.expr import Call, Cast, Var, const
from cuvil_tir.function import PrimFunc
from cuvil_tir.ops import OpDef, register_op, register_spellings
from cuvil_tir.stmt import (Block, BlockRealize, BufferRegion, BufferStore, For, IterVar,
                            Range)
from cuvil_tir.tensor_intrin import TensorIntrin

#: ``(A dtype, B dtype, C dtype)`` of each TVM intrinsic name
KINDS = {"dp4a_s8s8s32": ("int8", "int8", "int32"),
         "dp4a_u8s8s32": ("uint8", "int8", "int32"),
         "dp4a_s8u8s32": ("int8", "uint8", "int32"),
         "dp4a_u8u8u32": ("uint8", "uint8", "uint32")}

_SHORT = {"int8": "s", "uint8": "u"}


def op_name(a: str, b: str) -> str:
    """The op of the dot product of ``a`` bytes by ``b`` bytes.

    Example::

        >>> op_name("uint8", "int8")
        'cuda.dp4a_u8s8'
    """
    return f"cuda.dp4a_{_SHORT[a]}8{_SHORT[b]}8"


def _expand(acc: str):
    def expand(*args):
        total = args[8]
        for x, y in zip(args[:4], args[4:8]):
            total = total + Cast(acc, x) * Cast(acc, y)
        return total
    return expand


def _pack(p, parts) -> str:
    # bytes into one 32-bit register, lowest address in the lowest byte (as a load of
    # four adjacent bytes would put them): what dp4a multiplies lane by lane
    cast = "(unsigned int)(unsigned char)"
    terms = [f"({cast}({p.bare(x)}) << {8 * i})" if i else f"{cast}({p.bare(x)})"
             for i, x in enumerate(parts)]
    return f"({' | '.join(terms)})"


def _spelling(a: str, b: str, acc: str):
    kind = f"{'s' if a == 'int8' else 'u'}32.{'s' if b == 'int8' else 'u'}32"
    ctype = "int" if acc == "int32" else "unsigned int"
    helper = f"cvl_dp4a_{kind.replace('.', '_')}"
    text = (f"static inline {ctype} {helper}(unsigned int a, unsigned int b, {ctype} c) "
            "{\n"
            f"  {ctype} d;\n"
            f"  asm(\"dp4a.{kind} %0, %1, %2, %3;\" : \"=r\"(d) : \"r\"(a), \"r\"(b), "
            "\"r\"(c));\n"
            "  return d;\n}\n")

    def spell(p, e) -> str:
        p.use_helper(helper, text)
        return (f"{helper}({_pack(p, e.args[:4])}, "
                f"{_pack(p, e.args[4:8])}, {p.bare(e.args[8])})")
    return spell


def dp4a_intrin(a: str = "int8", b: str = "int8", acc: str = "int32") -> tuple:
    """``(desc, impl)`` of ``C[0] += sum(acc(A[k]) * acc(B[k]) for k in range(4))``
    (A, B four bytes in shared memory, C one accumulator in ``local``).

    Example::

        >>> desc, impl = dp4a_intrin()
        >>> [b.scope for b in desc.params]
        ['shared', 'shared', 'local']
    """
    def params():
        return (Buffer((4,), a, "A", scope="shared"), Buffer((4,), b, "B", scope="shared"),
                Buffer((1,), acc, "C", scope="local"))
    A, B, C = params()
    k, vk, z = Var("k"), Var("vk"), const(0)
    one = const(1)
    blk = Block("update", (IterVar(vk, Range.from_extent(4), "reduce"),),
                (BufferRegion(C, (Range(z, one),)), BufferRegion(A, (Range(vk, one),)),
                 BufferRegion(B, (Range(vk, one),))),
                (BufferRegion(C, (Range(z, one),)),),
                BufferStore(C, C[z] + Cast(acc, A[vk]) * Cast(acc, B[vk]), (z,)))
    name = f"dp4a_{_SHORT[a]}8{_SHORT[b]}8"
    desc = PrimFunc((A, B, C), For(k, z, const(4), "serial", BlockRealize((k,), const(True),
                                                                          blk)),
                    {"global_symbol": f"{name}_desc"})
    A, B, C = params()
    call = Call(acc, op_name(a, b), tuple(A[const(i)] for i in range(4))
                + tuple(B[const(i)] for i in range(4)) + (C[z],))
    root = Block("root", (), (), (), BufferStore(C, call, (z,)))
    impl = PrimFunc((A, B, C), BlockRealize((), const(True), root),
                    {"global_symbol": f"{name}_impl"})
    return desc, impl


for _name, (_a, _b, _acc) in KINDS.items():
    register_op(OpDef(op_name(_a, _b), 9, "any", effect="pure", expand=_expand(_acc),
                      doc=f"c + the dot product of four {_a} by four {_b} ({_acc}): "
                          "dp4a"), replace=True)
    register_spellings("cuda", {op_name(_a, _b): _spelling(_a, _b, _acc)})
    TensorIntrin.register(_name, *dp4a_intrin(_a, _b, _acc), override=True)

__all__ = ["KINDS", "dp4a_intrin", "op_name"]
