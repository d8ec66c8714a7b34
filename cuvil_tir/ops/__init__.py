"""The op registry: every intrinsic a ``Call`` may name, described once.

An :class:`OpDef` says, for one op, everything the rest of Cuvil needs to know:

* ``arity`` and ``operands`` (the dtype rule: ``"float"`` operands of one float dtype,
  result of that dtype; ``"number"``: int or float; ``"select"``: a bool condition then
  two values of one dtype; ``"any"``: unchecked, the caller gives the dtype);
* ``effect``: ``"pure"`` (may be folded, hoisted, duplicated), ``"reads"`` /
  ``"writes"`` (touches memory through its arguments), ``"barrier"`` (orders memory
  between threads; never moved), ``"opaque"`` (unknown: treated as reading and writing);
* ``reference``: a factory ``reference(t)`` returning the scalar function for numpy
  scalar type ``t`` (float32, float64 …): the semantics, used by constant folding and by
  the interpreter;
* the backends' spellings: ``llvm`` (an LLVM intrinsic, ``llvm.<name>.<type>``),
  ``libm`` (a C math library function, ``f``-suffixed for float32), ``c`` (a C
  template over ``{0}``, ``{1}`` … and ``{f}``, the float32 suffix), and ``expand``
  (the op in terms of other expressions, for a backend without a spelling).

The integer division and modulo semantics used by every layer are in
:mod:`cuvil_tir.ops.intdiv`.  New ops (a target's intrinsics) register with
:func:`register_op`.

Example::

    >>> from cuvil_tir import ops
    >>> ops.get_op("exp").arity, ops.get_op("exp").libm, ops.get_op("exp").effect
    (1, 'exp', 'pure')
    >>> "tanh" in ops.list_ops(operands="float")
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import CuvilError

#: the effects an op may have, from least to most constraining
EFFECTS = ("pure", "reads", "writes", "barrier", "opaque")
#: the dtype rules an op's operands follow
OPERAND_RULES = ("float", "number", "select", "any")


@dataclass(frozen=True)
class OpDef:
    """One op: its arity, dtype rule, effect, reference semantics and spellings.

    Example::

        >>> OpDef("twice", 1, "float", c="(2 * {0})").c.format("x", f="f")
        '(2 * x)'
    """

    name: str
    arity: int              # -1: any number of arguments
    operands: str = "float"
    effect: str = "pure"
    reference: Callable | None = None
    llvm: str | None = None
    libm: str | None = None
    c: str | None = None
    expand: Callable | None = None
    doc: str = ""

    def __post_init__(self):
        if self.effect not in EFFECTS:
            raise CuvilError(f"op {self.name!r}: effect must be one of {EFFECTS}, "
                             f"found {self.effect!r}")
        if self.operands not in OPERAND_RULES:
            raise CuvilError(f"op {self.name!r}: operands must be one of "
                             f"{OPERAND_RULES}, found {self.operands!r}")

    @property
    def pure(self) -> bool:
        """True when the op neither touches memory nor orders anything."""
        return self.effect == "pure"

    def c_spelling(self, args: list, element: str) -> str:
        """The C text of this op on the printed ``args`` for element dtype ``element``.

        Example::

            >>> get_op("sqrt").c_spelling(["x"], "float32")
            'sqrtf(x)'
            >>> get_op("if_then_else").c_spelling(["c", "x", "y"], "float64")
            '(c ? x : y)'
        """
        f = "f" if element == "float32" else ""
        if self.c is not None:
            return self.c.format(*args, f=f)
        if self.libm is not None:
            return f"{self.libm}{f}({', '.join(args)})"
        raise CuvilError(f"op {self.name!r} has no C spelling (neither 'c' nor 'libm')")


_OPS: dict[str, OpDef] = {}


def register_op(op: OpDef, replace: bool = False) -> OpDef:
    """Add ``op`` to the registry; ``replace=True`` overrides an op of that name.

    Example::

        >>> _ = register_op(OpDef("doc_twice", 1, "float", c="(2 * {0})"))
        >>> get_op("doc_twice").arity
        1
        >>> unregister_op("doc_twice")
    """
    if not isinstance(op, OpDef):
        raise CuvilError(f"register_op: expected an OpDef, found {type(op).__name__}")
    if op.name in _OPS and not replace:
        raise CuvilError(f"register_op: an op named {op.name!r} is already registered; "
                         "pass replace=True to override it")
    _OPS[op.name] = op
    return op


def unregister_op(name: str) -> None:
    """Remove the op called ``name`` (tests and notebooks that re-register).

    Example::

        >>> unregister_op("doc_none") if has_op("doc_none") else None
    """
    get_op(name)
    del _OPS[name]


def get_op(name: str) -> OpDef:
    """The op called ``name``, or an error listing the known ones.

    Example::

        >>> get_op("fma").arity
        3
    """
    try:
        return _OPS[name]
    except (KeyError, TypeError):
        raise CuvilError(f"unknown op {name!r}; known ops: {', '.join(sorted(_OPS))}") \
            from None


def has_op(name: str) -> bool:
    """True when ``name`` is a registered op.

    Example::

        >>> has_op("exp"), has_op("nope")
        (True, False)
    """
    return name in _OPS


def list_ops(operands: str | None = None, effect: str | None = None) -> tuple:
    """Names of the registered ops (in registration order), optionally filtered.

    Example::

        >>> "if_then_else" in list_ops(), "if_then_else" in list_ops(operands="float")
        (True, False)
    """
    return tuple(n for n, op in _OPS.items()
                 if (operands is None or op.operands == operands)
                 and (effect is None or op.effect == effect))


# the built-in math intrinsics -------------------------------------------------------------

def _ufunc(fn):
    return lambda t: fn


def _sigmoid(t):
    one = t(1)
    return lambda x: one / (one + np.exp(-x))


def _rsqrt(t):
    one = t(1)
    return lambda x: one / np.sqrt(x)


def _erf(t):
    return lambda x: t(math.erf(float(x))) if x == x else t(x)


def _fma(t):
    # one rounding: the product and sum in float64 (exact for float32 and narrower),
    # then rounded once to the dtype
    if t is np.float64 and hasattr(math, "fma"):
        return lambda a, b, c: np.float64(math.fma(float(a), float(b), float(c)))
    return lambda a, b, c: t(np.float64(a) * np.float64(b) + np.float64(c))


def _expand_sigmoid(x):
    from ..expr import Call
    one = _one(x)
    return one / (one + Call(x.dtype, "exp", (-x,)))


def _expand_rsqrt(x):
    from ..expr import Call
    return _one(x) / Call(x.dtype, "sqrt", (x,))


def _one(x):
    from ..expr import Broadcast, FloatImm
    from .. import dtype as D
    one = FloatImm(1.0, D.element(x.dtype))
    return one if D.lanes(x.dtype) == 1 else Broadcast(one, D.lanes(x.dtype))


_BUILTIN = [
    # name, llvm intrinsic, libm function, numpy reference, C template
    ("exp", "exp", "exp", np.exp, None),
    ("exp2", "exp2", "exp2", np.exp2, None),
    ("log", "log", "log", np.log, None),
    ("log2", "log2", "log2", np.log2, None),
    ("log10", "log10", "log10", np.log10, None),
    ("sqrt", "sqrt", "sqrt", np.sqrt, None),
    ("rsqrt", None, None, None, None),
    ("tanh", None, "tanh", np.tanh, None),
    ("sigmoid", None, None, None, None),
    ("erf", None, "erf", None, None),
    ("floor", "floor", "floor", np.floor, None),
    ("ceil", "ceil", "ceil", np.ceil, None),
    # half to even, like numpy; C's nearbyint rounds in the default (to-nearest-even) mode
    ("round", "roundeven", "nearbyint", np.rint, None),
    ("trunc", "trunc", "trunc", np.trunc, None),
    ("sin", "sin", "sin", np.sin, None),
    ("cos", "cos", "cos", np.cos, None),
]
_SPECIAL_REF = {"rsqrt": _rsqrt, "sigmoid": _sigmoid, "erf": _erf}
_EXPAND = {"rsqrt": _expand_rsqrt, "sigmoid": _expand_sigmoid}

for _name, _llvm, _libm, _np, _c in _BUILTIN:
    register_op(OpDef(_name, 1, "float", reference=_SPECIAL_REF.get(_name) or _ufunc(_np),
                      llvm=_llvm, libm=_libm, c=_c, expand=_EXPAND.get(_name),
                      doc=f"elementwise {_name} of a float"))
register_op(OpDef("abs", 1, "number", reference=_ufunc(np.abs), llvm="fabs", libm="fabs",
                  doc="absolute value (integers: INT_MIN stays INT_MIN)"))
register_op(OpDef("pow", 2, "float", reference=_ufunc(np.power), llvm="pow", libm="pow",
                  doc="x ** y"))
register_op(OpDef("fma", 3, "float", reference=_fma, llvm="fma", libm="fma",
                  doc="a * b + c with one rounding"))
register_op(OpDef("if_then_else", 3, "select", c="({0} ? {1} : {2})",
                  doc="then if cond else otherwise, evaluating only the taken branch"))
#: a call into a target's API (T.call_extern): args are the function's name, the
#: effect (both StringImm), then values, buffer regions or whole buffers
register_op(OpDef("call_extern", -1, "any", effect="opaque",
                  doc="a call of an external function of the target"))
#: the host's launch of an outlined parallel task (T.parallel_launch, see
#: cuvil_tir.ir_module): args are the task's name (StringImm), the first index, the
#: number of indices, then whole buffers and scalars
register_op(OpDef("parallel_launch", -1, "any", effect="opaque",
                  doc="run a parallel_task function of the module once per index"))

__all__ = ["EFFECTS", "OPERAND_RULES", "OpDef", "get_op", "has_op", "list_ops",
           "register_op", "unregister_op"]

# a pointer into a buffer (TVMScript's tvm_access_ptr), an assumption (T.assume),
# TVM's fixed-point multiply (T.q_multiply_shift), the bitwise integer ops
# (T.shift_left ...) and a buffer's element offset (A.elem_offset); each registered by
# its module
from . import access_ptr as _access_ptr  # noqa: E402,F401
from . import assume as _assume  # noqa: E402,F401
from . import qmul as _qmul  # noqa: E402,F401
from . import bitwise as _bitwise  # noqa: E402,F401
from . import elem_offset as _elem_offset  # noqa: E402,F401
