"""Every buffer load in a piece of IR, with the conditions and lets it is evaluated
under.

A load inside ``T.if_then_else(c, A[i], B[j])`` runs only where ``c`` holds (``A[i]``)
or fails (``B[j]``); one inside an ``if`` statement only in its branch; one under a
``Let`` sees the let's binding.  The bounds checks (``cuvil_tir.transform.bounds_check``:
a guarded load is checked only when its branch is taken) and the inlining primitives
(``schedules.primitives.inline_cut``: which elements a guarded consumer reads) both ask
that question; :func:`guarded_loads` answers it once.

The walk stops at a nested block (it declares its own reads) and lists the loads in
evaluation order: the loads in a load's indices before the load itself.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((8,), name="A")
    >>> i = T.var("i")
    >>> e = T.if_then_else(i < 7, A[i + 1], A[i]) * 2.0
    >>> [(str(g.load), [str(c) for c in g.guards]) for g in guarded_loads(e)]
    [('A[i + 1]', ['i < 7']), ('A[i]', ['not i < 7'])]
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ops
from ..expr import BufferLoad
from ..visitor import Visitor


@dataclass(frozen=True, slots=True)
class GuardedLoad:
    """One load, the conditions that hold wherever it is evaluated (innermost last),
    and the ``(var, value)`` bindings of the lets around it (outermost first).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> g = GuardedLoad(A[0], (), ())
        >>> str(g.load), g.guards, g.lets
        ('A[0]', (), ())
    """

    load: BufferLoad
    guards: tuple
    lets: tuple


class _Walk(Visitor):
    def __init__(self, buffer):
        self.buffer, self.out, self.guards, self.lets = buffer, [], [], []

    def visit_BufferLoad(self, e):
        self.generic_visit(e)
        if self.buffer is None or e.buffer is self.buffer:
            self.out.append(GuardedLoad(e, tuple(self.guards), tuple(self.lets)))

    def visit_Call(self, e):
        arms = ops.branches(e)
        if arms is None:
            self.generic_visit(e)
        else:
            self._arms(*arms)

    def visit_IfThenElse(self, s):
        self._arms(s.condition, s.then_case, s.else_case)

    def _arms(self, cond, then, other):
        self.visit(cond)
        for guard, branch in ((cond, then), (~cond, other)):
            if branch is not None:
                self.guards.append(guard)
                self.visit(branch)
                self.guards.pop()

    def visit_Let(self, e):
        self._let(e.var, e.value, e.body)

    def visit_LetStmt(self, s):
        self._let(s.var, s.value, s.body)

    def _let(self, var, value, body):
        self.visit(value)
        self.lets.append((var, value))
        self.visit(body)
        self.lets.pop()

    def visit_Block(self, blk):
        return None     # a nested block declares its own reads


def guarded_loads(node, buffer=None) -> list:
    """The loads in ``node`` (an expression or a statement; of ``buffer`` only, when
    given) as :class:`GuardedLoad` records, in evaluation order (see the module
    docstring).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((8,), name="A")
        >>> B = T.decl_buffer((8,), "int32", name="B")
        >>> i = T.var("i")
        >>> [str(g.load) for g in guarded_loads(A[B[i]] + A[i])]
        ['B[i]', 'A[B[i]]', 'A[i]']
        >>> [str(g.load) for g in guarded_loads(A[B[i]] + A[i], B)]
        ['B[i]']
    """
    walk = _Walk(buffer)
    walk.visit(node)
    return walk.out


__all__ = ["GuardedLoad", "guarded_loads"]
