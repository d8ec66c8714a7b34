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

from .buffer import Buffer
from .deep import deep_ok
from .expr import Expr, SizeVar, Var
from .function import PrimFunc
from .ir_module import IRModule
from .printer_expr import (INTRIN_ARITY, ExprPrinter, _is_true, float_text,  # noqa: F401
                           sanitize)
from .stmt import (Allocate, AssertStmt, Block, BlockRealize, BufferStore, Evaluate, For,
                   IfThenElse, LetStmt, SeqStmt, Stmt)
from .visitor import Visitor
from .node import same, set_text_form

#: loop kinds and the ``T.`` function that prints each
LOOP_FUNCS = {"serial": "serial", "parallel": "parallel", "vectorized": "vectorized",
              "unrolled": "unroll", "thread_binding": "thread_binding"}
_INDENT = "    "


@deep_ok
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
    if isinstance(node, IRModule):
        return module_text(node, highlight)
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


def module_text(mod: IRModule, highlight=None) -> str:
    """The text form of a module: a ``@T.ir_module`` class holding its functions,
    each printed on its own (names are unique within one function).

    Example::

        >>> import cuvil_tir as T
        >>> print(module_text(T.IRModule.from_func(T.PrimFunc([], T.Evaluate(T.const(0))))))
        @T.ir_module
        class Module:
            T.module_attrs({"entry": "main"})
        <BLANKLINE>
            @T.prim_func
            def main():
                T.func_attr({"calling_conv": "host"})
                T.evaluate(0)
    """
    lines = ["@T.ir_module", "class Module:"]
    if mod.attrs:
        p = _Printer()
        lines.append(_INDENT + f"T.module_attrs({p.annotations(mod.attrs)})")
    for f in mod.functions:
        p = _Printer(highlight, exact=True)
        p.func(f)
        lines.append("")
        lines.extend(_INDENT + x if x else x for x in p.lines)
    return "\n".join(lines)


def _flatten(s) -> list:
    if isinstance(s, SeqStmt):
        out = []
        for x in s.seq:
            out.extend(_flatten(x))
        return out
    return [s]



class _Printer(ExprPrinter):
    def __init__(self, highlight=None, exact=True):
        super().__init__(exact)
        self.loops: dict[int, For] = {}
        self.lines: list[str] = []
        self.highlight = highlight

    # lines --------------------------------------------------------------------------
    def emit(self, indent: int, text: str, node=None) -> None:
        self.lines.append(_INDENT * indent + text)
        h = self.highlight
        if h is not None and node is not None and (node is h or (
                isinstance(node, BlockRealize) and node.block is h)):
            self.lines.append(_INDENT * indent + "^" * len(text))

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
        name = json.dumps(b.name) if b.name else ""
        self.emit(indent, f"with T.block({name}):", realize or b)
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



def _dt_arg(dt: str) -> str:
    return "" if dt == "int32" else f", {json.dumps(dt)}"


def _same(a, b) -> bool:
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


# every node writes itself with this printer (str, repr, Node.script)
set_text_form(to_text)
