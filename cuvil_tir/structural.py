"""Structural equality and hashing up to variable and buffer renaming.

Two functions are structurally equal when one becomes the other by a consistent
one-to-one renaming of variables and buffers: names do not matter, structure, dtypes,
constants, loop kinds, block names and annotations do.

Example::

    >>> import cuvil_tir as T
    >>> i, j = T.var("i"), T.var("j")
    >>> structural_equal(i * 2 + 1, j * 2 + 1), structural_equal(i + i, i + j)
    (True, False)
"""

from __future__ import annotations

from .buffer import Buffer
from .expr import Var
from .node import Node, field_names


class _Equal:
    def __init__(self):
        self.vmap: dict[int, Var] = {}
        self.vrev: dict[int, Var] = {}

    def vars(self, a: Var, b: Var) -> bool:
        if type(a) is not type(b) or a.dtype != b.dtype:
            return False
        ma, mb = self.vmap.get(id(a)), self.vrev.get(id(b))
        if ma is None and mb is None:
            self.vmap[id(a)] = b
            self.vrev[id(b)] = a
            return True
        return ma is b and mb is a

    def bufs(self, a: Buffer, b: Buffer) -> bool:
        ma, mb = self.vmap.get(id(a)), self.vrev.get(id(b))
        if ma is not None or mb is not None:
            return ma is b and mb is a
        self.vmap[id(a)] = b
        self.vrev[id(b)] = a
        return (a.dtype == b.dtype and a.scope == b.scope and a.align == b.align
                and self.eq(a.shape, b.shape) and self.eq(a.strides, b.strides))

    def eq(self, x, y) -> bool:
        if x is y and not isinstance(x, (Var, Buffer)):
            return True
        tx = type(x)
        if tx is not type(y):
            return False
        if isinstance(x, Var):
            return self.vars(x, y)
        if isinstance(x, Buffer):
            return self.bufs(x, y)
        if isinstance(x, Node):
            return all(self.eq(getattr(x, f), getattr(y, f)) for f in field_names(tx))
        if tx is tuple or tx is list:
            return len(x) == len(y) and all(self.eq(a, b) for a, b in zip(x, y))
        if tx is float:
            return x == y or (x != x and y != y)
        return x == y


def structural_equal(a, b) -> bool:
    """True when ``a`` and ``b`` are equal up to renaming of variables and buffers.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] * 2.0, name="B")])
        >>> A2 = T.placeholder((4,), name="X")
        >>> g = T.create_prim_func([A2, T.compute((4,), lambda k: A2[k] * 2.0, name="B")])
        >>> structural_equal(f, g)
        True
    """
    return _Equal().eq(a, b)


def assert_structural_equal(a, b) -> None:
    """Raise ``AssertionError`` showing both texts when ``a`` and ``b`` differ.

    Example::

        >>> import cuvil_tir as T
        >>> assert_structural_equal(T.var("i") + 1, T.var("j") + 1)
    """
    if not structural_equal(a, b):
        raise AssertionError(f"IR differs:\n--- first\n{a}\n--- second\n{b}")


def structural_hash(x) -> int:
    """A hash consistent with :func:`structural_equal` (renaming-invariant).

    Example::

        >>> import cuvil_tir as T
        >>> structural_hash(T.var("i") + 1) == structural_hash(T.var("k") + 1)
        True
    """
    index: dict[int, int] = {}

    def h(v):
        if isinstance(v, Var):
            k = index.setdefault(id(v), len(index))
            return hash(("var", type(v).__name__, v.dtype, k))
        if isinstance(v, Buffer):
            if id(v) in index:
                return hash(("buf", index[id(v)]))
            k = index.setdefault(id(v), len(index))
            return hash(("buf", k, v.dtype, v.scope, h(v.shape), h(v.strides)))
        if isinstance(v, Node):
            return hash((type(v).__name__,) + tuple(h(getattr(v, f))
                                                    for f in field_names(type(v))))
        if isinstance(v, (tuple, list)):
            return hash(tuple(h(e) for e in v))
        return hash(v)

    return h(x)
