"""Tensor copies through a tensor map (Hopper's TMA ``cp.async.bulk.tensor``, sm_90+),
an op of the registry run by one thread:

``tma_load(dst[d], src[r, c], bar[k], rows, cols)`` copies the ``rows x cols`` box
of the 2-D global tensor ``src`` whose corner is element ``(r, c)`` into ``rows *
cols`` consecutive elements of shared ``dst`` from element ``d`` (row-major, through
``dst``'s XOR swizzle when ``transform_layout`` gave it one: the tensor map's
32/64/128-byte swizzle, which is the layout ``wgmma`` reads).  Box elements outside
the tensor are zero-filled.  The copy counts ``rows * cols`` elements' bytes against
``bar[k]``'s open phase (announce them with ``mbarrier_arrive(bar[k], bytes)``) and
lands when that phase completes, as a ``bulk_copy`` does (:mod:`cuvil_tir.ops.mbarrier`).

The copy is addressed through a *tensor map* (``CUtensorMap``): the CUDA target gives
the kernel one ``const __grid_constant__`` parameter per tensor and box, encoded at
launch by ``cuTensorMapEncodeTiled`` (:mod:`targets.cuda.tma`).  Before the buffers
are flattened the target appends the box corner and the tensor's dimensions to the
call (:func:`tma_parts` reads either form), and the swizzle after them.

Example::

    >>> import cuvil_tir as T
    >>> A = T.decl_buffer((128, 64), "float16", "A")
    >>> S = T.decl_buffer((64, 64), "float16", "S", scope="shared")
    >>> M = T.decl_buffer((1,), "uint64", "M", scope="shared")
    >>> p = tma_parts(T.Call("int32", "tma_load", (S[0, 0], A[64, 0], M[0], T.const(64),
    ...                                            T.const(64))))
    >>> p.box, p.nbytes
    ((64, 64), 8192)
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtype as D
from ..errors import CuvilError
from ..expr import BufferLoad, IntImm
from ..swizzle import register_swizzled_op
from . import OpDef, register_op
from .gpu import Tile
from .mbarrier import check_barrier

TMA_OP = "tma_load"
#: the most elements of one box dimension (``cuTensorMapEncodeTiled``'s limit)
BOX_LIMIT = 256
#: the arguments a call has as written, and after the target appended the corner and
#: the tensor's dimensions (then the swizzle)
WRITTEN_ARGS, PLACED_ARGS = 5, 9


@dataclass(frozen=True)
class TmaParts:
    """A ``tma_load`` call taken apart: the destination element, the source element
    (as written, or flattened), the barrier element, the box ``(rows, cols)``, the
    corner ``(row, col)`` and the tensor's ``(rows, cols)`` (expressions; None
    before the target placed them), the packed swizzle argument's position."""

    dst: object
    src: object
    bar: object
    box: tuple
    corner: tuple | None
    dims: tuple | None
    swizzle_arg: int | None

    @property
    def nbytes(self) -> int:
        """The bytes one copy brings (the whole box, zero-filled parts included)."""
        return self.box[0] * self.box[1] * D.bits(self.dst.buffer.dtype) // 8


def tma_parts(call) -> TmaParts:
    """The parts of a ``tma_load`` call, checked (module doc).

    Example::

        >>> tma_parts.__name__
        'tma_parts'
    """
    args = call.args
    if len(args) not in (WRITTEN_ARGS, PLACED_ARGS, PLACED_ARGS + 1) or not all(
            isinstance(a, BufferLoad) for a in args[:3]):
        raise CuvilError("tma_load takes (dst element, src element, barrier element, box "
                         f"rows, box cols), found {len(args)} arguments")
    dst, src, bar = args[:3]
    box = tuple(a.value if isinstance(a, IntImm) else None for a in args[3:5])
    if any(b is None or not 1 <= b <= BOX_LIMIT for b in box):
        raise CuvilError(f"tma_load: the box must be two constants in 1..{BOX_LIMIT}, found "
                         f"{args[3]} x {args[4]}")
    if dst.buffer.scope != "shared" or src.buffer.scope != "global":
        raise CuvilError(f"tma_load copies global memory to shared memory; found "
                         f"{src.buffer.name} ({src.buffer.scope}) to {dst.buffer.name} "
                         f"({dst.buffer.scope})")
    if dst.buffer.dtype != src.buffer.dtype:
        raise CuvilError(f"tma_load: {dst.buffer.name} is {dst.buffer.dtype} but "
                         f"{src.buffer.name} is {src.buffer.dtype}; the dtypes must agree")
    row_bytes = box[1] * D.bits(src.buffer.dtype) // 8
    if row_bytes % 16:
        raise CuvilError(f"tma_load: a box row of {box[1]} {src.buffer.dtype} elements is "
                         f"{row_bytes} bytes; the tensor engine moves rows of a multiple "
                         "of 16 bytes")
    check_barrier(bar, "tma_load")
    if len(args) == WRITTEN_ARGS:
        if len(src.indices) != 2:
            raise CuvilError(f"tma_load reads a 2-D tensor; {src.buffer.name} is indexed "
                             f"with {len(src.indices)} indices")
        return TmaParts(dst, src, bar, box, None, None, None)
    return TmaParts(dst, src, bar, box, tuple(args[5:7]), tuple(args[7:9]),
                    PLACED_ARGS if len(args) > PLACED_ARGS else None)


def _tiles(args) -> tuple:
    rows, cols = args[3].value, args[4].value
    placed = len(args) >= PLACED_ARGS
    return (Tile(0, rows, cols, 4, access="write",
                 swizzle_arg=PLACED_ARGS if len(args) > PLACED_ARGS else None),
            Tile(1, rows, cols, 8 if placed else None))


register_op(OpDef(TMA_OP, -1, "any", effect="writes", asynchronous="tma_load",
                  tiles=_tiles,
                  doc="tma_load(dst[d], src[r, c], bar[k], rows, cols): copy a box of a "
                      "2-D global tensor to shared memory through a tensor map; lands "
                      "when bar[k]'s phase completes"))
register_swizzled_op(TMA_OP, (0,))

__all__ = ["BOX_LIMIT", "PLACED_ARGS", "TMA_OP", "TmaParts", "WRITTEN_ARGS", "tma_parts"]
