"""The op registry: every intrinsic a ``Call`` may name, described once.

An :class:`OpDef` says, for one op, everything the rest of Cuvil needs to know:

* ``arity`` and ``operands`` (the dtype rule: ``"float"`` operands of one float dtype,
  result of that dtype; ``"number"``: int or float; ``"select"``: a bool condition then
  two values of one dtype, of which only the taken one is evaluated; ``"any"``:
  unchecked, the caller gives the dtype);
* ``effect``: ``"pure"`` (may be folded, hoisted, duplicated), ``"reads"`` /
  ``"writes"`` (touches memory through its arguments), ``"barrier"`` (orders memory
  between threads; never moved), ``"opaque"`` (unknown: treated as reading and
  writing); ``effect_of(call)`` when the effect depends on the call's arguments;
* the reference semantics, used by constant folding and by the interpreter:
  ``reference(t)`` returns the scalar function for numpy float type ``t`` (float32,
  float64 …), ``int_reference(dtype)`` the function on Python ints of an integer dtype
  (wrapped to it), ``int_bound(intervals)`` the range of the result from the operands'
  ranges, ``fold(dtype, args)`` a folding rule that replaces the reference's, and
  ``expand(*args)`` the op in terms of other expressions (for a backend, or an
  interpreter, without its own spelling);
* ``libm``: the name of the C math library's function (``f``-suffixed for float32),
  which the C family and LLVM's scalar fallback call.
* ``collective``: the threads that run the op together, for GPU-style targets:
  ``"block"`` (every thread of a block: a barrier), ``"warp"`` (the lanes of a warp: a
  shuffle, a tensor-core step), or None; ``tiles``: for an op on matrix tiles,
  ``tiles(args)`` gives each tile it touches (:class:`cuvil_tir.ops.gpu.Tile`), and
  ``reference(t)`` its computation on them (:mod:`cuvil_tir.ops.gpu`);
* ``asynchronous``: the op's role in asynchronous copies (``"copy"``, ``"commit"``,
  ``"wait"``: :mod:`cuvil_tir.ops.async_copy`), or None;
* ``lands``: for a tile op whose written tiles land later, its role (``"issue"``: a
  step issued without waiting, ``"commit"``: closes the issued steps into a group,
  ``"wait"``: waits until at most ``args[1]`` groups are in flight), which the
  interpreter gives its exact meaning (:mod:`cuvil_tir.interp.async_mma`), or None;
* ``lanes_reference``: for an op whose result lanes each combine several lanes of its
  arguments (a dot product of byte groups, :mod:`cuvil_tir.ops.dot`),
  ``lanes_reference(*args)`` computes the whole result from its arguments as numpy
  arrays of their lanes (the interpreter's semantics of the op);

How each backend writes each op is the per-backend table of
:mod:`cuvil_tir.ops.spelling`, filled by the backends from their own folders.  The
integer division and modulo semantics used by every layer are in
:mod:`cuvil_tir.intdiv`.  New ops (a target's intrinsics) register with
:func:`register_op`.

Example::

    >>> from cuvil_tir import ops
    >>> ops.get_op("exp").arity, ops.get_op("exp").libm, ops.get_op("exp").effect
    (1, 'exp', 'pure')
    >>> "tanh" in ops.list_ops(operands="float"), ops.get_op("if_then_else").conditional
    (True, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from fractions import Fraction

from ..errors import CuvilError
from .. import dtype as D
from ..expr import Call, Broadcast, FloatImm, StringImm
from ..dtype import float_value
from ..expr_build import make_float

#: the effects an op may have, from least to most constraining
EFFECTS = ("pure", "reads", "writes", "barrier", "opaque")
#: the groups of threads a collective op runs over (None: one thread)
COLLECTIVES = (None, "block", "warp", "warpgroup", "cluster")
#: the dtype rules an op's operands follow
OPERAND_RULES = ("float", "number", "select", "any")
#: the roles of asynchronous copies (:mod:`cuvil_tir.ops.async_copy`)
ASYNC_ROLES = (None, "copy", "commit", "wait", "bulk_copy", "mbarrier_init", "mbarrier_arrive",
               "mbarrier_wait", "tma_load")
#: the roles of tile ops that land at a later wait (:mod:`cuvil_tir.interp.async_mma`)
LANDS_ROLES = (None, "issue", "commit", "wait")


@dataclass(frozen=True)
class OpDef:
    """One op: its arity, dtype rule, effect and reference semantics.

    Example::

        >>> twice = OpDef("twice", 1, "float", reference=lambda t: lambda x: 2 * x)
        >>> twice.pure, twice.reference(float)(3.0)
        (True, 6.0)
    """

    name: str
    arity: int              # -1: any number of arguments
    operands: str = "float"
    effect: str = "pure"
    reference: Callable | None = None
    libm: str | None = None
    expand: Callable | None = None
    doc: str = ""
    int_reference: Callable | None = None
    int_bound: Callable | None = None
    fold: Callable | None = None
    effect_of: Callable | None = None
    collective: str | None = None
    tiles: Callable | None = None
    asynchronous: str | None = None
    lanes_reference: Callable | None = None
    lands: str | None = None

    def __post_init__(self):
        if self.lands not in LANDS_ROLES or (self.lands and self.tiles is None):
            raise CuvilError(f"op {self.name!r}: lands must be one of {LANDS_ROLES}, on a "
                             f"tile op (tiles given), found {self.lands!r}")
        if self.asynchronous not in ASYNC_ROLES:
            raise CuvilError(f"op {self.name!r}: asynchronous must be one of "
                             f"{ASYNC_ROLES}, found {self.asynchronous!r}")
        if self.collective not in COLLECTIVES:
            raise CuvilError(f"op {self.name!r}: collective must be one of "
                             f"{COLLECTIVES}, found {self.collective!r}")
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

    @property
    def conditional(self) -> bool:
        """True for ``cond ? then : else`` ops, which evaluate only the taken branch."""
        return self.operands == "select"


_OPS: dict[str, OpDef] = {}


def register_op(op: OpDef, replace: bool = False) -> OpDef:
    """Add ``op`` to the registry; ``replace=True`` overrides an op of that name.

    Example::

        >>> _ = register_op(OpDef("doc_twice", 1, "float", expand=lambda x: 2 * x))
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


def call_effect(call) -> str:
    """The effect of one ``Call``: its op's (or what ``effect_of`` says for these
    arguments, e.g. the effect a ``T.call_extern`` declares); ``"opaque"`` for an op
    the registry does not know.

    Example::

        >>> import cuvil_tir as T
        >>> call_effect(T.exp(T.var("x", "float32")))
        'pure'
        >>> call_effect(T.call_extern("int32", "dma", effect="reads"))
        'reads'
    """
    op = _OPS.get(call.op)
    if op is None:
        return "opaque"
    return op.effect_of(call) if op.effect_of is not None else op.effect


def may_write(call) -> bool:
    """True when ``call`` may write memory it is handed (any effect but pure and reads).

    Example::

        >>> import cuvil_tir as T
        >>> may_write(T.call_extern("int32", "dma")), may_write(T.sqrt(T.var("x", "float32")))
        (True, False)
    """
    return call_effect(call) not in ("pure", "reads")


def branches(e):
    """``(cond, then, else)`` of a call of a conditional op (``if_then_else``), or None
    for any other expression.

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> [str(x) for x in branches(T.if_then_else(i < 4, i, 0))]
        ['i < 4', 'i', '0']
        >>> branches(i) is None
        True
    """
    op = _OPS.get(getattr(e, "op", None)) if hasattr(e, "args") else None
    if op is None or not op.conditional or len(e.args) != 3:
        return None
    return tuple(e.args)


def callee(e) -> str | None:
    """The name of the target function a ``T.call_extern`` calls, or None for any other
    expression.

    Example::

        >>> import cuvil_tir as T
        >>> callee(T.call_extern("int32", "npu_sync")), callee(T.var("i"))
        ('npu_sync', None)
    """
    if getattr(e, "op", None) != _EXTERN:
        return None
    return _string_arg(e, 0, None)


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
    one = _one(x)
    return one / (one + Call(x.dtype, "exp", (-x,)))


def _expand_rsqrt(x):
    return _one(x) / Call(x.dtype, "sqrt", (x,))


def _one(x):
    one = FloatImm(1.0, D.element(x.dtype))
    return one if D.lanes(x.dtype) == 1 else Broadcast(one, D.lanes(x.dtype))


def _fold_fma(dt, args):
    # folded only when a * b + c is exact in float64: then no double rounding can make
    # the folded constant differ from the target's one-rounding fma
    if len(args) != 3 or not all(isinstance(a, FloatImm) for a in args):
        return None
    vals = [float_value(a.value, dt) for a in args]
    if not all(math.isfinite(v) for v in vals):
        return None
    exact = Fraction(vals[0]) * Fraction(vals[1]) + Fraction(vals[2])
    approx = vals[0] * vals[1] + vals[2]
    if math.isfinite(approx) and Fraction(approx) == exact:
        return make_float(approx, dt)
    return None


def _string_arg(call, k: int, missing: str) -> str:
    # the k-th argument of a call that names something (an effect, a mask), or
    # ``missing`` for a malformed call
    a = call.args[k] if len(call.args) > k else None
    return a.value if isinstance(a, StringImm) else missing


def _abs_int(dt):
    return lambda x: D.wrap_int(abs(int(x)), D.element(dt))


def _abs_bound(intervals):
    (lo, hi), = intervals
    if lo >= 0:
        return (lo, hi)
    if hi <= 0:
        return (-hi, -lo)
    return (0, max(-lo, hi))


_BUILTIN = [
    # name, libm function, numpy reference
    ("exp", "exp", np.exp),
    ("exp2", "exp2", np.exp2),
    ("log", "log", np.log),
    ("log2", "log2", np.log2),
    ("log10", "log10", np.log10),
    ("sqrt", "sqrt", np.sqrt),
    ("rsqrt", None, None),
    ("tanh", "tanh", np.tanh),
    ("sigmoid", None, None),
    ("erf", "erf", None),
    ("floor", "floor", np.floor),
    ("ceil", "ceil", np.ceil),
    # half to even, like numpy; C's nearbyint rounds in the default (to-nearest-even) mode
    ("round", "nearbyint", np.rint),
    ("trunc", "trunc", np.trunc),
    ("sin", "sin", np.sin),
    ("cos", "cos", np.cos),
]
_SPECIAL_REF = {"rsqrt": _rsqrt, "sigmoid": _sigmoid, "erf": _erf}
_EXPAND = {"rsqrt": _expand_rsqrt, "sigmoid": _expand_sigmoid}
_EXTERN = "call_extern"

for _name, _libm, _np in _BUILTIN:
    register_op(OpDef(_name, 1, "float", reference=_SPECIAL_REF.get(_name) or _ufunc(_np),
                      libm=_libm, expand=_EXPAND.get(_name),
                      doc=f"elementwise {_name} of a float"))
register_op(OpDef("abs", 1, "number", reference=_ufunc(np.abs), libm="fabs",
                  int_reference=_abs_int, int_bound=_abs_bound,
                  doc="absolute value (integers: INT_MIN stays INT_MIN)"))
register_op(OpDef("pow", 2, "float", reference=_ufunc(np.power), libm="pow",
                  doc="x ** y"))
register_op(OpDef("fma", 3, "float", reference=_fma, libm="fma", fold=_fold_fma,
                  doc="a * b + c with one rounding"))
register_op(OpDef("if_then_else", 3, "select",
                  doc="then if cond else otherwise, evaluating only the taken branch"))
#: a call into a target's API (T.call_extern): args are the function's name, the
#: effect (both StringImm), then values, buffer regions or whole buffers
register_op(OpDef(_EXTERN, -1, "any", effect="opaque",
                  effect_of=lambda call: _string_arg(call, 1, "opaque"),
                  doc="a call of an external function of the target"))
#: the host's launch of an outlined parallel task (T.parallel_launch, see
#: cuvil_tir.ir_module): args are the task's name (StringImm), the first index, the
#: number of indices, then whole buffers and scalars
register_op(OpDef("parallel_launch", -1, "any", effect="opaque",
                  doc="run a parallel_task function of the module once per index"))
#: the host's launch of an outlined device kernel (T.device_launch): args are the
#: kernel's name (StringImm), the number of launch dimensions, (axis, extent) pairs,
#: then whole buffers and scalars
register_op(OpDef("device_launch", -1, "any", effect="opaque",
                  doc="run a device_kernel function of the module over a launch grid"))

__all__ = ["COLLECTIVES", "EFFECTS", "EXPAND", "OPERAND_RULES", "OpDef", "Unsupported",
           "branches",
           "call_effect", "callee", "find_spelling", "get_op", "has_op", "list_ops",
           "may_write", "register_backend", "register_op", "register_spelling",
           "register_spellings", "spelling", "unregister_backend", "unregister_op"]

# a pointer into a buffer (TVMScript's tvm_access_ptr), an assumption (T.assume),
# TVM's fixed-point multiply (T.q_multiply_shift), the bitwise integer ops
# (T.shift_left ...) and a buffer's element offset (A.elem_offset); each registered by
# its module
from . import access_ptr as _access_ptr  # noqa: E402,F401
from . import assume as _assume  # noqa: E402,F401
from . import qmul as _qmul  # noqa: E402,F401
from . import bitwise as _bitwise  # noqa: E402,F401
from . import elem_offset as _elem_offset  # noqa: E402,F401
from . import dot as _dot  # noqa: E402,F401
# how each backend writes each op: the table the backends fill from their own folders
from .spelling import (EXPAND, Unsupported, find_spelling, register_backend,  # noqa: E402
                       register_spelling, register_spellings, spelling,
                       unregister_backend)
# the GPU ops: a block barrier, warp reductions (cuvil_tir.ops.gpu)
from . import gpu as _gpu  # noqa: E402,F401
# asynchronous copies and their waits (cuvil_tir.ops.async_copy)
from . import async_copy as _async_copy  # noqa: E402,F401
# bulk copies completing on mbarrier phases (cuvil_tir.ops.mbarrier)
from . import mbarrier as _mbarrier  # noqa: E402,F401
# tensor copies through tensor maps (cuvil_tir.ops.tma)
from . import tma as _tma  # noqa: E402,F401
# thread-block clusters: the cluster barrier and distributed shared memory
# (cuvil_tir.ops.cluster)
from . import cluster as _cluster  # noqa: E402,F401
