"""XOR swizzles: buffer layouts that permute the chunks of each row by the row's
index, as CUTLASS's ``Swizzle<B, M, S>`` and TileLang's shared layouts do, so the rows
a warp reads together (``ldmatrix``: 8 rows of 16 bytes) fall in different memory
banks without padding.

``Swizzle(bits, base, shift)`` puts element ``(i, j)`` of a 2-D buffer at ``(i, j ^
(((i >> shift) & (2**bits - 1)) << base))``: chunks of ``2**base`` elements trade
places within each group of ``2**bits`` chunks of a row, by ``bits`` bits of the row
index.  It depends on low bits of ``i`` and ``j`` only, so it survives the shrinking
of a buffer to the tile a thread block uses (tiles start at multiples of ``2**(shift
+ bits)`` rows and ``2**(base + bits)`` columns) and a pipeline's extra stage
dimension.  A schedule writes it as an index map for ``transform_layout``
(:meth:`Swizzle.index_map`; any map computing the same permutation is recognised by
:func:`recognize`, checked on every element).  Tile ops that address a tile through
a swizzle register with :func:`register_swizzled_op`; ``transform_layout`` then keeps
their tile arguments at the tile's logical origin and records the swizzle in the
function attribute :data:`SWIZZLE_KEY`, and the lowering hands it to the op as an
argument (``Tile.swizzle_arg``) that its code and the interpreter apply.

Example::

    >>> sw = Swizzle(3, 3, 0)            # rows of 128 bytes of float16, 16-byte chunks
    >>> [int(sw.apply(i, 0)) for i in range(4)], int(sw.apply(9, 8))
    ([0, 8, 16, 24], 0)
    >>> Swizzle.unpack(sw.pack()) == sw
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import CuvilError, LoweringError
from .expr import Call, IntImm
from .visitor import Mutator

#: the function attribute recording swizzled buffers: ``((name, packed), ...)``
SWIZZLE_KEY = "buffer_swizzle"
_SWIZZLED_OPS: dict = {}


@dataclass(frozen=True)
class Swizzle:
    """The XOR swizzle of a row's chunks by its row index (module doc).

    Example::

        >>> Swizzle(2, 3, 1).apply(np.arange(8), 0).tolist()
        [0, 0, 8, 8, 16, 16, 24, 24]
    """

    bits: int
    base: int
    shift: int

    def __post_init__(self):
        if not (1 <= self.bits <= 8 and 0 <= self.base <= 16 and 0 <= self.shift <= 16):
            raise CuvilError(f"Swizzle: expected 1 <= bits <= 8, 0 <= base <= 16 and 0 <= "
                             f"shift <= 16; found bits={self.bits}, base={self.base}, "
                             f"shift={self.shift}")

    def apply(self, rows, cols):
        """The column element ``(rows, cols)`` moves to (ints or numpy arrays)."""
        return cols ^ (((rows >> self.shift) & ((1 << self.bits) - 1)) << self.base)

    def pack(self) -> int:
        """One int for the generated code: ``(bits << 16) | (base << 8) | shift``."""
        return (self.bits << 16) | (self.base << 8) | self.shift

    @staticmethod
    def unpack(packed: int) -> "Swizzle | None":
        """The swizzle :meth:`pack` gave (None for 0, no swizzle)."""
        return None if packed == 0 else Swizzle(packed >> 16, (packed >> 8) & 255,
                                                packed & 255)

    @property
    def rows(self) -> int:
        """Rows after which the pattern repeats."""
        return 1 << (self.shift + self.bits)

    @property
    def cols(self) -> int:
        """Columns the pattern permutes (a row holds whole groups of them)."""
        return 1 << (self.base + self.bits)

    def index_map(self):
        """The map ``(i, j) -> (i, j ^ ...)`` for ``transform_layout``.

        Example::

            >>> import cuvil_tir as T
            >>> print(Swizzle(3, 3, 0).index_map()(T.var("i"), T.var("j"))[1])
            T.bitwise_xor(j // 8, i % 8) * 8 + j % 8
        """
        lo, span, step = 1 << self.shift, 1 << self.bits, 1 << self.base
        # the chunk index is XORed, the offset in the chunk kept: a vector of one chunk
        # stays contiguous for the vectorizer
        def col(i, j):
            r = (i // lo if lo > 1 else i) % span
            return (j // step ^ r) * step + j % step if step > 1 else j ^ r
        return lambda i, j: (i, col(i, j))


def recognize(rows, cols, new_rows, new_cols) -> Swizzle | None:
    """The swizzle taking each element ``(rows, cols)`` (numpy arrays over every element
    of a 2-D buffer) to ``(new_rows, new_cols)``, or None.

    Example::

        >>> i, j = np.divmod(np.arange(512), 64)
        >>> recognize(i, j, i, Swizzle(3, 3, 0).apply(i, j))
        Swizzle(bits=3, base=3, shift=0)
        >>> recognize(i, j, i, 63 - j) is None
        True
    """
    rows, cols = np.asarray(rows, np.int64), np.asarray(cols, np.int64)
    if rows.size == 0 or not np.array_equal(rows, new_rows) or np.array_equal(cols, new_cols):
        return None
    width = int(cols.max()) + 1
    for bits in range(1, 9):
        for base in range(0, width.bit_length()):
            if width % (1 << (base + bits)):
                continue
            for shift in range(0, int(rows.max()).bit_length() + 1):
                sw = Swizzle(bits, base, shift)
                if np.array_equal(sw.apply(rows, cols), new_cols):
                    return sw
    return None


def register_swizzled_op(op: str, tile_args: tuple) -> None:
    """Declare that the tile op ``op`` addresses the tiles of its arguments
    ``tile_args`` through a swizzle it is given (one packed int per tile, appended in
    order by the target's lowering).

    Example::

        >>> register_swizzled_op("example.tile_op", (0,))
        >>> swizzled_tiles("example.tile_op")
        (0,)
    """
    _SWIZZLED_OPS[op] = tuple(tile_args)


def swizzled_tiles(op) -> tuple:
    """The tile arguments ``op`` may take swizzled (empty: none).

    Example::

        >>> swizzled_tiles("cuda.wmma_sync")
        ()
    """
    return _SWIZZLED_OPS.get(op, ())


def swizzles_of(func) -> dict:
    """``{buffer name: Swizzle}`` recorded in ``func``.

    Example::

        >>> import cuvil_tir as T
        >>> swizzles_of(T.PrimFunc([], T.Evaluate(T.const(0))))
        {}
    """
    return {name: Swizzle.unpack(p) for name, p in func.attr(SWIZZLE_KEY, ()) or ()}


def append_swizzles(func):
    """Append to each call of a swizzled op (:func:`register_swizzled_op`) the packed
    swizzle of each of its swizzled tiles (0: laid out row-major), after the
    arguments the target's lowering appended before (leading dimensions).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> append_swizzles(f) is f
        True
    """
    found = swizzles_of(func)
    if not found:
        return func
    aligned = {e[0] for e in func.attr("buffer_dim_align", ()) or ()}
    for name in sorted(set(found) & aligned):
        raise LoweringError(f"{func.name}: buffer {name} is both swizzled and padded by "
                            "storage_align; a swizzle replaces the padding: drop the "
                            "storage_align")

    def check(buf, sw):
        # shrunk to a block's tile: the pattern must still fit whole in it
        dims = [d.value if isinstance(d, IntImm) else None for d in buf.shape[-2:]]
        if len(dims) != 2 or None in dims or dims[0] % sw.rows or dims[1] % sw.cols:
            raise LoweringError(f"{func.name}: swizzled buffer {buf.name} is shrunk to "
                                f"{[str(d) for d in buf.shape]}; its swizzle {sw} needs "
                                f"rows in multiples of {sw.rows} and columns of {sw.cols} "
                                "(tile the loops that way)")

    class _Append(Mutator):
        def visit_Call(self, e):
            e = self.generic_visit(e)
            tiles = swizzled_tiles(getattr(e, "op", None))
            if not tiles:
                return e
            packed = []
            for pos in tiles:
                buf = e.args[pos].buffer
                sw = found.get(buf.name)
                if sw is not None:
                    check(buf, sw)
                packed.append(IntImm(sw.pack() if sw is not None else 0, "int32"))
            return Call(e.dtype, e.op, tuple(e.args) + tuple(packed))
    return func.with_body(_Append().visit(func.body))


__all__ = ["SWIZZLE_KEY", "append_swizzles", "Swizzle", "recognize", "register_swizzled_op", "swizzled_tiles",
           "swizzles_of"]
