"""Reductions for te compute bodies: ``T.sum``, ``T.max``, ``T.min``, ``T.prod``.

``T.max(a, b)`` / ``T.min(a, b)`` without an axis are elementwise.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((8,), name="A")
    >>> k = T.reduce_axis((0, 8), name="k")
    >>> r = T.sum(A[k], axis=k)
    >>> r.combiner, r.dtype
    ('sum', 'float32')
"""

from __future__ import annotations

from .. import dtype as D
from ..errors import DTypeError
from ..expr import Expr, as_expr
from ..node import Node, node
from ..stmt import IterVar
from ..op import maximum, minimum


@node
class Reduce(Expr):
    """A reduction of ``source`` over ``axis`` with a named combiner.

    Example::

        >>> import cuvil_tir as T
        >>> k = T.reduce_axis((0, 4), name="k")
        >>> T.prod(T.cast(k, "float32"), axis=k).combiner
        'prod'
    """

    combiner: str
    source: Expr
    axis: tuple
    condition: Expr | None = None
    init: Expr | None = None

    @property
    def dtype(self) -> str:
        return self.source.dtype

    __hash__ = Node.__hash__


COMBINERS = ("sum", "max", "min", "prod")


def _axes(axis) -> tuple:
    if not isinstance(axis, (list, tuple)):
        axis = (axis,)
    axis = tuple(axis)
    for a in axis:
        if not isinstance(a, IterVar) or a.kind != "reduce":
            raise DTypeError(f"reduction axis must come from T.reduce_axis, found {a!r}")
    if not axis:
        raise DTypeError("a reduction needs at least one axis")
    return axis


def _is_axis(x) -> bool:
    return isinstance(x, IterVar) or (isinstance(x, (list, tuple)) and x
                                      and all(isinstance(a, IterVar) for a in x))


def _reduce(combiner: str, expr, axis, where=None, init=None) -> Reduce:
    src = as_expr(expr)
    if D.is_bool(src.dtype):
        raise DTypeError(f"T.{combiner}: cannot reduce bool values; cast to an integer")
    cond = None if where is None else as_expr(where)
    if cond is not None and not D.is_bool(cond.dtype):
        raise DTypeError(f"T.{combiner}: 'where' must be bool, found {cond.dtype}")
    start = None if init is None else as_expr(init)
    if start is not None and start.dtype != src.dtype:
        raise DTypeError(f"T.{combiner}: init must have the reduced values' dtype "
                         f"{src.dtype}, found {start.dtype}; cast it")
    return Reduce(combiner, src, _axes(axis), cond, start)


def sum(expr, axis, where=None, init=None) -> Reduce:  # noqa: A001 - the TVM name
    """Sum of ``expr`` over ``axis`` (one reduce axis or a list), starting from
    ``init`` (an expression over the output's indices, as TVM's ``init=``) instead of 0.

    Example::

        >>> import cuvil_tir as T
        >>> k = T.reduce_axis((0, 4), name="k")
        >>> T.sum(T.cast(k, "float32"), axis=[k]).combiner
        'sum'
        >>> T.sum(k, axis=k, init=T.const(1, "int32")).init.value
        1
    """
    return _reduce("sum", expr, axis, where, init)


def prod(expr, axis, where=None) -> Reduce:
    """Product of ``expr`` over ``axis``.

    Example::

        >>> import cuvil_tir as T
        >>> k = T.reduce_axis((0, 4), name="k")
        >>> T.prod(T.cast(k, "float32"), axis=k).combiner
        'prod'
    """
    return _reduce("prod", expr, axis, where)


def max(expr, axis=None, where=None):  # noqa: A001 - the TVM name
    """Max over ``axis``; or, with a second expression instead of an axis, elementwise.

    Example::

        >>> import cuvil_tir as T
        >>> x = T.var("x", "float32")
        >>> type(T.max(x, 0.0)).__name__
        'Max'
    """
    if axis is None or not _is_axis(axis):
        if axis is None:
            raise DTypeError("T.max needs an axis= (a reduction) or a second operand")
        return maximum(expr, axis)
    return _reduce("max", expr, axis, where)


def min(expr, axis=None, where=None):  # noqa: A001 - the TVM name
    """Min over ``axis``; or, with a second expression instead of an axis, elementwise.

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> str(T.min(i, 4))
        'T.min(i, 4)'
    """
    if axis is None or not _is_axis(axis):
        if axis is None:
            raise DTypeError("T.min needs an axis= (a reduction) or a second operand")
        return minimum(expr, axis)
    return _reduce("min", expr, axis, where)
