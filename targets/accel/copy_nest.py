"""Which DMA transfer a staged copy is: the loop nests that ``cache_read`` /
``cache_write`` / ``pad_einsum`` leave, recognised against the modes of the
accelerator's DMA (:class:`~targets.accel.description.DMA`) and its on-chip moves.

A nest ``for ...: dst[...] = value`` (possibly under ``if guard``) is

- a copy when ``value`` is a load ``src[...]``;
- a padded copy when it is ``if_then_else(guard, src[...], 0)`` (``pad_einsum``'s
  zero-filling load);
- a fill when it is the constant 0 (an accumulator tile initialised by the DMA);
- a copy with an element-wise op when it is ``op.fn(src[...])`` for one of the DMA's
  ``store_ops`` or a move's ``ops`` (activation on read-out).

Example::

    >>> import cuvil_tir as T
    >>> S = T.decl_buffer((4, 16), "int32", "S", scope="npu.acc")
    >>> r, c = T.var("r"), T.var("c")
    >>> nest = T.For(r, T.const(0), T.const(4), "serial", T.For(c, T.const(0), T.const(16),
    ...        "serial", T.BufferStore(S, T.const(0, "int32"), (r, c))))
    >>> copy_nest(nest).fill
    True
"""

from __future__ import annotations

from dataclasses import dataclass

from cuvil_tir import ops
from cuvil_tir.analysis.regions import simplify
from cuvil_tir.arith.affine import from_linear_form as from_linear, linear_form as linear
from cuvil_tir.expr import LE, LT, BufferLoad, FloatImm, IntImm, const
from cuvil_tir.op import conjuncts, if_then_else, maximum as max_, minimum as min_
from cuvil_tir.stmt import BufferStore, For, IfThenElse
from cuvil_tir.structural import structural_equal
from cuvil_tir.visitor import post_order_visit, used_vars

from .errors import AccelLoweringError


@dataclass(frozen=True)
class CopyNest:
    """A staged copy: its ``loops`` (outermost first), the ``store``, the ``load`` it
    copies (None for a fill), the ``guard`` of a partial tile, whether the rest of the
    tile is zero-``padded``, whether it is a zero ``fill``, and the DMA ``op`` applied
    on the way (None for a plain copy)."""

    loops: list
    store: BufferStore
    load: object
    guard: object = None
    padded: bool = False
    fill: bool = False
    op: object = None


def copy_nest(s, elementwise=()):
    """The :class:`CopyNest` of loop nest ``s``, else None; ``elementwise``: the element-wise
    operations (:class:`~targets.accel.description.DMAOp`) a copy may apply (the DMA's
    store ops and the moves')."""
    loops, body = [], s
    while isinstance(body, For):
        loops.append(body)
        body = body.body
    guard = None
    if isinstance(body, IfThenElse) and body.else_case is None:
        guard, body = body.condition, body.then_case
    if not isinstance(body, BufferStore) or not loops:
        return None
    v = body.value
    if isinstance(v, BufferLoad):
        return CopyNest(loops, body, v, guard)
    if guard is None and ops.branches(v) is not None and \
            isinstance(v.args[1], BufferLoad) and _is_zero(v.args[2]):
        return CopyNest(loops, body, v.args[1], v.args[0], padded=True)
    if guard is None and _is_zero(v):
        return CopyNest(loops, body, None, fill=True)
    loads = []
    post_order_visit(v, lambda n: loads.append(n) if isinstance(n, BufferLoad) else None)
    if len(loads) == 1:
        # both sides simplified alike (the pipeline's simplify has already rewritten
        # the stored value: a clip to -128 of a ReLU's output is gone)
        got = simplify(v)
        for op in elementwise:
            if structural_equal(simplify(op.apply(loads[0])), got):
                return CopyNest(loops, body, loads[0], guard, op=op)
    return None


def _is_zero(e) -> bool:
    return isinstance(e, (IntImm, FloatImm)) and e.value == 0


def valid_part(guard, row, col, rows, cols, where):
    """``(valid rows, valid columns)`` of a tile under ``guard`` (conjunction of
    upper bounds ``affine < n`` on the row or column loop, or of outer conditions)."""
    vr, vc = const(rows, "int32"), const(cols, "int32")
    for c in conjuncts(guard):
        lin = None
        if isinstance(c, (LT, LE)):
            a, b = linear(c.a), linear(c.b)
            if a is not None and b is not None:
                terms = dict(a[0])
                for k, (v, x) in b[0].items():
                    terms[k] = (v, terms.get(k, (v, 0))[1] - x)
                lin = ({k: t for k, t in terms.items() if t[1]},
                       a[1] - b[1] - (1 if isinstance(c, LE) else 0))
        inner = [] if lin is None else [(v, x) for v, x in lin[0].values()
                                        if row is not None and v is row.loop_var
                                        or v is col.loop_var]
        if lin is None or len(inner) > 1 or (inner and inner[0][1] != 1):
            raise AccelLoweringError(
                f"DMA: {where} is guarded by {c}, which is not an upper bound "
                "'row/column + offset < n' on one of the copy's two inner loops; the DMA "
                "moves whole rectangles (pad the computation with pad_einsum)")
        rest = {k: t for k, t in lin[0].items() if not inner or t[0] is not inner[0][0]}
        bound = -from_linear(rest, lin[1], "int32") if rest or lin[1] else const(0, "int32")
        if not inner:       # an outer condition: the whole tile or nothing
            vr = if_then_else(c, vr, const(0, "int32"))
        elif row is not None and inner[0][0] is row.loop_var:
            vr = min_(vr, max_(bound - row.min, const(0, "int32")))
        else:
            vc = min_(vc, max_(bound - col.min, const(0, "int32")))
    return vr, vc


def row_strides(buf) -> list:
    """Element stride of each dimension (row-major, or the buffer's own strides).

    Example::

        >>> import cuvil_tir as T
        >>> row_strides(T.decl_buffer((4, 8, 2), "int8", "X"))
        [16, 2, 1]
    """
    if buf.strides:
        return [int(s.value) for s in buf.strides]
    out, acc = [], 1
    for d in reversed(buf.shape):
        out.append(acc)
        acc *= int(d.value)
    return out[::-1]


def dim_of(indices, var):
    """The one dimension whose index uses ``var`` with coefficient 1, else None.

    Example::

        >>> import cuvil_tir as T
        >>> i, j = T.var("i"), T.var("j")
        >>> dim_of((j + 1, i), i), dim_of((i * 2, j), i)
        (1, None)
    """
    hit = None
    for d, e in enumerate(indices):
        if id(var) in {id(v) for v in used_vars(e)}:
            lin = linear(e)
            if hit is not None or lin is None or lin[0][id(var)][1] != 1:
                return None
            hit = d
    return hit


def transposed_loops(nest):
    """``(row loop, column loop)`` when the copy transposes a tile: the destination's
    last dimension runs along one of the two inner loops and the source's along the
    other (``dst[r, c] = src[c, r]``, in either loop order); else None."""
    if len(nest.loops) < 2 or nest.fill:
        return None
    a, b = nest.loops[-2], nest.loops[-1]
    for row, col in ((a, b), (b, a)):
        dlast, slast = len(nest.store.buffer.shape) - 1, len(nest.load.buffer.shape) - 1
        if dim_of(nest.store.indices, col.loop_var) == dlast and \
                dim_of(nest.load.indices, row.loop_var) == slast and \
                dim_of(nest.load.indices, col.loop_var) not in (None, slast) and \
                dim_of(nest.store.indices, row.loop_var) not in (None, dlast):
            return row, col
    return None


def continues(nest, row, sides) -> tuple:
    """The loops around ``row`` that, in both buffers, step exactly past the rows the
    loops inside them cover (a copy of contiguous row blocks: input rows of a conv, a
    filter's taps), outermost first: with ``row`` they are one transfer of more rows,
    paying the latency once.  None for guarded or padded copies (their valid part is
    per row block), unless the guard bounds only the column loop (a padded channel
    dimension: every row block has the same valid columns).

    Example::

        >>> import cuvil_tir as T
        >>> from targets.accel.copy_nest import copy_nest
        >>> S = T.decl_buffer((3, 4, 16), "int8", "S", scope="npu.inp")
        >>> G = T.decl_buffer((8, 4, 16), "int8", "G")
        >>> a, r, c = T.var("a"), T.var("r"), T.var("c")
        >>> nest = copy_nest(T.For(a, T.const(0), T.const(3), "serial", T.For(r, T.const(0),
        ...     T.const(4), "serial", T.For(c, T.const(0), T.const(16), "serial",
        ...     T.BufferStore(S, G[a + 2, r, c], (a, r, c))))), [])
        >>> [f.loop_var.name for f in continues(nest, nest.loops[1],
        ...                                      [(S, nest.store.indices), (G, nest.load.indices)])]
        ['a']
    """
    if row is None:
        return ()
    if nest.guard is not None:
        named = {id(v) for v in used_vars(nest.guard)}
        if any(id(f.loop_var) in named for f in nest.loops[:-1]):
            return ()
    out, rows = [], row.extent.value
    for outer in nest.loops[-3::-1]:
        if not (isinstance(outer.extent, IntImm) and isinstance(outer.min, IntImm)):
            break
        ok = True
        for buf, idx in sides:
            od, rd = dim_of(idx, outer.loop_var), dim_of(idx, row.loop_var)
            ok = ok and od is not None and rd is not None and od != rd and \
                row_strides(buf)[od] == row_strides(buf)[rd] * rows
        if not ok:
            break
        out.insert(0, outer)
        rows *= outer.extent.value
    return tuple(out)


def extent(loops) -> int:
    """The product of the constant extents of ``loops``."""
    n = 1
    for f in loops:
        n *= f.extent.value
    return n


__all__ = ["CopyNest", "continues", "copy_nest", "dim_of", "extent", "row_strides",
           "transposed_loops", "valid_part"]
