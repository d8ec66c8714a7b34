"""``vectorize_loops``: turn ``vectorized`` loops of constant extent into vector code.

Runs on lowered IR (after ``flatten_buffers`` and ``simplify``).  For a loop
``for v in T.vectorized(lo, lo + E)`` the loop variable becomes
``Ramp(lo, 1, lanes)`` and every expression that depends on it is widened: scalars
are broadcast, ``a + Ramp`` / ``Ramp * c`` stay ramps, so an index that is affine in
``v`` with stride 1 is a contiguous vector load or store, any other stride is a
gather / scatter (a ``Ramp`` of that stride), ``if_then_else`` and ``Select`` with a
lane-dependent condition become vector selects.  Extents larger than the target's
vector width (``vector_bits`` divided by the widest element type the loop touches:
8 lanes of float32 for 256-bit AVX2) are split into an ``unrolled`` loop over
full-width chunks plus one narrower vector (or a scalar) for the tail.

The pass never produces wrong code: when the body cannot be widened, it keeps the
loop serial (``unrolled`` when its extent is at most ``UNROLL_FALLBACK``, else the
original ``vectorized`` kind, which the LLVM backend emits as a serial loop with a
vectorize hint, so LLVM's own legality checks decide).  It refuses, in particular:

* a store whose location does not depend on ``v`` (a reduction into one location
  across lanes: ``s[0] += A[v]``), or whose locations of different lanes could meet
  (``C[v + k]`` inside an inner ``k`` loop);
* a buffer written in the loop and also accessed through a different index (a
  dependence between lanes, such as ``A[v + 1] = A[v]``);
* a lane-dependent condition around a statement, or guarding a load inside
  ``if_then_else`` (a select would load the guarded-off lanes) -- except a guard
  linear in ``v`` and free of inner variables (the tail guard of a non-dividing
  split): it is tested at the first and last lane of each chunk, and the chunk runs
  as vector code when both pass, serially otherwise;
* ``Allocate``, blocks, calls for effect, nested vector code, or a loop whose bounds
  depend on ``v``.

Example::

    >>> import cuvil_tir as T
    >>> A = T.decl_buffer((16,), "float32", "A")
    >>> B = T.decl_buffer((16,), "float32", "B")
    >>> i = T.var("i")
    >>> f = T.PrimFunc([A, B], T.For(i, T.const(0), T.const(8), "vectorized",
    ...                 T.BufferStore(B, A[i] * 2.0, (i,))))
    >>> print(T.to_text(vectorize_loops(f).body).strip())
    B[T.Ramp(0, 1, 8)] = A[T.Ramp(0, 1, 8)] * T.Broadcast(T.float32(2), 8)
"""

from __future__ import annotations

from .. import dtype as D
from .. import ops
from ..arith import Analyzer
from ..arith.affine import Affine, is_index_dtype
from ..expr import (And, Broadcast, BufferLoad, Call, Cast, Expr, IntImm, Let, Not, Ramp, Select,
                    Var)
from ..function import PrimFunc
from ..stmt import BufferStore, For, IfThenElse, LetStmt, seq
from ..visitor import Mutator, Visitor, post_order_visit, substitute
from ..node import same

#: a loop the pass cannot vectorize is unrolled instead when its extent is at most this
UNROLL_FALLBACK = 16
#: chunk loops with at most this many full-width chunks are ``unrolled``
UNROLL_CHUNKS = 4


class _Cannot(Exception):
    """The loop body cannot be widened; carries the reason (for ``explain``)."""


# widening -----------------------------------------------------------------------------

def _bcast(e: Expr, lanes: int) -> Expr:
    return e if e.lanes == lanes else Broadcast(e, lanes)


def _has_load(e) -> bool:
    found = []
    post_order_visit(e, lambda n: found.append(1) if isinstance(n, BufferLoad) else None)
    return bool(found)


class _Widen(Mutator):
    """Rewrite a loop body with ``var`` replaced by ``Ramp(base, 1, lanes)``."""

    def __init__(self, var: Var, base: Expr, lanes: int, inner: set = frozenset()):
        self.var, self.lanes, self.inner = var, lanes, inner
        self.vmap = {id(var): Ramp(base, IntImm(1, var.dtype), lanes)}
        #: lane-dependent guards assumed true for every lane (see ``_assume``)
        self.assumed: list = []

    def _assume(self, cond) -> bool:
        """Take a lane-dependent guard as true in every lane, if that can be tested
        once per chunk: linear in the loop variable (so true at the first and last
        lane means true at all lanes) and free of variables defined in the loop."""
        if not _linear_guard(cond, self.var) or _uses(cond, set(self.inner)):
            return False
        self.assumed.append(cond)
        return True

    # expressions
    def visit_Var(self, v):
        return self.vmap.get(id(v), v)

    def visit_Ramp(self, e):
        raise _Cannot("the body already holds vector code (nested vectorization)")

    visit_Broadcast = visit_Ramp

    def visit_BinaryOp(self, e):
        a, b = self.visit(e.a), self.visit(e.b)
        if a is e.a and b is e.b:
            return e
        cls, name, n = type(e), type(e).__name__, self.lanes
        if a.lanes == 1 and b.lanes == 1:
            return cls(a, b)
        if name in ("Add", "Sub"):
            ra, rb = isinstance(a, Ramp), isinstance(b, Ramp)
            if ra and b.lanes == 1:
                return Ramp(cls(a.base, b), a.stride, n)
            if rb and a.lanes == 1:
                stride = b.stride if name == "Add" else IntImm(0, b.stride.dtype) - b.stride
                return Ramp(cls(a, b.base), stride, n)
            if ra and rb:
                return Ramp(cls(a.base, b.base), cls(a.stride, b.stride), n)
        if name == "Mul":
            if isinstance(a, Ramp) and b.lanes == 1:
                return Ramp(a.base * b, a.stride * b, n)
            if isinstance(b, Ramp) and a.lanes == 1:
                return Ramp(a * b.base, a * b.stride, n)
        return cls(_bcast(a, n), _bcast(b, n))

    def visit_Not(self, e):
        a = self.visit(e.a)
        return e if a is e.a else Not(a)

    def visit_Cast(self, e):
        x = self.visit(e.value)
        if x is e.value:
            return e
        if x.lanes == 1:
            return Cast(e.dtype, x)
        if isinstance(x, Ramp) and is_index_dtype(e.dtype) and \
                D.bits(e.dtype) >= D.bits(x.base.dtype):
            return Ramp(Cast(e.dtype, x.base), Cast(e.dtype, x.stride), x.lanes)
        return Cast(D.with_lanes(e.dtype, x.lanes), x)

    def visit_Select(self, e):
        c, t, f = self.visit(e.condition), self.visit(e.true_value), self.visit(e.false_value)
        if c is e.condition and t is e.true_value and f is e.false_value:
            return e
        n = max(t.lanes, f.lanes, c.lanes)
        return Select(c, _bcast(t, n), _bcast(f, n))

    def visit_Call(self, e):
        args = tuple(self.visit(a) for a in e.args)
        if all(a is b for a, b in zip(args, e.args)):
            return e
        n = max(a.lanes for a in args)
        if n == 1:
            return Call(e.dtype, e.op, args)
        if ops.branches(e) is not None:
            c, t, f = args
            if c.lanes > 1:
                if _has_load(t) or _has_load(f):
                    if self._assume(e.args[0]):
                        return _bcast(t, n)
                    raise _Cannot("if_then_else guards a load with a lane-dependent "
                                  "condition; a vector select would load every lane")
                return Select(c, _bcast(t, n), _bcast(f, n))
            return Call(D.with_lanes(e.dtype, n), e.op, (c, _bcast(t, n), _bcast(f, n)))
        return Call(D.with_lanes(e.dtype, n), e.op, tuple(_bcast(a, n) for a in args))

    def visit_BufferLoad(self, e):
        idx = tuple(self.visit(i) for i in e.indices)
        if all(a is b for a, b in zip(idx, e.indices)):
            return e
        if sum(i.lanes > 1 for i in idx) > 1:
            idx = tuple(_bcast(i, self.lanes) for i in idx)
        return BufferLoad(e.buffer, idx)

    def visit_Let(self, e):
        value = self.visit(e.value)
        if value.lanes == 1:
            body = self.visit(e.body)
            return e if value is e.value and body is e.body else Let(e.var, value, body)
        nv = Var(e.var.name, value.dtype)
        self.vmap[id(e.var)] = nv
        return Let(nv, value, self.visit(e.body))

    # statements
    def visit_BufferStore(self, s):
        idx = tuple(self.visit(i) for i in s.indices)
        value = self.visit(s.value)
        n = max((i.lanes for i in idx), default=1)
        if n == 1:
            raise _Cannot(f"the store to '{s.buffer.name}' does not depend on the loop "
                          "variable (lanes would write one location)")
        if sum(i.lanes > 1 for i in idx) > 1:
            idx = tuple(_bcast(i, n) for i in idx)
        return BufferStore(s.buffer, _bcast(value, n), idx)

    def visit_LetStmt(self, s):
        value = self.visit(s.value)
        if value.lanes == 1:
            body = self.visit(s.body)
            return s if value is s.value and body is s.body else LetStmt(s.var, value, body)
        nv = Var(s.var.name, value.dtype)
        self.vmap[id(s.var)] = nv
        return LetStmt(nv, value, self.visit(s.body))

    def visit_IfThenElse(self, s):
        c = self.visit(s.condition)
        if c.lanes > 1:
            if s.else_case is None and self._assume(s.condition):
                return self.visit(s.then_case)
            raise _Cannot("a condition around a statement depends on the loop variable")
        then = self.visit(s.then_case)
        other = None if s.else_case is None else self.visit(s.else_case)
        return IfThenElse(c, then, other)

    def visit_For(self, s):
        lo, ext = self.visit(s.min), self.visit(s.extent)
        if lo.lanes > 1 or ext.lanes > 1:
            raise _Cannot(f"the bounds of the inner loop '{s.loop_var.name}' depend on "
                          "the loop variable")
        return For(s.loop_var, lo, ext, s.kind, self.visit(s.body), s.thread_tag,
                   s.annotations)

    def visit_Evaluate(self, s):
        if isinstance(s.value, IntImm):
            return s
        raise _Cannot("the body evaluates a call for its effect")

    def visit_AssertStmt(self, s):
        parts = [self.visit(s.condition)] + [self.visit(v) for v in s.values]
        if any(p.lanes > 1 for p in parts):
            raise _Cannot("a run-time check depends on the loop variable")
        if all(p is q for p, q in zip(parts, (s.condition,) + s.values)):
            return s
        return type(s)(parts[0], s.message, tuple(parts[1:]), s.kind)

    def _refuse(self, s):
        raise _Cannot(f"the body holds a {type(s).__name__}")

    visit_Allocate = visit_Block = visit_BlockRealize = _refuse


# legality: lanes must not touch each other's memory ------------------------------------

class _Accesses(Visitor):
    """Every load and store under a loop, with the loops and lets defined inside."""

    def __init__(self):
        self.stores, self.loads, self.inner, self.lets = [], [], {}, set()

    def visit_BufferStore(self, s):
        self.stores.append((s.buffer, s.indices))
        self.generic_visit(s)

    def visit_BufferLoad(self, e):
        self.loads.append((e.buffer, e.indices))
        self.generic_visit(e)

    def visit_For(self, s):
        self.inner[id(s.loop_var)] = s
        self.generic_visit(s)

    def visit_LetStmt(self, s):
        self.lets.add(id(s.var))
        self.generic_visit(s)

    def visit_Let(self, e):
        self.lets.add(id(e.var))
        self.generic_visit(e)


def _uses(e, ids: set) -> bool:
    found = []
    post_order_visit(e, lambda n: found.append(1) if isinstance(n, Var) and id(n) in ids
                     else None)
    return bool(found)


def _injective_position(ix: Expr, var: Var, extent: int, acc: _Accesses) -> bool:
    """Whether different values of ``var`` (over inner-loop iterations too) always
    give different values of the index ``ix``."""
    if not is_index_dtype(ix.dtype) or _uses(ix, acc.lets):
        return False
    aff = Affine.of(ix)
    c = 0
    inner = set(acc.inner)
    for atom, coeff in aff.terms:
        if isinstance(atom, Var) and atom is var:
            c = coeff
        elif _uses(atom, {id(var)}):
            return False                      # v inside a non-linear atom
        elif isinstance(atom, Var) and id(atom) in inner:
            continue                          # checked below, once c is known
        elif _uses(atom, inner):
            return False
    if c == 0:
        return False
    for atom, coeff in aff.terms:
        if isinstance(atom, Var) and id(atom) in inner and coeff % (c * extent) != 0:
            return False
    return True


def check_independent(loop: For) -> None:
    """Raise ``_Cannot`` unless the lanes of ``loop`` touch disjoint memory.

    Every buffer written in the loop must be accessed through one index only, and
    that index must separate the lanes (see :func:`_injective_position`).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((9,), "float32", "A")
        >>> i = T.var("i")
        >>> check_independent(T.For(i, T.const(0), T.const(8), "vectorized",
        ...                   T.BufferStore(A, A[i] + 1.0, (i,))))
    """
    acc = _Accesses()
    acc.visit(loop.body)
    extent = loop.extent.value
    written = {id(b): b for b, _ in acc.stores}
    for key, buf in written.items():
        accesses = [ix for b, ix in acc.stores + acc.loads if id(b) == key]
        first = accesses[0]
        if any(len(ix) != len(first) or not all(same(a, b) for a, b in zip(ix, first))
               for ix in accesses[1:]):
            raise _Cannot(f"buffer '{buf.name}' is written and accessed through "
                          "different indices in the loop (a dependence between lanes)")
        if not any(_injective_position(ix, loop.loop_var, extent, acc) for ix in first):
            raise _Cannot(f"the lanes of the store to '{buf.name}' may write the same "
                          "location (a reduction across lanes)")


# the pass ---------------------------------------------------------------------------------

def _element_bits(body) -> int:
    bits = []

    def look(n):
        if isinstance(n, (BufferLoad, Cast)):
            bits.append(D.bits(D.element(n.dtype)))
        elif isinstance(n, BufferStore):
            bits.append(D.bits(D.element(n.buffer.dtype)))

    post_order_visit(body, look)
    return max(bits, default=32)


class _Simplify(Mutator):
    """Simplify the scalar parts of vector indices (ramp bases and strides)."""

    def __init__(self):
        self.ana = Analyzer(index_no_overflow=True)

    def visit_Ramp(self, e):
        return Ramp(self.ana.simplify(e.base), self.ana.simplify(e.stride), e.lanes)


def _linear_guard(cond, var: Var) -> bool:
    """A conjunction of ``<``/``<=``/``>``/``>=`` between index expressions in which
    ``var`` appears only linearly: its truth set in ``var`` is an interval."""
    if isinstance(cond, And):
        return _linear_guard(cond.a, var) and _linear_guard(cond.b, var)
    if type(cond).__name__ not in ("LT", "LE", "GT", "GE") or \
            not is_index_dtype(cond.a.dtype):
        return False
    for side in (cond.a, cond.b):
        for atom, _ in Affine.of(side).terms:
            if atom is not var and _uses(atom, {id(var)}):
                return False
    return True


def widen(loop: For, base: Expr, lanes: int):
    """The body of ``loop`` for the ``lanes`` iterations starting at ``base``, as
    vector code; raises ``_Cannot`` when it cannot be widened.

    A guard the body needs per lane (``if jo * 16 + ji < n``, the tail guard of a
    non-dividing split) is tested once for the first and the last lane: when both
    pass, the vector code runs; otherwise the chunk runs lane by lane (unrolled)
    with its guards.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((8,), "float32", "A")
        >>> i = T.var("i")
        >>> loop = T.For(i, T.const(0), T.const(8), "vectorized",
        ...              T.BufferStore(A, A[i] * 2.0, (i,)))
        >>> print(T.to_text(widen(loop, T.const(4), 4)).strip())
        A[T.Ramp(4, 1, 4)] = A[T.Ramp(4, 1, 4)] * T.Broadcast(T.float32(2), 4)
    """
    v = loop.loop_var
    if lanes == 1:
        return substitute(loop.body, {v: base})
    acc = _Accesses()
    acc.visit(loop.body)
    w = _Widen(v, base, lanes, set(acc.inner) | acc.lets)
    vec = _Simplify().visit(w.visit(loop.body))
    if not w.assumed:
        return vec
    ana = Analyzer(index_no_overflow=True)
    last = base + IntImm(lanes - 1, v.dtype)
    test = None
    for cond in w.assumed:
        for at in (base, last):
            c = substitute(cond, {v: at})
            test = c if test is None else And(test, c)
    lane = Var(v.name + "_s", v.dtype)
    # unrolled, so that a local buffer indexed by the lane keeps constant indices
    kind = "unrolled" if lanes <= UNROLL_FALLBACK else "serial"
    serial = For(lane, IntImm(0, v.dtype), IntImm(lanes, v.dtype), kind,
                 substitute(loop.body, {v: ana.simplify(base + lane)}))
    return IfThenElse(ana.simplify(test), vec, serial)


class LoopVectorizer(Mutator):
    """The mutator behind :func:`vectorize_loops`; ``refused`` lists
    ``(loop variable name, reason)`` for each loop kept serial.

    Example::

        >>> LoopVectorizer(256).refused
        []
    """

    def __init__(self, vector_bits: int = 256):
        self.vector_bits = vector_bits
        self.refused: list = []

    def visit_For(self, s):
        body = self.visit(s.body)
        if body is not s.body:
            s = For(s.loop_var, s.min, s.extent, s.kind, body, s.thread_tag, s.annotations)
        if s.kind != "vectorized" or not isinstance(s.extent, IntImm):
            return s
        try:
            return self._vectorize(s)
        except _Cannot as why:
            self.refused.append((s.loop_var.name, str(why)))
            if s.extent.value <= UNROLL_FALLBACK:
                return For(s.loop_var, s.min, s.extent, "unrolled", s.body, s.thread_tag,
                           s.annotations)
            return s

    def _vectorize(self, s: For):
        ext, v = s.extent.value, s.loop_var
        if ext <= 0:
            return s
        check_independent(s)
        width = max(1, self.vector_bits // _element_bits(s.body))
        if ext <= width:
            return widen(s, s.min, ext)
        n, rem = divmod(ext, width)
        parts = []
        vo = Var(v.name + "_c", v.dtype)
        chunk = widen(s, s.min + vo * width, width)
        parts.append(For(vo, IntImm(0, v.dtype), IntImm(n, v.dtype),
                         "unrolled" if n <= UNROLL_CHUNKS else "serial", chunk))
        if rem:
            tail_base = _Simplify().ana.simplify(s.min + n * width)
            parts.append(widen(s, tail_base, rem))
        return seq(*parts)


def vectorize_loops(func: PrimFunc, vector_bits: int = 256) -> PrimFunc:
    """Vectorize the ``vectorized`` loops of constant extent in a lowered function.

    ``vector_bits`` is the target's vector register width (256 for AVX2).  Loops it
    cannot vectorize are kept serial; see the module docstring for the rules.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((20,), "float32", "A")
        >>> i = T.var("i")
        >>> f = T.PrimFunc([A], T.For(i, T.const(0), T.const(20), "vectorized",
        ...                 T.BufferStore(A, A[i] + 1.0, (i,))))
        >>> print(T.to_text(vectorize_loops(f).body).strip())  # doctest: +NORMALIZE_WHITESPACE
        for i_c in T.unroll(2):
            A[T.Ramp(i_c * 8, 1, 8)] = A[T.Ramp(i_c * 8, 1, 8)] + T.Broadcast(T.float32(1), 8)
        A[T.Ramp(16, 1, 4)] = A[T.Ramp(16, 1, 4)] + T.Broadcast(T.float32(1), 4)
    """
    body = LoopVectorizer(vector_bits).visit(func.body)
    return func if body is func.body else func.with_body(body)


def explain_vectorize(func: PrimFunc, vector_bits: int = 256) -> list:
    """``(loop variable, reason)`` for each ``vectorized`` loop the pass keeps serial.

    Example::

        >>> import cuvil_tir as T
        >>> A, s = T.decl_buffer((8,), "float32", "A"), T.decl_buffer((1,), "float32", "s")
        >>> i = T.var("i")
        >>> f = T.PrimFunc([A, s], T.For(i, T.const(0), T.const(8), "vectorized",
        ...                 T.BufferStore(s, s[0] + A[i], (T.const(0),))))
        >>> explain_vectorize(f)[0][1]
        "the lanes of the store to 's' may write the same location (a reduction across lanes)"
    """
    v = LoopVectorizer(vector_bits)
    v.visit(func.body)
    return v.refused


__all__ = ["LoopVectorizer", "UNROLL_FALLBACK", "check_independent", "explain_vectorize",
           "vectorize_loops", "widen"]
