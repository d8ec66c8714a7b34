"""Tile ops (a tensor-core step, a fragment load) outside a kernel: computed once.

A warp-wide tile op (``tiles`` in the op registry) inside a kernel runs once per warp
of 32 lanes (:mod:`cuvil_tir.interp.gpu`).  Outside one, in a function whose thread
loops run serially (what a scheduled TensorIR function means; ``Schedule(debug=True)``
checks GPU schedules that way), the one thread that runs it computes it once: the
op's ``reference`` on its tiles.  A tile spans the last two axes of its buffer from
the element the call passes (before ``flatten_buffers``), or ``rows`` rows ``ld``
elements apart from that element of a flat buffer (after, the leading dimension an
argument).

Example::

    >>> tile_origin((2, 16, 16), [1, 0, 0], None, 16, 16)
    (256, 16)
"""

from __future__ import annotations

import numpy as np

from ..errors import LoweringError
from ..ops import get_op
from ..ops.gpu import tiles_of
from ..printer import to_text
from .scalar import tile_storage, tile_values


def tile_origin(shape, idx, ld, rows: int, cols: int) -> tuple:
    """``(flat offset, row stride)`` of a ``rows x cols`` tile at ``idx`` of a buffer
    of ``shape`` (``ld``: the row stride a flattened call passes, else None)."""
    if ld is not None and len(idx) == 1:
        return idx[0], ld
    if len(idx) < 2 or idx[-2] + rows > shape[-2] or idx[-1] + cols > shape[-1]:
        raise LoweringError(f"a {rows} x {cols} tile at {list(idx)} does not fit the last "
                            f"two axes of a buffer of shape {tuple(shape)}")
    flat = int(np.ravel_multi_index(tuple(idx), tuple(shape)))
    return flat, (ld if ld is not None else shape[-1])


def tile_positions(arr, flat: int, ld: int, tile, name: str, text: str, swizzle=None):
    """The flat positions of ``tile`` in ``arr`` from ``flat``, ``ld`` apart (where
    ``swizzle`` puts them)."""
    pos = flat + ld * np.arange(tile.rows)[:, None] + np.arange(tile.cols)[None, :]
    if swizzle is not None:
        rows, cols = np.divmod(pos, ld)
        pos = rows * ld + swizzle.apply(rows, cols)
    if flat < 0 or pos.max() >= arr.size:
        raise LoweringError(f"tile of {name} at {flat} (ld {ld}) is out of bounds:\n{text}")
    return pos


def apply_tiles(spec, tiles, args, arrays, origins, text: str, log=None,
                swizzles=None) -> None:
    """Run ``spec``'s reference on the tiles (``origins``: ``(flat, ld)`` per tile)
    and store the written ones; ``log(buffer, position, is_write)`` sees each element
    touched (the race checker); ``swizzles`` (per tile, None or a
    :class:`cuvil_tir.swizzle.Swizzle`) place a swizzled tile's elements."""
    mats = []
    for k, ((flat, ld), arr, t, a) in enumerate(zip(origins, arrays, tiles, args)):
        flat_arr = arr.reshape(-1)
        sw = swizzles[k] if swizzles else None
        pos = tile_positions(flat_arr, flat, ld, t, a.buffer.name, text, sw)
        if log is not None and t.access != "write":
            for x in pos.ravel().tolist():
                log(a.buffer, x, False)
        mats.append((flat_arr, pos))
    # the reference computes on values (a bfloat16 tile is stored as its bits)
    outs = spec.reference(None)(*(tile_values(arr[pos], a.buffer.dtype)
                                  for (arr, pos), a in zip(mats, args)))
    written = [(m, t, a) for m, t, a in zip(mats, tiles, args) if t.writes]
    for ((arr, pos), t, a), value in zip(written, outs):
        arr[pos] = tile_storage(value, a.buffer.dtype)
        if log is not None:
            for x in pos.ravel().tolist():
                log(a.buffer, x, True)


def serial_tile_rule(compiler, call):
    """The interpreter's rule for a tile op outside a kernel: computed once."""
    spec = get_op(call.op)
    tiles = tiles_of(call)
    args = [call.args[t.arg] for t in tiles]
    slots = [compiler.buffer(a.buffer, call) for a in args]
    fidx = [[compiler.expr(ix) for ix in a.indices] for a in args]
    flds = [compiler.expr(call.args[t.ld_arg]) if t.ld_arg is not None else None
            for t in tiles]
    bufs = compiler.frame.bufs
    text = to_text(call)

    def run():
        arrays = [bufs[s] for s in slots]
        origins = [tile_origin(arr.shape, [int(f()) for f in fs],
                               None if fld is None else int(fld()), t.rows, t.cols)
                   for arr, fs, fld, t in zip(arrays, fidx, flds, tiles)]
        apply_tiles(spec, tiles, args, arrays, origins, text)
        return 0
    return run


__all__ = ["apply_tiles", "serial_tile_rule", "tile_origin", "tile_positions"]
