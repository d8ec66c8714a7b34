"""Random small programs for the schedule fuzzer: one to three stages over tiny shapes.

A program is drawn from a ``random.Random``: its dtype (``float32``, ``float16``,
``int8`` accumulated in ``int32``, ``int32``), its extents (1 to 8, sometimes a symbolic
size ``n``), a first stage (an elementwise stage reading its input at shifted, reversed,
transposed or duplicated indices, guarded where it would leave the input; a reduction
over an axis that may start past 0; or a matmul), and consumers reading the stage
reversed and twice, or padded.  Inputs hold small integers, so every schedule that
reorders a sum computes exactly the same numbers in every dtype, and results are
compared exactly.

Example::

    >>> import random
    >>> p = random_program(random.Random(3))
    >>> isinstance(p.func, T.PrimFunc) and len(p.arrays(np.random.default_rng(0))) >= 2
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import cuvil_tir as T

#: the dtypes a program computes in, with how often each is drawn
DTYPES = (("float32", 5), ("float16", 2), ("int8", 2), ("int32", 1))


@dataclass
class Program:
    """A function, how to make its arguments, and what it was drawn as."""

    func: T.PrimFunc
    shapes: list             # per parameter: the shape to allocate (sizes bound)
    dtypes: list             # per parameter
    what: str                # a one-line description, for reports
    sizes: dict = field(default_factory=dict)    # symbolic size -> value

    def arrays(self, rng) -> list:
        """Fresh arguments: inputs of small integers, outputs poisoned (55)."""
        out = []
        for k, (shape, dt) in enumerate(zip(self.shapes, self.dtypes)):
            if k == len(self.shapes) - 1:
                out.append(np.full(shape, 55, dt))
            else:
                out.append(rng.integers(-3, 4, shape).astype(dt))
        return out


def _pick(rng, weighted):
    total = sum(w for _, w in weighted)
    x = rng.uniform(0, total)
    for v, w in weighted:
        x -= w
        if x <= 0:
            return v
    return weighted[-1][0]


def _extent(rng, sym):
    """An extent: a constant from 1 to 8, or (once per program) the size ``sym``."""
    if sym is not None and rng.random() < 0.5:
        return sym
    return rng.choice((1, 2, 3, 4, 5, 6, 7, 8, 4, 6))


def _zero(dt):
    return T.const(0, dt)


def _in_bounds(conds):
    return T.all(*conds) if len(conds) > 1 else conds[0]


def _elementwise(rng, X, m, n, dt, name):
    """``Y[i, j] = X[idx] + X[idx']`` with the indices reversed, shifted (guarded),
    transposed or duplicated."""
    def index(i, j):
        form = rng.choice(("plain", "rev_i", "rev_j", "shift", "dup", "swap"))
        if form == "rev_i":
            return (m - 1 - i, j), [], form
        if form == "rev_j":
            return (i, n - 1 - j), [], form
        if form == "shift":
            return (i + 1, j), [i + 1 < m], form
        if form == "dup" and _same(m, n):
            return (i, i), [], form
        if form == "swap" and _same(m, n):
            return (j, i), [], form
        return (i, j), [], "plain"

    forms = []

    def body(i, j):
        terms = []
        for _ in range(rng.choice((1, 2))):
            idx, guard, form = index(i, j)
            forms.append(form)
            load = X[idx]
            terms.append(T.if_then_else(_in_bounds(guard), load, _zero(dt)) if guard
                         else load)
        value = terms[0] if len(terms) == 1 else terms[0] + terms[1]
        return value * T.const(2, dt) if rng.random() < 0.5 else value
    Y = T.compute((m, n), body, name=name)
    return Y, f"elementwise({','.join(forms)})"


def _same(a, b) -> bool:
    return str(a) == str(b)


def _acc(dt):
    return "int32" if dt == "int8" else dt


def _reduction(rng, X, m, n, dt, name):
    """``Y[i] = sum/max/min over k in [lo, hi)`` of ``X[i, k]`` (or ``X[i, hi - 1 - k +
    lo]``, reversed), accumulated in int32 for int8."""
    lo = rng.choice((0, 0, 1, 2)) if isinstance(n, int) and n > 2 else 0
    hi = n
    k = T.reduce_axis((lo, hi), name="k")
    combiner = rng.choice(("sum", "sum", "max", "min"))
    reverse = rng.random() < 0.3
    acc = _acc(dt)

    def body(i):
        x = X[i, (hi - 1 - k + lo) if reverse else k]
        x = x.astype(acc) if acc != dt else x
        return {"sum": T.sum, "max": T.max, "min": T.min}[combiner](x, axis=k)
    Y = T.compute((m,), body, name=name)
    return Y, f"{combiner}[{lo}:{hi}]{' reversed' if reverse else ''}"


def _matmul(rng, A, B, m, kk, n, dt, name):
    k = T.reduce_axis((0, kk), name="k")
    acc = _acc(dt)

    def body(i, j):
        a, b = A[i, k], B[k, j]
        if acc != dt:
            a, b = a.astype(acc), b.astype(acc)
        return T.sum(a * b, axis=k)
    return T.compute((m, n), body, name=name), "matmul"


def _consumer(rng, Y, name):
    """A consumer of ``Y``: scaled, relu'd, or reading it reversed and twice."""
    dt = Y.dtype
    shape = Y.shape
    form = rng.choice(("scale", "relu", "rev_dup", "pad"))
    if form == "relu":
        return T.compute(shape, lambda *ix: T.max(Y[ix], _zero(dt)), name=name), form
    if form == "rev_dup":
        e = shape[0]
        return T.compute(shape, lambda i, *r: Y[(e - 1 - i, *r)] + Y[(i, *r)],
                         name=name), form
    if form == "pad":
        e = shape[0]
        return T.compute(shape, lambda i, *r: T.if_then_else(
            i >= 1, Y[(i - 1, *r)], _zero(dt)) + T.if_then_else(
            i + 1 < e, Y[(i + 1, *r)], _zero(dt)), name=name), form
    return T.compute(shape, lambda *ix: Y[ix] * T.const(3, dt) + T.const(1, dt),
                     name=name), "scale"


def random_program(rng) -> Program:
    """One random program (see the module docstring)."""
    dt = _pick(rng, DTYPES)
    sym = T.size_var("n") if rng.random() < 0.25 else None
    m, n = _extent(rng, sym), _extent(rng, sym)
    X = T.placeholder((m, n), dt, name="X")
    params = [X]
    kind = _pick(rng, (("elementwise", 3), ("reduction", 3), ("matmul", 2)))
    if kind == "elementwise":
        Y, what = _elementwise(rng, X, m, n, dt, "Y")
    elif kind == "reduction":
        Y, what = _reduction(rng, X, m, n, dt, "Y")
    else:
        p = _extent(rng, sym)
        W = T.placeholder((n, p), dt, name="W")
        params.append(W)
        Y, what = _matmul(rng, X, W, m, n, p, dt, "Y")
    last = Y
    for stage in range(rng.choice((0, 1, 1, 2))):
        last, form = _consumer(rng, last, f"Z{stage}")
        what += f" -> {form}"
    func = T.create_prim_func(params + [last])
    size = rng.choice((1, 2, 3, 5, 7)) if sym is not None else None
    sizes = {sym: size} if sym is not None else {}

    def bound(shape):
        return tuple(size if isinstance(s, T.SizeVar) else int(s) for s in shape)
    shapes = [bound(p.shape) for p in params] + [bound(last.shape)]
    dtypes = [p.dtype for p in params] + [last.dtype]
    return Program(func, shapes, dtypes, f"{dt} {what}" + (f" n={size}" if sizes else ""),
                   sizes)


__all__ = ["Program", "random_program", "DTYPES"]
