"""The values the TVMScript parser evaluates to beside IR nodes, and their conversion
to expressions: the marker of a parser-only builtin (``T.block``, ``T.axis...``), what a
statement-level builtin call evaluated to, a pointer (``A.access_ptr(...)``).  Both the
evaluator and the TVM builtins (:mod:`.tvm_calls`) use them.

Example::

    >>> to_expr(3, "float32")
    T.float32(3)
    >>> is_builtin(Builtin("block"), "block"), is_py_scalar(2.0)
    (True, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import dtype as D
from ..errors import CuvilError
from ..expr import Broadcast, Expr, StringImm, as_expr, const
from ..stmt import BufferRegion


@dataclass(frozen=True)
class Builtin:
    """A ``T.<name>`` function that only the parser gives a meaning to."""

    name: str


@dataclass
class Spec:
    """What a statement-level builtin call evaluated to: ``kind`` and its arguments."""

    kind: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)


def is_builtin(v, name: str) -> bool:
    """True when ``v`` is the marker of ``T.<name>``."""
    return isinstance(v, Builtin) and v.name == name


@dataclass(frozen=True)
class Pointer:
    """What ``A.access_ptr(...)`` evaluates to: ``call`` (the ``access_ptr`` op) and,
    when the elements form a box of the buffer, ``region`` (how a ``T.call_extern``
    argument passes memory in Cuvil)."""

    call: Expr
    region: BufferRegion | None

    def as_argument(self):
        """The value a call receiving memory gets: the region when there is one."""
        return self.region if self.region is not None else self.call


def is_py_scalar(v) -> bool:
    """True for Python (not IR) numbers and bools."""
    return isinstance(v, (bool, int, float)) and not isinstance(v, Expr)


def to_expr(v, like: str | None = None) -> Expr:
    """An IR expression from a parser value (a literal takes the dtype ``like``)."""
    if isinstance(v, Expr):
        return v
    if isinstance(v, Pointer):
        return v.call
    if isinstance(v, str):
        return StringImm(v)
    if isinstance(v, Spec) and v.kind in ("var", "size_var"):
        raise CuvilError("bind T.var/T.size_var to a name first, e.g. n = T.size_var('n')")
    if is_py_scalar(v) and like is not None and D.lanes(like) > 1:
        return Broadcast(as_expr(v, D.element(like)), D.lanes(like))
    if is_py_scalar(v) and like is not None and D.is_bool(like) and not isinstance(v, bool):
        return const(v)
    return as_expr(v, like)


def unify(a, b) -> tuple[Expr, Expr]:
    """Two operands as expressions; a literal takes the other side's dtype."""
    if isinstance(a, Expr) and not isinstance(b, Expr):
        return a, to_expr(b, a.dtype)
    if isinstance(b, Expr) and not isinstance(a, Expr):
        return to_expr(a, b.dtype), b
    return to_expr(a), to_expr(b)


#: TVMScript's expression-node constructors the text form reads (``T.Add(x, 0)``)
NODE_CONSTRUCTORS = ("Add", "Sub", "Mul", "FloorDiv", "FloorMod", "EQ", "NE", "LT", "LE",
                     "GT", "GE", "And", "Or")
