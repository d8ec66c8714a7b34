"""Tensor-core accumulators kept in registers: TVM's ``wmma.accumulator`` scope.

A GEMM whose C tile is cached in ``wmma.accumulator`` (``sch.cache_write(blk, 0,
"wmma.accumulator")``) holds it in the registers of the warp that computes it for
the whole K loop: the tile is zeroed once, every K slice adds into it, and it reaches
memory once at the end.  (Accumulated in ``shared``, each K slice loads the C tile
into registers and stores it back.)  Three warp-wide ops touch such a buffer, each
the ``impl`` of a tensor intrinsic, so a schedule reaches them with ``tensorize``:

* ``cuda.wmma_fill_16x16_f32``: ``C[0:16, 0:16] = 0`` (the init block of
  ``decompose_reduction``): ``wmma::fill_fragment``;
* ``cuda.wmma_16x16x{K}_{f16,bf16}f32`` (:mod:`.tensorcore`): with C in
  ``wmma.accumulator`` the step adds into the fragment, A and B read from shared or
  global memory;
* ``cuda.wmma_store_16x16_f32``: ``D[0:16, 0:16] = C[0:16, 0:16]`` from the fragment
  to global or shared memory (the write-back block of ``cache_write``):
  ``wmma::store_matrix_sync``.

One allocation serves a warp (:func:`cuvil_tir.ops.gpu.per_warp`): the memory
planner sizes it by what one warp touches, the interpreter gives each warp its own
array, and the kernel declares ``wmma::fragment`` objects, one per 16 x 16 tile.  Its
elements are reachable only through these ops: any other access is refused at
lowering.

Example::

    >>> import schedules as S
    >>> {"cuda.wmma_fill_16x16_f32", "cuda.wmma_store_16x16_f32"} <= set(S.TensorIntrin.names())
    True
"""

from __future__ import annotations

import numpy as np

from cuvil_tir.buffer import Buffer
from cuvil_tir.errors import CodegenError, LoweringError
from cuvil_tir.expr import BufferLoad, Call, FloatImm, IntImm, Var, const
from cuvil_tir.function import PrimFunc
from cuvil_tir.ops import OpDef, register_op
from cuvil_tir.ops.gpu import Tile, per_warp, tiles_of
from cuvil_tir.printer import to_text
from cuvil_tir.stmt import (Block, BlockRealize, BufferRegion, BufferStore, Evaluate, For,
                            IterVar, Range)
from cuvil_tir.tensor_intrin import TensorIntrin
from cuvil_tir.visitor import post_order_visit

ACC_SCOPE = "wmma.accumulator"
#: the operand fragments of TVM's wmma schedules (:mod:`.tvm_wmma`)
MATRIX_A = "wmma.matrix_a"
MATRIX_B = "wmma.matrix_b"
FILL_OP = "cuda.wmma_fill"
STORE_OP = "cuda.wmma_store"
FILL_INTRIN = "cuda.wmma_fill_16x16_f32"
STORE_INTRIN = "cuda.wmma_store_16x16_f32"
FRAGMENT = "nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>"
#: per fragment scope: the ``wmma::fragment`` type of one 16 x 16 tile ({} the element
#: type) and the dtypes it holds
FRAGMENT_SCOPES = {
    ACC_SCOPE: (FRAGMENT, ("float32",)),
    **{s: (f"nvcuda::wmma::fragment<nvcuda::wmma::{s[5:]}, 16, 16, 16, {{}}, "
           "nvcuda::wmma::row_major>", ("float16", "bfloat16")) for s in (MATRIX_A, MATRIX_B)},
}
_ELEMENT = {"float32": "float", "float16": "half", "bfloat16": "__nv_bfloat16"}


def _fill_tiles(args) -> tuple:
    return (Tile(0, 16, 16, 1 if len(args) == 2 else None, "write"),)


def _store_tiles(args) -> tuple:
    lds = (2, 3) if len(args) == 4 else (None, None)
    return (Tile(0, 16, 16, lds[0]), Tile(1, 16, 16, lds[1], "write"))


register_op(OpDef(FILL_OP, -1, "any", effect="opaque", collective="warp",
                  tiles=_fill_tiles,
                  reference=lambda t: lambda c: (np.zeros_like(c, dtype="float32"),),
                  doc="C[16, 16] = 0 in a wmma.accumulator fragment (the 32 lanes of a "
                      "warp)"), replace=True)
register_op(OpDef(STORE_OP, -1, "any", effect="opaque", collective="warp",
                  tiles=_store_tiles, reference=lambda t: lambda c, d: (c,),
                  doc="D[16, 16] = C[16, 16] from a wmma.accumulator fragment to memory "
                      "(the 32 lanes of a warp)"), replace=True)


def tile_func(name: str, op: str, value, fill: bool, m: int = 16, n: int = 16,
              scope: str = ACC_SCOPE, dtype: str = "float32", sized: bool = False) -> tuple:
    """``(desc, impl)``: an ``m x n`` loop nest writing ``value(src, vi, vj)`` to its
    last buffer (``fill``: the only buffer, in ``scope``; else ``D`` in memory, read
    from ``C`` in ``scope``), and the warp-wide call of ``op`` on the tiles' first
    elements, then ``m, n`` when ``sized`` (an op of several tile sizes takes its
    size whatever it is: wmma's ops are 16 x 16 only and take none).

    Example::

        >>> desc, impl = tile_func("z", FILL_OP, lambda s, i, j: FloatImm(0.0, "float32"),
        ...                        True)
        >>> [b.scope for b in desc.params]
        ['wmma.accumulator']
    """
    bufs = [Buffer((m, n), dtype, nm, scope=s)
            for nm, s in (("C", scope), ("D", "global"))][: 1 if fill else 2]
    out, src = bufs[-1], bufs[0]
    i, j, vi, vj = Var("i"), Var("j"), Var("vi"), Var("vj")
    pt = (Range(vi, const(1)), Range(vj, const(1)))
    reads = () if fill else (BufferRegion(src, pt),)
    blk = Block(name, (IterVar(vi, Range.from_extent(m), "spatial"),
                       IterVar(vj, Range.from_extent(n), "spatial")),
                reads, (BufferRegion(out, pt),),
                BufferStore(out, value(src, vi, vj), (vi, vj)))
    body = For(i, const(0), const(m), "serial",
               For(j, const(0), const(n), "serial", BlockRealize((i, j), const(True), blk)))
    desc = PrimFunc(tuple(bufs), body, {"global_symbol": f"{name}_desc"})
    impl_bufs = [Buffer((m, n), dtype, b.name, scope=b.scope) for b in bufs]
    z = const(0)
    dims = (const(m), const(n)) if sized else ()
    call = Evaluate(Call("int32", op, tuple(b[z, z] for b in impl_bufs) + dims))
    impl = PrimFunc(tuple(impl_bufs), BlockRealize((), const(True),
                                                   Block("root", (), (), (), call)),
                    {"global_symbol": f"{name}_impl"})
    return desc, impl


def fill_intrin() -> tuple:
    """``(desc, impl)`` of ``C[0:16, 0:16] = 0`` on a ``wmma.accumulator`` tile.

    Example::

        >>> desc, impl = fill_intrin()
        >>> [b.scope for b in desc.params]
        ['wmma.accumulator']
    """
    return tile_func("wmma_fill_16x16_f32", FILL_OP,
                     lambda src, vi, vj: FloatImm(0.0, "float32"), True)


def store_intrin() -> tuple:
    """``(desc, impl)`` of ``D[0:16, 0:16] = C[0:16, 0:16]`` from a
    ``wmma.accumulator`` tile to memory.

    Example::

        >>> desc, impl = store_intrin()
        >>> [b.scope for b in desc.params]
        ['wmma.accumulator', 'global']
    """
    return tile_func("wmma_store_16x16_f32", STORE_OP, lambda src, vi, vj: src[vi, vj],
                     False)


TensorIntrin.register(FILL_INTRIN, *fill_intrin(), override=True)
TensorIntrin.register(STORE_INTRIN, *store_intrin(), override=True)


def check_fragments(func) -> None:
    """Refuse a ``wmma.accumulator`` buffer touched other than by the tensor-core ops
    (an element-wise access has no meaning: the fragment's layout over the lanes is
    the hardware's).

    Example::

        >>> import cuvil_tir as T
        >>> check_fragments(T.PrimFunc([], T.Evaluate(T.const(0))))
    """
    tile_args: set = set()
    post_order_visit(func.body, lambda n: tile_args.update(
        id(n.args[t.arg]) for t in tiles_of(n)) if isinstance(n, Call) else None)
    bad = []

    def look(n):
        buf = getattr(n, "buffer", None)
        if (isinstance(n, BufferLoad | BufferStore) and per_warp(buf.scope)
                and id(n) not in tile_args):
            bad.append((buf.scope, f"{to_text(n).strip()} touches one element"))
    post_order_visit(func.body, look)
    if bad:
        raise LoweringError(
            f"{func.name}: a {bad[0][0]} buffer is a tensor-core fragment: only "
            f"{FILL_INTRIN}, the cuda.wmma_16x16xK steps and {STORE_INTRIN} reach it, "
            "and the operand fragments' loads and steps (TVM's wmma_load_*, wmma_sync_* "
            "names) (tensorize the blocks that touch it with them); found: "
            + "; ".join(b for _, b in bad))


def fragment_ref(printer, load, ld) -> str:
    """``name[i]``: the fragment holding the 16 x 16 tile that starts at the
    (flattened) element ``load`` of a buffer whose rows hold ``ld`` elements.

    Example::

        >>> fragment_ref.__name__
        'fragment_ref'
    """
    name = printer.name_of(load.buffer)
    (off,) = load.indices
    n = ld.value if isinstance(ld, IntImm) else None
    if isinstance(off, IntImm) and n is not None:
        return f"{name}[{off.value // (16 * n) * (n // 16) + off.value % n // 16}]"
    o, w = printer.bare(off), printer.bare(ld)
    return f"{name}[({o}) / (16 * {w}) * ({w} / 16) + ({o}) % {w} / 16]"


def declare_fragments(printer, buf, name: str, n: int) -> None:
    """Declare ``buf`` (``n`` elements, called ``name``), a buffer of a
    :data:`FRAGMENT_SCOPES` scope, as its 16 x 16 fragments.

    Example::

        >>> declare_fragments.__name__
        'declare_fragments'
    """
    kind, dtypes = FRAGMENT_SCOPES[buf.scope]
    if buf.dtype not in dtypes or n % 256:
        raise CodegenError(f"cuda codegen: {buf.scope} buffer {buf.name} must hold whole "
                           f"16 x 16 {' or '.join(dtypes)} tiles; found {n} elements "
                           f"of {buf.dtype}")
    printer.use_helper("cuda_mma_h", "#include <mma.h>")
    printer.emit(f"{kind.format(_ELEMENT[buf.dtype])} {name}[{n // 256}];")


def fill_text(printer, e) -> str:
    """``wmma::fill_fragment`` of a lowered ``cuda.wmma_fill``.

    Example::

        >>> fill_text.__name__
        'fill_text'
    """
    printer.use_helper("cuda_mma_h", "#include <mma.h>")
    return f"nvcuda::wmma::fill_fragment({fragment_ref(printer, e.args[0], e.args[1])}, 0.0f)"


def store_text(printer, e) -> str:
    """``wmma::store_matrix_sync`` of a lowered ``cuda.wmma_store``.

    Example::

        >>> store_text.__name__
        'store_text'
    """
    printer.use_helper("cuda_mma_h", "#include <mma.h>")
    frag = fragment_ref(printer, e.args[0], e.args[2])
    return (f"nvcuda::wmma::store_matrix_sync({memory_tile(printer, e.args[1])}, "
            f"{frag}, {printer.bare(e.args[3])}, nvcuda::wmma::mem_row_major)")


def memory_tile(printer, load) -> str:
    """``&element``: the address of a tile in shared or global memory that a fragment
    is loaded from or stored to (a global tile's pointer is 32-byte aligned).

    Example::

        >>> memory_tile.__name__
        'memory_tile'
    """
    if load.buffer.scope == "global":
        printer.alignment[load.buffer.name] = 32
    return f"&{printer.access(load.buffer, load.indices)}"


__all__ = ["ACC_SCOPE", "FILL_INTRIN", "FILL_OP", "FRAGMENT_SCOPES", "MATRIX_A", "MATRIX_B",
           "STORE_INTRIN", "STORE_OP",
           "check_fragments", "declare_fragments", "fill_intrin", "fill_text",
           "fragment_ref", "memory_tile", "store_intrin", "store_text", "tile_func"]
