"""``bounds_check``: a run-time check before every buffer access not proven in bounds.

The pass runs first in the ``llvm`` and ``c`` pipelines, on the unlowered function, so
each check sees the N-d index, the buffer's own shape and the block it belongs to.
It has two modes:

* by default, only the *cheap* checks: an access the analyzer cannot prove in bounds
  whose check runs once before its loop (below: affine indices, no condition) or once
  per call (an access in no loop).  ``A[i + 1]`` for ``i < n`` is caught before the
  loop at no measurable cost; a static-shape kernel keeps no check at all;
* with ``Target("llvm", bounds_check=True)`` (the same for ``c``), every access as
  described below, data-dependent ones (``A[B[i]]``) and guarded ones included.
  Before every statement, each buffer access in it (the store and every
load, in block bodies, block inits and on internal/local buffers alike) becomes an
:class:`~cuvil_tir.stmt.AssertStmt` of kind ``"bounds"``: every index in
``[0, extent)``, with a message naming the access (``read``/``write``), the buffer,
the run-time index, the shape, the block and the statement.

* An access the analyzer proves in bounds from the enclosing loops' ranges gets no
  check (a static-shape kernel usually keeps none).
* A load guarded by ``T.if_then_else`` is checked only when its branch is taken; a
  load under a ``Let`` is checked with the let's binding.
* In a loop (of any kind but ``thread_binding``), an access directly in its body
  (under no condition, let or inner loop) whose indices are affine in the loop
  variable and read no memory is checked once, before the loop, at the loop's first
  and last iteration (an affine index takes its extremes there): a ``vectorized``
  loop still becomes vector code, and LLVM and the C compiler still vectorize and
  unroll the inner loop.  Any other check stays before its statement (a
  ``vectorized`` loop holding one runs serially).

Nothing else changes: the pass is in no other target's pipeline, and
:func:`bounds_check` is the identity when there is no target in the ``PassContext``.

Example::

    >>> import cuvil_tir as T
    >>> n = T.size_var("n")
    >>> A = T.placeholder((n,), name="A")
    >>> B = T.compute((n,), lambda i: A[i + 1] - A[i], name="B")   # reads A[n]
    >>> f = insert_bounds_checks(T.create_prim_func([A, B]))
    >>> print(T.lower(f).entry.body)  # doctest: +NORMALIZE_WHITESPACE
    if 0 < n:
        T.assert_(1 < n, "out-of-bounds read of A[{}] (shape ({},)) in block \\"B\\":
                  B[v_i] = A[v_i + 1] - A[v_i]", 1, n, kind="bounds")
        T.assert_(T.bool(False), "out-of-bounds read of A[{}] (shape ({},)) in block
                  \\"B\\": B[v_i] = A[v_i + 1] - A[v_i]", n, n, kind="bounds")
    for i in T.serial(n):
        B[i] = A[i + 1] - A[i]
"""

from __future__ import annotations

from .. import dtype as D
from ..analysis.guarded_loads import guarded_loads
from ..arith import Analyzer
from ..arith.affine import Affine
from ..expr import Broadcast, BufferLoad, Cast, IntImm, Let, Ramp, Var
from ..function import PrimFunc
from ..node import same
from ..op import all as all_of
from ..stmt import AssertStmt, IfThenElse, Range, seq
from ..visitor import Mutator, post_order_visit, substitute, used_vars
from .pass_manager import PassContext
from ..printer import to_text

#: longest statement text quoted in a message
STATEMENT_CHARS = 100


def _i64(e):
    return e if e.dtype == "int64" else Cast("int64", e)


def _statement_text(s) -> str:
    text = " ".join(to_text(s).split())
    if len(text) > STATEMENT_CHARS:
        text = text[:STATEMENT_CHARS - 3] + "..."
    return text.replace("{", "{{").replace("}", "}}")


def _scalar_indices(indices) -> list | None:
    """Each index as scalars to check: a ``Ramp`` by its first and last lane (affine,
    so its extremes), a ``Broadcast`` by its value; ``None`` for other vectors."""
    firsts, lasts = [], []
    for ix in indices:
        if ix.lanes == 1:
            firsts.append(ix)
            lasts.append(ix)
        elif isinstance(ix, Ramp):
            firsts.append(ix.base)
            lasts.append(ix.base + ix.stride * (ix.lanes - 1))
        elif isinstance(ix, Broadcast):
            firsts.append(ix.value)
            lasts.append(ix.value)
        else:
            return None
    return [firsts] if all(same(a, b) for a, b in zip(firsts, lasts)) else [firsts, lasts]


class _Access:
    """One access to check: buffer, scalar indices, guards and lets around it."""

    __slots__ = ("buffer", "indices", "write", "guards", "lets")

    def __init__(self, buffer, indices, write, guards=(), lets=()):
        self.buffer, self.indices, self.write = buffer, tuple(indices), write
        self.guards, self.lets = tuple(guards), tuple(lets)

    def hoistable(self) -> bool:
        return not self.guards and not self.lets


def _loads(e, out: list) -> None:
    """Append to ``out`` an access per load of ``e``, in evaluation order, with the
    ``if_then_else`` conditions and ``Let`` bindings around it."""
    for g in guarded_loads(e):
        for ix in _scalar_indices(g.load.indices) or ():
            out.append(_Access(g.load.buffer, ix, False, g.guards, g.lets))


def _condition(acc: _Access, indices, dims=None):
    conds = []
    for d, (ix, ext) in enumerate(zip(indices, acc.buffer.shape)):
        if dims is not None and d not in dims:
            continue
        dt = ix.dtype if ix.dtype == ext.dtype else "int64"
        x = ix if dt == ix.dtype else _i64(ix)
        hi = ext if dt == ext.dtype else _i64(ext)
        if not D.is_uint(dt):
            conds.append(x >= IntImm(0, dt))
        conds.append(x < hi)
    return all_of(*conds)


def _with_context(e, acc: _Access):
    for var, value in reversed(acc.lets):
        e = Let(var, value, e)
    return e


class _Insert(Mutator):
    def __init__(self, cheap_only: bool = False):
        #: keep only the checks that run once per loop or per call (default builds)
        self.cheap_only = cheap_only
        self.ana = Analyzer(index_no_overflow=True)
        self.vmap: dict = {}          # block iter var -> its value in loop variables
        self.block: str | None = None
        self.frames: list = []        # enclosing loops: [loop, depth, hoisted checks]
        self.depth = 0                # statement guards/loops/lets entered
        self.ranges: dict = {}        # id(loop variable) -> its Range

    # where a check may go -----------------------------------------------------------------
    def visit_For(self, loop):
        saved = dict(self.ana.bounds)
        self.ana.bind(loop.loop_var, Range(loop.min, loop.extent))
        self.ranges[id(loop.loop_var)] = Range(loop.min, loop.extent)
        self.depth += 1
        frame = [loop, self.depth, []] if loop.kind != "thread_binding" else None
        if frame is not None:
            self.frames.append(frame)
        try:
            new = self.generic_visit(loop)
        finally:
            self.depth -= 1
            self.ana.bounds = saved
            self.ranges.pop(id(loop.loop_var), None)
            if frame is not None:
                self.frames.pop()
        if frame is None or not frame[2]:
            return new
        last = loop.min + loop.extent - 1
        checks = []
        simp = self.ana.simplify
        for check in frame[2]:
            for at in (loop.min, last):
                c = substitute(check, {loop.loop_var: at})
                c = AssertStmt(simp(c.condition), c.message,
                               tuple(simp(v) for v in c.values), c.kind)
                proven = isinstance(c.condition, IntImm) and c.condition.value
                if not proven and not any(same(c, o) for o in checks):
                    checks.append(c)
        if not checks:
            return new
        hoisted = seq(*checks)
        if not self.ana.can_prove(loop.extent > 0):
            hoisted = IfThenElse(loop.extent > 0, hoisted)
        return seq(hoisted, new)

    def _guarded(self, s):
        self.depth += 1
        try:
            return self.generic_visit(s)
        finally:
            self.depth -= 1

    visit_LetStmt = visit_Allocate = _guarded

    def visit_IfThenElse(self, s):
        # the condition is known inside each branch: it may prove accesses there
        cond = substitute(s.condition, self.vmap)
        self.depth += 1
        try:
            with self.ana.constraint(cond):
                then = self.visit(s.then_case)
            other = s.else_case
            if other is not None:
                with self.ana.constraint(~cond):
                    other = self.visit(other)
        finally:
            self.depth -= 1
        if then is s.then_case and other is s.else_case:
            return s
        return IfThenElse(s.condition, then, other)

    def visit_BlockRealize(self, br):
        vals = [substitute(v, self.vmap) for v in br.iter_values]
        saved_map, saved_name = dict(self.vmap), self.block
        self.vmap.update({iv.var: v for iv, v in zip(br.block.iter_vars, vals)})
        self.block = br.block.name
        guard = not (isinstance(br.predicate, IntImm) and br.predicate.value)
        self.depth += guard
        try:
            if not guard:
                return self.generic_visit(br)
            with self.ana.constraint(substitute(br.predicate, self.vmap)):
                return self.generic_visit(br)
        finally:
            self.depth -= guard
            self.vmap, self.block = saved_map, saved_name

    def visit_Block(self, blk):
        init = None
        if blk.init is not None:
            self.depth += 1             # the init runs at the first reduction step only
            init = self.visit(blk.init)
            self.depth -= 1
        body = self.visit(blk.body)
        if init is blk.init and body is blk.body:
            return blk
        return type(blk)(blk.name, blk.iter_vars, blk.reads, blk.writes, body, init,
                         blk.alloc_buffers, blk.annotations)

    # the checks -------------------------------------------------------------------------
    def visit_BufferStore(self, s):
        accesses = []
        for ix in _scalar_indices(s.indices) or ():
            accesses.append(_Access(s.buffer, ix, True))
        loads = []
        _loads(s.value, loads)
        for ix in s.indices:
            _loads(ix, loads)
        checks = []
        for acc in accesses + loads:
            check = self._check(acc, s)
            if check is not None and not any(same(check.condition, c.condition)
                                             for c in checks):
                checks.append(check)
        if not checks:
            return s
        return seq(*checks, s)

    def _check(self, acc: _Access, stmt):
        loop_indices = [substitute(ix, self.vmap) for ix in acc.indices]
        dims = self._unproven(acc, loop_indices)
        if not dims:
            return None
        frame = self.frames[-1] if self.frames else None
        hoist = (frame is not None and frame[1] == self.depth and acc.hoistable()
                 and _affine_in(loop_indices, frame[0].loop_var))
        # a hoisted check is outside the block: it speaks of loop variables
        indices = loop_indices if hoist else list(acc.indices)
        cond = _condition(acc, indices, dims)
        if acc.guards:
            cond = ~all_of(*acc.guards) | cond
        cond = _with_context(cond, acc)
        shape, values = [], [_with_context(ix, acc) for ix in indices]
        for ext in acc.buffer.shape:
            if isinstance(ext, IntImm):
                shape.append(str(ext.value))
            else:
                shape.append("{}")
                values.append(ext)
        where = f' in block "{self.block}"' if self.block else ""
        name = acc.buffer.name.replace("{", "{{").replace("}", "}}")
        message = (f"out-of-bounds {'write' if acc.write else 'read'} of {name}"
                   f"[{', '.join('{}' for _ in indices)}] (shape ({', '.join(shape)}"
                   f"{',' if len(shape) == 1 else ''})){where}: {_statement_text(stmt)}")
        check = AssertStmt(cond, message, tuple(values), "bounds")
        if hoist:
            frame[2].append(check)
            return None
        if self.cheap_only and self.frames:
            return None         # it would run every iteration: bounds_check=True only
        return check

    def _unproven(self, acc: _Access, indices) -> list:
        """The dimensions whose index is not proven to lie in ``[0, extent)`` for
        every value of the enclosing loops under the enclosing conditions (an
        expression's own guards and lets are not used: conservative)."""
        every = list(range(len(indices)))
        if acc.lets:
            return every
        return [d for d in every if not self._in_bounds(acc, indices, d)]

    def _in_bounds(self, acc: _Access, indices, d: int) -> bool:
        ix, ext = indices[d], acc.buffer.shape[d]
        if self.ana.can_prove(_condition(acc, indices, (d,))):
            return True
        lo, hi = self._extreme(ix, -1), self._extreme(ix, 1)
        if lo is None or hi is None:
            return False
        if not D.is_uint(ix.dtype) and not self.ana.can_prove(lo >= 0):
            return False
        dt = "int64" if hi.dtype != ext.dtype else ext.dtype
        h = hi if dt == hi.dtype else _i64(hi)
        e = ext if dt == ext.dtype else _i64(ext)
        return self.ana.can_prove(e - h > IntImm(0, dt))

    def _extreme(self, e, sign: int):
        """The largest (``sign`` 1) or smallest (-1) value of the affine index ``e``
        over the enclosing loops, as an expression of sizes; ``None`` if unknown."""
        for _ in range(len(self.ranges) + 1):
            if not any(id(v) in self.ranges for v in used_vars(e)):
                return e
            if not D.is_integer(e.dtype) or e.lanes != 1:
                return None
            form = Affine.of(e)
            out = IntImm(form.const, e.dtype)
            for atom, c in form.terms:
                r = self.ranges.get(id(atom)) if isinstance(atom, Var) else None
                if r is None:
                    if any(id(v) in self.ranges for v in used_vars(atom)):
                        return None
                    out = out + atom * c if c != 1 else out + atom
                    continue
                top = r.min + r.extent - 1
                at = top if (c > 0) == (sign > 0) else r.min
                if at.dtype != e.dtype:
                    at = Cast(e.dtype, at)
                out = out + at * c if c != 1 else out + at
            e = out
        return None


def _affine_in(indices, var: Var) -> bool:
    """Whether every index is affine in ``var`` (``var`` appears only as a term) and
    reads no memory (a load could see a value the loop itself stores)."""
    loads = []
    post_order_visit(tuple(indices), lambda x: loads.append(x) if isinstance(x, BufferLoad)
                     else None)
    if loads:
        return False
    for ix in indices:
        for atom, _ in Affine.of(ix).terms:
            if atom is not var and any(v is var for v in used_vars(atom)):
                return False
    return True


def insert_bounds_checks(func: PrimFunc, cheap_only: bool = False) -> PrimFunc:
    """``func`` with a bounds check before every access not proven in bounds (see
    the module docstring); ``cheap_only``: only those that run once before a loop or
    once per call.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] * 2.0, name="B")])
        >>> insert_bounds_checks(f) is f      # every access provably in bounds
        True
    """
    body = _Insert(cheap_only).visit(func.body)
    return func if body is func.body else func.with_body(body)


def bounds_check(func: PrimFunc) -> PrimFunc:
    """The pass: every check when the target of the current ``PassContext`` has
    ``bounds_check`` set, the cheap ones when it has a target that does not, nothing
    without a target.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((4,), name="A")])
        >>> bounds_check(f) is f
        True
    """
    target = PassContext.current().target
    if target is None or func.attr("calling_conv") not in (None, "host"):
        return func          # an outlined task or a kernel: checked before outlining
    return insert_bounds_checks(func, cheap_only=not wants_bounds_check(target))


def wants_bounds_check(target) -> bool:
    """Whether ``target`` (a ``Target``, or None) asks for bounds checks.

    Example::

        >>> wants_bounds_check(None)
        False
    """
    return target is not None and bool(target.options.get("bounds_check"))



def with_bounds_check(passes, target) -> list:
    """``passes`` (a fresh list) led by :func:`bounds_check`, which inserts every
    check when ``target`` asks for them and the cheap ones otherwise: a target kind's
    ``pipeline(target)`` uses it.

    Example::

        >>> from cuvil_tir.transform import default_pipeline, pass_name
        >>> [pass_name(p) for p in with_bounds_check(default_pipeline(), None)][0]
        'bounds_check'
    """
    return [bounds_check] + list(passes)
