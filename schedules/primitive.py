"""The registry of schedule primitives.

A primitive is a pure function ``fn(func, *args, **kwargs) -> (new_func, result)``:
it checks legality first and raises :class:`ScheduleError` (leaving nothing changed,
since nothing was mutated), then builds the new function.  ``Schedule`` looks
primitives up here by name, applies them and records them in the trace.

Example::

    >>> @primitive("noop_example")
    ... def noop_example(func):
    ...     return func, None
    >>> PRIMITIVES["noop_example"] is noop_example
    True
"""

from __future__ import annotations

PRIMITIVES: dict = {}


def primitive(name: str):
    """Register ``fn`` as the primitive ``name``.

    Example::

        >>> "noop_example" in PRIMITIVES
        True
    """
    def register(fn):
        PRIMITIVES[name] = fn
        fn.primitive_name = name
        return fn
    return register
