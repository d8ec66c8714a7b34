"""Packing a convolution's weights panel by panel, inside the loop over the panels.

The generated space packs an operand read along one tiled axis into panels of the
register tile (GotoBLAS's packed panels, :func:`.space._pack`), once, before the
reduction block runs.  When that operand is larger than L2, the packed copy goes to
memory and comes back from it: a convolution's weights are read once for the pack,
written once, and read again (panel by panel) by the kernel.  Packed inside the loop
over the panels instead, each panel is written while the kernel is about to read it,
and read again from L2 for every spatial tile inside that loop.

The rule applies to a block that slides a window (a convolution's
``P[c, y + ry, x + rx] * W[k, c, ry, rx]``, :func:`.space.window_registers`) whose
vector-axis operand (the weights, packed by output channel) exceeds L2, in the
candidates whose outer spatial tiles put no loop between the two loops over the
panels (S0's and S1's, :func:`.space._tile_reduction`): such a loop would pack every
panel again per iteration, a memory-bound copy that the features' ``other_work``
counts as a little arithmetic (layer4's weights packed 7 times ran 2.4x slower than
packed once at the root).  It is no decision: in every such candidate measured it was
as fast as the root pack or faster.  A GEMM's packed panel stays at the root: its
loop over row blocks sits between the panel loops (GotoBLAS's ``j0 i0 j1 i1``), and a
convolution whose weights fit L2 still finds the root pack's copy there.

On one core of this 2-core Xeon (CPU time, the same candidates but the pack's place,
interleaved with numpy's im2col + matmul on one thread, load 5.5-5.7), ResNet-18's
layer4 3x3 convolution (512 channels, 7 x 7, 9.4 MB of weights) ran 15-24% faster
(1 x 7 x 32 register tile: 3.30 -> 2.78 ms, numpy 3.36 ms) and layer3's (256
channels, 14 x 14, 2.4 MB) 2-8% faster.

Which blocks it applies to is :func:`.space.offers_panel_packing` (the space's
register-tile plans decide the vector axis); this module holds the move itself.

Example::

    >>> from cuvil_tir.target import Machine
    >>> from schedules.tune.networks import conv2d, matmul
    >>> from schedules.tune.space import offers_panel_packing
    >>> m = Machine(512, 32, 49152, 1 << 21, 2)
    >>> [offers_panel_packing(f, b, m) for f, b in ((conv2d(512, 512, 7, 7), "Y"),
    ...     (conv2d(64, 64, 56, 56), "Y"), (matmul(2048, 2048, 2048), "C"))]
    [True, False, False]
"""

from __future__ import annotations

from cuvil_tir.analysis import tree
from cuvil_tir.errors import CuvilError


def pack_in_panel(sch, cache, panel_loop, dim) -> bool:
    """Move the staged copy ``cache`` (not yet laid out in panels) under
    ``panel_loop``, the loop over the panels of its axis ``dim``, with its loop over
    that axis innermost, as the root pack runs: the lanes of a panel are written side
    by side, while each of the rows they come from is read in order (a 9.4 MB weight
    packed this way ran as fast as numpy copies it; with the lanes outermost, each
    lane's row read contiguously and the panel written a lane at a time, 5x slower).
    False, the schedule unchanged, where the copy cannot move there."""
    try:
        sch.compute_at(cache, panel_loop)
    except CuvilError:
        return False
    node = tree.get(sch.func, tree.find_block(sch.func, cache.name))
    own = sch.get_loops(cache)[-len(node.block.writes[0].buffer.shape):]
    sch.reorder(*[lp for n, lp in enumerate(own) if n != dim], own[dim])
    return True


__all__ = ["pack_in_panel"]
