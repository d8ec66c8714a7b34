"""Integer division and modulo: the one definition every layer uses.

Cuvil's run-time semantics (numpy's convention, on every target): division or modulo by
zero gives 0 and never traps; ``Div``/``Mod`` truncate toward zero (C's ``/`` and
``%``); ``FloorDiv``/``FloorMod`` round toward negative infinity (Python's ``//`` and
``%``).  The functions compute on Python integers exactly: callers wrap the result to
the dtype (so ``INT_MIN // -1`` wraps to ``INT_MIN``).  Constant folding
(:mod:`cuvil_tir.arith.fold`, the expression builders), the interpreter and the
compile-time checks read :data:`INT_DIVISIONS`; the code generators emit the same
semantics (``targets.llvm.intrinsics.int_divmod``, ``targets.cstyle.helpers``), and
``tests/cuvil_tir/test_ops.py`` checks that they agree.  (A divisor that is the
*constant* zero is refused earlier, by the builders, with ``DivisionByZeroError``.)

Example::

    >>> truncdiv(-7, 2), truncmod(-7, 2), floordiv(-7, 2), floormod(-7, 2)
    (-3, -1, -4, 1)
    >>> floordiv(5, 0), floormod(5, 0)
    (0, 0)
"""

from __future__ import annotations


def truncdiv(x: int, y: int) -> int:
    """``x / y`` rounded toward zero; 0 when ``y`` is 0.

    Example::

        >>> truncdiv(7, -2)
        -3
    """
    if y == 0:
        return 0
    # integer arithmetic: int(x / y) goes through float and is wrong beyond 2**53
    q = (x if x >= 0 else -x) // (y if y >= 0 else -y)
    return -q if (x < 0) != (y < 0) else q


def truncmod(x: int, y: int) -> int:
    """The remainder of :func:`truncdiv` (sign of ``x``); 0 when ``y`` is 0.

    Example::

        >>> truncmod(7, -2)
        1
    """
    return 0 if y == 0 else x - y * truncdiv(x, y)


def floordiv(x: int, y: int) -> int:
    """``x // y`` (toward negative infinity); 0 when ``y`` is 0.

    Example::

        >>> floordiv(7, -2)
        -4
    """
    return 0 if y == 0 else x // y


def floormod(x: int, y: int) -> int:
    """``x % y`` (sign of ``y``); 0 when ``y`` is 0.

    Example::

        >>> floormod(7, -2)
        -1
    """
    return 0 if y == 0 else x % y


#: the IR node name of each integer division -> its exact function
INT_DIVISIONS = {"Div": truncdiv, "Mod": truncmod, "FloorDiv": floordiv,
                 "FloorMod": floormod}
