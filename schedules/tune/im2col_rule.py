"""The im2col rule of the generated space: a convolution whose weights exceed L2 and
whose output plane fits one register tile's width is computed as a GEMM over its
output positions, the weights read as they are.

The register tiling (:func:`.space._tile_reduction`) vectorises a convolution's output
channels, so its weights are packed (transposed: the lanes are output channels, 4608
floats apart in ResNet-18's layer4) on every call.  That pack costs the same per
weight whatever the layer, while the arithmetic per weight is two per output
position: layer4's 7 x 7 plane gives 98 FLOPs per weight against layer3's 392, and on
one core of this 2-core Xeon the pack of layer4's 9.4 MB of weights alone took 738 us
of a 2.2-2.6 ms call (its kernel without it near layer3's 76% of the FMA peak).

Here the output positions are fused into one axis (``transform_block_layout``) and
become the vector axis, padded to whole vectors (at most four: 49 positions in 64
lanes), and the window read is staged once per call as ``cols[c, ry, rx, position]``
(im2col: 1/10 of layer4's weights); the register tile is ``rows`` output channels by
all the positions, so each weight is read once, straight from ``W[k, c, ry, rx]``
(contiguous along the reduction), as a broadcast.  On one core of this 2-core Xeon
(CPU time, medians of interleaved runs with numpy's im2col + matmul on one thread),
layer4's 3x3 convolution ran in 1.71 ms this way (6 rows) against 2.02 ms for the
register tiling's best candidate (1 x 7 x 32, reduction chunks), numpy 2.54 ms (load
2.5), and layer4's stride-2 3x3 (256 to 512 channels, 7 x 7 out) in 0.93 ms against
1.13 ms, numpy 1.39 ms (load 3.6).

Offered (one more choice of the block's categorical, :func:`.space.generated_space`)
where :func:`.space.offers_panel_packing` holds (a sliding window whose packed weights
exceed L2) and the positions fit four vectors; it samples the rows (output channels
per register tile) and runs the row tiles in parallel.

Example::

    >>> from cuvil_tir.target import Machine
    >>> from schedules.tune.networks import conv2d
    >>> m = Machine(512, 32, 49152, 1 << 21, 2)
    >>> [len(im2col_choices(conv2d(512, 512, 7, 7), "Y", m)),
    ...  len(im2col_choices(conv2d(256, 256, 14, 14), "Y", m))]
    [1, 0]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cuvil_tir.analysis import tree
from cuvil_tir.errors import CuvilError

from cuvil_tir.visitor import used_vars

from .space import _move_last, _signature, offers_panel_packing

#: the most vectors the positions may take (the register tile's width)
MOST_VECTORS = 4


@dataclass(frozen=True)
class Im2colChoice:
    """The im2col schedule of one convolution block: its output positions in
    ``vectors`` vectors of ``lanes`` lanes, register tiles of 1 to ``most_rows``
    output channels; ``name`` is the categorical's label.

    Example::

        >>> Im2colChoice(16, 4, 6).tiles[-1]
        (6, 4)
    """

    lanes: int
    vectors: int
    most_rows: int
    name: str = "im2col"

    @property
    def tiles(self) -> tuple:
        """``(rows, vectors)`` of each register tile it may draw (the categorical's
        weight is the largest's accumulator count)."""
        return tuple((r, self.vectors) for r in range(1, self.most_rows + 1))

    def apply(self, sch, block: str) -> None:
        """Fuse the positions, stage the window read as im2col columns and the output
        by position, pad the positions to whole vectors and tile (module doc):
        ``row tiles (parallel) / reduction / rows / vectors / lanes``."""
        node = tree.get(sch.func, tree.find_block(sch.func, block)).block
        spatial = [iv for iv in node.iter_vars if iv.kind == "spatial"]
        shape = [iv.dom.extent.value for iv in spatial[1:]]
        n_red = len(node.iter_vars) - len(spatial)
        window = next(k for k, r in enumerate(node.reads)
                      if any(id(iv.var) in _var_ids(r) for iv in spatial[1:]))
        sch.transform_block_layout(block, _fuse_positions(shape, n_red))
        cols = sch.reindex(block, ("read", window))
        sch.reindex(block, ("write", 0))
        acc = sch.cache_write(block, 0, "local")
        width = self.vectors * self.lanes
        if math.prod(shape) % width:
            sch.pad_einsum(block, [1, width] + [1] * n_red)
        # the columns laid out reduction-major, a row of positions per reduction step
        sch.transform_layout(cols, 0, _move_last(1 + n_red, 0), "write")
        copy = sch.get_loops(cols)
        sch.reorder(*copy[1:], copy[0])
        sch.parallel(copy[1])
        rows = sch.sample_categorical(list(range(1, self.most_rows + 1)),
                                      list(range(1, self.most_rows + 1)))
        chan, pos, *red = sch.get_loops(sch.get_block(block))
        chan_o, chan_i = sch.split(chan, [None, rows])
        pos_o, pos_v, pos_i = sch.split(pos, [None, self.vectors, self.lanes])
        sch.reorder(chan_o, pos_o, *red, chan_i, pos_v, pos_i)
        sch.parallel(chan_o)
        sch.reverse_compute_at(acc, pos_o)
        init = sch.decompose_reduction(sch.get_block(block), red[0])
        for blk in (init, sch.get_block(block)):
            *_, r_loop, v_loop, lane_loop = sch.get_loops(blk)
            sch.unroll(r_loop)
            sch.unroll(v_loop)
            sch.vectorize(lane_loop)


def _var_ids(region) -> set:
    return {id(v) for rg in region.region for v in used_vars(rg.min)}


def _fuse_positions(shape, n_red):
    """The block layout ``(channel, *positions, *reduction) -> (channel, position,
    *reduction)``, positions fused row-major over ``shape``."""
    def index_map(*iv):
        fused = 0
        for v, extent in zip(iv[1:1 + len(shape)], shape):
            fused = fused * extent + v
        return (iv[0], fused, *iv[1 + len(shape):])
    index_map.__signature__ = _signature(1 + len(shape) + n_red)
    return index_map


def im2col_choices(func, block: str, machine) -> list:
    """``[Im2colChoice]`` for the reduction block ``block`` of ``func`` on ``machine``
    when its weights are packed panel by panel (:func:`.space.offers_panel_packing`:
    a sliding window, weights beyond L2, the output channels the vector axis), its
    iterators are the channels, then the positions, then the reduction, and the
    positions fit :data:`MOST_VECTORS` vectors; else ``[]``.

    Example::

        >>> from cuvil_tir.target import Machine
        >>> from schedules.tune.networks import conv2d, matmul
        >>> m = Machine(512, 32, 49152, 1 << 21, 2)
        >>> im2col_choices(conv2d(512, 512, 7, 7), "Y", m)[0].tiles[-1]
        (6, 4)
        >>> im2col_choices(matmul(64, 64, 64), "C", m)
        []
    """
    try:
        node = tree.get(func, tree.find_block(func, block)).block
    except CuvilError:
        return []
    kinds = [iv.kind for iv in node.iter_vars]
    n_spatial = kinds.count("spatial")
    if n_spatial < 2 or kinds != ["spatial"] * n_spatial + ["reduce"] * (len(kinds) - n_spatial):
        return []
    if not offers_panel_packing(func, block, machine):
        return []
    shape = [getattr(iv.dom.extent, "value", None) for iv in node.iter_vars[1:n_spatial]]
    if not all(isinstance(e, int) for e in shape):
        return []
    lanes = machine.lanes(str(node.writes[0].buffer.dtype))
    vectors = -(-math.prod(shape) // lanes)
    if vectors > MOST_VECTORS:
        return []
    # accumulators, one operand vector per vector of the tile, a broadcast
    most_rows = (machine.vector_registers - vectors - 1) // vectors
    return [Im2colChoice(lanes, vectors, most_rows)] if most_rows >= 1 else []


__all__ = ["Im2colChoice", "MOST_VECTORS", "im2col_choices"]
