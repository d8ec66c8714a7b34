"""Expressions, values, regions and buffer declarations in the text form.

:class:`ExprPrinter` is the part of the printer (:mod:`cuvil_tir.printer`) that
statements and functions build on: unique names, constants that read back exactly,
operator precedence, intrinsic calls, ranges, regions and buffer declarations.

Example::

    >>> import cuvil_tir as T
    >>> i = T.var("i")
    >>> ExprPrinter().expr(T.max(i, 0) * 2)
    'T.max(i, 0) * 2'
"""

from __future__ import annotations

import json
import keyword
import math
import re

from . import dtype as D
from . import ops
from .buffer import Buffer
from .expr import (Add, And, Broadcast, BufferLoad, Call, Cast, CmpOp, Div, Expr, FloatImm,
                   FloorDiv, FloorMod, IntImm, Let, Max, Min, Mod, Mul, Not, Or, Ramp,
                   Select, StringImm, Sub, Var)
from .node import Node
from .stmt import BufferRegion, IterVar, Range

#: intrinsics printed as ``T.<op>(args)``, with their arity: the built-in ops of the
#: op registry (:mod:`cuvil_tir.ops`)
#: ops printed as ``T.<op>(...)`` (collective GPU ops and asynchronous copies have no
#: builder: ``T.call_intrin``)
INTRIN_ARITY = {n: ops.get_op(n).arity for n in ops.list_ops()
                if ops.get_op(n).arity >= 0 and ops.get_op(n).collective is None
                and ops.get_op(n).asynchronous is None}
_RESERVED = set(keyword.kwlist) | {"T", "True", "False", "None"}
_INFIX = {Add: ("+", 9), Sub: ("-", 9), Mul: ("*", 10), FloorDiv: ("//", 10),
          FloorMod: ("%", 10)}
_ATOM, _UNARY = 13, 11


def _is_true(e) -> bool:
    return isinstance(e, IntImm) and e.dtype == "bool" and e.value == 1


def _is_zero_of(e, dtype) -> bool:
    return isinstance(e, IntImm) and e.value == 0 and e.dtype == dtype


def sanitize(name: str) -> str:
    """Turn any name into a Python identifier that is not a keyword.

    Example::

        >>> sanitize("A.shared"), sanitize("for"), sanitize("1x")
        ('A_shared', 'for_', '_1x')
    """
    s = re.sub(r"\W", "_", name or "v")
    if not s or s[0].isdigit():
        s = "_" + s
    return s + "_" if s in _RESERVED else s


def float_text(v: float) -> str:
    """A float literal that reads back exactly (``1``, ``0.5``, ``"inf"``).

    Example::

        >>> float_text(1.0), float_text(0.1), float_text(float("-inf"))
        ('1', '0.1', '"-inf"')
    """
    if math.isnan(v):
        return '"nan"'
    if math.isinf(v):
        return '"inf"' if v > 0 else '"-inf"'
    if v == 0 and math.copysign(1.0, v) < 0:
        return "-0.0"
    if v.is_integer() and abs(v) < 1e16:
        return str(int(v))
    return repr(v)


class ExprPrinter:
    """Prints expressions and the values they appear in; names are made unique.

    ``exact``: the text must read back to an equal node (a whole function), so two
    bare int32 literals are typed to keep the parser from folding them.

    Example::

        >>> import cuvil_tir as T
        >>> ExprPrinter().value({"k": (1, 2.5, "s")})
        '{"k": (1, 2.5, "s")}'
    """

    def __init__(self, exact=True):
        self.exact = exact
        self.names: dict[int, str] = {}
        self.taken: set[str] = set()
        self.keep: list = []          # keep named objects alive so ids stay unique

    # names --------------------------------------------------------------------------
    def name(self, obj) -> str:
        n = self.names.get(id(obj))
        if n is not None:
            return n
        base = sanitize(getattr(obj, "name", "v"))
        n, k = base, 1
        while n in self.taken:
            n, k = f"{base}_{k}", k + 1
        self.taken.add(n)
        self.names[id(obj)] = n
        self.keep.append(obj)
        return n


    # values (annotations, attrs) -------------------------------------------------
    def value(self, v) -> str:
        if isinstance(v, IntImm) and v.dtype == "int32":
            return f"T.int32({v.value})"
        if isinstance(v, Expr):
            return self.expr(v)
        if isinstance(v, Buffer):
            return self.buffer_decl("T.Buffer", v, named=True)
        if isinstance(v, Range):
            return f"T.Range({self.expr(v.min)}, {self.expr(v.extent)})"
        if isinstance(v, IterVar):
            return (f"T.IterVar({self.name(v.var)}, T.Range({self.expr(v.dom.min)}, "
                    f"{self.expr(v.dom.extent)}), {json.dumps(v.kind)})")
        if isinstance(v, BufferRegion):
            return self.region(v)
        if isinstance(v, Node):
            return type(v).__name__
        if isinstance(v, bool) or v is None:
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, float):
            t = float_text(v)
            return t if not t.startswith('"') else f"T.float64({t})"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{self.value(k)}: {self.value(x)}"
                                   for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(self.value(x) for x in v) + "]"
        if isinstance(v, tuple):
            if len(v) == 1:
                return "(" + self.value(v[0]) + ",)"
            return "(" + ", ".join(self.value(x) for x in v) + ")"
        return repr(v)

    def annotations(self, ann: tuple) -> str:
        return "{" + ", ".join(f"{json.dumps(k)}: {self.value(v)}" for k, v in ann) + "}"

    # expressions ----------------------------------------------------------------------
    def expr(self, e) -> str:
        return self.prec(e)[0]

    def sub(self, e, need: int) -> str:
        text, p = self.prec(e)
        return text if p >= need else f"({text})"

    def const(self, e, bare=True) -> tuple[str, int]:
        if isinstance(e, IntImm):
            if e.dtype == "bool":
                return f"T.bool({bool(e.value)})", _ATOM
            if e.dtype == "int32" and bare:
                return str(e.value), (_ATOM if e.value >= 0 else _UNARY)
            return f"T.{e.dtype}({e.value})", _ATOM
        return f"T.{e.dtype}({float_text(e.value)})", _ATOM

    def call(self, fn: str, *args) -> str:
        return f"{fn}(" + ", ".join(args) + ")"

    def prec(self, e) -> tuple[str, int]:  # noqa: C901 - one dispatch over node kinds
        t = type(e)
        if isinstance(e, Var):
            return self.name(e), _ATOM
        if t is IntImm or t is FloatImm:
            return self.const(e)
        if t in _INFIX or (t is Div and D.is_float(e.dtype)):
            sym, p = _INFIX.get(t, ("/", 10))
            return self.infix(e, sym, p), p
        if isinstance(e, CmpOp):
            return self.infix(e, e.symbol, 4), 4
        if t is And or t is Or:
            p = 2 if t is And else 1
            return self.infix(e, "and" if t is And else "or", p), p
        if t is Not:
            return "not " + self.sub(e.a, 3), 3
        if t in (Div, Mod, Min, Max):
            fn = {Div: "T.truncdiv", Mod: "T.truncmod", Min: "T.min", Max: "T.max"}[t]
            return self.call(fn, *self.operands(e)), _ATOM
        if t is StringImm:
            return json.dumps(e.value), _ATOM
        if t is Cast:
            return self.call("T.Cast", json.dumps(e.dtype), self.expr(e.value)), _ATOM
        if t is Select:
            return self.call("T.Select", self.expr(e.condition), self.expr(e.true_value),
                             self.expr(e.false_value)), _ATOM
        if t is Call:
            return self.intrin(e), _ATOM
        if t is BufferLoad:
            return self.name(e.buffer) + self.indices(e.indices), _ATOM
        if t is Ramp:
            return self.call("T.Ramp", self.expr(e.base), self.expr(e.stride),
                             str(e.lanes)), _ATOM
        if t is Broadcast:
            return self.call("T.Broadcast", self.expr(e.value), str(e.lanes)), _ATOM
        if t is Let:
            extra = [] if e.var.dtype == e.value.dtype else [f"dtype={json.dumps(e.var.dtype)}"]
            return self.call("T.Let", self.name(e.var), self.expr(e.value),
                             self.expr(e.body), *extra), _ATOM
        if t.__name__ == "Reduce":
            args = [self.expr(e.source),
                    "axis=[" + ", ".join(self.name(a.var) for a in e.axis) + "]"]
            if e.condition is not None:
                args.append("where=" + self.expr(e.condition))
            return self.call("T." + e.combiner, *args), _ATOM
        return self.value(e), _ATOM

    def literal_pair(self, e) -> bool:
        # two bare int32 literals would fold when parsed: the exact form types the left
        return self.exact and type(e.a) is IntImm and type(e.b) is IntImm and \
            e.a.dtype == "int32"

    def operands(self, e) -> list[str]:
        if self.literal_pair(e):
            return [self.const(e.a, bare=False)[0], self.expr(e.b)]
        return [self.expr(e.a), self.expr(e.b)]

    def infix(self, e, sym: str, p: int) -> str:
        if self.literal_pair(e):
            left = self.const(e.a, bare=False)[0]
        else:
            # comparisons do not chain: parenthesize a comparison operand
            left = self.sub(e.a, p + 1 if p == 4 else p)
        return f"{left} {sym} {self.sub(e.b, p + 1)}"

    def intrin(self, e: Call) -> str:
        form = ops.find_spelling("tir", e.op) if ops.has_op(e.op) else None
        text = form(self, e) if form is not None else None
        if text is not None:
            return text
        args = [self.expr(a) for a in e.args]
        n = INTRIN_ARITY.get(e.op)
        # a namespaced op (``x86.dpbusd``) is no attribute of T: it prints through
        # T.call_intrin so the text parses back
        if n == len(e.args) and e.op.isidentifier():
            ref = e.args[1] if ops.get_op(e.op).conditional else e.args[0]
            if ref.dtype == e.dtype:
                return self.call("T." + e.op, *args)
        return self.call("T.call_intrin", json.dumps(e.dtype), json.dumps(e.op), *args)

    def elem_offset(self, e: Call) -> str | None:
        """TVMScript's ``A.elem_offset`` (the ``elem_offset`` op of buffer ``A``)."""
        if len(e.args) == 1 and isinstance(e.args[0], StringImm):
            return f"{e.args[0].value}.elem_offset"
        return None

    def device_launch(self, e: Call) -> str | None:
        """``T.device_launch("k", {"blockIdx.x": g, ...}, A, n)``."""
        if len(e.args) < 2 or not isinstance(e.args[1], IntImm):
            return None
        n = 2 * e.args[1].value
        pairs = e.args[2:2 + n]
        dims = ", ".join(f"{json.dumps(pairs[k].value)}: {self.expr(pairs[k + 1])}"
                         for k in range(0, n, 2))
        return self.call("T.device_launch", self.expr(e.args[0]), "{" + dims + "}", *(
            self.name(a.buffer) if isinstance(a, BufferRegion) else self.expr(a)
            for a in e.args[2 + n:]))

    def assume(self, e: Call) -> str | None:
        """``T.assume(cond)``."""
        return self.call("T.assume", self.expr(e.args[0])) if len(e.args) == 1 else None

    def parallel_launch(self, e: Call) -> str | None:
        """``T.parallel_launch("task", first, count, buffers and scalars...)``."""
        if len(e.args) < 3 or not isinstance(e.args[0], StringImm):
            return None
        return self.call("T.parallel_launch", *(
            self.name(a.buffer) if isinstance(a, BufferRegion) else self.expr(a)
            for a in e.args))

    def access_ptr(self, e: Call) -> str | None:
        """TVMScript's spelling, ``T.tvm_access_ptr(T.type_annotation("float16"), A.data,
        offset, extent, mask)`` (mask 1 read, 2 write, 3 both): it reads back as is."""
        if len(e.args) != 4:
            return None
        region, off, ext, mask = e.args
        ann = self.call("T.type_annotation", json.dumps(region.buffer.dtype))
        code = {"r": 1, "w": 2, "rw": 3}[mask.value]
        return self.call("T.tvm_access_ptr", ann, f"{self.name(region.buffer)}.data",
                         self.expr(off), self.expr(ext), str(code))

    def call_extern(self, e: Call) -> str | None:
        """``T.call_extern("dtype", "name", args..., effect="...")``; a region argument
        always prints as slices (``A[i:i + 1]``), so it never reads back as a load."""
        if len(e.args) < 2 or not all(isinstance(a, StringImm) for a in e.args[:2]):
            return None
        args = [json.dumps(e.dtype), json.dumps(e.args[0].value)]
        for a in e.args[2:]:
            if isinstance(a, BufferRegion):
                parts = []
                for rg in a.region:
                    b = self.bounds(rg.min, rg.extent)
                    parts.append(f"{b[0]}:{b[1]}" if len(b) == 2 else f"0:{b[0]}")
                args.append(f"{self.name(a.buffer)}[{', '.join(parts)}]")
            else:
                args.append(self.expr(a))
        if e.args[1].value != "opaque":
            args.append(f"effect={json.dumps(e.args[1].value)}")
        return self.call("T.call_extern", *args)

    def indices(self, idx) -> str:
        if not idx:
            return "[()]"
        return "[" + ", ".join(self.expr(i) for i in idx) + "]"

    # ranges and regions --------------------------------------------------------------
    def bounds(self, lo, ext) -> list[str]:
        """``[extent]`` for a zero-based range, else ``[lo, lo + extent]``."""
        if _is_zero_of(lo, ext.dtype):
            return [self.expr(ext)]
        if isinstance(lo, IntImm) and isinstance(ext, IntImm) and lo.dtype == ext.dtype:
            return [self.expr(lo), self.expr(IntImm(lo.value + ext.value, lo.dtype))]
        if lo.dtype == ext.dtype:
            return [self.expr(lo), self.infix(Add(lo, ext), "+", 9)]
        return [self.expr(lo), f"{self.sub(lo, 10)} + {self.sub(ext, 10)}"]

    def region(self, r: BufferRegion) -> str:
        parts = []
        for rg in r.region:
            if isinstance(rg.extent, IntImm) and rg.extent.value == 1 and \
                    rg.extent.dtype == rg.min.dtype:
                parts.append(self.expr(rg.min))
            else:
                b = self.bounds(rg.min, rg.extent)
                parts.append(f"{b[0]}:{b[1]}" if len(b) == 2
                             else f"{self.expr(rg.min)}:{b[0]}")
        return self.name(r.buffer) + ("[" + ", ".join(parts) + "]" if parts else "[()]")

    # buffers ---------------------------------------------------------------------------
    def buffer_decl(self, fn: str, b: Buffer, named=False) -> str:
        args = [_tuple(self.expr(s) for s in b.shape), json.dumps(b.dtype)]
        if named:
            args.append(f"name={json.dumps(b.name)}")
        if b.strides:
            args.append("strides=" + _tuple(self.expr(s) for s in b.strides))
        if b.scope != "global":
            args.append(f"scope={json.dumps(b.scope)}")
        if b.align != 64:
            args.append(f"align={b.align}")
        if b.axis_separators:
            args.append(f"axis_separators={list(b.axis_separators)}")
        return self.call(fn, *args)


def _tuple(items) -> str:
    items = list(items)
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"



# the ops with a text form of their own (TVMScript's spellings, which the parser reads
# back); every other op prints as T.<op>(...) or T.call_intrin(...)
ops.register_backend("tir")
ops.register_spellings("tir", {"call_extern": ExprPrinter.call_extern,
                               "access_ptr": ExprPrinter.access_ptr,
                               "assume": ExprPrinter.assume,
                               "elem_offset": ExprPrinter.elem_offset,
                               "parallel_launch": ExprPrinter.parallel_launch,
                               "device_launch": ExprPrinter.device_launch})
