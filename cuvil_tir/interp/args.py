"""Check the interpreter's arguments and bind symbolic sizes from the arrays' shapes.

Buffer parameters take numpy arrays of exactly the storage dtype
(:func:`cuvil_tir.dtype.to_numpy`: bfloat16 as uint16 bits) and shape; a 1-D
parameter of a lowered (flattened) function also takes a C-contiguous array of any
rank, seen through a flat view so the outputs land in the caller's array.  Scalar
``Var`` parameters take Python (or numpy) numbers.  Shape dimensions that are a bare
size variable bind it; other dimensions (``n * 4``) are checked, and solve for one
unknown size variable when they are affine in it.

Example::

    >>> import numpy as np, cuvil_tir as T
    >>> n = T.size_var("n")
    >>> A = T.placeholder((n,), name="A")
    >>> f = T.create_prim_func([A, T.compute((n,), lambda i: A[i] * 2.0, name="B")])
    >>> T.interpret(f, np.ones(3, "float32"), np.zeros(4, "float32"))
    Traceback (most recent call last):
    ...
    cuvil_tir.errors.ShapeError: [CVL-E102] argument 1 (B): dimension 0 is n = 3 (bound by an earlier argument), found 4
"""

from __future__ import annotations

import numbers

import numpy as np

from .. import dtype as D
from ..buffer import Buffer
from ..errors import DTypeError, ShapeError
from ..expr import IntImm, Var
from . import scalar as S
from ..visitor import used_vars


def scalar_value(k: int, var: Var, value):
    """The interpreter value of scalar argument ``value`` for parameter ``var``.

    Example::

        >>> import cuvil_tir as T
        >>> scalar_value(0, T.var("n"), 5)
        5
    """
    dt = var.dtype
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if not isinstance(value, (numbers.Number, np.generic)) or isinstance(value, complex):
        raise DTypeError(f"argument {k} ({var.name}): expected a Python number for the "
                         f"scalar parameter of dtype {dt}, found {type(value).__name__}")
    if D.is_float(dt):
        return S.to_dtype(dt)(float(value))
    if isinstance(value, (float, np.floating)):
        raise DTypeError(f"argument {k} ({var.name}): expected an integer for the {dt} "
                         f"parameter, found the float {value!r}; pass int(value)")
    v = int(value)
    lo, hi = D.int_range(dt)
    if not lo <= v <= hi:
        raise DTypeError(f"argument {k} ({var.name}): {v} does not fit the parameter's "
                         f"dtype {dt} (range [{lo}, {hi}])")
    return bool(v) if D.is_bool(dt) else v


def buffer_array(k: int, buf: Buffer, arr):
    """The array the interpreter uses for buffer parameter ``buf`` (a view of ``arr``)."""
    if not isinstance(arr, np.ndarray):
        raise DTypeError(f"argument {k} ({buf.name}): expected a numpy array of dtype "
                         f"{buf.dtype}, found {type(arr).__name__}")
    want = D.to_numpy(buf.dtype)
    if arr.dtype != want:
        note = " (bfloat16 tensors are stored as uint16 bits)" if \
            buf.dtype == "bfloat16" else ""
        fix = f"convert with arr.astype('{want.name}')"
        if D.is_float8(buf.dtype):
            note = " (fp8 tensors are stored as uint8 bits)"
            fix = f"encode values with cuvil_tir.float8.encode(arr, '{D.element(buf.dtype)}')"
        raise DTypeError(f"argument {k} ({buf.name}): expected dtype {want.name}{note}, "
                         f"found {arr.dtype.name}; {fix}")
    if arr.ndim == buf.ndim:
        return arr
    if buf.ndim == 1:
        if not arr.flags.c_contiguous:
            raise ShapeError(f"argument {k} ({buf.name}): the flat 1-D parameter needs a "
                             f"C-contiguous array to view, found a non-contiguous array of "
                             f"shape {arr.shape}; pass np.ascontiguousarray(arr)")
        return arr.reshape(-1)
    raise ShapeError(f"argument {k} ({buf.name}): expected a {buf.ndim}-D array of shape "
                     f"{_shape_text(buf)}, found {arr.ndim}-D shape {arr.shape}")


def _shape_text(buf) -> str:
    dims = [str(d) for d in buf.shape]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


class SizeBinder:
    """Bind size variables from array shapes, then check every remaining dimension.

    ``evaluate(expr) -> int`` evaluates a dimension with the sizes bound so far;
    ``bind(var, value)`` records one size.

    Example::

        >>> import cuvil_tir as T
        >>> n = T.size_var("n")
        >>> got = {}
        >>> b = SizeBinder(lambda e: None, lambda v, x: got.setdefault(v.name, x))
        >>> b.dim(0, "A", 0, n, 5); b.finish(); got
        {'n': 5}
    """

    def __init__(self, evaluate, bind, bound=()):
        self.evaluate = evaluate
        self._bind = bind
        self.values: dict[int, int] = {}
        self.deferred: list = []
        for v, x in bound:
            self.values[id(v)] = x

    def bind(self, var, value):
        self.values[id(var)] = value
        self._bind(var, value)

    def dim(self, k: int, name: str, d: int, expr, actual: int) -> None:
        """Match dimension ``d`` of argument ``k`` against ``actual``."""
        if isinstance(expr, IntImm):
            if expr.value != actual:
                raise ShapeError(f"argument {k} ({name}): dimension {d} must be "
                                 f"{expr.value}, found {actual}")
            return
        if isinstance(expr, Var):
            if id(expr) in self.values:
                want = self.values[id(expr)]
                if want != actual:
                    raise ShapeError(f"argument {k} ({name}): dimension {d} is "
                                     f"{expr.name} = {want} (bound by an earlier "
                                     f"argument), found {actual}")
                return
            self.bind(expr, actual)
            return
        self.deferred.append((k, name, d, expr, actual))

    def finish(self) -> None:
        """Check (or solve) the dimensions that are expressions."""
        pending = list(self.deferred)
        while pending:
            rest = []
            for item in pending:
                k, name, d, expr, actual = item
                free = [v for v in used_vars(expr) if id(v) not in self.values]
                if not free:
                    got = self.evaluate(expr)
                    if got != actual:
                        raise ShapeError(f"argument {k} ({name}): dimension {d} is {expr} "
                                         f"= {got}, found {actual}")
                elif len(free) == 1:
                    self._solve(item, free[0])
                else:
                    rest.append(item)
            if len(rest) == len(pending):
                k, name, d, expr, _ = rest[0]
                raise ShapeError(f"argument {k} ({name}): cannot infer the sizes in "
                                 f"dimension {d} = {expr}; give another argument whose "
                                 "dimension is the size variable itself")
            pending = rest

    def _solve(self, item, var):
        k, name, d, expr, actual = item
        f0 = self._try(var, 0, expr)
        f1 = self._try(var, 1, expr)
        slope = f1 - f0
        if slope > 0 and (actual - f0) % slope == 0 and actual >= f0:
            v = (actual - f0) // slope
            if self._try(var, v, expr) == actual:
                self.bind(var, v)
                return
        raise ShapeError(f"argument {k} ({name}): dimension {d} is {expr}, which no value "
                         f"of {var.name} makes equal to {actual}")

    def _try(self, var, value, expr) -> int:
        self._bind(var, value)
        self.values[id(var)] = value
        try:
            return self.evaluate(expr)
        finally:
            del self.values[id(var)]
