"""``transform_layout`` of a buffer that tile ops read (a tensorized ``mma``'s shared
tiles): such an op addresses its tile from the tile's first element, so re-indexing
that element is not enough.  An op registered with
:func:`cuvil_tir.swizzle.register_swizzled_op` takes the tile through an XOR swizzle:
the map must be one (:func:`cuvil_tir.swizzle.recognize`, checked on every element),
its tile arguments stay at the tile's logical origin and the swizzle is recorded for
the lowering.  Any other tile op is refused: it would read the old layout.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((4,), name="A")
    >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
    >>> tile_layout(f, None, A, None)
    frozenset()
"""

from __future__ import annotations

import numpy as np

from cuvil_tir.expr import BufferLoad, Call, IntImm
from cuvil_tir.ops.gpu import tiles_of
from cuvil_tir.printer import to_text
from cuvil_tir.swizzle import Swizzle, recognize, swizzled_tiles
from cuvil_tir.structural import structural_equal
from cuvil_tir.visitor import post_order_visit

from ..errors import LayoutError, schedule_error
from .index_eval import eval_np


def _tile_uses(func, buf) -> list:
    """``(call, argument position)`` of each tile argument loading ``buf``."""
    uses = []

    def look(n):
        if isinstance(n, Call):
            for t in tiles_of(n):
                a = n.args[t.arg]
                if isinstance(a, BufferLoad) and a.buffer is buf:
                    uses.append((n, t.arg))
    post_order_visit(func.body, look)
    return uses


def _coords(buf, new_buf, params, exprs):
    """``(rows, cols, new rows, new cols)`` of every element of a 2-D buffer before and
    after the map (None when a shape is not constant or the map is not computable)."""
    old = [s.value if isinstance(s, IntImm) else None for s in buf.shape]
    new = [s.value if isinstance(s, IntImm) else None for s in new_buf.shape]
    if len(old) != 2 or None in old or old != new:
        return None
    rows, cols = (g.ravel() for g in np.meshgrid(*[np.arange(n, dtype=np.int64) for n in old],
                                                 indexing="ij"))
    vals = [eval_np(x, {id(params[0]): rows, id(params[1]): cols}) for x in exprs]
    if any(v is None for v in vals):
        return None
    return (rows, cols) + tuple(np.broadcast_to(v, rows.shape) for v in vals)


def map_swizzle(buf, new_buf, params, exprs):
    """The XOR swizzle the map is on ``buf`` (2-D, constant shape, checked on every
    element), or None.

    Example::

        >>> map_swizzle.__name__
        'map_swizzle'
    """
    if not any(isinstance(n, Call) and n.op == "bitwise_xor" for x in exprs
               for n in _nodes(x)):
        return None
    sw = written_swizzle(buf, params, exprs)
    if sw is None:
        coords = _coords(buf, new_buf, params, exprs)
        sw = recognize(*coords) if coords is not None else None
    return sw if sw is not None and buf.shape[0].value % sw.rows == 0 else None


def written_swizzle(buf, params, exprs):
    """The swizzle whose ``index_map()`` the map is, as written, on a 2-D buffer of
    constant shape whose rows hold whole groups of its pattern, or None.  Such a map is
    one-to-one by construction (each row's chunks XORed by one row-dependent value),
    so a buffer too large to check element by element (a cache of a 4096 x 4096
    operand before it shrinks to its tile) needs no enumeration.

    Example::

        >>> import cuvil_tir as T
        >>> i, j = T.var("i"), T.var("j")
        >>> buf = T.decl_buffer((4096, 4096), "float16", name="A_shared")
        >>> written_swizzle(buf, (i, j), Swizzle(2, 3, 1).index_map()(i, j))
        Swizzle(bits=2, base=3, shift=1)
    """
    shape = [s.value if isinstance(s, IntImm) else None for s in buf.shape]
    if len(shape) != 2 or None in shape or len(exprs) != 2 or exprs[0] is not params[0]:
        return None
    for bits in range(1, 9):
        for base in range(0, shape[1].bit_length()):
            if shape[1] % (1 << (base + bits)):
                continue
            for shift in range(0, 17):
                sw = Swizzle(bits, base, shift)
                if structural_equal(sw.index_map()(*params)[1], exprs[1]):
                    return sw
    return None


def _nodes(e) -> list:
    out = []
    post_order_visit(e, out.append)
    return out


def tile_layout(func, blk, buf, swizzle) -> frozenset:
    """The ids of the tile arguments to keep at their origin when ``buf`` is re-laid
    out through ``swizzle`` (None: another map); refused when a tile op reading
    ``buf`` cannot take the new layout."""
    uses = _tile_uses(func, buf)
    if not uses:
        return frozenset()
    ops = sorted({c.op for c, _ in uses})
    plain = sorted({c.op for c, pos in uses if pos not in swizzled_tiles(c.op)})
    if plain or swizzle is None:
        why = (f"{', '.join(plain)} read(s) it row-major from the tile's first element"
               if plain else "the map is not an XOR swizzle of the chunks of each row of a "
               "2-D buffer (cuvil_tir.swizzle.Swizzle(...).index_map()) over whole "
               "periods of its pattern")
        raise schedule_error(LayoutError, "transform_layout",
                             f"buffer {buf.name!r} is a tile of {', '.join(ops)} "
                             f"({to_text(uses[0][0]).strip()}); {why}. Re-lay it out "
                             "before tensorize, or use a swizzle that the op takes",
                             func, blk)
    return frozenset(id(c.args[pos]) for c, pos in uses)


__all__ = ["map_swizzle", "tile_layout"]
