"""TVM's wmma tensor intrinsics in Cuvil: operand fragments and TVM's names.

TVM's CUDA tensor-core schedules stage A and B tiles in ``wmma.matrix_a`` and
``wmma.matrix_b`` buffers (fragments in the registers of a warp) and tensorize four
blocks with intrinsics named ``wmma_load_16x16x16_f16_{a,b}_shared[_dyn]``,
``wmma_fill_16x16x16_f32``, ``wmma_sync_16x16x16_f16f16f32`` and
``wmma_store_16x16x16_f32_{shared,shared_dyn,global}``.  Those names are registered
here, so such a schedule ports line by line:

* the fill and store intrinsics are Cuvil's accumulator ones (:mod:`.fragments`);
* ``cuda.wmma_load`` (``wmma::load_matrix_sync``) copies a 16 x 16 tile from shared or
  global memory into an operand fragment (``wmma.matrix_a``/``wmma.matrix_b``: which
  one is the destination's scope);
* ``cuda.wmma_mma`` (``wmma::mma_sync``) adds the product of an A and a B fragment
  into a ``wmma.accumulator`` fragment: nothing touches memory in the K loop.

Operand fragments are per-warp buffers like the accumulator (sized by what one warp
touches, declared as ``wmma::fragment`` arrays, reached only through these ops).  The
Cuvil names are ``cuda.wmma_load_16x16_{f16,bf16}`` and
``cuda.wmma_mma_16x16x16_{f16,bf16}f32``; the TVM names are aliases (TVM's ``shared``
and ``shared.dyn`` are one scope in Cuvil).  TVM's column-major (``_trans``) and
integer variants are not registered.

Example::

    >>> import schedules as S
    >>> {"wmma_load_16x16x16_f16_a_shared", "wmma_sync_16x16x16_f16f16f32",
    ...  "wmma_fill_16x16x16_f32", "wmma_store_16x16x16_f32_shared_dyn"
    ...  } <= set(S.TensorIntrin.names())
    True
"""

from __future__ import annotations

from cuvil_tir.buffer import Buffer
from cuvil_tir.expr import Call, Var, const
from cuvil_tir.function import PrimFunc
from cuvil_tir.ops import OpDef, register_op, register_spellings
from cuvil_tir.ops.gpu import Tile
from cuvil_tir.stmt import (Block, BlockRealize, BufferRegion, BufferStore, Evaluate, For,
                            IterVar, Range)
from cuvil_tir.tensor_intrin import TensorIntrin

from .fragments import (ACC_SCOPE, MATRIX_A, MATRIX_B, fill_intrin, fragment_ref,
                        memory_tile, store_intrin)
from .tensorcore import MEMORY, WMMA_INPUTS, register_tile_op

LOAD_OP = "cuda.wmma_load"
MMA_OP = "cuda.wmma_mma"


def _load_tiles(args) -> tuple:
    lds = (2, 3) if len(args) == 4 else (None, None)
    return (Tile(0, 16, 16, lds[0], "write"), Tile(1, 16, 16, lds[1]))


def _mma_tiles(args) -> tuple:
    lds = (3, 4, 5) if len(args) == 6 else (None, None, None)
    return (Tile(0, 16, 16, lds[0]), Tile(1, 16, 16, lds[1]),
            Tile(2, 16, 16, lds[2], "readwrite"))


register_op(OpDef(LOAD_OP, -1, "any", effect="opaque", collective="warp",
                  tiles=_load_tiles, reference=lambda t: lambda frag, src: (src,),
                  doc="F[16, 16] = S[16, 16]: a tile of memory into a wmma.matrix_a or "
                      "wmma.matrix_b fragment (the 32 lanes of a warp)"), replace=True)
register_op(OpDef(MMA_OP, -1, "any", effect="opaque", collective="warp",
                  tiles=_mma_tiles,
                  reference=lambda t: lambda a, b, c: (c + a.astype("float32")
                                                       @ b.astype("float32"),),
                  doc="C[16, 16] += A[16, 16] @ B[16, 16] in float32 on fragments (the 32 "
                      "lanes of a warp)"), replace=True)
register_tile_op(LOAD_OP, 2, ((MATRIX_A, MATRIX_B), MEMORY))
register_tile_op(MMA_OP, 3, ((MATRIX_A,), (MATRIX_B,), (ACC_SCOPE,)))


def _tile(name, dtype, scope, rows=16, cols=16):
    return Buffer((rows, cols), dtype, name, scope=scope)


def _impl(name: str, op: str, bufs) -> PrimFunc:
    z = const(0)
    call = Evaluate(Call("int32", op, tuple(b[z, z] for b in bufs)))
    return PrimFunc(tuple(bufs), BlockRealize((), const(True),
                                              Block("root", (), (), (), call)),
                    {"global_symbol": f"{name}_impl"})


def _nest(body, loops) -> For:
    for v, extent in reversed(loops):
        body = For(v, const(0), const(extent), "serial", body)
    return body


def load_intrin(dtype: str = "float16", fragment: str = MATRIX_A) -> tuple:
    """``(desc, impl)`` of ``F[0:16, 0:16] = S[0:16, 0:16]``, a tile of shared (or
    global) memory loaded into an operand fragment of ``fragment``'s scope.

    Example::

        >>> desc, impl = load_intrin()
        >>> [b.scope for b in desc.params]
        ['shared', 'wmma.matrix_a']
    """
    name = f"wmma_load_16x16_{WMMA_INPUTS[dtype]}"
    src, frag = _tile("S", dtype, "shared"), _tile("F", dtype, fragment)
    i, j, vi, vj = Var("i"), Var("j"), Var("vi"), Var("vj")
    pt = (Range(vi, const(1)), Range(vj, const(1)))
    blk = Block("load", (IterVar(vi, Range.from_extent(16), "spatial"),
                         IterVar(vj, Range.from_extent(16), "spatial")),
                (BufferRegion(src, pt),), (BufferRegion(frag, pt),),
                BufferStore(frag, src[vi, vj], (vi, vj)))
    desc = PrimFunc((src, frag), _nest(BlockRealize((i, j), const(True), blk),
                                       ((i, 16), (j, 16))),
                    {"global_symbol": f"{name}_desc"})
    impl = _impl(name, LOAD_OP, (_tile("F", dtype, fragment), _tile("S", dtype, "shared")))
    return desc, _reorder_params(impl)


def _reorder_params(impl: PrimFunc) -> PrimFunc:
    # desc and impl take the same parameters in the same order (source, fragment);
    # the op takes the written tile first, as wmma::load_matrix_sync does
    return PrimFunc(tuple(reversed(impl.params)), impl.body, impl.attrs)


def mma_intrin(dtype: str = "float16") -> tuple:
    """``(desc, impl)`` of ``C[0:16, 0:16] += float(A[0:16, 0:16]) @ float(B[0:16,
    0:16])`` on a ``wmma.matrix_a``, a ``wmma.matrix_b`` and a ``wmma.accumulator``
    fragment.

    Example::

        >>> desc, impl = mma_intrin()
        >>> [b.scope for b in desc.params]
        ['wmma.matrix_a', 'wmma.matrix_b', 'wmma.accumulator']
    """
    name = f"wmma_mma_16x16x16_{WMMA_INPUTS[dtype]}f32"

    def params():
        return (_tile("A", dtype, MATRIX_A), _tile("B", dtype, MATRIX_B),
                _tile("C", "float32", ACC_SCOPE))
    A, B, C = params()
    i, j, r, vi, vj, vk = (Var(n) for n in ("i", "j", "k", "vi", "vj", "vk"))

    def pt(*xs):
        return tuple(Range(x, const(1)) for x in xs)
    blk = Block("update", (IterVar(vi, Range.from_extent(16), "spatial"),
                           IterVar(vj, Range.from_extent(16), "spatial"),
                           IterVar(vk, Range.from_extent(16), "reduce")),
                (BufferRegion(C, pt(vi, vj)), BufferRegion(A, pt(vi, vk)),
                 BufferRegion(B, pt(vk, vj))),
                (BufferRegion(C, pt(vi, vj)),),
                BufferStore(C, C[vi, vj] + A[vi, vk].astype("float32")
                            * B[vk, vj].astype("float32"), (vi, vj)))
    desc = PrimFunc((A, B, C), _nest(BlockRealize((i, j, r), const(True), blk),
                                     ((i, 16), (j, 16), (r, 16))),
                    {"global_symbol": f"{name}_desc"})
    return desc, _impl(name, MMA_OP, params())


def load_name(dtype: str) -> str:
    """Cuvil's name of the fragment load on ``dtype`` tiles.

    Example::

        >>> load_name("bfloat16")
        'cuda.wmma_load_16x16_bf16'
    """
    return f"cuda.wmma_load_16x16_{WMMA_INPUTS[dtype]}"


def mma_name(dtype: str) -> str:
    """Cuvil's name of the fragment step on ``dtype`` inputs.

    Example::

        >>> mma_name("float16")
        'cuda.wmma_mma_16x16x16_f16f32'
    """
    return f"cuda.wmma_mma_16x16x16_{WMMA_INPUTS[dtype]}f32"


#: TVM's intrinsic names (python/tvm/tir/tensor_intrin/cuda.py) and what they are here
TVM_NAMES = {
    **{f"wmma_load_16x16x16_f16_{ab}_{scope}": load_name("float16")
       for ab in "ab" for scope in ("shared", "shared_dyn")},
    "wmma_sync_16x16x16_f16f16f32": mma_name("float16"),
    "wmma_fill_16x16x16_f32": "cuda.wmma_fill_16x16_f32",
    **{f"wmma_store_16x16x16_f32_{scope}": "cuda.wmma_store_16x16_f32"
       for scope in ("shared", "shared_dyn", "global")},
}

for _dt in WMMA_INPUTS:
    TensorIntrin.register(load_name(_dt), *load_intrin(_dt), override=True)
    TensorIntrin.register(mma_name(_dt), *mma_intrin(_dt), override=True)
for _tvm, _ours in TVM_NAMES.items():
    _pair = {"cuda.wmma_fill_16x16_f32": fill_intrin,
             "cuda.wmma_store_16x16_f32": store_intrin}.get(_ours)
    _fn = TensorIntrin.get(_ours) if _pair is None else None
    TensorIntrin.register(_tvm, *(_pair() if _pair else (_fn.desc, _fn.impl)),
                          override=True)


def load_text(printer, e) -> str:
    """``wmma::load_matrix_sync`` of a lowered ``cuda.wmma_load``.

    Example::

        >>> load_text.__name__
        'load_text'
    """
    printer.use_helper("cuda_mma_h", "#include <mma.h>")
    frag = fragment_ref(printer, e.args[0], e.args[2])
    return (f"nvcuda::wmma::load_matrix_sync({frag}, {memory_tile(printer, e.args[1])}, "
            f"{printer.bare(e.args[3])})")


def mma_text(printer, e) -> str:
    """``wmma::mma_sync`` of a lowered ``cuda.wmma_mma``.

    Example::

        >>> mma_text.__name__
        'mma_text'
    """
    printer.use_helper("cuda_mma_h", "#include <mma.h>")
    a, b, c = (fragment_ref(printer, x, ld) for x, ld in zip(e.args[:3], e.args[3:]))
    return f"nvcuda::wmma::mma_sync({c}, {a}, {b}, {c})"


register_spellings("cuda", {LOAD_OP: load_text, MMA_OP: mma_text})

__all__ = ["LOAD_OP", "MMA_OP", "TVM_NAMES", "load_intrin", "load_name", "load_text",
           "mma_intrin", "mma_name", "mma_text"]
