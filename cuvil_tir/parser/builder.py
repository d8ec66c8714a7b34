"""Statements and functions of the text form: build a PrimFunc from the lark tree.

Scoping follows Python: a loop, a block, a let or an allocation binds its names for
its body.  A block sees the loops around it only through its axes (``T.axis.*`` and
``T.where`` may name loop variables, nothing else in the block may).  Missing
``T.reads``/``T.writes`` are inferred from the block's body the way
``T.create_prim_func`` computes them.

Example::

    >>> import cuvil_tir as T
    >>> f = T.parse('''
    ... @T.prim_func
    ... def main(A: T.Buffer((4,), "float32")):
    ...     for i in T.serial(4):
    ...         A[i] = T.float32(0)
    ... ''')
    >>> f.body.kind, f.name
    ('serial', 'main')
"""

from __future__ import annotations

from lark import Tree

from .. import dtype as D
from ..buffer import Buffer
from ..block_regions import infer_block_regions, widen_block_regions
from ..region_check import check_block_regions
from ..errors import CuvilError, LoweringError
from ..expr import BufferLoad, Expr, SizeVar, Var, const
from ..function import PrimFunc
from ..printer import contains_block
from ..script import ScalarType
from ..stmt import (Allocate, AssertStmt, Block, BlockRealize, BufferStore, Evaluate, For,
                    IfThenElse, IterVar, LetStmt, Range, SeqStmt, seq, BufferRegion)
from ..visitor import Visitor
from .calls import BuiltinCalls
from .tvmscript import TVM_ASSIGN, TVMScriptMixin
from .tvm_lowered import SCOPE_ALIASES, TVMLoweredMixin
from .tvm_allreduce import TVMAllreduceMixin
from .tvm_calls import tvm_store_value
from .evaluate import LOOP_KINDS, ExprEvaluator, point_range, span
from .values import Builtin, Spec, is_builtin as _is, to_expr
from ..te.create_prim_func import access_regions


class _BlockCtx:
    """What the header lines of one block (or the function's root) declare."""

    def __init__(self, name: str, is_func: bool = False):
        self.name = name
        self.is_func = is_func
        self.iter_vars: list = []
        self.values: list = []
        self.predicate = None
        self.reads = None
        self.writes = None
        self.annotations = None
        self.allocs: list = []
        self.init = None
        self.attrs = None
        self.trees: dict = {}     # "reads"/"writes" -> the statement declaring them


def _stmts_to_seq(stmts: list):
    if len(stmts) == 1:
        return stmts[0]
    return SeqStmt(tuple(stmts))


class Builder(TVMScriptMixin, TVMLoweredMixin, TVMAllreduceMixin, BuiltinCalls,
              ExprEvaluator):
    """Turns the tree of one ``def`` into a :class:`PrimFunc`."""

    # functions ---------------------------------------------------------------------------
    def function(self, start: Tree) -> PrimFunc:
        self.handles: dict = {}          # id(handle parameter) -> its matched buffer
        fdef = start.children[-1]
        name = str(fdef.children[0])
        params = next((c for c in fdef.children[1:] if isinstance(c, Tree)
                       and c.data == "params"), None)
        suite = fdef.children[-1].children
        k, rest = 0, []
        # T.var / T.size_var declarations at the top (after T.func_attr, as printed):
        # parameter shapes may use them
        while k < len(suite) and (self.is_decl(suite[k]) or _is_func_attr(suite[k])):
            if self.is_decl(suite[k]):
                self.statement(suite[k], None)
            else:
                rest.append(suite[k])
            k += 1
        plist = self.params(params.children if params is not None else [])
        ctx = _BlockCtx("root", is_func=True)
        body = _stmts_to_seq(self.suite(rest + list(suite[k:]), ctx))
        plist = self.match_params(plist, fdef)
        if ctx.allocs or (contains_block(body) and not (
                isinstance(body, BlockRealize) and body.block.name == "root")):
            root = Block("root", (), (), (), body, None, tuple(ctx.allocs))
            body = BlockRealize((), const(True), root)
        attrs = ctx.attrs if ctx.attrs is not None else {"global_symbol": name}
        return PrimFunc(tuple(plist), body, attrs)

    def is_decl(self, t) -> bool:
        if t.data != "assign" or t.children[1].data != "call":
            return False
        try:
            callee = self.eval(t.children[1].children[0])
        except CuvilError:
            return False
        return _is(callee, "var") or _is(callee, "size_var")

    def params(self, trees) -> list:
        out: list = [None] * len(trees)
        deferred = []
        for k, p in enumerate(trees):
            pname = str(p.children[0])
            if len(p.children) < 2:
                raise self.error(f"parameter '{pname}' needs an annotation: "
                                 "T.Buffer((shape), dtype) or a scalar type such as "
                                 "T.int32", p)
            ann = p.children[1]
            if ann.data == "call" and _is(self.eval(ann.children[0]), "Buffer"):
                deferred.append((k, pname, ann))   # shapes may use later scalar params
                continue
            spec = self.eval(ann)
            if isinstance(spec, ScalarType):
                var = Var(pname, spec.dtype)
            elif isinstance(spec, Spec) and spec.kind in ("var", "size_var"):
                var = self.make_var(pname, spec)
            else:
                raise self.error(f"parameter '{pname}': expected T.Buffer(...) or a scalar "
                                 f"type such as T.int32, found {spec!r}", ann)
            self.bind(pname, var, "param")
            out[k] = var
        for k, pname, ann in deferred:
            buf = self.make_buffer(pname, self.eval(ann), ann)
            self.bind(pname, buf, "param")
            out[k] = buf
        return out

    def make_var(self, name: str, spec: Spec) -> Var:
        dtype = D.canonical(spec.args[1])
        return (SizeVar if spec.kind == "size_var" else Var)(name, dtype)

    def make_buffer(self, name: str, spec, tree) -> Buffer:
        if not isinstance(spec, Spec) or spec.kind not in ("Buffer", "alloc_buffer",
                                                           "allocate"):
            raise self.error(f"expected a buffer declaration for '{name}', found {spec!r}",
                             tree)
        shape, dtype = spec.args
        if not isinstance(shape, (tuple, list)):
            shape = (shape,)
        kw = spec.kwargs
        self.buffer_extras(kw, tree, name=name)
        strides = kw.get("strides") or ()
        return self.wrap(lambda: Buffer(tuple(to_expr(s, "int32") for s in shape),
                                        D.canonical(dtype), name,
                                        tuple(to_expr(s, "int32") for s in strides),
                                        SCOPE_ALIASES.get(kw.get("scope", "global"),
                                                          kw.get("scope", "global")),
                                        int(kw.get("align", 64)),
                                        tuple(kw.get("axis_separators") or ())),
                         tree)

    # suites ----------------------------------------------------------------------------
    def suite(self, trees, ctx) -> list:
        out: list = []
        for k, t in enumerate(trees):
            rest = trees[k + 1:]
            s = self.wrap(self.statement, t, t, ctx, rest)
            if s == "consumed":
                out.append(self.let_rest)
                break
            if s is not None:
                out.append(s)
        return out

    def body(self, suite_tree, ctx=None, frame=None, kind="alias"):
        self.frames.append({} if frame is None else {n: (v, kind) for n, v in frame.items()})
        try:
            stmts = self.suite(suite_tree.children, ctx)
        finally:
            self.frames.pop()
        return seq(*stmts) if not stmts else _stmts_to_seq(stmts)

    def statement(self, t, ctx, rest=()):
        fn = getattr(self, "s_" + t.data, None)
        if fn is None:
            raise self.error(f"this statement ({t.data}) is not part of the text form", t)
        return fn(t, ctx, rest)

    def s_pass_stmt(self, t, ctx, rest):
        return None

    def s_expr_stmt(self, t, ctx, rest):
        node = t.children[0]
        callee = self.eval(node.children[0]) if node.data == "call" else None
        self.allow_loop_vars = _is(callee, "where")
        try:
            v = self.eval(node)
        finally:
            self.allow_loop_vars = False
        if isinstance(v, Spec) and v.kind == "launch_thread":
            # T.launch_thread(env_thread_var, n): the rest of the suite runs in it
            name = v.args[0].var.name if v.args and hasattr(v.args[0], "var") else ""
            self.let_rest = self.launch_thread(name, v, lambda var: self.rest_of_suite(
                var, "loop", ctx, rest), t)
            return "consumed"
        if isinstance(v, Spec):
            return self.header(v, ctx, t)
        if isinstance(v, Expr):
            return Evaluate(v)
        if isinstance(v, str) and node.data == "string":
            return None                # a docstring
        raise self.error(f"expected a statement, found the value {v!r}", t)

    def header(self, v: Spec, ctx, t):
        if v.kind == "evaluate":
            return Evaluate(v.args[0])
        if v.kind == "stmt":
            return v.args[0]
        if v.kind == "attr":
            # T.attr(reducer, "reduce_scope", ...) as a statement: for the rest
            self.reducer = self.reduce_scope(v, t)
            return None
        if v.kind == "assert":
            return AssertStmt(*v.args)
        if v.kind == "func_attr":
            if ctx is None or not ctx.is_func:
                raise self.error("T.func_attr belongs at the top of the function body", t)
            ctx.attrs = dict(v.args[0])
            return None
        where = {"reads": "reads", "writes": "writes", "where": "predicate",
                 "block_attr": "annotations"}.get(v.kind)
        if where is None:
            raise self.error(f"T.{v.kind}(...) is not a statement here", t)
        if ctx is None or ctx.is_func:
            raise self.error(f"T.{v.kind} must be directly inside a 'with T.block(...)'", t)
        if v.kind in ("reads", "writes"):
            regions = []
            for r in v.args:
                items = r if isinstance(r, (list, tuple)) else (r,)
                for x in items:
                    regions.append(_region(x))
            setattr(ctx, where, tuple(regions))
            ctx.trees[v.kind] = t
        elif v.kind == "where":
            setattr(ctx, where, to_expr(v.args[0], "bool"))
        else:
            setattr(ctx, where, dict(v.args[0]))
        return None

    def s_assign(self, t, ctx, rest):
        lhs, rhs = t.children
        if lhs.data == "getitem":
            ld = self.eval(lhs)
            if not isinstance(ld, BufferLoad):
                raise self.error("expected a buffer element on the left of '=', e.g. "
                                 "A[i] = ...", lhs)
            return self.store(ld, to_expr(self.eval(rhs), ld.buffer.dtype))
        names = _target_names(lhs)
        if names is None:
            raise self.error("expected a name, names or a buffer element on the left of "
                             "'='", lhs)
        callee = self.eval(rhs.children[0]) if rhs.data == "call" else None
        axis = isinstance(callee, Builtin) and callee.name.startswith("axis.")
        self.allow_loop_vars = axis
        try:
            v = self.eval(rhs)
        finally:
            self.allow_loop_vars = False
        if axis:
            return self.axes(names, v, ctx, t)
        if len(names) != 1:
            if isinstance(v, (tuple, list)) and len(v) == len(names):
                for n, x in zip(names, v):
                    if isinstance(x, Spec) and x.kind in ("var", "size_var"):
                        self.bind(n, self.make_var(n, x), "decl")   # n, m = T.int64(), ...
                    else:
                        self.bind(n, x)
                return None
            raise self.error(f"cannot unpack into {len(names)} names", t)
        name = names[0]
        if isinstance(v, Spec) and (v.kind in TVM_ASSIGN or v.kind == "Buffer"):
            return self.tvm_assign(name, v, ctx, t, rhs)
        if isinstance(v, Spec) and v.kind == "alloc_buffer":
            if ctx is None:
                raise self.error("T.alloc_buffer must be directly inside a block or the "
                                 "function body; use 'with T.allocate(...) as X:' for an "
                                 "Allocate statement", t)
            buf = self.make_buffer(name, v, rhs)
            ctx.allocs.append(buf)
            self.bind(name, buf, "buffer")
            return None
        if isinstance(v, Spec) and v.kind in ("var", "size_var"):
            self.bind(name, self.make_var(name, v), "decl")
            return None
        if isinstance(v, Spec) and v.kind == "launch_thread":
            self.let_rest = self.launch_thread(name, v, lambda var: self.rest_of_suite(
                var, "loop", ctx, rest), t)
            return "consumed"
        if isinstance(v, Spec) and v.kind == "env_thread":
            return self.env_thread(name, v, t)
        if isinstance(v, Spec) and v.kind == "allocate":
            return self.allocate_rest(name, v, ctx, rest, t)
        if isinstance(v, Expr):
            return self.let_stmt(Var(name, v.dtype), v, ctx, rest)
        self.bind(name, v)
        return None

    def s_augassign(self, t, ctx, rest):
        # C[i] += x is C[i] = C[i] + x
        lhs, op, rhs = t.children
        ld = self.eval(lhs) if lhs.data == "getitem" else None
        if not isinstance(ld, BufferLoad):
            raise self.error(f"expected a buffer element on the left of '{op}', e.g. "
                             f"C[i] {op} x", lhs)
        value = self.wrap(self.binop, t, str(op)[:-1], ld, self.eval(rhs))
        return self.store(ld, to_expr(value, ld.buffer.dtype))

    def store(self, ld: BufferLoad, value: Expr) -> BufferStore:
        """``buffer[indices] = value``; in TVM's dialect with TVM's store conversion."""
        if self.tvm_dialect:
            value = tvm_store_value(value, ld.buffer)
        return BufferStore(ld.buffer, value, ld.indices)

    def s_annassign(self, t, ctx, rest):
        target, ann, value = t.children
        if target.data != "name":
            raise self.error("expected a name before ':' (a let binding x: T.int32 = ...)",
                             target)
        dt = self.eval(ann)
        if not isinstance(dt, ScalarType):
            raise self.error(f"expected a scalar type such as T.int32 after ':', found "
                             f"{dt!r}", ann)
        v = to_expr(self.eval(value), dt.dtype)
        return self.let_stmt(Var(str(target.children[0]), dt.dtype), v, ctx, rest)

    def let_stmt(self, var, value, ctx, rest):
        # ``x: T.int32 = v`` binds x for the rest of the suite
        self.let_rest = LetStmt(var, value, self.rest_of_suite(var, "let", ctx, rest))
        return "consumed"

    def rest_of_suite(self, var, kind, ctx, rest):
        """The statements ``rest`` with ``var`` bound (as a ``kind``) around them."""
        self.frames.append({var.name: (var, kind)})
        try:
            stmts = self.suite(list(rest), ctx)
        finally:
            self.frames.pop()
        return seq(*stmts) if not stmts else _stmts_to_seq(stmts)

    def axes(self, names, v: Spec, ctx, t):
        if ctx is None or ctx.is_func:
            raise self.error("T.axis.* must be directly inside a 'with T.block(...)'", t)
        if v.kind == "axis.remap":
            kinds, values = v.args
            if len(kinds) != len(values) or len(names) != len(values):
                raise self.error(f"T.axis.remap: {len(kinds)} kinds, {len(values)} values "
                                 f"and {len(names)} names must agree", t)
            for n, k, val in zip(names, kinds, values):
                dom = self.loop_dom.get(id(val)) if isinstance(val, Var) else None
                if dom is None or k not in "SR":
                    raise self.error("T.axis.remap expects kinds 'S'/'R' and loop variables "
                                     f"of enclosing loops, found {k!r} and {val!r}", t)
                self.axis(n, "spatial" if k == "S" else "reduce", Range(*dom), val, ctx)
            return None
        if len(names) != 1:
            raise self.error(f"T.{v.kind} declares one axis, found {len(names)} names", t)
        if len(v.args) != 2:
            raise self.error(f"T.{v.kind} expects (domain, value), e.g. "
                             f"T.{v.kind}(128, i)", t)
        dom, val = v.args
        rng = span(*dom) if isinstance(dom, (tuple, list)) else \
            Range(const(0, to_expr(dom, "int32").dtype), to_expr(dom, "int32"))
        self.axis(names[0], v.kind[5:], rng, to_expr(val, rng.extent.dtype), ctx,
                  v.kwargs.get("dtype"))
        return None

    def axis(self, name, kind, dom, value, ctx, dtype=None):
        var = Var(name, dtype or dom.extent.dtype)
        ctx.iter_vars.append(IterVar(var, dom, kind))
        ctx.values.append(value)
        self.bind(name, var, "axis")

    # compound statements ----------------------------------------------------------------
    def s_for_stmt(self, t, ctx, rest):
        targets, it, suite = t.children
        names = [str(n) for n in targets.children]
        spec = self.eval(it)
        if not isinstance(spec, Spec) or spec.kind not in tuple(LOOP_KINDS) + ("grid",):
            raise self.error("expected a loop such as T.serial(n), T.parallel(n), "
                             "T.vectorized(n), T.unroll(n), T.thread_binding(n, thread=...) "
                             f"or T.grid(...), found {spec!r}", it)
        if spec.kind == "grid":
            loops = [(None, Range(const(0, to_expr(e, "int32").dtype), to_expr(e, "int32")))
                     for e in spec.args]
        else:
            a = spec.args
            if len(a) not in (1, 2):
                raise self.error(f"T.{spec.kind} expects (extent) or (start, stop)", it)
            rng = span(*a) if len(a) == 2 else Range(const(0, to_expr(a[0], "int32").dtype),
                                                     to_expr(a[0], "int32"))
            loops = [(spec, rng)]
        if len(names) != len(loops):
            raise self.error(f"{len(names)} loop variable(s) for {len(loops)} loop(s)",
                             targets)
        vars_ = []
        for n, (sp, rng) in zip(names, loops):
            dtype = sp.kwargs.get("dtype", rng.min.dtype) if sp is not None else rng.min.dtype
            v = Var(n, dtype)
            self.loop_dom[id(v)] = (rng.min, rng.extent)
            vars_.append(v)
        body = self.body(suite, None, {v.name: v for v in vars_}, "loop")
        for v, (sp, rng) in reversed(list(zip(vars_, loops))):
            kind = LOOP_KINDS[sp.kind] if sp is not None else "serial"
            kw = sp.kwargs if sp is not None else {}
            body = For(v, rng.min, rng.extent, kind, body, kw.get("thread"),
                       kw.get("annotations") or ())
        return body

    def s_if_stmt(self, t, ctx, rest):
        ch = t.children
        cond = to_expr(self.eval(ch[0]), "bool")
        then = self.body(ch[1])
        other = None
        tail = ch[2:]
        if tail and tail[0].data == "elif_":
            other = self.s_if_stmt(Tree("if_stmt", list(tail[0].children) + list(tail[1:]),
                                        tail[0].meta), ctx, rest)
        elif tail:
            other = self.body(tail[0].children[0])
        return IfThenElse(cond, then, other)

    def s_with_stmt(self, t, ctx, rest):
        head, suite = t.children[0], t.children[-1]
        names = [str(n) for n in t.children[1].children] if len(t.children) == 3 else []
        spec = self.eval(head)
        kind = spec.kind if isinstance(spec, Spec) else None
        if kind == "block":
            return self.block(spec, suite, ctx, t)
        if kind == "init":
            if ctx is None or ctx.is_func:
                raise self.error("'with T.init():' must be directly inside a block", t)
            ctx.init = self.body(suite)
            return None
        if kind == "allocate_const" and len(names) == 1:
            return self.with_allocate_const(names[0], spec, suite, t)
        if kind == "attr" and not names:
            return self.with_attr(spec, suite, head)
        if kind == "launch_thread" and len(names) == 1:
            return self.launch_thread(names[0], spec, lambda var: self.body(
                suite, None, {var.name: var}, "loop"), head)
        if kind in ("LetStmt", "allocate"):
            if len(names) != 1:
                raise self.error(f"'with T.{kind}(...)' needs 'as <name>'", t)
            if kind == "allocate":
                buf = self.make_buffer(names[0], spec, head)
                return Allocate(buf, self.body(suite, None, {names[0]: buf}, "buffer"))
            value = to_expr(spec.args[0])
            var = Var(names[0], spec.kwargs.get("dtype", value.dtype))
            return LetStmt(var, value, self.body(suite, None, {var.name: var}, "let"))
        raise self.error("expected 'with T.block(name)', 'with T.init()', "
                         f"'with T.allocate(...) as X' or 'with T.LetStmt(v) as x', found "
                         f"{spec!r}", head)

    def _outer_ranges(self) -> dict:
        """``{Var: Range}`` of the loops and block iterators in scope (the region
        check's small nests may be enumerated through them)."""
        out = {}
        for c in self.block_ctxs:
            out.update((iv.var, iv.dom) for iv in c.iter_vars)
        for frame in self.frames:
            for v, kind in frame.values():
                dom = self.loop_dom.get(id(v)) if kind == "loop" else None
                if dom is not None:
                    out[v] = Range(*dom)
        return out

    def block(self, spec: Spec, suite, outer_ctx, t):
        # TVMScript's unnamed block (`with T.block():`) has the empty name, as in TVM
        name = spec.args[0] if spec.args else spec.kwargs.get("name_hint", "")
        if len(spec.args) > 1 or set(spec.kwargs) - {"name_hint"} or not isinstance(name, str):
            raise self.error("T.block expects the block's name, e.g. T.block(\"C\"), or "
                             "nothing (an unnamed block)", t)
        ctx = _BlockCtx(name)
        self.frames.append({})
        self.block_frames.append(len(self.frames) - 1)
        self.block_ctxs.append(ctx)
        try:
            stmts = self.suite(suite.children, ctx)
        finally:
            self.frames.pop()
            self.block_frames.pop()
            self.block_ctxs.pop()
        body = seq(*stmts) if not stmts else _stmts_to_seq(stmts)
        writes, reads = ctx.writes, ctx.reads
        if ctx.name == "root" and not ctx.iter_vars:
            reads, writes = reads or (), writes or ()
        if reads is None or writes is None:
            r, w = _infer(Block(ctx.name, tuple(ctx.iter_vars), (), (), body, ctx.init,
                                tuple(ctx.allocs), ctx.annotations or ()))
            reads = r if reads is None else reads
            writes = w if writes is None else writes
        blk = Block(ctx.name, tuple(ctx.iter_vars), reads, writes, body, ctx.init,
                    tuple(ctx.allocs), ctx.annotations or ())
        if ctx.trees:
            try:
                check_block_regions(blk, self._outer_ranges())
            except LoweringError as err:
                if self.tvm_dialect:
                    # TVM does not check declared regions: a TVM test's under-stated
                    # T.reads/T.writes are read as covering what the body accesses
                    blk = widen_block_regions(blk)
                    pred = ctx.predicate if ctx.predicate is not None else const(True)
                    return BlockRealize(tuple(ctx.values), pred, blk)
                kind = "writes" if err.message.startswith(f"block '{blk.name}' writes") \
                    else "reads"
                raise self.error(err.message, ctx.trees.get(kind) or
                                 next(iter(ctx.trees.values()))) from None
        pred = ctx.predicate if ctx.predicate is not None else const(True)
        return BlockRealize(tuple(ctx.values), pred, blk)


def _is_func_attr(t) -> bool:
    if t.data != "expr_stmt" or not isinstance(t.children[0], Tree) or \
            t.children[0].data != "call":
        return False
    f = t.children[0].children[0]
    return isinstance(f, Tree) and f.data == "getattr" and str(f.children[1]) == "func_attr"


def _target_names(t):
    if t.data == "name":
        return [str(t.children[0])]
    if t.data == "tuple" and all(c.data == "name" for c in t.children):
        return [str(c.children[0]) for c in t.children]
    return None


def _region(x):
    if isinstance(x, BufferRegion):
        return x
    if isinstance(x, BufferLoad):
        return BufferRegion(x.buffer, tuple(point_range(i) for i in x.indices))
    if isinstance(x, Buffer):
        return BufferRegion.full(x)
    raise CuvilError(f"T.reads/T.writes expect buffer regions such as A[i, 0:4], found {x!r}")


def _stores(stmts) -> list:
    found: list = []

    class _V(Visitor):
        def visit_BufferStore(self, s):
            found.append(BufferLoad(s.buffer, s.indices))
            self.generic_visit(s)

        def visit_BlockRealize(self, s):
            return None       # nested blocks declare their own accesses

    _V().visit(tuple(x for x in stmts if x is not None))
    return found


def _infer(blk: Block) -> tuple:
    """``(reads, writes)`` of a block without declared regions.

    A block of loads and stores only gets the regions ``T.create_prim_func`` would
    give it; one with loops or blocks inside gets them relaxed over those loops and the
    inner blocks' iterators.  A written buffer leaves the reads only with an init.
    """
    if _has_loops_or_blocks(blk.body) or (blk.init is not None and
                                          _has_loops_or_blocks(blk.init)):
        return infer_block_regions(blk)
    writes = tuple(access_regions(tuple(_stores((blk.body, blk.init)))))
    written = [w.buffer for w in writes] if blk.init is not None else []
    local = list(blk.alloc_buffers)
    reads = tuple(access_regions(tuple(x for x in (blk.body, blk.init) if x is not None),
                                 exclude=written + local))
    return reads, tuple(w for w in writes if all(w.buffer is not b for b in local))


def _has_loops_or_blocks(s) -> bool:
    found = []

    class _V(Visitor):
        def visit_For(self, n):
            found.append(n)

        def visit_BlockRealize(self, n):
            found.append(n)

    _V().visit(s)
    return bool(found)

