"""The text form: print any IR node as TVMScript-style Python that ``T.parse`` reads back.

Conventions (see ``docs`` of :func:`to_text`): int32 constants are bare, other constants
typed (``T.float32(1)``); ``//`` and ``%`` are floor division/modulo, truncating ones are
``T.truncdiv``/``T.truncmod``; the root block of a function is implicit; variable names
are made unique (``i``, ``i_1``) so the text is unambiguous.

Example::

    >>> import cuvil_tir as T
    >>> i = T.var("i")
    >>> to_text((i + 1) * 2 // 3)
    '(i + 1) * 2 // 3'
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
                   Select, SizeVar, StringImm, Sub, Var)
from .function import PrimFunc
from .node import Node
from .stmt import (Allocate, AssertStmt, Block, BlockRealize, BufferRegion, BufferStore,
                   Evaluate, For, IfThenElse, IterVar, LetStmt, Range, SeqStmt, Stmt)
from .visitor import Visitor

#: loop kinds and the ``T.`` function that prints each
LOOP_FUNCS = {"serial": "serial", "parallel": "parallel", "vectorized": "vectorized",
              "unrolled": "unroll", "thread_binding": "thread_binding"}
#: intrinsics printed as ``T.<op>(args)``, with their arity: the built-in ops of the
#: op registry (:mod:`cuvil_tir.ops`)
INTRIN_ARITY = {n: ops.get_op(n).arity for n in ops.list_ops() if ops.get_op(n).arity >= 0}
_RESERVED = set(keyword.kwlist) | {"T", "True", "False", "None"}
_INFIX = {Add: ("+", 9), Sub: ("-", 9), Mul: ("*", 10), FloorDiv: ("//", 10),
          FloorMod: ("%", 10)}
_ATOM, _UNARY = 13, 11
_INDENT = "    "


def to_text(node, highlight=None) -> str:
    """The text form of ``node`` (a PrimFunc, statement, expression, buffer, …).

    ``highlight`` is a statement (loop, block, block realize, store …) of ``node``;
    its first line is underlined with ``^`` so error messages can point at it.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((8,), "float32", "A")
        >>> i = T.var("i")
        >>> loop = T.For(i, T.const(0), T.const(8), "parallel",
        ...              T.BufferStore(A, A[i] * 2.0, (i,)))
        >>> print(to_text(loop, highlight=loop))
        for i in T.parallel(8):
        ^^^^^^^^^^^^^^^^^^^^^^^
            A[i] = A[i] * T.float32(2)
    """
    # only a whole function must read back exactly; bare nodes print for people
    p = _Printer(highlight, exact=isinstance(node, PrimFunc))
    if isinstance(node, PrimFunc):
        p.func(node)
    elif isinstance(node, Stmt):
        p.suite(_flatten(node), 0)
    elif isinstance(node, Expr):
        return p.expr(node)
    else:
        return p.value(node)
    return "\n".join(p.lines)


def _flatten(s) -> list:
    if isinstance(s, SeqStmt):
        out = []
        for x in s.seq:
            out.extend(_flatten(x))
        return out
    return [s]


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


class _Printer:
    def __init__(self, highlight=None, exact=True):
        self.exact = exact
        self.names: dict[int, str] = {}
        self.taken: set[str] = set()
        self.keep: list = []          # keep named objects alive so ids stay unique
        self.loops: dict[int, For] = {}
        self.lines: list[str] = []
        self.highlight = highlight

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

    # lines --------------------------------------------------------------------------
    def emit(self, indent: int, text: str, node=None) -> None:
        self.lines.append(_INDENT * indent + text)
        h = self.highlight
        if h is not None and node is not None and (node is h or (
                isinstance(node, BlockRealize) and node.block is h)):
            self.lines.append(_INDENT * indent + "^" * len(text))

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
        if e.op == "call_extern" and len(e.args) >= 2 and \
                all(isinstance(a, StringImm) for a in e.args[:2]):
            return self.call_extern(e)
        args = [self.expr(a) for a in e.args]
        n = INTRIN_ARITY.get(e.op)
        if n == len(e.args):
            ref = e.args[1] if e.op == "if_then_else" else e.args[0]
            if ref.dtype == e.dtype:
                return self.call("T." + e.op, *args)
        return self.call("T.call_intrin", json.dumps(e.dtype), json.dumps(e.op), *args)

    def call_extern(self, e: Call) -> str:
        """``T.call_extern("dtype", "name", args..., effect="...")``; a region argument
        always prints as slices (``A[i:i + 1]``), so it never reads back as a load."""
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
        return self.call(fn, *args)

    # statements ------------------------------------------------------------------------
    def suite(self, stmts: list, indent: int) -> None:
        if not stmts:
            self.emit(indent, "pass")
        for k, s in enumerate(stmts):
            self.stmt(s, indent, last=k == len(stmts) - 1)

    def stmt(self, s, indent: int, last: bool = True) -> None:  # noqa: C901
        t = type(s)
        if t is BufferStore:
            self.emit(indent, f"{self.name(s.buffer)}{self.indices(s.indices)} = "
                              f"{self.expr(s.value)}", s)
        elif t is For:
            self.emit(indent, f"for {self.name(s.loop_var)} in {self.loop_head(s)}:", s)
            self.loops[id(s.loop_var)] = s
            self.suite(_flatten(s.body), indent + 1)
        elif t is SeqStmt:
            self.suite(_flatten(s), indent)
        elif t is IfThenElse:
            self.if_chain(s, indent, "if")
        elif t is LetStmt:
            self.let_stmt(s, indent, last)
        elif t is Allocate:
            self.emit(indent, f"with {self.buffer_decl('T.allocate', s.buffer)} as "
                              f"{self.name(s.buffer)}:", s)
            self.suite(_flatten(s.body), indent + 1)
        elif t is Evaluate:
            self.emit(indent, f"T.evaluate({self.expr(s.value)})", s)
        elif t is AssertStmt:
            args = [self.expr(s.condition), json.dumps(s.message)]
            args += [self.expr(v) for v in s.values]
            if s.kind != "assert":
                args.append(f"kind={json.dumps(s.kind)}")
            self.emit(indent, self.call("T.assert_", *args), s)
        elif t is BlockRealize:
            self.block(s.block, indent, s)
        elif t is Block:
            self.block(s, indent, None)
        else:
            self.emit(indent, self.value(s), s)

    def loop_head(self, s: For) -> str:
        args = self.bounds(s.min, s.extent)
        if s.kind == "thread_binding":
            args.append(f"thread={json.dumps(s.thread_tag)}")
        if s.annotations:
            args.append("annotations=" + self.annotations(s.annotations))
        if s.loop_var.dtype != s.min.dtype:
            args.append(f"dtype={json.dumps(s.loop_var.dtype)}")
        return self.call("T." + LOOP_FUNCS[s.kind], *args)

    def if_chain(self, s: IfThenElse, indent: int, word: str) -> None:
        self.emit(indent, f"{word} {self.expr(s.condition)}:", s)
        self.suite(_flatten(s.then_case), indent + 1)
        e = s.else_case
        if isinstance(e, IfThenElse):
            self.if_chain(e, indent, "elif")
        elif e is not None:
            self.emit(indent, "else:")
            self.suite(_flatten(e), indent + 1)

    def let_stmt(self, s: LetStmt, indent: int, last: bool) -> None:
        if last:
            # the rest of the suite is the body: ``x: T.int32 = value``
            self.emit(indent, f"{self.name(s.var)}: T.{s.var.dtype} = {self.expr(s.value)}", s)
            self.suite(_flatten(s.body), indent)
            return
        extra = "" if s.var.dtype == s.value.dtype else f", dtype={json.dumps(s.var.dtype)}"
        self.emit(indent, f"with T.LetStmt({self.expr(s.value)}{extra}) as "
                          f"{self.name(s.var)}:", s)
        self.suite(_flatten(s.body), indent + 1)

    def block(self, b: Block, indent: int, realize) -> None:
        self.emit(indent, f"with T.block({json.dumps(b.name)}):", realize or b)
        header = len(self.lines)
        i = indent + 1
        values = realize.iter_values if realize is not None else (None,) * len(b.iter_vars)
        if b.iter_vars and realize is not None and self.remappable(b, values):
            kinds = "".join("S" if iv.kind == "spatial" else "R" for iv in b.iter_vars)
            lhs = ", ".join(self.name(iv.var) for iv in b.iter_vars)
            vals = ", ".join(self.name(v) for v in values)
            self.emit(i, f"{lhs} = T.axis.remap({json.dumps(kinds)}, [{vals}])")
        else:
            for iv, v in zip(b.iter_vars, values):
                dom = self.bounds(iv.dom.min, iv.dom.extent)
                args = [dom[0] if len(dom) == 1 else f"({dom[0]}, {dom[1]})"]
                if v is not None:
                    args.append(self.expr(v))
                if iv.var.dtype != iv.dom.extent.dtype:
                    args.append(f"dtype={json.dumps(iv.var.dtype)}")
                self.emit(i, f"{self.name(iv.var)} = {self.call('T.axis.' + iv.kind, *args)}")
        if realize is not None and not _is_true(realize.predicate):
            self.emit(i, f"T.where({self.expr(realize.predicate)})")
        # a block's own buffers come first: its regions may name them
        for buf in b.alloc_buffers:
            self.emit(i, f"{self.name(buf)} = {self.buffer_decl('T.alloc_buffer', buf)}")
        if b.name != "root" or b.reads or b.writes:
            self.emit(i, "T.reads(" + ", ".join(self.region(r) for r in b.reads) + ")")
            self.emit(i, "T.writes(" + ", ".join(self.region(r) for r in b.writes) + ")")
        if b.annotations:
            self.emit(i, f"T.block_attr({self.annotations(b.annotations)})")
        if b.init is not None:
            self.emit(i, "with T.init():")
            self.suite(_flatten(b.init), i + 1)
        body = _flatten(b.body)
        if body or len(self.lines) == header:
            self.suite(body, i)

    def remappable(self, b: Block, values) -> bool:
        seen = set()
        for iv, v in zip(b.iter_vars, values):
            loop = self.loops.get(id(v)) if isinstance(v, Var) else None
            if loop is None or id(v) in seen or iv.kind not in ("spatial", "reduce"):
                return False
            seen.add(id(v))
            if not (iv.dom.min is loop.min or _same(iv.dom.min, loop.min)) or \
                    not _same(iv.dom.extent, loop.extent) or iv.var.dtype != v.dtype:
                return False
        return True

    # functions -------------------------------------------------------------------------
    def func(self, f: PrimFunc) -> None:
        name = f.attr("global_symbol", "main")
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            name = "main"
        params = []
        for p in f.params:
            if isinstance(p, Buffer):
                continue
            self.name(p)
        for p in f.params:
            if isinstance(p, Buffer):
                params.append(f"{self.name(p)}: {self.buffer_decl('T.Buffer', p)}")
            elif isinstance(p, SizeVar):
                params.append(f"{self.name(p)}: T.size_var({json.dumps(p.name)}"
                              f"{_dt_arg(p.dtype)})")
            else:
                params.append(f"{self.name(p)}: T.{p.dtype}")
        self.emit(0, "@T.prim_func")
        self.emit(0, f"def {name}(" + ", ".join(params) + "):")
        if tuple(f.attrs) != (("global_symbol", name),):
            self.emit(1, f"T.func_attr({self.annotations(f.attrs)})")
        for v in free_vars(f):
            fn = "T.size_var" if isinstance(v, SizeVar) else "T.var"
            self.emit(1, f"{self.name(v)} = {fn}({json.dumps(v.name)}{_dt_arg(v.dtype)})")
        body = f.body
        if implicit_root(body):
            for buf in body.block.alloc_buffers:
                self.emit(1, f"{self.name(buf)} = {self.buffer_decl('T.alloc_buffer', buf)}")
            self.suite(_flatten(body.block.body), 1)
        else:
            self.suite(_flatten(body), 1)


def _tuple(items) -> str:
    items = list(items)
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _dt_arg(dt: str) -> str:
    return "" if dt == "int32" else f", {json.dumps(dt)}"


def _same(a, b) -> bool:
    from .node import same
    return same(a, b)


def contains_block(s) -> bool:
    """True when a BlockRealize occurs anywhere in ``s``.

    Example::

        >>> import cuvil_tir as T
        >>> contains_block(T.Evaluate(T.const(0)))
        False
    """
    found = []

    class _V(Visitor):
        def visit_BlockRealize(self, n):
            found.append(n)

        def visit_Expr(self, n):
            return None

    _V().visit(s)
    return bool(found)


def implicit_root(body) -> bool:
    """True when ``body`` is a plain root block that the text form leaves implicit.

    The parser adds the root block back exactly when the function body has blocks or
    top-level ``T.alloc_buffer`` lines, so only such roots may be left out.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> implicit_root(T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")]).body)
        True
    """
    if not isinstance(body, BlockRealize) or body.iter_values or not _is_true(body.predicate):
        return False
    b = body.block
    if b.name != "root" or b.iter_vars or b.reads or b.writes or b.init is not None or \
            b.annotations:
        return False
    inner = _flatten(b.body)
    if len(inner) == 1 and isinstance(inner[0], BlockRealize) and \
            inner[0].block.name == "root":
        return False
    return bool(b.alloc_buffers) or contains_block(b.body)


def free_vars(f: PrimFunc) -> list:
    """Variables a function uses without binding them (symbolic shapes, mostly).

    Example::

        >>> import cuvil_tir as T
        >>> n = T.size_var("n")
        >>> A = T.placeholder((n,), name="A")
        >>> [v.name for v in free_vars(T.create_prim_func([A, T.compute((n,), lambda i: A[i], name="B")]))]
        ['n']
    """
    bound = {id(p) for p in f.params if isinstance(p, Var)}
    used: dict[int, Var] = {}
    seen_bufs: set[int] = set()

    class _V(Visitor):
        def visit_Var(self, v):
            used.setdefault(id(v), v)

        def visit_buffer(self, b):
            if id(b) not in seen_bufs:
                seen_bufs.add(id(b))
                self.visit(b.shape)
                self.visit(b.strides)

        def visit_For(self, s):
            bound.add(id(s.loop_var))
            self.generic_visit(s)

        def visit_LetStmt(self, s):
            bound.add(id(s.var))
            self.generic_visit(s)

        def visit_Let(self, e):
            bound.add(id(e.var))
            self.generic_visit(e)

        def visit_IterVar(self, iv):
            bound.add(id(iv.var))
            self.generic_visit(iv)

        def visit_Block(self, b):
            for buf in b.alloc_buffers:
                self.visit_buffer(buf)
            self.generic_visit(b)

        def visit_Allocate(self, s):
            self.visit_buffer(s.buffer)
            self.generic_visit(s)

    v = _V()
    v.visit(tuple(p for p in f.params if isinstance(p, Buffer)))
    v.visit(f.body)
    return [x for k, x in used.items() if k not in bound]
