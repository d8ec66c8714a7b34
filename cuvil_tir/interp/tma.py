"""The interpreter's meaning of tensor copies (``tma_load``, :mod:`cuvil_tir.ops.tma`).

A copy reads its box of the source when it starts (elements outside the tensor read
as zero, as the tensor engine fills them), counts the whole box's bytes against its
mbarrier's open phase and lands when that phase completes, at the positions the
destination's swizzle gives each element: exactly a ``bulk_copy`` of a box
(:mod:`cuvil_tir.interp.mbarrier`).  So a thread that touches the destination
before waiting on the phase is, with ``check_races=True``, a
:class:`~cuvil_tir.errors.RaceError` naming the copy and the access.

Example::

    >>> box_values(np.arange(6.0), (2, 3), (1, 1), (2, 2)).tolist()
    [[4.0, 5.0], [0.0, 0.0]]
"""

from __future__ import annotations

import numpy as np

from .. import dtype as D
from ..errors import CuvilError, LoweringError
from ..ops.tma import tma_parts
from ..printer import to_text
from ..swizzle import Swizzle
from .exprs import as_index
from .mbarrier import BulkCopy, _element, _flat, barrier_access
from .memory import MarkedArray
from .tile_ops import tile_positions


def box_values(src, dims: tuple, corner: tuple, box: tuple, name: str = "src",
               text: str = "") -> np.ndarray:
    """The ``box`` of the row-major ``dims`` tensor ``src`` (read flat) at ``corner``, zero
    outside the tensor; an element inside that nothing wrote is refused.

    Example::

        >>> box_values(np.arange(4.0), (2, 2), (-1, 0), (2, 2)).tolist()
        [[0.0, 0.0], [0.0, 1.0]]
    """
    rows = corner[0] + np.arange(box[0])[:, None]
    cols = corner[1] + np.arange(box[1])[None, :]
    inside = (rows >= 0) & (rows < dims[0]) & (cols >= 0) & (cols < dims[1])
    flat = np.where(inside, rows * dims[1] + cols, 0)
    if isinstance(src, MarkedArray) and not np.take(src.written, flat[inside]).all():
        raise LoweringError(f"tma_load reads uninitialised memory of {name} in the box "
                            f"{box[0]} x {box[1]} at {list(corner)}:\n{text}")
    return np.where(inside, np.take(src, flat), np.zeros((), src.dtype))


def compile_tma(c, call, role: str, state, block):
    """The closure running one ``tma_load`` for the current thread of ``block``
    (``state``: the block's :class:`~cuvil_tir.interp.async_copy.AsyncCopies`).

    Example::

        >>> compile_tma.__name__
        'compile_tma'
    """
    text = to_text(call)
    try:
        p = tma_parts(call)
    except CuvilError as err:
        raise LoweringError(f"{err.message}:\n{text}") from None
    bufs = c.frame.bufs
    barrier, known = barrier_access(c, p.bar, call, state, block, text)
    kd, fd = _element(c, p.dst, call)
    ks, fs = _element(c, p.src, call)
    fcorner = [c.expr(x) for x in p.corner] if p.corner else fs
    fdims = [c.expr(x) for x in p.dims] if p.dims else None
    sw = Swizzle.unpack(call.args[p.swizzle_arg].value) if p.swizzle_arg else None
    elem = D.bits(p.dst.buffer.dtype) // 8 or 1
    # the engine writes whole swizzle patterns: a swizzled box starts on 1024 bytes
    align = 1024 if sw is not None else 128
    rows, cols = p.box
    tile = type("Box", (), {"rows": rows, "cols": cols})

    def copy():
        d, s = bufs[kd], bufs[ks]
        if d.ndim > 1 and d.shape[-1] != cols:
            raise LoweringError(f"tma_load writes rows of {cols} elements one after another; "
                                f"{p.dst.buffer.name}'s rows hold {d.shape[-1]}:\n{text}")
        at_d = _flat(fd, d)
        if (at_d * elem) % align:
            raise LoweringError(f"tma_load: the destination {p.dst.buffer.name}[{at_d}] must "
                                f"start on a {align}-byte boundary:\n{text}")
        dims = tuple(as_index(f()) for f in fdims) if fdims else s.shape
        if len(dims) != 2 or dims[0] * dims[1] != s.size:
            raise LoweringError(f"tma_load reads {p.src.buffer.name} as a 2-D tensor of "
                                f"{list(dims)}; it holds {s.size} elements:\n{text}")
        corner = tuple(as_index(f()) for f in fcorner)
        vals = box_values(s, dims, corner, p.box, p.src.buffer.name, text)
        pos = tile_positions(d.reshape(-1), at_d, cols, tile, p.dst.buffer.name, text, sw)
        b = known(barrier())
        cp = BulkCopy(d, p.dst.buffer, pos.ravel(), vals.ravel(), block.cur, text)
        for flat in cp.pos.tolist():
            if block.check:
                state.check(d, flat, block.thread, "writes", text, block.threads)
            state.inflight[(id(d), flat)] = cp
        b.copies.append(cp)
        b.tx -= p.nbytes
        b.complete_if_ready(state)
    return copy


__all__ = ["box_values", "compile_tma"]
