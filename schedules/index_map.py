"""Index maps as values, and the layout that makes an access follow its loops.

:class:`IndexMap` is a function from indices to indices (``lambda i, j: (j, i)``) held
as expressions over its own input variables, so it can be compared
(:meth:`IndexMap.is_equivalent_to`), inverted (:meth:`IndexMap.inverse`) and passed
wherever a primitive takes an ``index_map`` (``transform_layout``).

:func:`suggest_index_map` answers: which layout of a buffer makes the elements one
access touches appear in the order of its loops?  Each index is read as *digits* of
the loop variables (``i // 16``, ``i % 16``, ``j``: :func:`cuvil_tir.analysis.index_map.parse`);
every buffer dimension is split at its digits, digits of one loop that sit next to
each other in both the loop and the buffer's row-major order stay one dimension, and
the pieces are ordered by loop (outermost first) and, within a loop, from its most to
its least significant digit.  Reading the re-laid buffer then walks memory in loop
order: the layout a packing stage (``cache_read`` + ``transform_layout``) wants.

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.stmt import For, Evaluate
    >>> i, j = T.var("i"), T.var("j")
    >>> loops = [For(v, T.const(0), T.const(n), "serial", Evaluate(T.const(0)))
    ...          for v, n in ((i, 4), (j, 8))]
    >>> m = suggest_index_map(T.decl_buffer((8, 4), name="B"), [j, i], loops)
    >>> m
    IndexMap(lambda i0, i1: (i1, i0))
"""

from __future__ import annotations

import inspect

from cuvil_tir.analysis import index_map as digits_of
from cuvil_tir.analysis.regions import simplify
from cuvil_tir.expr import IntImm, Var, const
from cuvil_tir.stmt import IterVar, Range
from cuvil_tir.visitor import substitute

from .errors import ScheduleArgumentError, schedule_error
from .primitives.layout import LayoutError
from .primitives.layout_padding import inverse_of
from .primitives.index_maps import apply_index_map, index_names


class IndexMap:
    """``outputs`` (expressions) as a function of ``inputs`` (variables).

    Example::

        >>> m = IndexMap.from_func(lambda i, j: (j, i // 4, i % 4))
        >>> [str(e) for e in m(1, 9)], m.ndim_in, m.ndim_out
        (['9', '0', '1'], 2, 3)
    """

    def __init__(self, inputs, outputs):
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.__signature__ = inspect.Signature(
            [inspect.Parameter(v.name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
             for v in self.inputs])

    @staticmethod
    def from_func(fn, what: str = "IndexMap.from_func") -> "IndexMap":
        """The map ``fn`` (one parameter per input index) computes.

        Example::

            >>> IndexMap.from_func(lambda x: (x // 2, x % 2))
            IndexMap(lambda x: (x // 2, x % 2))
        """
        if isinstance(fn, IndexMap):
            return fn
        names = index_names(fn) if callable(fn) else None
        if names is None:
            raise schedule_error(ScheduleArgumentError, what, f"expected a function of "
                                 f"the indices (a lambda), found {fn!r}")
        inputs, outputs = apply_index_map(fn, len(names), "", prim=what,
                                          what="the map has")
        return IndexMap(inputs, outputs)

    @property
    def ndim_in(self) -> int:
        return len(self.inputs)

    @property
    def ndim_out(self) -> int:
        return len(self.outputs)

    def __call__(self, *indices) -> list:
        if len(indices) != self.ndim_in:
            raise schedule_error(LayoutError, "IndexMap", f"the map takes {self.ndim_in} "
                                 f"index(es), found {len(indices)}")
        vm = {v: (x if not isinstance(x, int) else const(x, v.dtype))
              for v, x in zip(self.inputs, indices)}
        return [simplify(substitute(e, vm)) for e in self.outputs]

    def is_equivalent_to(self, other) -> bool:
        """Whether ``other`` (an IndexMap or a function) gives provably equal indices
        for every input.

        Example::

            >>> m = IndexMap.from_func(lambda x: (x // 4, x % 4))
            >>> m.is_equivalent_to(lambda y: (y // 4, y - y // 4 * 4)), \\
            ...     m.is_equivalent_to(lambda y: (y // 4, y % 2))
            (True, False)
        """
        other = IndexMap.from_func(other, "IndexMap.is_equivalent_to")
        if (other.ndim_in, other.ndim_out) != (self.ndim_in, self.ndim_out):
            return False
        mine = self(*other.inputs)
        for a, b in zip(mine, other.outputs):
            d = simplify(a - b)
            if not (isinstance(d, IntImm) and d.value == 0):
                return False
        return True

    def inverse(self, shape) -> "IndexMap":
        """The map back, for inputs ranging over ``shape`` (the map must be one to
        one there, and quasi-affine: sums, constant multiples, ``//`` and ``%``).

        Example::

            >>> IndexMap.from_func(lambda i, j: (j // 2, i, j % 2)).inverse((3, 4))
            IndexMap(lambda o0, o1, o2: (o1, o0 * 2 + o2))
        """
        if len(shape) != self.ndim_in:
            raise schedule_error(LayoutError, "IndexMap.inverse", f"shape {tuple(shape)} "
                                 f"has {len(shape)} dimension(s), the map takes "
                                 f"{self.ndim_in}")
        outs = [Var(f"o{k}", e.dtype) for k, e in enumerate(self.outputs)]
        back = inverse_of([const(n) if isinstance(n, int) else n for n in shape],
                          self.inputs, self.outputs, outs)
        if back is None:
            raise schedule_error(LayoutError, "IndexMap.inverse",
                                 f"{self!r} is not invertible over shape {tuple(shape)}: "
                                 "it is not one-to-one there, or not quasi-affine (sums, "
                                 "constant multiples, // and % by constants)")
        return IndexMap(outs, [back[v] for v in self.inputs])

    def __repr__(self) -> str:
        args = ", ".join(v.name for v in self.inputs)
        outs = ", ".join(str(e) for e in self.outputs)
        return f"IndexMap(lambda {args}: ({outs}{',' if self.ndim_out == 1 else ''}))"


def _int(x):
    """A Python int of an int or an integer constant, else None."""
    if isinstance(x, IntImm):
        return x.value
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _range(d, extent: int):
    """The number of values of digit ``d`` of a loop of ``extent``, when exact."""
    top = min(d.mod, extent) if d.mod is not None else extent
    return top // d.div if top % d.div == 0 else None


def _piece(x, c: int, prev):
    """Sub-index ``(x % prev) // c`` of a buffer index ``x`` (``prev`` None: no
    modulo; ``c`` 1: no division)."""
    e = x if prev is None else x % prev
    return e if c == 1 else e // c


def suggest_index_map(buffer, indices, loops, predicate=True):
    """The layout of ``buffer`` in which the access ``buffer[indices]``, under
    ``loops`` (``For`` nodes, outermost first, starting at 0), walks memory in loop
    order (see the module docstring); None when the access is not a surjective
    quasi-affine map of the loops onto the buffer (each dimension exactly tiled by
    its digits), or has a ``predicate``.

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.stmt import For, Evaluate
        >>> i, j = T.var("i"), T.var("j")
        >>> loops = [For(v, T.const(0), T.const(n), "serial", Evaluate(T.const(0)))
        ...          for v, n in ((i, 32), (j, 64))]
        >>> suggest_index_map(T.decl_buffer((8, 256), name="B"),
        ...                   [i // 16 * 4 + j // 16, i % 16 * 16 + j % 16], loops)
        IndexMap(lambda i0, i1: (i0 // 4, i1 // 16, i0 % 4, i1 % 16))
    """
    if not (predicate is True or (isinstance(predicate, IntImm) and predicate.value)):
        return None
    shape = [_int(s) for s in buffer.shape]
    if len(indices) != len(shape) or None in shape:
        return None
    order = {id(f.loop_var): k for k, f in enumerate(loops)}
    extents = {}
    for f in loops:
        if _int(f.min) != 0 or _int(f.extent) is None:
            return None
        extents[id(f.loop_var)] = _int(f.extent)
    ivs = [IterVar(f.loop_var, Range.from_extent(const(extents[id(f.loop_var)])))
           for f in loops]
    xs = [Var(f"i{d}", "int32") for d in range(len(shape))]
    pieces = []          # (flat coefficient, digit, range, piece expression)
    stride = 1
    for d in reversed(range(len(shape))):
        try:
            offset, ds = digits_of.parse(simplify(indices[d]), ivs)
        except digits_of.NotInvertible:
            return None
        if not (isinstance(offset, IntImm) and offset.value == 0):
            return None
        ds = sorted(ds, key=lambda g: -g.coef)
        prev, top = None, shape[d]
        for g in ds:
            r = _range(g, extents[id(g.var)])
            if r is None or g.coef <= 0 or (prev if prev is not None else top) != g.coef * r:
                return None
            pieces.append((g.coef * stride, g, r, _piece(xs[d], g.coef, prev)))
            prev = g.coef
        if (prev if prev is not None else top) != 1:
            return None
        stride *= shape[d]
    pieces.sort(key=lambda p: -p[0])
    # neighbours in memory that are neighbouring digits of one loop stay together
    groups = []
    for coef, g, r, e in pieces:
        last = groups[-1] if groups else None
        if last is not None:
            lcoef, lg, lr, le = last
            if lg.var is g.var and lcoef == coef * r and lg.div == g.div * r:
                groups[-1] = (coef, type(g)(g.var, g.coef, g.div, lg.mod), lr * r,
                              le * r + e)
                continue
        groups.append((coef, g, r, e))
    groups.sort(key=lambda p: (order[id(p[1].var)], -p[1].div))
    return IndexMap(xs, [simplify(e) for _, _, _, e in groups])


__all__ = ["IndexMap", "suggest_index_map"]
