"""``verify`` / ``verify_well_formed``: reject ill-formed IR with a LoweringError.

Checked, on IR with or without blocks:

* every variable used is defined: parameters, size variables of parameter shapes and
  strides, loop variables, let variables, block iter variables;
* no variable is defined again inside its own scope (a loop nest reusing a loop var);
* every buffer used is a parameter or allocated (``Allocate``, block ``alloc_buffers``);
* loads and stores have one integer index per dimension; stored values have the
  buffer's dtype and the indices' lanes;
* block iter values have their iter var's dtype and stay in its domain;
* memory safety: an access whose index range — from loop bounds and enclosing
  ``IfThenElse`` conditions / ``if_then_else`` guards on single variables — is
  *provably* outside the buffer's extent (the bound is reached, not just an
  over-approximation) is an error naming the buffer, the index and the range; an
  access under a condition that provably never holds is never reached, so never one.

Example::

    >>> import cuvil_tir as T
    >>> A = T.decl_buffer((16,), "float32", "A")
    >>> i = T.var("i")
    >>> f = T.PrimFunc([A], T.For(i, T.const(0), T.const(16), "serial",
    ...                           T.BufferStore(A, T.const(0.0), (i + 1,))))
    >>> try:
    ...     verify_well_formed(f)
    ... except T.LoweringError as err:
    ...     print(err.message.splitlines()[0])
    out-of-bounds store to buffer 'A': index i + 1 of dimension 0 ranges over [1, 16] but the extent is 16 (valid: 0..15)
"""

from __future__ import annotations

from contextlib import contextmanager

from .. import dtype as D
from .. import ops
from ..arith import Analyzer
from ..arith.affine import Affine, is_index_dtype
from ..buffer import Buffer
from ..errors import LoweringError
from ..expr import GT, LT, GE, LE, And, CmpOp, Expr, IntImm, Max, Not, Ramp, \
    Broadcast, Var
from ..function import PrimFunc
from .instruments import PassInstrument
from ..ir_module import IRModule, calling_conv
from ..printer import to_text
from ..stmt import Range
from ..visitor import Visitor, substitute, used_vars
from .inline import inline_launches


class _Verify(Visitor):
    def __init__(self, func: PrimFunc):
        self.func = func
        self.scope: set[int] = set()
        self.buffers: set[int] = set()
        self.ana = Analyzer(index_no_overflow=True)
        self.exact: set[int] = set()     # vars whose known bound is attained
        self.precise = True              # no enclosing condition we cannot model
        self.where: list[str] = []
        # block iter var -> its binding over loop variables: an index relative to a
        # tile (``L[vt - vo * 8]``) is bounded through what its variables are bound to
        self.bound_to: dict = {}

    # errors and scopes ---------------------------------------------------------------------
    def fail(self, msg: str) -> None:
        where = " > ".join(self.where) or "function body"
        raise LoweringError(f"{msg}\n  in function '{self.func.name}', at: {where}")

    @contextmanager
    def define(self, var: Var, rng: Range | None = None, what: str = "loop"):
        if id(var) in self.scope:
            self.fail(f"{what} variable '{var.name}' is defined again inside its own "
                      "scope; give the inner definition a new Var")
        saved = dict(self.ana.bounds)
        self.scope.add(id(var))
        exact = False
        if rng is not None and is_index_dtype(var.dtype):
            self.ana.bind(var, rng)
            lo, hi = self.ana.const_int_bound(rng.min), \
                self.ana.const_int_bound(rng.min + rng.extent - 1)
            exact = lo[0] == lo[1] and hi[0] == hi[1] and lo[0] <= hi[0]
        if exact:
            self.exact.add(id(var))
        try:
            yield
        finally:
            self.scope.discard(id(var))
            self.exact.discard(id(var))
            self.ana.bounds = saved

    @contextmanager
    def assume(self, cond: Expr):
        saved = self.precise
        # under a condition that cannot hold the code is never reached (the else arm
        # of a guard its loop's extent already decides): no bound there is attained
        if not self._simple_condition(cond) or \
                (self.precise and not isinstance(cond, IntImm) and
                 D.is_bool(cond.dtype) and self.ana.can_prove(Not(cond))):
            self.precise = False
        try:
            with self.ana.constraint(cond):
                yield
        finally:
            self.precise = saved

    def _simple_condition(self, cond) -> bool:
        """Conjunctions of comparisons of one exact variable with constants: tightening
        the variable's interval is then exact, so bounds stay attained (an inequality
        ``c * v < k`` with any ``c`` too: the integers meeting it are an interval)."""
        if isinstance(cond, IntImm):
            return True
        if isinstance(cond, And):
            return self._simple_condition(cond.a) and self._simple_condition(cond.b)
        if isinstance(cond, Not) and isinstance(cond.a, CmpOp):
            return self._simple_condition(cond.a)
        if isinstance(cond, CmpOp) and is_index_dtype(cond.a.dtype):
            aff = Affine.of(cond.a).combine(Affine.of(cond.b), -1)
            terms = aff.terms
            return len(terms) == 1 and isinstance(terms[0][0], Var) \
                and id(terms[0][0]) in self.exact and (
                    abs(terms[0][1]) == 1 or isinstance(cond, (LT, LE, GT, GE)))
        return False

    # definitions ---------------------------------------------------------------------------
    def run(self) -> None:
        for p in self.func.params:
            if isinstance(p, Buffer):
                self.buffers.add(id(p))
                for v in used_vars(tuple(p.shape) + tuple(p.strides)):
                    self.scope.add(id(v))
            else:
                self.scope.add(id(p))
        self.visit(self.func.body)

    def visit_Var(self, v):
        if id(v) not in self.scope:
            self.fail(f"variable '{v.name}' is used but not defined (not a parameter, a "
                      "size in a parameter's shape, a loop, let or block iter variable "
                      "in scope)")

    def visit_buffer(self, buf):
        if id(buf) not in self.buffers:
            self.fail(f"buffer '{buf.name}' is used but not defined: pass it as a "
                      "parameter or allocate it (Allocate / block alloc_buffers)")

    def visit_For(self, s):
        self.where.append(f"for {s.loop_var.name}")
        self.visit(s.min)
        self.visit(s.extent)
        if not D.is_integer(s.loop_var.dtype):
            self.fail(f"loop variable '{s.loop_var.name}' must be an integer, found "
                      f"{s.loop_var.dtype}")
        with self.assume(self._runs(s.extent)):
            with self.define(s.loop_var, Range(s.min, s.extent)):
                self.visit(s.body)
        self.where.pop()

    def _runs(self, extent):
        """What holds while a loop of ``extent`` runs its body: ``extent > 0``.  A loop
        split by a guard (``T.serial(T.max(2 - io * 3, 0))``) runs for some outer
        iterations only, and the accesses of its body are reached for those alone."""
        if self.ana.const_int_bound(extent)[0] >= 1 or \
                not any(id(v) in self.exact for v in used_vars(extent)):
            # an extent of sizes alone (T.serial(n)): an access out of bounds for every
            # n that runs it stays an error
            return IntImm(1, "bool")
        zero = IntImm(0, extent.dtype)
        if isinstance(extent, Max):
            # max(a, b) > 0 with b <= 0 constant is a > 0, a condition on a's variables
            a, b = (extent.a, extent.b) if isinstance(extent.b, IntImm) else \
                (extent.b, extent.a)
            if isinstance(b, IntImm) and b.value <= 0:
                return GT(a, zero)
        return GT(extent, zero)

    def visit_LetStmt(self, s):
        self.visit(s.value)
        with self.define(s.var, what="let"):
            if is_index_dtype(s.var.dtype):
                self.ana.bind(s.var, s.value)
            self.visit(s.body)

    def visit_Let(self, e):
        self.visit(e.value)
        with self.define(e.var, what="let"):
            self.visit(e.body)

    def visit_Allocate(self, s):
        self.visit(s.buffer.shape)
        self.buffers.add(id(s.buffer))
        self.visit(s.body)
        self.buffers.discard(id(s.buffer))

    def visit_IfThenElse(self, s):
        self.visit(s.condition)
        with self.assume(s.condition):
            self.visit(s.then_case)
        if s.else_case is not None:
            with self.assume(Not(s.condition)):
                self.visit(s.else_case)

    def visit_Call(self, e):
        arms = ops.branches(e)
        if arms is not None:
            c, t, f = arms
            self.visit(c)
            with self.assume(c):
                self.visit(t)
            with self.assume(Not(c)):
                self.visit(f)
            return
        self.visit(e.args)

    def visit_BlockRealize(self, br):
        blk = br.block
        self.where.append(f"block {blk.name}")
        self.visit(br.iter_values)
        self.visit(br.predicate)
        saved = dict(self.bound_to)
        with self.assume(br.predicate):
            for iv, val in zip(blk.iter_vars, br.iter_values):
                if val.dtype != iv.var.dtype:
                    self.fail(f"block '{blk.name}': iter var '{iv.var.name}' has dtype "
                              f"{iv.var.dtype} but is bound to {to_text(val)} of dtype "
                              f"{val.dtype}")
                self._check_binding(blk, iv, val)
                self.bound_to[iv.var] = substitute(val, saved) if saved else val
            self.visit_block_body(blk)
        self.bound_to = saved
        self.where.pop()

    def visit_Block(self, blk):
        self.visit_block_body(blk)

    def visit_block_body(self, blk):
        with self._defs(list(blk.iter_vars)):
            for b in blk.alloc_buffers:
                self.visit(b.shape)
                self.buffers.add(id(b))
            for r in tuple(blk.reads) + tuple(blk.writes):
                self.visit(r.buffer)
                self.visit(r.region)
            if blk.init is not None:
                self.visit(blk.init)
            self.visit(blk.body)
            for b in blk.alloc_buffers:
                self.buffers.discard(id(b))

    @contextmanager
    def _defs(self, ivs):
        if not ivs:
            yield
            return
        iv = ivs[0]
        self.visit(iv.dom)
        with self.define(iv.var, iv.dom, what="block iter"):
            with self._defs(ivs[1:]):
                yield

    def _check_binding(self, blk, iv, val):
        if not (self.precise and self._exact_index(val)):
            return
        lo, hi = self.ana.const_int_bound(val)
        dlo, dhi = self.ana.const_int_bound(iv.dom.min), \
            self.ana.const_int_bound(iv.dom.min + iv.dom.extent - 1)
        if dlo[0] == dlo[1] and dhi[0] == dhi[1] and (lo < dlo[0] or hi > dhi[0]):
            self.fail(f"block '{blk.name}': iter var '{iv.var.name}' is bound to "
                      f"{to_text(val)}, which ranges over [{lo}, {hi}], outside its domain "
                      f"[{dlo[0]}, {dhi[0]}]; fix the iter value or the domain")

    # accesses --------------------------------------------------------------------------------
    def visit_BufferLoad(self, e):
        self.visit(e.buffer)
        self.visit(e.indices)
        self._check_access(e.buffer, e.indices, "load from")

    def visit_BufferStore(self, s):
        self.visit(s.buffer)
        self.visit(s.value)
        self.visit(s.indices)
        self._check_access(s.buffer, s.indices, "store to")
        if D.element(s.value.dtype) != s.buffer.dtype:
            self.fail(f"store to buffer '{s.buffer.name}': the value has dtype "
                      f"{s.value.dtype} but the buffer holds {s.buffer.dtype}; cast it")
        lanes = max((ix.lanes for ix in s.indices), default=1)
        if s.value.lanes != lanes:
            self.fail(f"store to buffer '{s.buffer.name}': a value of {s.value.lanes} "
                      f"lane(s) stored at indices of {lanes} lane(s)")

    def _exact_index(self, ix) -> bool:
        if isinstance(ix, Ramp):
            return isinstance(ix.stride, IntImm) and self._exact_index(ix.base)
        if isinstance(ix, Broadcast):
            return self._exact_index(ix.value)
        if not is_index_dtype(ix.dtype):
            return False
        return all(isinstance(t, Var) and id(t) in self.exact
                   for t, _ in Affine.of(ix).terms)

    def _check_access(self, buf, indices, what):
        if len(indices) != len(buf.shape):
            self.fail(f"{what} buffer '{buf.name}': expected {len(buf.shape)} index(es), "
                      f"found {len(indices)}")
        for d, ix in enumerate(indices):
            if not D.is_integer(D.element(ix.dtype)):
                self.fail(f"{what} buffer '{buf.name}': index {to_text(ix)} of dimension "
                          f"{d} has dtype {ix.dtype}; indices are integers")
        if not self.precise:
            return
        for d, (ix, ext) in enumerate(zip(indices, buf.shape)):
            if not self._exact_index(ix):
                continue
            lo, hi = self.ana.const_int_bound(ix)
            if self.bound_to and is_index_dtype(ix.dtype):
                # the iter vars through their bindings: exact too, and both ranges
                # hold, so only what lies outside both is reached for certain
                # (correlated iter vars widen the first, guards on them the second)
                via = self.ana.simplify(substitute(ix, self.bound_to))
                if self._exact_index(via):
                    vlo, vhi = self.ana.const_int_bound(via)
                    lo, hi = max(lo, vlo), min(hi, vhi)
            ext_hi = self.ana.const_int_bound(ext)[1]
            if lo < 0 or (isinstance(ext, IntImm) and hi >= ext.value) or hi > ext_hi - 1:
                ext_s = to_text(ext)
                valid = f"0..{ext.value - 1}" if isinstance(ext, IntImm) else f"0..{ext_s} - 1"
                self.fail(f"out-of-bounds {what.split()[0]} {what.split()[1]} buffer "
                          f"'{buf.name}': index {to_text(ix)} of dimension {d} ranges over "
                          f"[{lo}, {hi}] but the extent is {ext_s} (valid: {valid})\n"
                          f"  fix: shrink the loop, or guard the access with an if / "
                          f"T.if_then_else")


def verify_well_formed(func) -> None:
    """Raise ``LoweringError`` if ``func`` is ill-formed (see the module docstring).

    A module is verified through its host functions with every parallel launch
    replaced by the loop it stands for, so a task's accesses are checked against the
    range of its iteration index; a launch of a missing task or with arguments that
    do not match the task's parameters is an error too.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> verify_well_formed(T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")]))
    """
    if isinstance(func, IRModule):
        for f in func.functions:
            if calling_conv(f) == "host":
                _Verify(inline_launches(func, f)).run()
        return
    if not isinstance(func, PrimFunc):
        raise LoweringError(f"verify: expected a PrimFunc or an IRModule, found "
                            f"{type(func).__name__}")
    _Verify(func).run()


def verify(func):
    """The verifier as a pass (of a PrimFunc or a module): returns ``func`` unchanged
    when well-formed.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="X")])
        >>> verify(f) is f
        True
    """
    verify_well_formed(func)
    return func


verify.pass_kind = "any"


class VerifyEach(PassInstrument):
    """Run :func:`~cuvil_tir.transform.verify.verify_well_formed` after every pass; a
    failure names the pass that produced the ill-formed IR.

    Example::

        >>> isinstance(VerifyEach(), PassInstrument)
        True
    """

    def run_after_pass(self, func, name):
        try:
            verify_well_formed(func)
        except LoweringError as err:
            raise LoweringError(f"after pass '{name}': {err.message}") from err
