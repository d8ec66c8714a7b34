"""``B = T.decl_buffer(shape, dtype, data=A.data)`` (or ``T.Buffer(..., data=A.data)``):
a second buffer over the memory of ``A``, with its own shape.

TVMScript declares such an alias to read a buffer in another shape (a flat view of a
matrix, a matrix view of a flat buffer).  Cuvil has one buffer per memory, so the alias
dissolves into accesses of ``A``: ``B[i, j]`` is the element of ``A`` at the same
row-major position, ``A[i * 4 + j]`` for a flat ``A`` and ``B`` of shape ``(2, 4)``;
a slice of ``B`` is the box of ``A`` holding it.  The alias must have ``A``'s dtype
(a reinterpretation of the bytes is refused) and no more elements than ``A``.

Example::

    >>> import cuvil_tir as T
    >>> f = T.parse('''
    ... def f(A: T.Buffer((8,), "float32"), C: T.Buffer((2, 4), "float32")):
    ...     B = T.decl_buffer((2, 4), "float32", data=A.data)
    ...     for i, j in T.grid(2, 4):
    ...         C[i, j] = B[i, j]
    ... ''')
    >>> print(f.body.body.body)
    C[i, j] = A[i * 4 + j]
"""

from __future__ import annotations

from ..buffer import Buffer, const_elements
from ..errors import CuvilError
from ..expr import BufferLoad, Expr, IntImm
from ..stmt import BufferRegion, Range
from ..arith import simplify


class AliasView:
    """``name``, of ``shape``, over the memory of ``source`` (a Buffer): indexed in its
    own row-major order (see the module docstring)."""

    is_buffer_view = True

    def __init__(self, name: str, source: Buffer, shape: tuple):
        self.name = name
        self.source = source
        self.view_shape = shape
        self.dtype = source.dtype
        self.lead = 0

    def _flat(self, idx) -> Expr:
        total = None
        for i, st in zip(idx, Buffer(self.view_shape, self.dtype, self.name)
                         .default_strides()):
            term = i if isinstance(st, IntImm) and st.value == 1 else i * st
            total = term if total is None else total + term
        return total if total is not None else IntImm(0, "int32")

    def _unflat(self, flat: Expr) -> list:
        src = self.source
        if src.ndim == 1:
            return [flat]
        out = []
        for d, (st, n) in enumerate(zip(src.default_strides(), src.shape)):
            q = flat if isinstance(st, IntImm) and st.value == 1 else flat // st
            out.append(q if d == 0 else q % n)
        return out

    def getitem(self, idx):
        """``self[idx]``: a load of ``source`` (points) or the box of ``source``
        holding the slices."""
        if not any(isinstance(i, Range) for i in idx):
            return BufferLoad(self.source, tuple(self._unflat(self._flat(idx))))
        lo = simplify(self._flat([i.min if isinstance(i, Range) else i for i in idx]))
        hi = simplify(self._flat([i.min + i.extent - 1 if isinstance(i, Range) else i
                                  for i in idx]))
        if self.source.ndim == 1:
            return BufferRegion(self.source, (Range(lo, simplify(hi - lo + 1)),))
        # the rows of the source the flat range crosses, each whole
        s0 = self.source.default_strides()[0]
        first, last = simplify(lo // s0), simplify(hi // s0)
        return BufferRegion(self.source, (Range(first, simplify(last - first + 1)),) +
                            tuple(Range(IntImm(0, n.dtype), n) for n in self.source.shape[1:]))

    def full(self) -> BufferRegion:
        return BufferRegion.full(self.source)

    def elem_offset(self) -> Expr:
        return IntImm(0, "int32")

    def view_strides(self) -> tuple:
        return Buffer(self.view_shape, self.dtype, self.name).default_strides()

    def __repr__(self) -> str:
        return f"{self.name} (an alias of {self.source.name})"


def alias_of(name: str, source: Buffer, shape: tuple, dtype: str):
    """The buffer ``name`` declared over ``source``'s memory: ``source`` itself when
    shape and dtype agree, else an :class:`AliasView`; refuses another dtype and more
    elements than ``source`` has.

    Example::

        >>> A = Buffer((IntImm(8, "int32"),), "float32", "A")
        >>> alias_of("B", A, (IntImm(8, "int32"),), "float32") is A
        True
    """
    if dtype != source.dtype:
        raise CuvilError(f"{name}: declared as {dtype} over the data of {source.name}, a "
                         f"{source.dtype} buffer; Cuvil does not reinterpret a buffer's "
                         f"bytes: declare {name} with dtype {source.dtype}, or convert "
                         "with T.Cast element by element")
    if [str(s) for s in shape] == [str(s) for s in source.shape]:
        return source
    mine, theirs = const_elements(shape), const_elements(source.shape)
    if isinstance(mine, int) and isinstance(theirs, int) and mine > theirs:
        raise CuvilError(f"{name}: declared with {mine} elements over the data of "
                         f"{source.name}, which has {theirs}; an alias may not reach "
                         "past the memory it aliases")
    return AliasView(name, source, tuple(shape))


__all__ = ["AliasView", "alias_of"]
