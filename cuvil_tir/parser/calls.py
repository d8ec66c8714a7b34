"""The ``T.<name>(...)`` calls of the text form that build expressions or specs.

A :class:`~.evaluate.Builtin` ``T.<name>`` evaluates by calling ``b_<name>`` of the
builder (this mixin): ``T.Cast``, ``T.Select``, ``T.if_then_else``, ``T.min`` ...,
the intrinsics (``T.exp(x)``), and the specs a statement turns into IR
(``T.Buffer(...)``, ``T.evaluate(...)``).

Example::

    >>> import cuvil_tir as T
    >>> f = T.parse("def f(A: T.Buffer((4,), 'float32')):\\n"
    ...             "    A[0] = T.max(A[1], T.exp(A[2]))\\n")
    >>> str(f.body.value)
    'T.max(A[1], T.exp(A[2]))'
"""

from __future__ import annotations

from .. import dtype as D
from .. import ops
from ..errors import CuvilError
from .. import expr as E
from ..expr import (Broadcast, Call, Cast, Div, Expr, FloorDiv, FloorMod, Max, Min, Mod,
                    Ramp, Select)
from ..printer import INTRIN_ARITY
from .values import NODE_CONSTRUCTORS, Spec, to_expr, unify
from ..ops.qmul import q_multiply_shift, q_multiply_shift_per_axis
from ..ops.bitwise import make


class BuiltinCalls:
    """The builder's ``b_<name>`` methods (see the module docstring)."""

    # ``extra`` holds TVMScript's buffer keywords (elem_offset, offset_factor, data ...):
    # the builder checks them (see .tvmscript)
    def b_Buffer(self, shape=None, dtype="float32", *, strides=(), scope="global", align=64,
                 name=None, **extra):
        return Spec("Buffer", (shape, dtype), dict(strides=strides, scope=scope,
                                                   align=align, name=name, **extra))

    def b_alloc_buffer(self, shape, dtype="float32", *, strides=(), scope="global",
                       align=64, **extra):
        return Spec("alloc_buffer", (shape, dtype), dict(strides=strides, scope=scope,
                                                         align=align, **extra))

    def b_allocate(self, shape, dtype="float32", scope="global", *, strides=(), align=64,
                   **extra):
        return Spec("allocate", (shape, dtype), dict(strides=strides, scope=scope,
                                                     align=align, **extra))

    def b_var(self, name=None, dtype="int32"):
        return Spec("var", (name, dtype))

    def b_size_var(self, name=None, dtype="int32"):
        return Spec("size_var", (name, dtype))

    def b_Cast(self, dtype, value):
        return Cast(D.canonical(dtype), to_expr(value))

    def b_Select(self, cond, a, b):
        return Select(to_expr(cond, "bool"), *unify(a, b))

    def b_if_then_else(self, cond, a, b, dtype=None):
        if dtype is not None:      # TVMScript spells the result dtype out
            dtype = D.canonical(dtype)
            a, b = to_expr(a, dtype), to_expr(b, dtype)
            if a.dtype != dtype or b.dtype != dtype:
                raise CuvilError(f"T.if_then_else(..., dtype={dtype!r}): the branches have "
                                 f"dtypes {a.dtype} and {b.dtype}; cast them to {dtype}")
        a, b = unify(a, b)
        return Call(a.dtype, "if_then_else", (to_expr(cond, "bool"), a, b))

    def b_likely(self, cond, dtype="bool"):
        # a branch-prediction hint in TVM; the condition itself is what counts
        return to_expr(cond, "bool")

    def b_Ramp(self, base, stride, lanes):
        base, stride = unify(base, stride)
        return Ramp(base, stride, int(lanes))

    def b_Broadcast(self, value, lanes):
        return Broadcast(to_expr(value), int(lanes))

    def b_min(self, a, b):
        return Min(*unify(a, b))

    def b_max(self, a, b):
        return Max(*unify(a, b))

    def b_truncdiv(self, a, b):
        return Div(*unify(a, b))

    def b_truncmod(self, a, b):
        return Mod(*unify(a, b))

    def b_floordiv(self, a, b):
        return FloorDiv(*unify(a, b))

    def b_floormod(self, a, b):
        return FloorMod(*unify(a, b))

    def b_call_intrin(self, dtype, op, *args):
        return Call(D.canonical(dtype), str(op), tuple(to_expr(a) for a in args))

    def b_evaluate(self, value):
        return Spec("evaluate", (to_expr(value),))

    def b_assert_(self, condition, message, *values, kind="assert"):
        if not isinstance(message, str):
            raise CuvilError(f"T.assert_: expected a message string after the condition, "
                             f"found {message!r}")
        return Spec("assert", (to_expr(condition), message,
                               tuple(to_expr(v, "int32") for v in values), kind))

    def b_q_multiply_shift(self, x, y, q, s, dtype="int32"):
        return q_multiply_shift(x, y, q, s, dtype)

    def b_q_multiply_shift_per_axis(self, x, y, ls, rs, q, lshift, rshift, dtype="int32"):
        return q_multiply_shift_per_axis(x, y, ls, rs, q, lshift, rshift, dtype)

    def bitwise(self, op: str, args, dtype=None) -> Call:
        call = make(op, *(to_expr(a) if isinstance(a, (Expr, bool)) else a for a in args))
        if dtype is not None and D.canonical(dtype) != call.dtype:
            raise CuvilError(f"T.{op}(..., dtype={dtype!r}): the operands are "
                             f"{call.dtype}; cast them first")
        return call

    def b_bitwise_and(self, *args, dtype=None):
        return self.bitwise("bitwise_and", args, dtype)

    def b_bitwise_or(self, *args, dtype=None):
        return self.bitwise("bitwise_or", args, dtype)

    def b_bitwise_xor(self, *args, dtype=None):
        return self.bitwise("bitwise_xor", args, dtype)

    def b_bitwise_not(self, *args, dtype=None):
        return self.bitwise("bitwise_not", args, dtype)

    def b_shift_left(self, *args, dtype=None):
        return self.bitwise("shift_left", args, dtype)

    def b_shift_right(self, *args, dtype=None):
        return self.bitwise("shift_right", args, dtype)

    def intrinsic(self, op: str, args, dtype=None) -> Call:
        n = INTRIN_ARITY[op]
        if len(args) != n:
            raise CuvilError(f"T.{op} expects {n} argument(s), found {len(args)}")
        ref = next((a for a in args if isinstance(a, Expr)), None)
        vals = [to_expr(a, None if ref is None else ref.dtype) for a in args]
        if ops.get_op(op).operands == "float" and not D.is_float(vals[0].dtype):
            raise CuvilError(f"T.{op} expects float operands, found {vals[0].dtype}; cast "
                             f"first, e.g. T.{op}(T.Cast('float32', x))")
        if dtype is not None and D.canonical(dtype) != vals[0].dtype:
            raise CuvilError(f"T.{op}(..., dtype={dtype!r}): the operand is "
                             f"{vals[0].dtype}; cast it first")
        return Call(vals[0].dtype, op, tuple(vals))

    def node(self, name: str, args) -> Expr:
        """TVMScript's node constructors (``T.Add(a, b)``, ``T.Mul(0, 128)``): the node
        itself, unfolded, its literal operands typed by the other side (``int32``
        when both are literals)."""
        if len(args) != 2:
            raise CuvilError(f"T.{name} expects 2 operands, found {len(args)}")
        a, b = unify(*args)
        if a.dtype != b.dtype:
            raise CuvilError(f"T.{name}: operands must have one dtype, found {a.dtype} "
                             f"and {b.dtype}; cast one side")
        return getattr(E, name)(a, b)

    def __getattr__(self, name: str):
        # T.exp(x), T.sqrt(x) ... share one builder
        if name.startswith("b_") and name[2:] in INTRIN_ARITY and \
                not ops.get_op(name[2:]).conditional:
            op = name[2:]
            return lambda *args, dtype=None: self.intrinsic(op, args, dtype)
        if name.startswith("b_") and name[2:] in NODE_CONSTRUCTORS:
            return lambda *args: self.node(name[2:], args)
        raise AttributeError(name)



__all__ = ["BuiltinCalls"]
