"""Handles to loops and blocks that stay valid across schedule primitives.

A ``BlockRV`` names a block (block names are unique in a function); a ``LoopRV`` holds
the loop's variable, which primitives keep for every loop they do not replace.  A
handle to a loop that a primitive replaced (e.g. the loop that ``split`` split) no
longer resolves, and using it raises ``ScheduleError``.

``BlockRV()`` and ``LoopRV()`` without an argument are *fresh* handles: placeholders
for the results of instructions in a trace built by hand (see
:class:`schedules.Trace`), compared by identity.  No schedule accepts them.

A schedule of a module with several functions (see ``Schedule.work_on``) sets a
handle's ``func`` to the name of the function it points into, so that ``B`` of one
function and ``B`` of another are different handles; otherwise ``func`` is None.

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

    __slots__ = ("name", "func")

    def __init__(self, name: str | None = None, func: str | None = None):
        self.name = name
        self.func = func

    def __eq__(self, other):
        if self.name is None:
            return other is self
        return isinstance(other, BlockRV) and other.name == self.name and \
            other.func == self.func

    def __hash__(self):
        return id(self) if self.name is None else hash(("BlockRV", self.name, self.func))

    def __repr__(self):
        if self.name is None:
            return "BlockRV()"
        return f"BlockRV({self.name!r}" + (f", func={self.func!r})" if self.func else ")")


class LoopRV:
    """A handle to a loop, by loop variable (compared by identity); ``LoopRV()`` is a
    fresh handle.

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> LoopRV(i) == LoopRV(i), LoopRV(i) == LoopRV(T.var("i"))
        (True, False)
    """

    __slots__ = ("var", "func")

    def __init__(self, var: Var | None = None, func: str | None = None):
        self.var = var
        self.func = func

    def __eq__(self, other):
        if self.var is None:
            return other is self
        return isinstance(other, LoopRV) and other.var is self.var and \
            other.func == self.func

    def __hash__(self):
        return id(self) if self.var is None else id(self.var)

    def __repr__(self):
        if self.var is None:
            return "LoopRV()"
        return f"LoopRV({self.var.name}" + (f", func={self.func!r})" if self.func else ")")


class LocationMark(LoopRV):
    """A compute location that is not a loop: :data:`ROOT_MARK` or :data:`INLINE_MARK`
    (what ``sample_compute_location`` draws; ``compute_at`` takes them as its loop).

    Example::

        >>> ROOT_MARK.var.name, isinstance(INLINE_MARK, LoopRV)
        ('root', True)
    """

    __slots__ = ()


ROOT_MARK = LocationMark(Var("root"))
"""The location "where the block is now" (decision -1)."""

INLINE_MARK = LocationMark(Var("inline"))
"""The location "inlined into its consumers" (decision -2)."""


def home_free(value):
    """``value`` with every handle in it replaced by one without ``func`` (what a
    primitive, which sees one function, is given).

    Example::

        >>> home_free([BlockRV("B", func="f"), 3])
        [BlockRV('B'), 3]
    """
    if isinstance(value, BlockRV) and value.func is not None:
        return BlockRV(value.name)
    if isinstance(value, LoopRV) and value.func is not None:
        return LoopRV(value.var)
    if isinstance(value, (list, tuple)):
        return type(value)(home_free(v) for v in value)
    if isinstance(value, dict):
        return {k: home_free(v) for k, v in value.items()}
    return value
