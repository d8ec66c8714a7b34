"""Builders for intrinsic calls, conditionals and integer helpers.

Math intrinsics take float operands (``abs`` also integers) and keep their dtype:
``T.exp(x)`` of a float16 ``x`` is float16.  ``if_then_else`` evaluates only the
taken branch, so it may guard an out-of-bounds load; ``select`` may evaluate both.

Example::

    >>> import cuvil_tir as T
    >>> x = T.var("x", "float32")
    >>> T.exp(x).dtype, T.if_then_else(x > 0.0, x, 0.0).op
    ('float32', 'if_then_else')
"""

from __future__ import annotations

import re
import numpy as np

from . import dtype as D
from . import ops
from .errors import DTypeError
from .float8 import largest
from .ops import intdiv
from .expr import (Call, Expr, FloatImm, FloorDiv, FloorMod, IntImm, Max, Min, Mod, Div, Not,
                   Select, _unify, as_expr, binary, const, zero_division, StringImm, And, Var,
                   SizeVar)
from .stmt import BufferRegion
from .buffer import Buffer
from .ops.bitwise import make

#: unary float intrinsics (from the op registry, :mod:`cuvil_tir.ops`)
UNARY_FLOAT = tuple(n for n in ops.list_ops(operands="float") if ops.get_op(n).arity == 1)
#: the built-in intrinsic names a ``Call`` may carry (the op registry's at import)
INTRINSICS = ops.list_ops()


def _float_arg(name: str, x) -> Expr:
    x = as_expr(x)
    if not D.is_float(x.dtype):
        raise DTypeError(f"T.{name} expects a float operand, found {x.dtype}; cast it "
                         f"first, e.g. T.{name}(x.astype('float32'))")
    return x


def _unary(name: str):
    ops.get_op(name)   # a builder exists only for a registered op

    def fn(x):
        x = _float_arg(name, x)
        return Call(x.dtype, name, (x,))
    fn.__name__ = name
    fn.__doc__ = (f"Elementwise ``{name}`` of a float expression.\n\n    Example::\n\n"
                  f"        >>> import cuvil_tir as T\n"
                  f"        >>> T.{name}(T.var('x', 'float32')).op\n        '{name}'\n")
    return fn


exp = _unary("exp")
exp2 = _unary("exp2")
log = _unary("log")
log2 = _unary("log2")
log10 = _unary("log10")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
erf = _unary("erf")
floor = _unary("floor")
ceil = _unary("ceil")
round = _unary("round")  # noqa: A001 - the TVM name; rounds half to even like numpy
trunc = _unary("trunc")
sin = _unary("sin")
cos = _unary("cos")


def abs(x) -> Expr:  # noqa: A001 - the TVM name
    """Absolute value of an int or float expression (unsigned: unchanged).

    Example::

        >>> import cuvil_tir as T
        >>> T.abs(T.var("i")).dtype
        'int32'
    """
    x = as_expr(x)
    if D.is_uint(x.dtype):
        return x
    if D.is_bool(x.dtype):
        raise DTypeError("T.abs expects a number, found bool")
    return Call(x.dtype, "abs", (x,))


def pow(x, y) -> Expr:  # noqa: A001 - the TVM name
    """``x ** y`` for floats.

    Example::

        >>> import cuvil_tir as T
        >>> T.pow(T.var("x", "float32"), 2.0).dtype
        'float32'
    """
    x, y = _unify(x, y, "T.pow")
    _float_arg("pow", x)
    return Call(x.dtype, "pow", (x, y))


def fma(a, b, c) -> Expr:
    """``a * b + c`` with one rounding.

    Example::

        >>> import cuvil_tir as T
        >>> x = T.var("x", "float32")
        >>> T.fma(x, x, 1.0).op
        'fma'
    """
    a, b = _unify(a, b, "T.fma")
    a, c = _unify(a, c, "T.fma")
    b, _ = _unify(b, c, "T.fma")
    _float_arg("fma", a)
    return Call(a.dtype, "fma", (a, b, c))


def if_then_else(cond, then_value, else_value) -> Expr:
    """``then_value if cond else else_value``, evaluating only the taken branch.

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> T.if_then_else(i < 4, i, 0).dtype
        'int32'
    """
    cond = _bool(cond, "T.if_then_else")
    a, b = _unify(then_value, else_value, "T.if_then_else")
    if isinstance(cond, IntImm):
        return a if cond.value else b
    return Call(a.dtype, "if_then_else", (cond, a, b))


def call_extern(dtype, name: str, *args, effect: str = "opaque") -> Call:
    """A call of the external function ``name`` of the target, returning ``dtype``.

    Arguments may be expressions, strings (C strings), buffer regions (``A[i:i + 16, 0:16]`` in the text
    form, or a :class:`~cuvil_tir.stmt.BufferRegion`: passed as a pointer to the
    region's first element) or whole buffers (a pointer to the buffer).  ``effect`` is
    one of :data:`cuvil_tir.ops.EFFECTS`: ``"opaque"`` (the default: it may read and
    write anything it is given), ``"pure"``, ``"reads"``, ``"writes"``, ``"barrier"``;
    or ``"writes:K,L"``: it writes only its arguments at positions K, L (0-based,
    regions or buffers) and only reads the others (a copy ``dma(dst, src)`` is
    ``"writes:0"``), which lets a caller pass a read-only array for the others.
    Use it as a statement with ``T.evaluate(...)``.  Stored as
    ``Call(dtype, "call_extern", (StringImm(name), StringImm(effect), *args))``.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((4, 16), "int8", "A")
        >>> c = T.call_extern("int32", "npu_load", T.BufferRegion.full(A), 64, effect="reads")
        >>> c.args[0].value, c.args[1].value, c.dtype
        ('npu_load', 'reads', 'int32')
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise DTypeError(f"T.call_extern: the function name must be an identifier, "
                         f"found {name!r}")
    vals = call_args(f"T.call_extern({name!r})", args)
    if effect not in ops.EFFECTS:
        _written_positions(name, effect, vals)
    return Call(D.canonical(dtype), "call_extern", (StringImm(name), StringImm(effect),
                                                     *vals))


def _written_positions(name: str, effect: str, args) -> set:
    """The argument positions of effect ``"writes:K,L"``, each naming a region."""
    m = re.fullmatch(r"writes:(\d+(?:,\d+)*)", effect) if isinstance(effect, str) else None
    if m is None:
        raise DTypeError(f"T.call_extern({name!r}): effect must be one of "
                         f"{', '.join(ops.EFFECTS)} or 'writes:K,L' (the positions of "
                         f"the arguments it writes), found {effect!r}")
    pos = {int(k) for k in m.group(1).split(",")}
    for k in sorted(pos):
        if k >= len(args) or not isinstance(args[k], BufferRegion):
            raise DTypeError(f"T.call_extern({name!r}): effect {effect!r} says argument "
                             f"{k} is written, but it is not a buffer or region (the "
                             f"call has {len(args)} arguments)")
    return pos


def extern_writes(call):
    """The arguments a ``T.call_extern`` may write, by position among its arguments:
    ``None`` for every memory argument (``"opaque"``, ``"writes"``, ``"barrier"``), an
    empty set for ``"pure"``/``"reads"``, the listed ones for ``"writes:K,L"``.

    Example::

        >>> import cuvil_tir as T
        >>> A, B = T.decl_buffer((4,), "int8", "A"), T.decl_buffer((4,), "int8", "B")
        >>> sorted(extern_writes(T.call_extern("int32", "dma", A, B, effect="writes:0")))
        [0]
        >>> extern_writes(T.call_extern("int32", "f", A)) is None
        True
    """
    effect = call.args[1].value
    if effect in ("pure", "reads"):
        return set()
    if effect in ops.EFFECTS:
        return None
    return _written_positions(call.args[0].value, effect, call.args[2:])


def call_args(who: str, args) -> list:
    """Arguments of a call on memory (``T.call_extern``, ``T.parallel_launch``): whole
    buffers become their full region, regions and expressions stay, numbers become
    constants; anything else is a ``DTypeError`` naming ``who``.

    Example::

        >>> import cuvil_tir as T
        >>> [type(a).__name__ for a in call_args("f", [T.decl_buffer((2,), "int8", "A"), 3])]
        ['BufferRegion', 'IntImm']
    """
    vals = []
    for k, a in enumerate(args):
        if isinstance(a, Buffer):
            a = BufferRegion.full(a)
        if isinstance(a, str):
            a = StringImm(a)          # a name the callee takes ("row_major")
        if not isinstance(a, (BufferRegion, Expr)):
            try:
                a = as_expr(a)
            except (TypeError, ValueError, DTypeError):
                raise DTypeError(f"{who}: argument {k} must be an expression, a buffer "
                                 f"region or a buffer, found {type(a).__name__}") from None
        vals.append(a)
    return vals


def select(cond, then_value, else_value) -> Expr:
    """``then_value if cond else else_value``; both sides may be evaluated.

    Example::

        >>> import cuvil_tir as T
        >>> x = T.var("x", "float32")
        >>> type(T.select(x > 0.0, x, 0.0)).__name__
        'Select'
    """
    cond = _bool(cond, "T.select")
    a, b = _unify(then_value, else_value, "T.select")
    if isinstance(cond, IntImm):
        return a if cond.value else b
    return Select(cond, a, b)


def _bool(c, where: str) -> Expr:
    c = as_expr(c, "bool") if isinstance(c, bool) else as_expr(c)
    if not D.is_bool(c.dtype):
        raise DTypeError(f"{where}: the condition must be bool, found {c.dtype}; "
                         "compare first, e.g. x != 0")
    return c


def all(*conds) -> Expr:  # noqa: A001 - the TVM name
    """Logical and of any number of conditions (``True`` when none).

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> T.all(i > 0, i < 4).dtype
        'bool'
    """
    if len(conds) == 1 and isinstance(conds[0], (list, tuple)):
        conds = tuple(conds[0])
    out: Expr = const(True)
    for c in conds:
        c = _bool(c, "T.all")
        out = c if isinstance(out, IntImm) and out.value else (out & c)
    return out


def conjuncts(cond) -> list:
    """The ``And``-separated parts of a condition, the inverse of :func:`all`
    (``[]`` for constant true).

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> [str(c) for c in conjuncts(T.all(i > 0, i < 4))]
        ['i > 0', 'i < 4']
    """
    if isinstance(cond, IntImm) and cond.value:
        return []
    if isinstance(cond, And):
        return conjuncts(cond.a) + conjuncts(cond.b)
    return [cond]


def bitwise_and(x, y) -> Expr:
    """``x & y`` on integers (see :mod:`cuvil_tir.ops.bitwise`).

    Example::

        >>> import cuvil_tir as T
        >>> str(T.bitwise_and(T.var("x"), 15))
        'T.bitwise_and(x, 15)'
    """
    return make("bitwise_and", x, y)


def bitwise_or(x, y) -> Expr:
    """``x | y`` on integers (see :mod:`cuvil_tir.ops.bitwise`).

    Example::

        >>> import cuvil_tir as T
        >>> T.bitwise_or(T.var("u", "uint8"), 1).dtype
        'uint8'
    """
    return make("bitwise_or", x, y)


def bitwise_xor(x, y) -> Expr:
    """``x ^ y`` on integers (see :mod:`cuvil_tir.ops.bitwise`).

    Example::

        >>> import cuvil_tir as T
        >>> T.bitwise_xor(T.var("x"), T.var("y")).op
        'bitwise_xor'
    """
    return make("bitwise_xor", x, y)


def bitwise_not(x) -> Expr:
    """``~x`` on integers (see :mod:`cuvil_tir.ops.bitwise`).

    Example::

        >>> import cuvil_tir as T
        >>> str(T.bitwise_not(T.var("x")))
        'T.bitwise_not(x)'
    """
    return make("bitwise_not", x)


def shift_left(x, y) -> Expr:
    """``x << y`` on integers, wrapping; an amount outside ``[0, bits)`` gives 0 (see
    :mod:`cuvil_tir.ops.bitwise`).

    Example::

        >>> import cuvil_tir as T
        >>> str(T.shift_left(T.var("x"), 4))
        'T.shift_left(x, 4)'
    """
    return make("shift_left", x, y)


def shift_right(x, y) -> Expr:
    """``x >> y`` on integers: arithmetic for signed dtypes, logical for unsigned ones
    (see :mod:`cuvil_tir.ops.bitwise`).

    Example::

        >>> import cuvil_tir as T
        >>> T.shift_right(T.var("w", "int8"), 4).dtype
        'int8'
    """
    return make("shift_right", x, y)


def any(*conds) -> Expr:  # noqa: A001 - the TVM name
    """Logical or of any number of conditions (``False`` when none).

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> T.any(i < 0, i >= 4).dtype
        'bool'
    """
    if len(conds) == 1 and isinstance(conds[0], (list, tuple)):
        conds = tuple(conds[0])
    out: Expr = const(False)
    for c in conds:
        c = _bool(c, "T.any")
        out = c if isinstance(out, IntImm) and not out.value else (out | c)
    return out


def logical_not(c) -> Expr:
    """``not c``.

    Example::

        >>> import cuvil_tir as T
        >>> T.logical_not(T.var("i") < 2).dtype
        'bool'
    """
    c = _bool(c, "T.logical_not")
    if isinstance(c, IntImm):
        return const(not c.value)
    return Not(c)


def floordiv(a, b) -> Expr:
    """Floor division (rounds toward negative infinity), like Python ``//``.

    Example::

        >>> floordiv(-7, 2).value
        -4
    """
    return binary(FloorDiv, a, b)


def floormod(a, b) -> Expr:
    """Floor modulo (sign of the divisor), like Python ``%``.

    Example::

        >>> floormod(-7, 2).value
        1
    """
    return binary(FloorMod, a, b)


def truncdiv(a, b) -> Expr:
    """Truncating integer division (rounds toward zero), like C ``/``.

    Example::

        >>> truncdiv(-7, 2).value
        -3
    """
    a, b = _unify(a, b, "T.truncdiv")
    if not D.is_integer(a.dtype):
        raise DTypeError(f"T.truncdiv expects integers, found {a.dtype}")
    if isinstance(b, IntImm) and b.value == 0:
        zero_division(f"T.truncdiv({a}, {b})")
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return IntImm(intdiv.truncdiv(a.value, b.value), a.dtype)
    return Div(a, b)


def truncmod(a, b) -> Expr:
    """Truncating remainder (sign of the dividend), like C ``%``.

    Example::

        >>> truncmod(-7, 2).value
        -1
    """
    a, b = _unify(a, b, "T.truncmod")
    if not D.is_integer(a.dtype):
        raise DTypeError(f"T.truncmod expects integers, found {a.dtype}")
    if isinstance(b, IntImm) and b.value == 0:
        zero_division(f"T.truncmod({a}, {b})")
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return IntImm(intdiv.truncmod(a.value, b.value), a.dtype)
    return Mod(a, b)


def minimum(a, b) -> Expr:
    """Elementwise minimum (``T.min(a, b)`` without ``axis``).

    Example::

        >>> minimum(3, 5).value
        3
    """
    return binary(Min, a, b)


def maximum(a, b) -> Expr:
    """Elementwise maximum (``T.max(a, b)`` without ``axis``).

    Example::

        >>> maximum(3, 5).value
        5
    """
    return binary(Max, a, b)


def min_value(dtype: str) -> Expr:
    """The lowest finite value of ``dtype`` (``-inf`` is not used for floats).

    Example::

        >>> min_value("int8").value
        -128
    """
    dtype = D.canonical(dtype)
    if D.is_float(dtype):
        return FloatImm(_float_limits(dtype)[0], dtype)
    return IntImm(D.int_range(dtype)[0], dtype)


def max_value(dtype: str) -> Expr:
    """The highest finite value of ``dtype``.

    Example::

        >>> max_value("uint8").value
        255
    """
    dtype = D.canonical(dtype)
    if D.is_float(dtype):
        return FloatImm(_float_limits(dtype)[1], dtype)
    return IntImm(D.int_range(dtype)[1], dtype)


def _float_limits(dtype: str) -> tuple[float, float]:
    if dtype == "bfloat16":
        hi = float(np.float32(3.3895313892515355e38))
        return -hi, hi
    if D.is_float8(dtype):
        return -largest(dtype), largest(dtype)
    fi = np.finfo(np.dtype(dtype))
    return float(fi.min), float(fi.max)


def infinity(dtype: str) -> Expr:
    """``+inf`` of a float dtype.

    Example::

        >>> infinity("float32").value
        inf
    """
    return FloatImm(float("inf"), D.canonical(dtype))


def var(name: str = "v", dtype: str = "int32"):
    """A scalar variable.

    Example::

        >>> var("n", "int64").dtype
        'int64'
    """
    return Var(name, dtype)


def size_var(name: str = "n", dtype: str = "int32"):
    """A non-negative symbolic size.

    Example::

        >>> type(size_var("n")).__name__
        'SizeVar'
    """
    return SizeVar(name, dtype)


__all__ = [n for n in dir() if not n.startswith("_") and n not in ("annotations", "math", "D", "ops",
                                                                  "intdiv")]
