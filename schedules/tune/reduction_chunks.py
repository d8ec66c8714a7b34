"""Sweeping a convolution's reduction in chunks outside its spatial tiles.

The generated space's multi-level tiling (:func:`.space._tile_reduction`) runs the
whole reduction inside each register tile (``S0 S1 R0 R1 S2``): the accumulator stays
in registers, and every register tile of a weight panel reads the whole panel again.
When the weights exceed L2 (ResNet-18's layer4 3x3 convolution: 9.4 MB), that panel
is read from L2, not L1, once per register tile.  With the outer reduction loops
``R0`` moved between the loop over the panels and the other spatial tile loops
(``S0 S1[panel] R0 S1[rest] R1 S2``, GotoBLAS's ``kc`` blocks outside its rows), a
chunk of the panel is read by every register tile of the panel while it is still in
L1, and the accumulator holds the panel's spatial tile (a ``local`` buffer placed at
the panel loop, initialised once before the chunks, copied out once after them).

It is a decision (``whole`` / ``chunks``), offered where the weights are packed panel
by panel (:func:`.space.offers_reduction_chunks`), so GEMMs and convolutions whose
weights fit L2 draw the candidates they drew before.

Example::

    >>> CHUNK_PLACES
    ('whole', 'chunks')
"""

from __future__ import annotations

#: where the outer reduction loops sit: inside every register tile's loops (the
#: default tiling) or outside the spatial tiles of a weight panel
CHUNK_PLACES = ("whole", "chunks")


def chunk_sizes(extents, step_bytes, l1d_bytes) -> list:
    """The inner extent of each reduction axis (``extents``, outermost first) in a
    chunk whose slice of the weight panel (``step_bytes`` per reduction step: the
    panel's width in bytes) fills at most half of L1, the other half left to the
    image rows the chunk reads: the innermost axes whole while they fit (a
    convolution's window), the next one the largest divisor that fits.

    Example::

        >>> chunk_sizes([512, 3, 3], 32 * 4, 49152)       # 16 channels x 3 x 3
        [16, 3, 3]
        >>> chunk_sizes([8, 3, 3], 32 * 4, 49152)
        [8, 3, 3]
    """
    room = max(1, l1d_bytes // 2 // max(1, step_bytes))
    out = []
    for ext in reversed(extents):
        size = max(d for d in range(1, min(ext, room) + 1) if ext % d == 0)
        out.append(size)
        room = max(1, room // size) if size == ext else 1
    return out[::-1]


__all__ = ["CHUNK_PLACES", "chunk_sizes"]
