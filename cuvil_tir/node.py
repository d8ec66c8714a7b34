"""The base of every IR node: frozen dataclasses compared and hashed by structure.

Variables and buffers are the exception: they compare by identity (two ``Var("i")``
are different variables).  ``same(a, b)`` is exact structural equality (variables by
identity); :func:`cuvil_tir.structural_equal` is equality up to renaming.

Example::

    >>> import cuvil_tir as T
    >>> i = T.var("i")
    >>> same(i + 1, i + 1), same(i + 1, T.var("i") + 1)
    (True, False)
"""

from __future__ import annotations

import dataclasses

from .errors import CuvilError, DTypeError, LoweringError


#: the printer's ``to_text``: it imports every node class, so this module (below them
#: all) cannot import it; :mod:`cuvil_tir.printer` registers it with
#: :func:`set_text_form` when ``import cuvil_tir`` loads it, before any caller can
#: hold a node
_TEXT_FORM: list = []


def set_text_form(to_text) -> None:
    """Make ``to_text(node, highlight=None)`` the text form of every node (``str``,
    ``repr``, :meth:`Node.script`); the printer calls it once.

    Example::

        >>> from cuvil_tir.printer import to_text
        >>> set_text_form(to_text)
    """
    _TEXT_FORM[:] = [to_text]


def node(cls):
    """Class decorator: a frozen, slotted dataclass without generated eq/hash.

    Example::

        >>> @node
        ... class Pair(Node):
        ...     a: int
        ...     b: int
        >>> same(Pair(1, 2), Pair(1, 2))
        True
    """
    cls = dataclasses.dataclass(frozen=True, slots=True, eq=False, repr=False)(cls)
    post = getattr(cls, "__post_init__", None)
    if post is not None:
        cls.__post_init__ = _guarded(post, cls.__name__)
    return cls


def _guarded(post, name: str):
    # a field of the wrong kind (None, a string where an expression belongs) fails in
    # the checks with AttributeError/TypeError/ValueError: report it inside the
    # hierarchy, naming the node; free on the normal path
    def __post_init__(self):
        try:
            post(self)
        except CuvilError:
            raise
        except (AttributeError, TypeError, ValueError, IndexError) as err:
            cls = DTypeError if isinstance(err, (AttributeError, TypeError)) else LoweringError
            raise cls(f"{name}: malformed node ({err}); build IR nodes from expressions "
                      "and statements (T.var, T.const, buffer loads, T.For, ...)") from None
    return __post_init__


class Node:
    """Base of IR nodes (expressions, statements and their parts).

    Example::

        >>> import cuvil_tir as T
        >>> isinstance(T.const(1), Node)
        True
    """

    #: ``_h``: the structural hash, computed once (:func:`node_hash`); not a field, so
    #: a copy or an unpickled node computes its own (its variables are new objects)
    __slots__ = ("_h",)
    #: nodes compared by identity instead of structure (variables, buffers)
    by_identity = False

    def children(self):
        """Field values in declaration order.

        Example::

            >>> import cuvil_tir as T
            >>> len((T.var("i") + 1).children())
            2
        """
        return tuple(getattr(self, f) for f in field_names(type(self)))

    def __eq__(self, other):
        return same(self, other)

    def __ne__(self, other):
        return not same(self, other)

    def __hash__(self):
        return node_hash(self)

    def script(self, highlight=None) -> str:
        """The text form (``str(node)``); ``highlight``: a statement of this node whose
        first line is underlined with ``^`` (for error messages).

        Example::

            >>> import cuvil_tir as T
            >>> (T.var("i") + 1).script()
            'i + 1'
        """
        if _TEXT_FORM:
            return _TEXT_FORM[0](self, highlight=highlight)
        # only while cuvil_tir itself is being imported, before the printer is
        return f"<{type(self).__name__}>"

    def __repr__(self) -> str:
        return self.script()

    def __str__(self) -> str:
        return self.__repr__()


_FIELDS: dict[type, tuple[str, ...]] = {}


def field_names(cls) -> tuple[str, ...]:
    """Names of a node class's dataclass fields, cached.

    Example::

        >>> import cuvil_tir as T
        >>> field_names(type(T.var("i") + 1))
        ('a', 'b')
    """
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls))
        _FIELDS[cls] = names
    return names


def same(x, y) -> bool:
    """Exact structural equality; variables and buffers by identity.

    Example::

        >>> same((1, 2), (1, 2))
        True
    """
    if x is y:
        return True
    tx = type(x)
    if tx is not type(y):
        return False
    if isinstance(x, Node):
        if x.by_identity:
            return False
        for f in field_names(tx):
            if not same(getattr(x, f), getattr(y, f)):
                return False
        return True
    if tx is tuple or tx is list:
        return len(x) == len(y) and all(same(a, b) for a, b in zip(x, y))
    if tx is float:
        return x == y or (x != x and y != y)
    return x == y


def node_hash(x) -> int:
    """Structural hash consistent with :func:`same`.

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> node_hash(i + 1) == node_hash(i + 1)
        True
    """
    if isinstance(x, Node):
        if x.by_identity:
            return id(x)
        # the IR is immutable: a node's hash never changes, and hashing is linear in
        # its size (a Key of every atom, of every index, ...): kept on the node
        h = getattr(x, "_h", None)
        if h is None:
            h = hash((type(x).__name__,) + tuple(node_hash(getattr(x, f))
                                                 for f in field_names(type(x))))
            object.__setattr__(x, "_h", h)
        return h
    if isinstance(x, (tuple, list)):
        return hash(tuple(node_hash(v) for v in x))
    return hash(x)
