"""Bitwise integer ops, with TVM's names: ``bitwise_and``, ``bitwise_or``,
``bitwise_xor``, ``bitwise_not``, ``shift_left``, ``shift_right``.

The operands are integers of one dtype (a Python int takes the other operand's dtype);
the result has that dtype.  On every backend:

* ``and``/``or``/``xor``/``not`` act on the two's complement bit pattern;
* ``shift_left(x, y)`` is ``x * 2**y`` wrapped to the dtype; ``shift_right(x, y)`` is
  arithmetic (the sign fills in) for a signed dtype and logical for an unsigned one;
* a shift amount outside ``[0, bits)``, negative included, leaves what shifting one bit
  at a time would: ``0``, or ``-1`` for an arithmetic right shift of a negative ``x``.
  C and LLVM leave such shifts undefined, so the generated code checks the amount
  unless it is a constant in range (the common case: ``T.shift_right(w, 4)``).

Example::

    >>> import cuvil_tir as T
    >>> x = T.var("x")
    >>> e = make("shift_right", make("bitwise_and", x, 0xF0), 4)
    >>> str(e), e.dtype
    ('T.shift_right(T.bitwise_and(x, 240), 4)', 'int32')
    >>> scalar("shift_right", "int8")(-128, 9)
    -1
"""

from __future__ import annotations

from .. import dtype as D
from . import OpDef, register_op
from ..expr_build import BITWISE
from ..expr_build import bitwise as make

SHIFTS = ("shift_left", "shift_right")


def _wrap(v: int, dt: str) -> int:
    return D.wrap_int(v, dt)


def shifted_out(op: str, x: int, dt: str) -> int:
    """What a shift by an amount outside ``[0, bits)`` leaves of ``x``.

    Example::

        >>> shifted_out("shift_right", -5, "int32"), shifted_out("shift_left", -5, "int32")
        (-1, 0)
    """
    return -1 if op in _FILLS_SIGN and D.is_int(dt) and x < 0 else 0


def _logic(fn):
    def ref(dt):
        e = D.element(dt)
        return lambda a, b: _wrap(fn(int(a), int(b)), e)
    return ref


def _not(dt):
    e = D.element(dt)
    return lambda a: _wrap(~int(a), e)


def _shift(op, step):
    # step: the shift of an amount in range (a << b wraps; a >> b on the signed or
    # unsigned value is exact)
    def ref(dt):
        e = D.element(dt)
        bits = D.bits(e)

        def shift(a, b):
            a, b = int(a), int(b)
            if not 0 <= b < bits:
                return shifted_out(op, a, e)
            return step(a, b, e)
        return shift
    return ref


_FILLS_SIGN = ("shift_right",)
#: each op's reference semantics: ``_REFERENCE[op](dtype)`` is the op on Python ints
_REFERENCE = {
    "bitwise_and": _logic(lambda a, b: a & b),
    "bitwise_or": _logic(lambda a, b: a | b),
    "bitwise_xor": _logic(lambda a, b: a ^ b),
    "bitwise_not": _not,
    "shift_left": _shift("shift_left", lambda a, b, e: _wrap(a << b, e)),
    "shift_right": _shift("shift_right", lambda a, b, e: a >> b),
}


def scalar(op: str, dt: str):
    """The op on Python ints of (element) dtype ``dt``: the reference semantics, used by
    the interpreter and constant folding.

    Example::

        >>> scalar("shift_left", "int8")(1, 7), scalar("bitwise_not", "uint8")(0)
        (-128, 255)
    """
    return _REFERENCE[op](dt)


for _name, _arity in BITWISE.items():
    register_op(OpDef(_name, _arity, "any", int_reference=_REFERENCE[_name],
                      doc=f"TVM's {_name} on integers (see cuvil_tir.ops.bitwise)"))

__all__ = ["BITWISE", "SHIFTS", "make", "scalar", "shifted_out"]
