"""te-style tensors: placeholders, compute stages and reduction axes.

A tensor owns the buffer it is stored in, so ``A[i, j]`` is a ``BufferLoad`` and a
compute body is ordinary IR.  :func:`~cuvil_tir.te.create_prim_func` turns the stages
into TensorIR blocks.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((4, 8), name="A")
    >>> B = T.compute((4, 8), lambda i, j: A[i, j] * 2.0, name="B")
    >>> B.shape[1].value, [ax.var.name for ax in B.op.axis]
    (8, ['i', 'j'])
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

from .. import dtype as D
from ..buffer import Buffer
from ..deep import deep_ok
from ..errors import DTypeError, ShapeError
from ..expr import Expr, Var, as_expr
from ..stmt import IterVar, Range
from .reduction import Reduce
from ..visitor import Visitor

# compute() records here which tensors its body reads
_ACTIVE: list[dict] = []


@dataclass(eq=False)
class PlaceholderOp:
    """The operation of an input tensor.

    Example::

        >>> import cuvil_tir as T
        >>> type(T.placeholder((2,), name="A").op).__name__
        'PlaceholderOp'
    """

    name: str
    axis: tuple = ()
    inputs: tuple = ()


@dataclass(eq=False)
class ComputeOp:
    """The operation of a compute stage: spatial axes, body, reduction axes, inputs.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((2,), name="A")
        >>> T.compute((2,), lambda i: A[i], name="B").op.inputs[0] is A
        True
    """

    name: str
    axis: tuple
    body: Expr
    reduce_axis: tuple = ()
    inputs: tuple = ()
    attrs: dict = field(default_factory=dict)


class Tensor:
    """A te tensor: ``.shape``, ``.dtype``, ``.name``, ``.op``, ``.buffer``.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((3,), "int8", name="A")
        >>> A.dtype, A.ndim
        ('int8', 1)
    """

    def __init__(self, buffer: Buffer, op):
        self.buffer = buffer
        self.op = op

    @property
    def shape(self) -> tuple:
        return self.buffer.shape

    @property
    def dtype(self) -> str:
        return self.buffer.dtype

    @property
    def name(self) -> str:
        return self.buffer.name

    @property
    def ndim(self) -> int:
        return len(self.buffer.shape)

    def __getitem__(self, indices):
        if not isinstance(indices, tuple):
            indices = (indices,)
        flat = []
        for ix in indices:
            if isinstance(ix, IterVar):
                ix = ix.var
            flat.append(ix)
        if len(flat) != self.ndim:
            raise ShapeError(f"tensor {self.name} has {self.ndim} dimension(s) but was "
                             f"indexed with {len(flat)} index(es)")
        for ix in flat:
            e = as_expr(ix, "int32") if not isinstance(ix, Expr) else ix
            if not D.is_integer(e.dtype):
                raise DTypeError(f"tensor {self.name}: indices must be integers, found "
                                 f"{e.dtype}")
        if _ACTIVE:
            _ACTIVE[-1][id(self.buffer)] = self
        return self.buffer[tuple(flat)]

    def __repr__(self) -> str:
        dims = ", ".join(str(s) for s in self.shape)
        return f"Tensor({self.name}, ({dims}), {self.dtype})"


def _shape(shape) -> tuple:
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    out = []
    for s in shape:
        e = as_expr(s, "int32")
        if not D.is_integer(e.dtype):
            raise DTypeError(f"shape entries must be integers, found {e.dtype} ({e})")
        if hasattr(e, "value") and e.value < 0:
            raise ShapeError(f"shape entries must be non-negative, found {e.value}")
        out.append(e)
    return tuple(out)


def placeholder(shape, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor.

    Example::

        >>> import cuvil_tir as T
        >>> n = T.size_var("n")
        >>> T.placeholder((n, 4), name="X").shape[0] is n
        True
    """
    buf = Buffer(_shape(shape), D.canonical(dtype), name)
    return Tensor(buf, PlaceholderOp(name))


def reduce_axis(dom, name: str = "rv") -> IterVar:
    """A reduction axis over ``dom = (lo, hi)`` (or an extent).

    Example::

        >>> import cuvil_tir as T
        >>> k = T.reduce_axis((0, 16), name="k")
        >>> k.kind, k.dom.extent.value
        ('reduce', 16)
    """
    if isinstance(dom, (tuple, list)):
        if len(dom) != 2:
            raise ShapeError(f"reduce_axis {name}: expected a domain (lo, hi) or an extent, "
                             f"found {dom!r}")
        lo, hi = dom
    else:
        lo, hi = 0, dom
    lo_e, hi_e = as_expr(lo, "int32"), as_expr(hi, "int32")
    if lo_e.dtype != hi_e.dtype:
        lo_e = as_expr(lo, hi_e.dtype) if not isinstance(lo, Expr) else lo_e
    return IterVar(Var(name, hi_e.dtype), Range(lo_e, hi_e - lo_e), "reduce")


def _axis_names(fcompute, n: int) -> list[str]:
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        params = []
    if len(params) == n and all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                                for p in params):
        return [p.name for p in params]
    return ["i" if n == 1 else f"i{k}" for k in range(n)]


@deep_ok
def compute(shape, fcompute, name: str = "compute", attrs: dict | None = None) -> Tensor:
    """An output tensor ``out[idx] = fcompute(*idx)`` (any rank; may be a reduction).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4, 4), name="A")
        >>> k = T.reduce_axis((0, 4), name="k")
        >>> S = T.compute((4,), lambda i: T.sum(A[i, k], axis=k), name="S")
        >>> [a.var.name for a in S.op.reduce_axis]
        ['k']
    """
    shp = _shape(shape)
    if not callable(fcompute):
        raise ShapeError(f"compute {name}: expected a function of the {len(shp)} indices, "
                         f"e.g. lambda i, j: A[i, j] + 1.0, found {fcompute!r}")
    names = _axis_names(fcompute, len(shp))
    axis = tuple(IterVar(Var(nm, s.dtype), Range(as_expr(0, s.dtype), s), "spatial")
                 for nm, s in zip(names, shp))
    _ACTIVE.append({})
    try:
        body = fcompute(*[a.var for a in axis])
    finally:
        inputs = _ACTIVE.pop()
    if isinstance(body, (list, tuple)):
        raise ShapeError(f"compute {name}: fcompute returned {len(body)} values; one "
                         "output per compute is supported, define one compute per output")
    body = as_expr(body)
    _check_reduce_position(body, name)
    red_axis = body.axis if isinstance(body, Reduce) else ()
    dt = body.dtype
    if D.lanes(dt) != 1:
        raise DTypeError(f"compute {name}: the body must be scalar, found {dt}")
    buf = Buffer(shp, dt, name)
    op = ComputeOp(name, axis, body, red_axis, tuple(inputs.values()), dict(attrs or {}))
    return Tensor(buf, op)


def _check_reduce_position(body: Expr, name: str) -> None:

    class _Find(Visitor):
        def visit_Reduce(self, r):
            raise ShapeError(f"compute {name}: a reduction (T.sum/T.max/…) must be the "
                             "whole body of a compute, found one nested inside an "
                             "expression; compute it in a stage of its own")

    if isinstance(body, Reduce):
        _Find().visit(body.source)
        if body.condition is not None:
            _Find().visit(body.condition)
    else:
        _Find().visit(body)
