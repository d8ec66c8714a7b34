"""Handles to loops and blocks that stay valid across schedule primitives.

A ``BlockRV`` names a block (block names are unique in a function); a ``LoopRV`` holds
the loop's variable, which primitives keep for every loop they do not replace.  A
handle to a loop that a primitive replaced (e.g. the loop that ``split`` split) no
longer resolves, and using it raises ``ScheduleError``.

Example::

    >>> import cuvil_tir as T
    >>> BlockRV("C").name
    'C'
"""

from __future__ import annotations

from cuvil_tir.expr import Var


class BlockRV:
    """A handle to a block, by name.

    Example::

        >>> BlockRV("C") == BlockRV("C")
        True
    """

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, BlockRV) and other.name == self.name

    def __hash__(self):
        return hash(("BlockRV", self.name))

    def __repr__(self):
        return f"BlockRV({self.name!r})"


class LoopRV:
    """A handle to a loop, by loop variable (compared by identity).

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> LoopRV(i) == LoopRV(i), LoopRV(i) == LoopRV(T.var("i"))
        (True, False)
    """

    __slots__ = ("var",)

    def __init__(self, var: Var):
        self.var = var

    def __eq__(self, other):
        return isinstance(other, LoopRV) and other.var is self.var

    def __hash__(self):
        return id(self.var)

    def __repr__(self):
        return f"LoopRV({self.var.name})"
