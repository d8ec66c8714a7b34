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
from .deep import deep_ok
from .expr import Var
from .node import Node, field_names


# node class -> the field that binds a variable; fields in _AFTER_BIND are its scope
_BINDS = {"For": "loop_var", "Let": "var", "LetStmt": "var", "IterVar": "var"}
_AFTER_BIND = ("body",)
# nodes compared with fresh variable maps: the functions of a module are independent
_SCOPES = ("PrimFunc",)


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
                and a.axis_separators == b.axis_separators and self.eq(a.shape, b.shape) and self.eq(a.strides, b.strides))

    def define(self, a: Var, b: Var) -> bool:
        # a binding site starts a new scope: the same Var object bound by two sibling
        # loops equals two distinct Vars, as TVM's def-point remapping does
        if type(a) is not type(b) or a.dtype != b.dtype:
            return False
        self.vmap[id(a)] = b
        self.vrev[id(b)] = a
        return True

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
            if tx.__name__ in _SCOPES and self.vmap:
                outer = self.vmap, self.vrev
                self.vmap, self.vrev = {}, {}
                try:
                    return self.eq(x, y)
                finally:
                    self.vmap, self.vrev = outer
            names = field_names(tx)
            bound = _BINDS.get(tx.__name__)
            if bound is not None:
                # the bound value is compared before the variable comes into scope
                for f in names:
                    if f != bound and f not in _AFTER_BIND and \
                            not self.eq(getattr(x, f), getattr(y, f)):
                        return False
                if not self.define(getattr(x, bound), getattr(y, bound)):
                    return False
                return all(self.eq(getattr(x, f), getattr(y, f))
                           for f in names if f in _AFTER_BIND)
            return all(self.eq(getattr(x, f), getattr(y, f)) for f in names)
        if tx is tuple or tx is list:
            return len(x) == len(y) and all(self.eq(a, b) for a, b in zip(x, y))
        if tx is float:
            return x == y or (x != x and y != y)
        return x == y


@deep_ok
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

    Valid inside one process only: it is built on Python's ``hash``, which is salted
    per process and may change between Python versions.  For anything persistent (a
    file, a database, another process) use :func:`cuvil_tir.fingerprint`.

    Example::

        >>> import cuvil_tir as T
        >>> structural_hash(T.var("i") + 1) == structural_hash(T.var("k") + 1)
        True
    """
    index: dict[int, int] = {}
    counter = [0]

    def number(v) -> int:
        counter[0] += 1
        index[id(v)] = counter[0]
        return counter[0]

    def h(v):
        if isinstance(v, Var):
            k = index[id(v)] if id(v) in index else number(v)
            return hash(("var", type(v).__name__, v.dtype, k))
        if isinstance(v, Buffer):
            if id(v) in index:
                return hash(("buf", index[id(v)]))
            k = number(v)
            return hash(("buf", k, v.dtype, v.scope, v.axis_separators, h(v.shape),
                         h(v.strides)))
        if isinstance(v, Node):
            if type(v).__name__ in _SCOPES and index:
                return structural_hash(v)   # numbered on its own, as eq compares it
            names = field_names(type(v))
            bound = _BINDS.get(type(v).__name__)
            if bound is None:
                return hash((type(v).__name__,) + tuple(h(getattr(v, f)) for f in names))
            parts = [h(getattr(v, f)) for f in names if f != bound and f not in _AFTER_BIND]
            var = getattr(v, bound)
            number(var)  # a binding site is a fresh variable, as in structural_equal
            parts.append(h(var))
            parts.extend(h(getattr(v, f)) for f in names if f in _AFTER_BIND)
            return hash((type(v).__name__,) + tuple(parts))
        if isinstance(v, (tuple, list)):
            return hash(tuple(h(e) for e in v))
        return hash(v)

    return h(x)
