"""Expression nodes and the Python operators that build them.

Every expression has a ``dtype``.  Operators promote dtypes by the rule documented in
:mod:`cuvil_tir.dtype`; Python ``//`` and ``%`` are *floor* division and modulo (as in
TVM), ``/`` is true division and only defined for floats, comparisons build boolean
expressions, and ``&``, ``|``, ``~`` combine booleans.

Example::

    >>> import cuvil_tir as T
    >>> i = T.var("i")
    >>> e = (i * 4 + 1) // 2
    >>> e.dtype
    'int32'
"""

from __future__ import annotations

from typing import Any

from . import dtype as D
from .errors import DTypeError
from .node import Node, node, same


class Expr(Node):
    """Base of all expressions; carries operator overloading.

    Example::

        >>> import cuvil_tir as T
        >>> (T.var("x", "float32") * 2.0).dtype
        'float32'
    """

    #: the dtype of a node whose dtype is derived from an operand, computed once at
    #: construction (a chain of n additions then costs n steps to build, not n**2/2,
    #: and reading it never recurses down the chain); not a field
    __slots__ = ("_dt",)

    def _cache_dtype(self, dtype: str) -> None:
        object.__setattr__(self, "_dt", dtype)

    # arithmetic -----------------------------------------------------------------
    def __add__(self, o): return binary(Add, self, o)
    def __radd__(self, o): return binary(Add, o, self)
    def __sub__(self, o): return binary(Sub, self, o)
    def __rsub__(self, o): return binary(Sub, o, self)
    def __mul__(self, o): return binary(Mul, self, o)
    def __rmul__(self, o): return binary(Mul, o, self)
    def __truediv__(self, o): return binary(Div, self, o)
    def __rtruediv__(self, o): return binary(Div, o, self)
    def __floordiv__(self, o): return binary(FloorDiv, self, o)
    def __rfloordiv__(self, o): return binary(FloorDiv, o, self)
    def __mod__(self, o): return binary(FloorMod, self, o)
    def __rmod__(self, o): return binary(FloorMod, o, self)

    def __neg__(self):
        if isinstance(self, IntImm):
            return IntImm(-self.value, self.dtype)
        if isinstance(self, FloatImm):
            return FloatImm(-self.value, self.dtype)
        if D.is_uint(self.dtype) or D.is_bool(self.dtype):
            raise DTypeError(f"cannot negate an expression of dtype {self.dtype}")
        return Sub(zero_like(self), self)

    # comparisons ------------------------------------------------------------------
    def __lt__(self, o): return binary(LT, self, o)
    def __le__(self, o): return binary(LE, self, o)
    def __gt__(self, o): return binary(GT, self, o)
    def __ge__(self, o): return binary(GE, self, o)

    def __eq__(self, o):
        try:
            return binary(EQ, self, o)
        except DTypeError:
            return False

    def __ne__(self, o):
        try:
            return binary(NE, self, o)
        except DTypeError:
            return True

    __hash__ = Node.__hash__

    # logic on bools, bitwise ops on integers (as TVM's operators) -----------------------
    def __and__(self, o): return _and_or(And, "bitwise_and", self, o)
    def __rand__(self, o): return _and_or(And, "bitwise_and", o, self)
    def __or__(self, o): return _and_or(Or, "bitwise_or", self, o)
    def __ror__(self, o): return _and_or(Or, "bitwise_or", o, self)
    def __xor__(self, o): return bitwise("bitwise_xor", self, o)
    def __rxor__(self, o): return bitwise("bitwise_xor", o, self)
    def __lshift__(self, o): return bitwise("shift_left", self, o)
    def __rlshift__(self, o): return bitwise("shift_left", o, self)
    def __rshift__(self, o): return bitwise("shift_right", self, o)
    def __rrshift__(self, o): return bitwise("shift_right", o, self)

    def __invert__(self):
        a = as_expr(self)
        if D.is_integer(a.dtype) and not D.is_bool(a.dtype):
            return bitwise("bitwise_not", a)
        if not D.is_bool(a.dtype):
            raise DTypeError(f"'~' expects a bool or integer expression, found {a.dtype}; "
                             "compare first, e.g. ~(x > 0)")
        return Not(a)

    def __bool__(self):
        raise DTypeError(f"a symbolic expression ({self}) has no Python truth value; "
                         "use T.if_then_else / T.select for conditional values, and "
                         "&, |, ~ (or T.all/T.any) instead of and/or/not")

    def astype(self, dtype: str) -> "Expr":
        """Convert to ``dtype`` (same as ``T.cast(self, dtype)``).

        Example::

            >>> import cuvil_tir as T
            >>> T.var("i").astype("float32").dtype
            'float32'
        """
        return cast(self, dtype)

    @property
    def lanes(self) -> int:
        """Vector lanes of this expression's dtype."""
        return D.lanes(self.dtype)


# leaves -------------------------------------------------------------------------------

@node
class Var(Expr):
    """A scalar variable; compares by identity.

    Example::

        >>> Var("i").dtype
        'int32'
    """

    name: str
    dtype: str = "int32"
    by_identity = True

    def __post_init__(self):
        object.__setattr__(self, "dtype", D.canonical(self.dtype))

    __hash__ = Node.__hash__


@node
class SizeVar(Var):
    """A variable known to be non-negative (a symbolic size).

    Example::

        >>> SizeVar("n").dtype
        'int32'
    """

    __hash__ = Node.__hash__


#: the scalar integer and bool dtypes an IntImm was made of -> their (lo, hi)
_INT_RANGE: dict[str, tuple[int, int]] = {}


@node
class IntImm(Expr):
    """An integer (or bool) constant; the value is wrapped into the dtype's range.

    Example::

        >>> IntImm(300, "uint8").value
        44
    """

    value: int
    dtype: str = "int32"

    def __post_init__(self):
        dt = self.dtype
        # the checks of a dtype string are done once: the lowering passes make
        # thousands of constants of the same few dtypes per function
        span = _INT_RANGE.get(dt) if type(dt) is str else None
        if span is None:
            dt = D.canonical(dt)
            if not (D.is_integer(dt) or D.is_bool(dt)) or D.lanes(dt) != 1:
                raise DTypeError(f"IntImm: expected a scalar integer or bool dtype, "
                                 f"found {dt}")
            object.__setattr__(self, "dtype", dt)
            span = _INT_RANGE[dt] = D.int_range(dt)
        value = int(self.value)
        if not span[0] <= value <= span[1]:
            value = D.wrap_int(value, dt)
        object.__setattr__(self, "value", value)

    def __bool__(self):
        return self.value != 0

    def __int__(self):
        return self.value

    def __index__(self):
        return self.value

    __hash__ = Node.__hash__


@node
class FloatImm(Expr):
    """A floating-point constant.

    Example::

        >>> FloatImm(0.5, "float16").dtype
        'float16'
    """

    value: float
    dtype: str = "float32"

    def __post_init__(self):
        dt = D.canonical(self.dtype)
        if not D.is_float(dt) or D.lanes(dt) != 1:
            raise DTypeError(f"FloatImm: expected a scalar float dtype, found {dt}")
        object.__setattr__(self, "dtype", dt)
        object.__setattr__(self, "value", float(self.value))

    def __float__(self):
        return self.value

    __hash__ = Node.__hash__


@node
class StringImm(Expr):
    """A string constant (annotation values, extern call names).

    Example::

        >>> StringImm("hi").dtype
        'handle'
    """

    value: str
    dtype: str = "handle"
    __hash__ = Node.__hash__


# conversions and arithmetic ----------------------------------------------------------

@node
class Cast(Expr):
    """Convert ``value`` to ``dtype`` (C semantics; float to int truncates).

    Example::

        >>> Cast("float32", Var("i")).dtype
        'float32'
    """

    dtype: str
    value: Expr

    def __post_init__(self):
        dt = D.canonical(self.dtype)
        object.__setattr__(self, "dtype", dt)
        if D.lanes(dt) != self.value.lanes:
            raise DTypeError(f"Cast: cannot change lanes ({self.value.dtype} -> {dt})")

    __hash__ = Node.__hash__


class BinaryOp(Expr):
    """Base of two-operand nodes; both operands have the same dtype.

    Example::

        >>> isinstance(Var("i") + 1, BinaryOp)
        True
    """

    __slots__ = ()
    symbol = "?"

    def __post_init__(self):
        if self.a.dtype != self.b.dtype:
            raise DTypeError(f"{type(self).__name__}: operands must have one dtype, "
                             f"found {self.a.dtype} and {self.b.dtype}")
        self._cache_dtype(self._result(self.a.dtype))

    @staticmethod
    def _result(operand: str) -> str:
        return operand

    @property
    def dtype(self) -> str:
        try:
            return self._dt
        except AttributeError:      # unpickled or copied: the cache is not a field
            return self._result(self.a.dtype)


def _binop(name: str, symbol: str):
    cls = type(name, (BinaryOp,), {"__annotations__": {"a": Expr, "b": Expr},
                                   "symbol": symbol, "__hash__": Node.__hash__,
                                   "__module__": __name__,
                                   "__doc__": f"``a {symbol} b``."})
    return node(cls)


Add = _binop("Add", "+")
Sub = _binop("Sub", "-")
Mul = _binop("Mul", "*")
Div = _binop("Div", "/")          # floats: true division; ints: truncating (C) division
Mod = _binop("Mod", "truncmod")   # truncating remainder (C %)
FloorDiv = _binop("FloorDiv", "//")
FloorMod = _binop("FloorMod", "%")
Min = _binop("Min", "min")
Max = _binop("Max", "max")


class CmpOp(BinaryOp):
    """Base of comparisons; the result is ``bool`` with the operands' lanes.

    Example::

        >>> (Var("i") < 4).dtype
        'bool'
    """

    __slots__ = ()

    @staticmethod
    def _result(operand: str) -> str:
        return D.with_lanes("bool", D.lanes(operand))


def _cmpop(name: str, symbol: str, bool_fn=None):
    ns = {"__annotations__": {"a": Expr, "b": Expr}, "symbol": symbol,
          "__hash__": Node.__hash__, "__module__": __name__,
          "__doc__": f"``a {symbol} b``."}
    if bool_fn is not None:
        ns["__bool__"] = bool_fn
    return node(type(name, (CmpOp,), ns))


# ``a == b`` builds EQ; its truth value is structural equality, so dict lookups and
# ``x in list`` keep working on expressions, as in TVM.
EQ = _cmpop("EQ", "==", lambda self: same(self.a, self.b))
NE = _cmpop("NE", "!=", lambda self: not same(self.a, self.b))
LT = _cmpop("LT", "<")
LE = _cmpop("LE", "<=")
GT = _cmpop("GT", ">")
GE = _cmpop("GE", ">=")


class LogicOp(BinaryOp):
    """Base of ``And``/``Or``; operands are bool.

    Example::

        >>> ((Var("i") < 4) & (Var("j") > 0)).dtype
        'bool'
    """

    __slots__ = ()

    def __post_init__(self):
        BinaryOp.__post_init__(self)
        if not D.is_bool(self.a.dtype):
            raise DTypeError(f"{type(self).__name__}: expected bool operands, found "
                             f"{self.a.dtype}")


And = node(type("And", (LogicOp,), {"__annotations__": {"a": Expr, "b": Expr},
                                    "symbol": "and", "__hash__": Node.__hash__,
                                    "__module__": __name__, "__doc__": "``a and b``."}))
Or = node(type("Or", (LogicOp,), {"__annotations__": {"a": Expr, "b": Expr},
                                  "symbol": "or", "__hash__": Node.__hash__,
                                  "__module__": __name__, "__doc__": "``a or b``."}))


@node
class Not(Expr):
    """Logical negation of a bool expression.

    Example::

        >>> Not(Var("i") < 4).dtype
        'bool'
    """

    a: Expr

    def __post_init__(self):
        if not D.is_bool(self.a.dtype):
            raise DTypeError(f"Not: expected a bool operand, found {self.a.dtype}")
        self._cache_dtype(self.a.dtype)

    @property
    def dtype(self) -> str:
        try:
            return self._dt
        except AttributeError:
            return self.a.dtype

    __hash__ = Node.__hash__


@node
class Select(Expr):
    """``true_value if condition else false_value``; both sides may be evaluated.

    Example::

        >>> Select(Var("i") < 4, IntImm(1), IntImm(0)).dtype
        'int32'
    """

    condition: Expr
    true_value: Expr
    false_value: Expr

    def __post_init__(self):
        if not D.is_bool(self.condition.dtype):
            raise DTypeError(f"Select: condition must be bool, found {self.condition.dtype}")
        if self.true_value.dtype != self.false_value.dtype:
            raise DTypeError(f"Select: branches must have one dtype, found "
                             f"{self.true_value.dtype} and {self.false_value.dtype}")
        self._cache_dtype(self.true_value.dtype)

    @property
    def dtype(self) -> str:
        try:
            return self._dt
        except AttributeError:
            return self.true_value.dtype

    __hash__ = Node.__hash__


@node
class Call(Expr):
    """A call of a named intrinsic (``"exp"``, ``"fma"``, ``"if_then_else"`` …).

    ``if_then_else`` evaluates only the taken branch.  See :mod:`cuvil_tir.op` for
    the list of intrinsics and their dtype rules.

    Example::

        >>> Call("float32", "exp", (Var("x", "float32"),)).dtype
        'float32'
    """

    dtype: str
    op: str
    args: tuple

    def __post_init__(self):
        object.__setattr__(self, "dtype", D.canonical(self.dtype))
        object.__setattr__(self, "args", tuple(self.args))

    __hash__ = Node.__hash__


@node
class BufferLoad(Expr):
    """Read ``buffer[indices]``; a ``Ramp`` last index makes a vector load.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((4,), "float32", "A")
        >>> A[Var("i")].dtype
        'float32'
    """

    buffer: Any
    indices: tuple

    def __post_init__(self):
        object.__setattr__(self, "indices", tuple(self.indices))

    @property
    def dtype(self) -> str:
        # a buffer of vector elements loads whole elements: float32x4 at a scalar
        # index is float32x4, at a 2-lane ramp float32x8
        n = max((ix.lanes for ix in self.indices), default=1)
        if n == 1:
            return self.buffer.dtype
        return D.with_lanes(self.buffer.dtype, D.lanes(self.buffer.dtype) * n)

    __hash__ = Node.__hash__


@node
class Ramp(Expr):
    """The vector ``[base, base + stride, …]`` of ``lanes`` elements.

    Example::

        >>> Ramp(IntImm(0), IntImm(1), 8).dtype
        'int32x8'
    """

    base: Expr
    stride: Expr
    lanes: int

    @property
    def dtype(self) -> str:
        return D.with_lanes(self.base.dtype, self.lanes)

    __hash__ = Node.__hash__


@node
class Broadcast(Expr):
    """A scalar repeated over ``lanes`` lanes.

    Example::

        >>> Broadcast(FloatImm(1.0), 4).dtype
        'float32x4'
    """

    value: Expr
    lanes: int

    @property
    def dtype(self) -> str:
        return D.with_lanes(self.value.dtype, self.lanes)

    __hash__ = Node.__hash__


@node
class Let(Expr):
    """Bind ``var`` to ``value`` inside ``body``.

    Example::

        >>> x = Var("x")
        >>> Let(x, IntImm(2), x * 3).dtype
        'int32'
    """

    var: Var
    value: Expr
    body: Expr

    def __post_init__(self):
        self._cache_dtype(self.body.dtype)

    @property
    def dtype(self) -> str:
        try:
            return self._dt
        except AttributeError:
            return self.body.dtype

    __hash__ = Node.__hash__


# the builders live in their own module; re-exported here, where every caller looks
from .expr_build import (_convert, _unify, as_expr, binary, bitwise, cast,  # noqa: E402,F401
                         const, logical, zero_division, zero_like)


def _and_or(cls, op, a, b):
    """``&``/``|``: logical on bool operands, bitwise on integer ones (TVM's rule)."""
    if any(isinstance(x, Expr) and D.is_integer(x.dtype) and not D.is_bool(x.dtype)
           for x in (a, b)):
        return bitwise(op, a, b)
    return logical(cls, a, b)

