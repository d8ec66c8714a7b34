"""Buffers: named, typed, shaped regions of memory in a scope.

A buffer compares by identity, like a variable.  ``strides`` is empty for a compact
row-major buffer; ``scope`` is ``"global"``, ``"local"``, ``"shared"`` or a target's
memory such as ``"npu.wgt"``.  ``axis_separators`` groups the logical axes into
physical ones, as TVM's do: ``(1,)`` on a ``(4, 8)`` buffer asks for a 4 x 8 physical
array rather than 32 contiguous elements (empty: one physical axis).  Every memory of a
Cuvil target is linear, so lowering flattens each group and then the groups together,
row-major: the separators never change a computed value (see
:mod:`cuvil_tir.transform.flatten_buffers`).

Example::

    >>> import cuvil_tir as T
    >>> A = T.Buffer((4, 8), "float32", name="A")
    >>> A[1, 2].dtype, A.ndim
    ('float32', 2)
"""

from __future__ import annotations

from . import dtype as D
from .errors import ShapeError
from .expr import Expr, IntImm, BufferLoad, as_expr, const
from .node import Node, node
from .stmt import BufferRegion, Range


@node
class Buffer(Node):
    """A multi-dimensional buffer.

    Example::

        >>> import cuvil_tir as T
        >>> n = T.size_var("n")
        >>> B = T.decl_buffer((n,), "int8", "B", scope="local")
        >>> B.scope
        'local'
    """

    shape: tuple
    dtype: str = "float32"
    name: str = "buffer"
    strides: tuple = ()
    scope: str = "global"
    align: int = 64
    axis_separators: tuple = ()
    by_identity = True

    def __post_init__(self):
        object.__setattr__(self, "dtype", D.canonical(self.dtype))
        if isinstance(self.shape, (int, Expr)) and not isinstance(self.shape, bool):
            object.__setattr__(self, "shape", (self.shape,))    # T.Buffer(16, ...), as TVM
        elif not isinstance(self.shape, (tuple, list)):
            raise ShapeError(f"buffer {self.name}: expected a shape such as (16,) or 16, "
                             f"found {self.shape!r}")
        object.__setattr__(self, "shape", tuple(as_expr(s, "int32") if not isinstance(s, Expr)
                                                else s for s in self.shape))
        object.__setattr__(self, "strides", tuple(as_expr(s, "int32") if not isinstance(s, Expr)
                                                  else s for s in self.strides))
        if self.strides and len(self.strides) != len(self.shape):
            raise ShapeError(f"buffer {self.name}: {len(self.shape)} dims but "
                             f"{len(self.strides)} strides")
        object.__setattr__(self, "axis_separators",
                           check_axis_separators(self.axis_separators, len(self.shape),
                                                 f"buffer {self.name}"))

    __hash__ = Node.__hash__

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    def __getitem__(self, indices) -> BufferLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != len(self.shape):
            raise ShapeError(f"buffer {self.name} has {len(self.shape)} dimension(s) but "
                             f"was indexed with {len(indices)} index(es)")
        if any(isinstance(ix, slice) for ix in indices):
            return self._region(indices)
        return BufferLoad(self, tuple(as_expr(ix, "int32") for ix in indices))

    def _region(self, indices):
        """``A[i:i + 16, 0:16]``: the region (for ``T.call_extern``), as in TVM."""
        ranges = []
        for d, ix in enumerate(indices):
            if not isinstance(ix, slice):
                ranges.append(Range(as_expr(ix, "int32"), const(1, "int32")))
                continue
            if ix.step is not None:
                raise ShapeError(f"buffer {self.name}: a region slice has no step, found "
                                 f"step {ix.step} in dimension {d}")
            lo = as_expr(0 if ix.start is None else ix.start, "int32")
            hi = self.shape[d] if ix.stop is None else as_expr(ix.stop, "int32")
            ranges.append(Range(lo, hi - lo))
        return BufferRegion(self, tuple(ranges))

    def load(self, indices) -> BufferLoad:
        """``self[indices]`` with indices as a sequence."""
        return self[tuple(indices)]

    def with_changes(self, **changes) -> "Buffer":
        """A new buffer (a new identity) like this one with ``changes`` applied.

        Example::

            >>> import cuvil_tir as T
            >>> A = T.decl_buffer((4, 8), "float32", "A")
            >>> B = A.with_changes(scope="local")
            >>> (B.scope, B.name, B is A)
            ('local', 'A', False)
        """
        fields = dict(shape=self.shape, dtype=self.dtype, name=self.name,
                      strides=self.strides, scope=self.scope, align=self.align,
                      axis_separators=self.axis_separators)
        fields.update(changes)
        return Buffer(**fields)

    def default_strides(self) -> tuple:
        """Row-major strides of the shape (the ``strides`` if given).

        Example::

            >>> import cuvil_tir as T
            >>> [int(s) for s in T.decl_buffer((2, 3, 4), "float32", "A").default_strides()]
            [12, 4, 1]
        """
        if self.strides:
            return self.strides
        out = []
        acc: Expr = const(1, "int32")
        for s in reversed(self.shape):
            out.append(acc)
            acc = acc * s if not (isinstance(acc, IntImm) and acc.value == 1) else s
        return tuple(reversed(out))

    def nbytes_const(self) -> int | None:
        """Bytes of the buffer when its shape is constant, else None."""
        n = 1
        for s in self.shape:
            if not isinstance(s, IntImm):
                return None
            n *= s.value
        return n * D.itemsize(self.dtype)


def const_elements(dims) -> int | None:
    """The number of elements of a box of extents ``dims`` when all are constants,
    else None.

    Example::

        >>> from cuvil_tir.expr import IntImm, Var
        >>> const_elements((IntImm(2, "int32"), IntImm(3, "int32")))
        6
        >>> const_elements((IntImm(2, "int32"), Var("n"))) is None
        True
    """
    n = 1
    for d in dims:
        if not isinstance(d, IntImm):
            return None
        n *= d.value
    return n


def check_axis_separators(seps, ndim: int, where: str) -> tuple:
    """``seps`` as a tuple of ints, each in ``[1, ndim - 1]`` and increasing (a group of
    logical axes is never empty); refused (``ShapeError``) otherwise.

    Example::

        >>> check_axis_separators([1], 2, "buffer B")
        (1,)
    """
    out = tuple(getattr(s, "value", s) for s in seps) if isinstance(seps, (tuple, list)) \
        else None
    if out is None or any(isinstance(s, bool) or not isinstance(s, int) for s in out):
        raise ShapeError(f"{where}: axis_separators must be a list of ints such as [1], "
                         f"found {seps!r}")
    if any(not 0 < s < ndim for s in out) or list(out) != sorted(set(out)):
        raise ShapeError(f"{where}: axis_separators {list(out)} must be increasing axes "
                         f"in 1..{ndim - 1} (a separator k starts a physical axis at "
                         f"logical axis k of the {ndim}); e.g. axis_separators=[1] on a "
                         "2-d buffer")
    return out


def decl_buffer(shape, dtype: str = "float32", name: str = "buf", strides=(),
                scope: str = "global", align: int = 64, axis_separators=()) -> Buffer:
    """Declare a buffer.

    Example::

        >>> decl_buffer((16,), "float32", "X").shape[0].value
        16
        >>> decl_buffer((4, 4), "float32", "Y", axis_separators=[1]).axis_separators
        (1,)
    """
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    return Buffer(tuple(shape), dtype, name, tuple(strides), scope, align, axis_separators)


_dataclass_init = Buffer.__init__


def _init(self, *args, offset_factor=0, elem_offset=None, buffer_type="", **kwargs):
    # TVMScript's buffer keywords, so that a TVM-printed annotation such as
    # ``A: T.Buffer((16, 16), "float32", offset_factor=1)`` evaluates when the def runs;
    # only values that describe a plain Cuvil buffer are accepted
    if not isinstance(offset_factor, int) or offset_factor < 0:
        raise ShapeError(f"Buffer: offset_factor must be a non-negative int, found "
                         f"{offset_factor!r}")
    if elem_offset not in (None, 0) or buffer_type not in ("", "default", "auto"):
        raise ShapeError("Buffer: a Cuvil buffer starts at its first element "
                         "(elem_offset=0, buffer_type='default'); found "
                         f"elem_offset={elem_offset!r}, buffer_type={buffer_type!r}")
    _dataclass_init(self, *args, **kwargs)


_init.__doc__ = _dataclass_init.__doc__
_init.__wrapped__ = _dataclass_init
Buffer.__init__ = _init
