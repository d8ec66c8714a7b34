"""Handles to loops and blocks that stay valid across schedule primitives.

A ``BlockRV`` names a block (block names are unique in a function); a ``LoopRV`` holds
the loop's variable, which primitives keep for every loop they do not replace.  A
handle to a loop that a primitive replaced (e.g. the loop that ``split`` split) no
longer resolves, and using it raises ``ScheduleError``.

``BlockRV()`` and ``LoopRV()`` without an argument are *fresh* handles: placeholders
for the results of instructions in a trace built by hand (see
:class:`schedules.Trace`), compared by identity.  No schedule accepts them.

Example::

    >>> import cuvil_tir as T
    >>> BlockRV("C").name
    'C'
    >>> BlockRV() == BlockRV()
    False
"""

from __future__ import annotations

from cuvil_tir.expr import Var


class BlockRV:
    """A handle to a block, by name; ``BlockRV()`` is a fresh handle (by identity).

    Example::

        >>> BlockRV("C") == BlockRV("C")
        True
    """

    __slots__ = ("name",)

    def __init__(self, name: str | None = None):
        self.name = name

    def __eq__(self, other):
        if self.name is None:
            return other is self
        return isinstance(other, BlockRV) and other.name == self.name

    def __hash__(self):
        return id(self) if self.name is None else hash(("BlockRV", self.name))

    def __repr__(self):
        return "BlockRV()" if self.name is None else f"BlockRV({self.name!r})"


class LoopRV:
    """A handle to a loop, by loop variable (compared by identity); ``LoopRV()`` is a
    fresh handle.

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> LoopRV(i) == LoopRV(i), LoopRV(i) == LoopRV(T.var("i"))
        (True, False)
    """

    __slots__ = ("var",)

    def __init__(self, var: Var | None = None):
        self.var = var

    def __eq__(self, other):
        if self.var is None:
            return other is self
        return isinstance(other, LoopRV) and other.var is self.var

    def __hash__(self):
        return id(self) if self.var is None else id(self.var)

    def __repr__(self):
        return "LoopRV()" if self.var is None else f"LoopRV({self.var.name})"
