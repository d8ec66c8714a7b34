"""``assume``: a condition the code may take as true (TVMScript's ``T.assume``).

``Call("bool", "assume", (cond,))``, used as a statement (``T.evaluate(T.assume(c))``):
a hint for analyses, with no run-time effect.  The interpreter and the code generators
evaluate it to ``True`` without evaluating ``cond`` (a false assumption is not checked,
and never makes the program compute something else: nothing relies on it).

Example::

    >>> import cuvil_tir as T
    >>> c = assume(T.var("i") < 4)
    >>> c.op, c.dtype, str(c)
    ('assume', 'bool', 'T.assume(i < 4)')
"""

from __future__ import annotations

from ..errors import DTypeError
from . import OpDef, register_op
from ..expr import Call, as_expr

#: the op's name in ``Call.op``
ASSUME = "assume"

# arity -1: spelled T.assume(cond) by the printer and parser, not one of the math ops
register_op(OpDef(ASSUME, -1, "any", effect="pure",
                  doc="a condition the code may assume true; no run-time effect"))


def assume(cond):
    """The ``assume`` call of the bool condition ``cond``.

    Example::

        >>> import cuvil_tir as T
        >>> assume(T.const(True)).args[0].value
        1
    """
    cond = as_expr(cond, "bool") if isinstance(cond, bool) else as_expr(cond)
    if cond.dtype != "bool":
        raise DTypeError(f"T.assume: expected a bool condition, found {cond.dtype}; "
                         "compare first, e.g. x == 42")
    return Call("bool", ASSUME, (cond,))


__all__ = ["ASSUME", "assume"]
