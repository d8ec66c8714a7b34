"""Constant integer bounds of expressions (interval analysis).

``ConstIntBound(known).bound(e)`` is an inclusive ``(lo, hi)`` of Python ints (or
``±inf`` for non-integer dtypes) that every value of ``e`` lies in, given ``known``:
a mapping from :class:`~cuvil_tir.arith.affine.Key` of a variable (or of any atom) to
its interval.  Results are clamped to the dtype: an exact interval that does not fit
the dtype means the value may wrap, so the whole dtype range is returned.

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.arith.affine import Key
    >>> i = T.var("i")
    >>> ConstIntBound({Key(i): (0, 15)}).bound(i // 4 + 1)
    (1, 4)
"""

from __future__ import annotations

from .. import dtype as D
from .. import ops
from ..expr import CmpOp, Expr, FloatImm, IntImm, SizeVar, Var
from . import interval as I
from .affine import Key


class ConstIntBound:
    """Interval analysis over one set of known bounds (see the module docstring).

    Example::

        >>> import cuvil_tir as T
        >>> ConstIntBound({}).bound(T.size_var("n") % 8)
        (0, 7)
    """

    def __init__(self, known: dict):
        self.known = known
        self._memo: dict[int, tuple] = {}
        # structural hashing is linear in the expression: only hash what may be known
        self._types = {type(k.expr) for k in known}

    def bound(self, e: Expr) -> tuple:
        """The interval of ``e`` (see the class docstring)."""
        r = self._memo.get(id(e))
        if r is not None and r[0] is e:
            return r[1]
        iv = self._compute(e)
        k = self.known.get(Key(e)) if type(e) in self._types else None
        if k is not None:
            iv = I.intersect(iv, k)
            if iv[0] > iv[1]:  # contradictory facts: keep the known one
                iv = k
        iv = I.clamp_to_dtype(iv, e.dtype)
        self._memo[id(e)] = (e, iv)
        return iv

    def _compute(self, e: Expr) -> tuple:
        dt = e.dtype
        el = D.element(dt)
        if isinstance(e, IntImm):
            return (e.value, e.value)
        if isinstance(e, FloatImm) or D.is_float(el) or el == "handle":
            return I.everything()
        if isinstance(e, SizeVar):
            return (0, I.dtype_range(dt)[1])
        if isinstance(e, Var):
            return I.dtype_range(dt)
        m = getattr(self, "_" + type(e).__name__, None)
        if m is not None:
            return m(e)
        if isinstance(e, CmpOp):
            return (0, 1)
        return I.dtype_range(dt)

    def _Add(self, e): return I.add(self.bound(e.a), self.bound(e.b))
    def _Sub(self, e): return I.sub(self.bound(e.a), self.bound(e.b))
    def _Mul(self, e): return I.mul(self.bound(e.a), self.bound(e.b))
    def _FloorDiv(self, e): return self._div(e, I.floordiv)
    def _FloorMod(self, e): return self._div(e, I.floormod, zero_ok=True)
    def _Div(self, e): return self._div(e, I.truncdiv)
    def _Mod(self, e): return self._div(e, I.truncmod, zero_ok=True)
    def _Min(self, e): return I.vmin(self.bound(e.a), self.bound(e.b))
    def _Max(self, e): return I.vmax(self.bound(e.a), self.bound(e.b))
    def _Not(self, e): return I.sub((1, 1), self.bound(e.a))

    def _div(self, e, fn, zero_ok=False):
        a, b = self.bound(e.a), self.bound(e.b)
        if b == (0, 0):
            return (0, 0)  # x // 0 == x % 0 == 0 in Cuvil
        if b[0] == 0:
            b = (1, b[1])
            return I.union(fn(a, b), (0, 0))
        if b[1] == 0:
            b = (b[0], -1)
            return I.union(fn(a, b), (0, 0))
        if b[0] < 0 < b[1]:
            # the divisor may be 0 (result 0) or either sign: union of both halves
            neg, pos = fn(a, (b[0], -1)), fn(a, (1, b[1]))
            return I.union(I.union(neg, pos), (0, 0))
        return fn(a, b)

    def _And(self, e):
        a, b = self.bound(e.a), self.bound(e.b)
        return (min(a[0], b[0]), min(a[1], b[1]))

    def _Or(self, e):
        a, b = self.bound(e.a), self.bound(e.b)
        return (max(a[0], b[0]), max(a[1], b[1]))

    def _Select(self, e):
        return I.union(self.bound(e.true_value), self.bound(e.false_value))

    def _Cast(self, e):
        src = e.value.dtype
        if D.is_float(D.element(src)):
            return I.dtype_range(e.dtype)
        iv = self.bound(e.value)
        if D.is_bool(D.element(e.dtype)):
            return (0, 0) if iv == (0, 0) else ((1, 1) if iv[0] > 0 or iv[1] < 0 else (0, 1))
        return iv  # clamped by bound(): a value that fits converts exactly

    def _Call(self, e):
        arms = ops.branches(e)
        if arms is not None:
            return I.union(self.bound(arms[1]), self.bound(arms[2]))
        op = ops.get_op(e.op) if ops.has_op(e.op) else None
        if op is not None and op.int_bound is not None:
            return op.int_bound([self.bound(a) for a in e.args])
        return I.dtype_range(e.dtype)

    def _Let(self, e):
        saved = self.known.get(Key(e.var))
        self.known[Key(e.var)] = self.bound(e.value)
        self._types.add(type(e.var))
        try:
            self._memo.clear()
            return self.bound(e.body)
        finally:
            if saved is None:
                del self.known[Key(e.var)]
            else:
                self.known[Key(e.var)] = saved
            self._memo.clear()

    def _Ramp(self, e):
        base, stride = self.bound(e.base), self.bound(e.stride)
        last = I.add(base, I.scale(stride, e.lanes - 1))
        return I.union(base, last)

    def _Broadcast(self, e):
        return self.bound(e.value)

    def _BufferLoad(self, e):
        return I.dtype_range(e.dtype)

