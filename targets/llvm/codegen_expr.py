"""Expressions and memory accesses of the llvm codegen (:class:`ExprEmitter`).

A mixin of :class:`targets.llvm.codegen.LLVMCodegen`: it translates every expression
node to an SSA value of the function being built (``self.b``), reading the values of
variables from ``self.vars`` and buffer pointers from ``self.bufs``.  Statements, the
function's signature and allocation live in :mod:`targets.llvm.codegen`.

Example::

    >>> import cuvil_tir as T
    >>> from targets.llvm.codegen import LLVMCodegen
    >>> cg = LLVMCodegen(T.PrimFunc([], T.Evaluate(T.const(0))))
    >>> cg.expr(T.const(2) + T.const(3))
    '5'
"""

from __future__ import annotations

import re

from cuvil_tir import dtype as D
from cuvil_tir import ops
from cuvil_tir.errors import CodegenError
from cuvil_tir.expr import (Add, Cast, Div, FloorDiv, FloorMod, IntImm, Max, Min, Mod, Mul,
                            Ramp, Sub)
from cuvil_tir.stmt import BufferRegion

from . import intrinsics as I
from .types import mem_type, reg_type, scalar_const, splat
from . import spellings  # noqa: F401 - registers the llvm spellings of the ops

#: loop annotation: vector stores inside the loop are non-temporal (streaming) stores,
#: which skip the cache and the read-for-ownership of the destination line; worth it
#: for large outputs written once and not read back soon (an elementwise kernel)
NONTEMPORAL = "pragma_nontemporal"
#: loop annotation: the float arithmetic inside the loop may be reassociated (the
#: ``reassoc`` fast-math flag, for this loop only): LLVM then vectorizes a reduction
#: over it, with partial sums in vector lanes; sums change in the last bits.  The
#: user's opt-in for one loop, where ``fast_math="...,reassoc"`` opts in everywhere
REASSOC = "pragma_reassoc"

_FLOAT_OPS = {"Add": "fadd", "Sub": "fsub", "Mul": "fmul", "Div": "fdiv", "Mod": "frem"}
_INT_OPS = {"Add": "add", "Sub": "sub", "Mul": "mul"}
_ICMP = {"EQ": "eq", "NE": "ne", "LT": "lt", "LE": "le", "GT": "gt", "GE": "ge"}
_FCMP = {"EQ": "oeq", "NE": "une", "LT": "olt", "LE": "ole", "GT": "ogt", "GE": "oge"}


def _symbol(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name) else f'"{name}"'


_INDEX_OPS = (Add, Sub, Mul, Div, Mod, FloorDiv, FloorMod, Min, Max)

#: (code generator class, expression class) -> the ``e_<Class>`` method translating it
_EXPR: dict = {}


def index64(e):
    """The int32 scalar index ``e`` computed in 64 bits: each int32 leaf is widened,
    then the arithmetic runs in int64 (equal values: index arithmetic never
    overflows, ``Analyzer(index_no_overflow=True)``).

    Why: LLVM 22.1's loop vectorizer miscompiles the sign extension of a 32-bit
    index that holds ``i % 2**k`` beside another access indexed by ``i % 2**k``
    (issue 25, repro 19: the second access becomes a contiguous load); no
    ``sext`` of index arithmetic, no such loop.  64-bit indices are also what
    LLVM widens 32-bit ones to (IndVarSimplify), so the code is no slower.

    Example::

        >>> import cuvil_tir as T
        >>> i = T.var("i")
        >>> e = index64(i % 4 + i * 4)
        >>> e.dtype, type(e.a.a).__name__
        ('int64', 'Cast')
    """
    if e.dtype != "int32":
        return e
    if isinstance(e, IntImm):
        return IntImm(e.value, "int64")
    if isinstance(e, _INDEX_OPS):
        return type(e)(index64(e.a), index64(e.b))
    return Cast("int64", e)


class ExprEmitter:
    """Expression translation shared by every function an :class:`LLVMCodegen` emits.

    Example::

        >>> from targets.llvm.codegen import LLVMCodegen
        >>> issubclass(LLVMCodegen, ExprEmitter)
        True
    """

    #: True while the flat index of a memory access is being emitted: its integer
    #: ``add``/``sub``/``mul`` carry ``nsw`` (lowering already assumes index
    #: arithmetic does not overflow, see ``Analyzer(index_no_overflow=True)``), which
    #: lets LLVM widen ``sext(i*s + k)`` into 64-bit pointer steps instead of
    #: recomputing a 32-bit index and sign-extending it per access
    in_index = False

    # expressions ----------------------------------------------------------------------
    def expr(self, e) -> str:
        fn = _EXPR.get((type(self), type(e)))
        if fn is not None:
            return fn(self, e)
        for klass in type(e).__mro__:
            fn = getattr(type(self), "e_" + klass.__name__, None)
            if fn is not None:
                _EXPR[(type(self), type(e))] = fn   # found once per pair of classes
                return fn(self, e)
        raise CodegenError(f"llvm codegen: no translation for expression node "
                           f"{type(e).__name__} ({e})")

    def e_Var(self, v):
        try:
            return self.vars[id(v)]
        except KeyError:
            raise CodegenError(f"llvm codegen: variable '{v.name}' is used but never "
                               "defined (not a parameter, loop variable, let or size "
                               "variable of a parameter's shape)") from None

    def e_IntImm(self, c):
        return scalar_const(c.value, c.dtype)

    def e_FloatImm(self, c):
        return scalar_const(c.value, c.dtype)

    def e_StringImm(self, s):
        raise CodegenError(f"llvm codegen: string constant {s.value!r} used as a value")

    def e_Cast(self, c):
        return I.convert(self.b, self.expr(c.value), c.value.dtype, c.dtype)

    def e_BinaryOp(self, e):
        kind = type(e).__name__
        dt = e.a.dtype
        x, y = self.expr(e.a), self.expr(e.b)
        b = self.b
        if D.is_float(dt):
            cdt = I.compute_dtype(dt)
            x, y = I.widen(b, x, dt), I.widen(b, y, dt)
            r = self._float_binary(kind, x, y, cdt)
            return I.narrow(b, r, dt)
        t = reg_type(dt)
        if kind in _INT_OPS:
            nsw = " nsw" if self.in_index and D.is_int(dt) else ""
            return b.op(f"{_INT_OPS[kind]}{nsw} {t} {x}, {y}")
        if kind in ("Div", "Mod", "FloorDiv", "FloorMod"):
            return I.int_divmod(b, kind, x, y, dt)
        if kind in ("Min", "Max"):
            pred = ("s" if D.is_int(dt) else "u") + ("lt" if kind == "Min" else "gt")
            c = b.op(f"icmp {pred} {t} {x}, {y}")
            return b.op(f"select {reg_type(D.with_lanes('bool', D.lanes(dt)))} {c}, "
                        f"{t} {x}, {t} {y}")
        raise CodegenError(f"llvm codegen: integer operator {kind}")

    def _float_binary(self, kind: str, x: str, y: str, dt: str) -> str:
        b, t, fm = self.b, reg_type(dt), self.fm
        if kind in _FLOAT_OPS:
            return b.op(f"{_FLOAT_OPS[kind]} {fm}{t} {x}, {y}")
        if kind in ("Min", "Max"):
            # NaN-propagating, like numpy.minimum/maximum
            fn = I.declare_intrinsic(b, "minimum" if kind == "Min" else "maximum", dt, 2)
            return b.op(f"call {t} @{fn}({t} {x}, {t} {y})")
        if kind == "FloorDiv":
            q = b.op(f"fdiv {fm}{t} {x}, {y}")
            return I.math_call(b, "floor", [q], dt)
        if kind == "FloorMod":
            # fmod, then move a remainder of the wrong sign into the divisor's sign
            r = b.op(f"frem {fm}{t} {x}, {y}")
            bt = reg_type(D.with_lanes("bool", D.lanes(dt)))
            zero = splat(scalar_const(0.0, D.element(dt)), dt)
            nz = b.op(f"fcmp une {t} {r}, {zero}")
            rn = b.op(f"fcmp olt {t} {r}, {zero}")
            yn = b.op(f"fcmp olt {t} {y}, {zero}")
            d = b.op(f"xor {bt} {rn}, {yn}")
            fix = b.op(f"and {bt} {nz}, {d}")
            s = b.op(f"fadd {fm}{t} {r}, {y}")
            return b.op(f"select {bt} {fix}, {t} {s}, {t} {r}")
        raise CodegenError(f"llvm codegen: float operator {kind}")

    def e_CmpOp(self, e):
        kind = type(e).__name__
        dt = e.a.dtype
        x, y = self.expr(e.a), self.expr(e.b)
        if D.is_float(dt):
            x, y = I.widen(self.b, x, dt), I.widen(self.b, y, dt)
            return self.b.op(f"fcmp {_FCMP[kind]} {reg_type(I.compute_dtype(dt))} {x}, {y}")
        pred = _ICMP[kind]
        if kind not in ("EQ", "NE"):
            pred = ("s" if D.is_int(dt) else "u") + pred
        return self.b.op(f"icmp {pred} {reg_type(dt)} {x}, {y}")

    def e_And(self, e):
        return self.b.op(f"and {reg_type(e.dtype)} {self.expr(e.a)}, {self.expr(e.b)}")

    def e_Or(self, e):
        return self.b.op(f"or {reg_type(e.dtype)} {self.expr(e.a)}, {self.expr(e.b)}")

    def e_Not(self, e):
        return self.b.op(f"xor {reg_type(e.dtype)} {self.expr(e.a)}, "
                         f"{splat('true', e.dtype)}")

    def e_Select(self, e):
        c, x, y = self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value)
        t = reg_type(e.dtype)
        return self.b.op(f"select {reg_type(e.condition.dtype)} {c}, {t} {x}, {t} {y}")

    def e_Call(self, e):
        """An op, written as the op registry's llvm spelling says (targets/llvm/spellings.py)."""
        sp = ops.spelling("llvm", e.op)
        if sp is ops.EXPAND:
            return self.expr(ops.get_op(e.op).expand(*e.args))   # e.g. sigmoid
        if callable(sp):
            return sp(self, e)
        return I.math_call(self.b, sp, [self.expr(a) for a in e.args], e.dtype)

    def _call_extern(self, e):
        """``T.call_extern``: a declared external function; a region argument is a
        pointer to its first element."""
        types, vals = [], []
        for a in e.args[2:]:
            if isinstance(a, BufferRegion):
                ptr, _ = self._address(a.buffer, tuple(r.min for r in a.region))
                types.append("ptr")
                vals.append(f"ptr {ptr}")
            else:
                t = reg_type(a.dtype)
                types.append(t)
                vals.append(f"{t} {self.expr(a)}")
        name, ret = e.args[0].value, reg_type(e.dtype)
        self.b.declare(f"extern {name}", f"declare {ret} @{_symbol(name)}({', '.join(types)})")
        return self.b.op(f"call {ret} @{_symbol(name)}({', '.join(vals)})")

    def _if_then_else(self, cond, then_value, else_value, dt):
        b = self.b
        if D.lanes(cond.dtype) > 1:   # a vector condition has no branch: select
            c, x, y = self.expr(cond), self.expr(then_value), self.expr(else_value)
            return b.op(f"select {reg_type(cond.dtype)} {c}, {reg_type(dt)} {x}, "
                        f"{reg_type(dt)} {y}")
        c = self.expr(cond)
        lt, lf, end = b.label("ite.then"), b.label("ite.else"), b.label("ite.end")
        b.raw(f"br i1 {c}, label %{lt}, label %{lf}")
        b.start(lt)
        x = self.expr(then_value)
        from_t = b.current
        b.raw(f"br label %{end}")
        b.start(lf)
        y = self.expr(else_value)
        from_f = b.current
        b.raw(f"br label %{end}")
        b.start(end)
        return b.op(f"phi {reg_type(dt)} [{x}, %{from_t}], [{y}, %{from_f}]")

    def e_Let(self, e):
        old = self.vars.get(id(e.var))
        self.vars[id(e.var)] = self.expr(e.value)
        try:
            return self.expr(e.body)
        finally:
            self._restore(e.var, old)

    def _restore(self, var, old):
        if old is None:
            self.vars.pop(id(var), None)
        else:
            self.vars[id(var)] = old

    def _broadcast(self, v: str, dt: str, lanes: int) -> str:
        vt = reg_type(D.with_lanes(dt, lanes))
        x = self.b.op(f"insertelement {vt} poison, {reg_type(dt)} {v}, i32 0")
        return self.b.op(f"shufflevector {vt} {x}, {vt} poison, <{lanes} x i32> "
                         "zeroinitializer")

    def e_Broadcast(self, e):
        return self._broadcast(self.expr(e.value), e.value.dtype, e.lanes)

    def e_Ramp(self, e):
        dt = e.base.dtype
        base = self._broadcast(self.expr(e.base), dt, e.lanes)
        stride = self._broadcast(self.expr(e.stride), dt, e.lanes)
        t = reg_type(e.dtype)
        steps = "<" + ", ".join(f"{reg_type(dt)} {k}" for k in range(e.lanes)) + ">"
        m = self.b.op(f"mul {t} {stride}, {steps}")
        return self.b.op(f"add {t} {base}, {m}")

    # memory ---------------------------------------------------------------------------
    def _buffer_ptr(self, buf) -> str:
        try:
            return self.bufs[id(buf)]
        except KeyError:
            raise CodegenError(f"llvm codegen: buffer '{buf.name}' is accessed but is "
                               "neither a parameter nor allocated (Allocate) around the "
                               "access") from None

    def _flat_index(self, buf, indices):
        if len(indices) == 1:
            return indices[0]
        flat = None
        for ix, st in zip(indices, buf.default_strides()):
            term = ix if isinstance(st, IntImm) and st.value == 1 else ix * st
            flat = term if flat is None else flat + term
        return flat

    def _address(self, buf, indices):
        """``(pointer, lanes)`` of a contiguous access, or ``(None, per-lane pointers)``."""
        outer, self.in_index = self.in_index, True
        try:
            return self._address_of(buf, indices)
        finally:
            self.in_index = outer

    def _address_of(self, buf, indices):
        base = self._buffer_ptr(buf)
        last = indices[-1]
        contiguous = (isinstance(last, Ramp) and isinstance(last.stride, IntImm)
                      and last.stride.value == 1 and not buf.strides
                      and all(ix.lanes == 1 for ix in indices[:-1]))
        if contiguous:
            flat = index64(self._flat_index(buf, tuple(indices[:-1]) + (last.base,)))
            return self._gep(buf, base, self.expr(flat), flat.dtype), last.lanes
        flat = self._flat_index(buf, tuple(indices))
        if flat.lanes == 1:
            flat = index64(flat)
        v = self.expr(flat)
        n = flat.lanes
        if n == 1:
            return self._gep(buf, base, v, flat.dtype), 1
        vt = reg_type(flat.dtype)
        ptrs = []
        for lane in range(n):
            x = self.b.op(f"extractelement {vt} {v}, i32 {lane}")
            ptrs.append(self._gep(buf, base, x, D.element(flat.dtype)))
        return None, ptrs

    def _gep(self, buf, base: str, idx: str, idx_dt: str) -> str:
        i64 = I.convert(self.b, idx, idx_dt, "int64")
        return self.b.op(f"getelementptr inbounds {mem_type(buf.dtype)}, ptr {base}, "
                         f"i64 {i64}")

    def e_BufferLoad(self, e):
        # a loaded value is data, even inside an index (``A[B[i] * 3 % 5]``): only
        # its own address is index arithmetic
        outer, self.in_index = self.in_index, False
        try:
            return self._load(e)
        finally:
            self.in_index = outer

    def _load(self, e):
        buf = e.buffer
        ptr, lanes = self._address(buf, e.indices)
        al = D.itemsize(buf.dtype)
        b = self.b
        if ptr is not None:
            mt = mem_type(D.with_lanes(buf.dtype, lanes))
            v = b.op(f"load {mt}, ptr {ptr}, align {al}")
            dt = D.with_lanes(buf.dtype, lanes)
        else:
            st = mem_type(buf.dtype)
            dt = D.with_lanes(buf.dtype, len(lanes))
            vt = mem_type(dt)
            v = "poison"
            for k, p in enumerate(lanes):
                x = b.op(f"load {st}, ptr {p}, align {al}")
                v = b.op(f"insertelement {vt} {v}, {st} {x}, i32 {k}")
        if D.is_bool(buf.dtype):
            v = b.op(f"icmp ne {mem_type(dt)} {v}, {splat('0', D.with_lanes('int8', D.lanes(dt)))}")
        return v
