"""PrimFunc: the unit of scheduling and compilation.

``params`` are the function's arguments in order: buffers (tensors) or scalar
variables.  Symbolic sizes used in the buffers' shapes are bound from the arguments'
shapes at call time.  ``attrs`` holds metadata such as the function name.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((4,), name="A")
    >>> B = T.compute((4,), lambda i: A[i] + 1.0, name="B")
    >>> f = T.create_prim_func([A, B])
    >>> [p.name for p in f.params]
    ['A', 'B']
"""

from __future__ import annotations

from .buffer import Buffer
from .errors import LoweringError
from .expr import Var
from .node import Node, node
from .stmt import Stmt, _annotations


@node
class PrimFunc(Node):
    """A function over buffers; immutable, like every node.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="X")])
        >>> f.name
        'main'
    """

    params: tuple
    body: Stmt
    attrs: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "params", tuple(self.params))
        object.__setattr__(self, "attrs", _annotations(self.attrs))
        for p in self.params:
            if not isinstance(p, (Buffer, Var)):
                raise LoweringError(f"PrimFunc parameters are Buffers or Vars, found {p!r}")

    __hash__ = Node.__hash__

    @property
    def name(self) -> str:
        """The function's name (attribute ``global_symbol``, default ``main``)."""
        return self.attr("global_symbol", "main")

    def attr(self, key: str, default=None):
        """Look up one attribute."""
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    def with_attr(self, key: str, value) -> "PrimFunc":
        """A copy with one attribute set.

        Example::

            >>> import cuvil_tir as T
            >>> T.create_prim_func([T.placeholder((2,), name="X")]).with_attr("global_symbol", "f").name
            'f'
        """
        d = dict(self.attrs)
        d[key] = value
        return PrimFunc(self.params, self.body, d)

    def with_body(self, body: Stmt) -> "PrimFunc":
        """A copy with another body (the same object if ``body`` is unchanged)."""
        return self if body is self.body else PrimFunc(self.params, body, self.attrs)

    @property
    def buffers(self) -> tuple:
        """The buffer parameters, in order."""
        return tuple(p for p in self.params if isinstance(p, Buffer))

    @property
    def buffer_map(self) -> dict:
        """``{name: buffer}`` of the buffer parameters (TVM's buffer_map, keyed by name)."""
        return {b.name: b for b in self.buffers}
