"""TVMScript-style names of the text form: ``T.float32(1)``, ``T.serial``, ``T.block`` …

These objects exist so that a ``@T.prim_func`` function is valid Python (its
annotations are evaluated when the ``def`` runs) and so that every name the printer
writes is a real attribute of ``T``.  The parser gives them their meaning; called from
plain Python, the scalar types build constants, the loop kinds behave like ``range``
on Python ints, and the block-level names raise a :class:`~cuvil_tir.ParseError`
saying where they belong.

Example::

    >>> from cuvil_tir import script as T
    >>> T.float32(1).dtype, T.int64(3).value
    ('float32', 3)
    >>> list(T.serial(2, 4))
    [2, 3]
"""

from __future__ import annotations

import itertools

from . import dtype as D
from .errors import ParseError
from .expr import Cast, Expr, FloatImm, IntImm, SizeVar, Var, const


class ScalarType:
    """A scalar dtype usable as ``T.int32`` (annotation) or ``T.int32(5)`` (constant).

    ``T.float32(x)`` of a number (or ``"inf"``/``"nan"``) is a typed constant, of an
    expression a cast; ``T.int32()`` is a fresh variable.

    Example::

        >>> T_f16 = ScalarType("float16")
        >>> T_f16(0.5).dtype, T_f16("inf").value
        ('float16', inf)
    """

    __slots__ = ("dtype",)

    def __init__(self, dtype: str):
        self.dtype = D.canonical(dtype)

    def __call__(self, value=None, *, size_var: bool = False):
        if value is None:
            return SizeVar("n", self.dtype) if size_var else Var("v", self.dtype)
        if isinstance(value, str):
            value = float(value)
        if isinstance(value, Expr):
            return value if value.dtype == self.dtype else Cast(self.dtype, value)
        if D.is_float(self.dtype):
            return FloatImm(float(value), self.dtype)
        if D.is_bool(self.dtype):
            return IntImm(1 if value else 0, "bool")
        return const(value, self.dtype)

    def __repr__(self) -> str:
        return f"T.{self.dtype}"


for _dt in D.SCALAR_DTYPES:
    globals()[_dt] = ScalarType(_dt)
del _dt

#: ``a: T.handle``, a parameter that ``T.match_buffer`` turns into a buffer (TVMScript)
handle = ScalarType("handle")


def _only_in_text(name: str):
    raise ParseError(f"T.{name} only has a meaning inside a @T.prim_func function or "
                     f"T.parse text; in Python, build IR with the node constructors or "
                     f"T.compute")


def _range(name: str, args) -> range:
    if all(isinstance(a, int) for a in args) and 1 <= len(args) <= 2:
        return range(*args)
    _only_in_text(name)


def serial(*args, **kwargs):
    """A serial loop ``for i in T.serial(n)`` / ``T.serial(lo, hi)``; like ``range`` on ints.

    Example::

        >>> list(serial(3))
        [0, 1, 2]
    """
    return _range("serial", args)


def parallel(*args, **kwargs):
    """A parallel loop; like ``range`` on Python ints.

    Example::

        >>> list(parallel(2))
        [0, 1]
    """
    return _range("parallel", args)


def vectorized(*args, **kwargs):
    """A vectorized loop; like ``range`` on Python ints.

    Example::

        >>> list(vectorized(2))
        [0, 1]
    """
    return _range("vectorized", args)


def unroll(*args, **kwargs):
    """An unrolled loop; like ``range`` on Python ints.

    Example::

        >>> list(unroll(2))
        [0, 1]
    """
    return _range("unroll", args)


def thread_binding(*args, thread: str | None = None, **kwargs):
    """A loop bound to a GPU thread axis, ``T.thread_binding(n, thread="threadIdx.x")``.

    Example::

        >>> list(thread_binding(2, thread="threadIdx.x"))
        [0, 1]
    """
    return _range("thread_binding", args)


def grid(*extents):
    """Perfectly nested serial loops, ``for i, j in T.grid(4, 8)``; on ints, the product.

    Example::

        >>> list(grid(2, 2))
        [(0, 0), (0, 1), (1, 0), (1, 1)]
    """
    if all(isinstance(e, int) for e in extents):
        return itertools.product(*(range(e) for e in extents))
    _only_in_text("grid")


def block(name: str = "", **kwargs):
    """``with T.block("name"):`` opens a block (text form only).

    Example::

        >>> try:
        ...     block("B")
        ... except ParseError as err:
        ...     print(err.code)
        CVL-E108
    """
    _only_in_text("block")


class _Axis:
    """``T.axis.spatial(dom, value)``, ``T.axis.reduce``, ``T.axis.opaque``,
    ``T.axis.remap("SSR", [i, j, k])``: block iteration variables (text form only).

    Example::

        >>> try:
        ...     axis.spatial(4, 0)
        ... except ParseError as err:
        ...     print(err.code)
        CVL-E108
    """

    def spatial(self, dom, value=None, **kwargs):
        """A data-parallel block variable."""
        _only_in_text("axis.spatial")

    def reduce(self, dom, value=None, **kwargs):
        """A reduction block variable."""
        _only_in_text("axis.reduce")

    def opaque(self, dom, value=None, **kwargs):
        """A block variable of unknown kind."""
        _only_in_text("axis.opaque")

    def remap(self, kinds: str, values):
        """Block variables bound one-to-one to loop variables."""
        _only_in_text("axis.remap")


axis = _Axis()


def _text_only(name: str, summary: str):
    def fn(*args, **kwargs):
        _only_in_text(name)
    fn.__name__ = name
    fn.__doc__ = (f"{summary} (text form only).\n\n    Example::\n\n"
                  f"        >>> try:\n        ...     {name}()\n"
                  f"        ... except ParseError as err:\n        ...     print(err.code)\n"
                  f"        CVL-E108\n")
    return fn


reads = _text_only("reads", "``T.reads(A[vi], B[0:4])``: the regions a block reads")
writes = _text_only("writes", "``T.writes(C[vi])``: the regions a block writes")
init = _text_only("init", "``with T.init():`` the statement run before a reduction")
where = _text_only("where", "``T.where(cond)``: the predicate of a block realize")
block_attr = _text_only("block_attr", "``T.block_attr({...})``: block annotations")
alloc_buffer = _text_only("alloc_buffer", "``X = T.alloc_buffer(shape, dtype)``: a block's "
                                          "local buffer")
allocate = _text_only("allocate", "``with T.allocate(shape, dtype, scope=...) as X:`` an "
                                  "Allocate statement")
evaluate = _text_only("evaluate", "``T.evaluate(expr)``: an Evaluate statement")
func_attr = _text_only("func_attr", "``T.func_attr({...})``: a function's attributes")
match_buffer = _text_only("match_buffer", "``A = T.match_buffer(a, shape, dtype)``: the "
                                          "buffer of a handle parameter, or a view of a "
                                          "region")
allocate_const = _text_only("allocate_const", "``c = T.allocate_const(values, dtype, "
                                              "extents)``: a buffer of constants")
call_intrin = _text_only("call_intrin", "``T.call_intrin(dtype, op, *args)``: a Call of "
                                        "any intrinsic")

#: the names this module adds to ``cuvil_tir`` (``T.<name>``)
__all__ = list(D.SCALAR_DTYPES) + [
    "ScalarType", "serial", "parallel", "vectorized", "unroll", "thread_binding", "grid",
    "block", "axis", "reads", "writes", "init", "where", "block_attr", "alloc_buffer",
    "allocate", "evaluate", "func_attr", "call_intrin", "handle", "match_buffer",
    "allocate_const"]
