"""Expressions of the text form: evaluate a lark expression tree to IR or Python values.

Literals stay Python values (``128``, ``"float32"``) until an IR node needs them, so
annotation dicts and shapes read naturally; operators on IR expressions build nodes
directly, without folding or promotion, so the printed IR reads back exactly.  The
``T.<name>`` functions the parser interprets are :class:`Builtin` markers; calling
one returns IR or a *spec* that a statement turns into IR (a loop, a block …).

Example::

    >>> import cuvil_tir as T
    >>> f = T.parse("def f(A: T.Buffer((4,), 'int8')):\\n    A[0] = A[1] + T.int8(2)\\n")
    >>> str(f.body.value)
    'A[1] + T.int8(2)'
"""

from __future__ import annotations

import ast
import difflib
import functools
import types

from lark import Token, Tree
import cuvil_tir

from .. import dtype as D
from .. import script
from ..buffer import Buffer
from ..errors import CuvilError, ParseError
from ..expr import (EQ, GE, GT, LE, LT, NE, Add, And, BufferLoad, Cast,
                    Div, Expr, FloorDiv, FloorMod, IntImm, Let, Mul, Not, Or,
                    Sub, Var)
from ..op import call_extern
from .tvm_calls import TVM_FUNCS, float_literal_promotes, tvm_builtin
from .values import (NODE_CONSTRUCTORS, Builtin, Pointer, Spec, is_builtin, is_py_scalar,
                     to_expr, unify)
from ..printer import INTRIN_ARITY
from ..stmt import BufferRegion, Range
from ..arith import simplify
from ..node import same


class Namespace:
    """The value of ``T`` inside the text form."""

    def __repr__(self) -> str:
        return "T"


NAMESPACE = Namespace()

#: ``T.<name>`` interpreted by the parser rather than called
BUILTINS = {"Buffer", "alloc_buffer", "allocate", "block", "axis", "reads", "writes",
            "init", "where", "block_attr", "func_attr", "evaluate", "call_intrin",
            "serial", "parallel", "vectorized", "unroll", "thread_binding", "grid",
            "LetStmt", "Let", "Cast", "Select", "Ramp", "Broadcast", "min", "max",
            "truncdiv", "truncmod", "floordiv", "floormod", "var", "size_var",
            "prim_func", "match_buffer", "decl_buffer", "buffer_decl", "allocate_const",
            "likely", "let", "assert_", "launch_thread", "env_thread", "attr",
            "comm_reducer", "reinterpret", "tvm_thread_allreduce"} | set(INTRIN_ARITY) | \
    set(NODE_CONSTRUCTORS)
AXIS_KINDS = ("spatial", "reduce", "scan", "opaque")
#: TVMScript's short axis names
AXIS_ALIASES = {"S": "spatial", "R": "reduce"}
LOOP_KINDS = {"serial": "serial", "parallel": "parallel", "vectorized": "vectorized",
              "unroll": "unrolled", "thread_binding": "thread_binding"}


_is = is_builtin

_CMP = {"<": LT, "<=": LE, ">": GT, ">=": GE, "==": EQ, "!=": NE}
_ARITH = {"+": Add, "-": Sub, "*": Mul, "/": Div, "//": FloorDiv, "%": FloorMod}
_PY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
       "/": lambda a, b: a / b, "//": lambda a, b: a // b, "%": lambda a, b: a % b,
       "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
       ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}


def pos(t) -> tuple[int, int]:
    """1-based (line, column) of a token, or of the first token of a tree."""
    if isinstance(t, Token):
        return t.line or 1, t.column or 1
    # positions come from the first token: propagating them to every tree would double
    # the parse time
    for c in getattr(t, "children", ()):
        if isinstance(c, (Tree, Token)):
            return pos(c)
    return 1, 1


class ExprEvaluator:
    """Evaluates expression trees against scopes of names (see the builder)."""

    def __init__(self, env: dict, source: str, filename=None, line_offset=0, col_offset=0):
        self.env = env
        self.lines = source.splitlines()
        self.filename = filename
        self.line_offset = line_offset
        self.col_offset = col_offset
        self.frames: list[dict] = [{}]     # name -> (value, kind)
        self.block_frames: list[int] = []  # frame index of each enclosing block
        self.allow_loop_vars = False
        self.loop_dom: dict[int, tuple] = {}
        self.block_ctxs: list = []         # the headers of the enclosing blocks
        self.launched: list = []           # (tag, var, extent) of T.launch_thread around
        self.reducer = None                # the reducer of T.attr(..., "reduce_scope")

    # errors ------------------------------------------------------------------------
    def error(self, message: str, tree) -> ParseError:
        line, col = pos(tree)
        src = self.lines[line - 1] if 1 <= line <= len(self.lines) else None
        return ParseError(message, line=line + self.line_offset, column=col + self.col_offset,
                          source_line=None if src is None else " " * self.col_offset + src,
                          filename=self.filename)

    def wrap(self, fn, tree, *args):
        try:
            return fn(*args)
        except ParseError:
            raise
        except CuvilError as err:
            raise self.error(err.message, tree) from None
        except (TypeError, ValueError, ZeroDivisionError, AttributeError, KeyError,
                IndexError) as err:
            raise self.error(str(err), tree) from None

    @functools.cached_property
    def tvm_dialect(self) -> bool:
        """True when the function names its ``T`` through a module flagged
        ``__tvmscript_namespace__`` (written for TVM's Python frontend, whose operator
        overloading promotes an integer meeting a float literal)."""
        return any(isinstance(v, types.ModuleType) and
                   getattr(v, "__tvmscript_namespace__", False) is True
                   for v in map(self.env.__getitem__, self.env))

    # names ---------------------------------------------------------------------------
    def bind(self, name: str, value, kind: str = "alias") -> None:
        self.frames[-1][name] = (value, kind)

    def lookup(self, name: str, tree):
        for depth in range(len(self.frames) - 1, -1, -1):
            hit = self.frames[depth].get(name)
            if hit is None:
                continue
            value, kind = hit
            # an opaque block (no axes) may use the loops around it, as in TVM
            if kind == "loop" and self.block_frames and depth < self.block_frames[-1] \
                    and not self.allow_loop_vars and self.block_ctxs[-1].iter_vars:
                raise self.error(
                    f"block uses the loop variable '{name}' directly; a block sees loop "
                    f"variables only through its axes: declare one, e.g. "
                    f"v_{name} = T.axis.spatial(<extent>, {name}), and use v_{name}", tree)
            return value
        if name == "range":         # for i in range(n): a serial loop, as in TVMScript
            return Builtin("serial")
        if name in self.env:
            v = self.env[name]
            # a module flagged __tvmscript_namespace__ stands for T too (a TVM-named
            # alias such as ``from tvm.script import tir as T`` over Cuvil)
            if v is script or getattr(v, "__name__", None) == "cuvil_tir" or \
                    getattr(v, "__tvmscript_namespace__", False) is True:
                return NAMESPACE
            return v
        known = [n for f in self.frames for n in f] + list(self.env)
        near = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean '{near[0]}'?" if near else ""
        raise self.error(f"undefined variable '{name}': expected a name bound by a "
                         f"parameter, a loop, a block axis or an assignment{hint}", tree)

    def attribute(self, base, name: str, tree):
        if base is NAMESPACE:
            name = {"sblock": "block", "sblock_alloc_buffer": "alloc_buffer",
                    "sblock_attr": "block_attr"}.get(name, name)   # newer TVM's spellings
            if name in BUILTINS:
                return Builtin(name)
            for mod in (script, cuvil_tir):
                if hasattr(mod, name):
                    return getattr(mod, name)
            if name.startswith("tvm_"):
                return tvm_builtin(name)
            if name in TVM_FUNCS:
                return TVM_FUNCS[name]
            near = difflib.get_close_matches(name, sorted(BUILTINS) + list(script.__all__),
                                             n=1)
            hint = f"; did you mean 'T.{near[0]}'?" if near else ""
            raise self.error(f"unknown name 'T.{name}'{hint}", tree)
        if isinstance(base, Builtin) and base.name == "axis":
            name = AXIS_ALIASES.get(name, name)
            if name in AXIS_KINDS or name == "remap":
                return Builtin("axis." + name)
            raise self.error(f"unknown name 'T.axis.{name}'; expected T.axis.spatial (S), "
                             "T.axis.reduce (R), T.axis.scan, T.axis.opaque or T.axis.remap", tree)
        if isinstance(base, Buffer) or is_view(base):
            return self.buffer_attribute(base, name, tree)
        if isinstance(base, (Builtin, Namespace)):
            raise self.error(f"'T.{base.name}' has no attribute '{name}'", tree)
        return self.wrap(getattr, tree, base, name)

    # evaluation -----------------------------------------------------------------------
    def eval(self, t):
        if isinstance(t, Token):
            raise self.error(f"unexpected {t!s}", t)
        fn = getattr(self, "e_" + t.data, None)
        if fn is None:
            raise self.error(f"this construct ({t.data}) is not part of the text form", t)
        return self.wrap(fn, t, t)

    def e_name(self, t):
        return self.lookup(str(t.children[0]), t)

    def e_number(self, t):
        s = str(t.children[0]).replace("_", "")
        if s[:2].lower() == "0x" or not any(c in s for c in ".eE"):
            return int(s, 0)
        return float(s)

    def e_string(self, t):
        return ast.literal_eval(str(t.children[0]))

    def e_fstring(self, t):
        """``f"wmma_{suffix}"``: each placeholder a name (or ``name.attr``) of the
        function's scope, as Python evaluates it when the ``def`` runs."""
        parts = []
        for node in ast.parse(str(t.children[0]), mode="eval").body.values:
            if isinstance(node, ast.Constant):
                parts.append(str(node.value))
                continue
            chain, e = [], node.value
            while isinstance(e, ast.Attribute):
                chain.append(e.attr)
                e = e.value
            if not isinstance(e, ast.Name) or node.format_spec is not None:
                raise self.error("an f-string placeholder must be a name, e.g. "
                                 "f\"wmma_{suffix}\"", t)
            value = self.lookup(e.id, t)
            for attr in reversed(chain):
                value = self.attribute(value, attr, t)
            conv = {ord("r"): repr, ord("a"): ascii}.get(node.conversion, str)
            parts.append(conv(value))
        return "".join(parts)

    def e_none(self, t):
        return None

    def e_true(self, t):
        return True

    def e_false(self, t):
        return False

    def e_tuple(self, t):
        return tuple(self.eval(c) for c in t.children)

    def e_list(self, t):
        return [self.eval(c) for c in t.children]

    def e_lambdef(self, t):
        params = [str(n) for n in t.children[0].children] if len(t.children) == 2 else []
        return self.lambda_value(params, t.children[-1])

    def e_dict(self, t):
        return {self.eval(p.children[0]): self.eval(p.children[1]) for p in t.children}

    def e_getattr(self, t):
        return self.attribute(self.eval(t.children[0]), str(t.children[1]), t)

    def e_arith(self, t):
        ch = t.children
        v = self.eval(ch[0])
        for k in range(1, len(ch), 2):
            v = self.wrap(self.binop, ch[k], str(ch[k]), v, self.eval(ch[k + 1]))
        return v

    e_term = e_arith

    def binop(self, op: str, a, b):
        if is_py_scalar(a) and is_py_scalar(b):
            return _PY[op](a, b)
        if self.tvm_dialect:
            a, b = float_literal_promotes(a, b), float_literal_promotes(b, a)
        a, b = unify(a, b)
        if op == "/" and not D.is_float(a.dtype):
            raise CuvilError(f"'/' is true division and needs float operands, found "
                             f"{a.dtype}; use '//' (floor) or T.truncdiv(a, b) for integers")
        if a.dtype != b.dtype:
            raise CuvilError(f"'{op}': operands must have one dtype, found {a.dtype} and "
                             f"{b.dtype}; the text form does not promote, cast one side, "
                             f"e.g. T.Cast(\"{b.dtype}\", x)")
        return _ARITH[op](a, b)

    def e_comparison(self, t):
        ch = t.children
        vals = [self.eval(c) for c in ch[0::2]]
        out = None
        for k, op in enumerate(ch[1::2]):
            a, b = vals[k], vals[k + 1]
            if is_py_scalar(a) and is_py_scalar(b):
                r = _PY[str(op)](a, b)
            else:
                r = self.wrap(lambda x, y, o=str(op): _CMP[o](*unify(x, y)), op, a, b)
            out = r if out is None else self.logic(And, out, r)
        return out

    def logic(self, cls, a, b):
        if is_py_scalar(a) and is_py_scalar(b):
            return (a and b) if cls is And else (a or b)
        return cls(to_expr(a, "bool"), to_expr(b, "bool"))

    def e_and_test(self, t):
        vals = [self.eval(c) for c in t.children]
        out = vals[0]
        for v in vals[1:]:
            out = self.logic(And, out, v)
        return out

    e_band = e_and_test

    def e_or_test(self, t):
        vals = [self.eval(c) for c in t.children]
        out = vals[0]
        for v in vals[1:]:
            out = self.logic(Or, out, v)
        return out

    e_bor = e_or_test

    def e_not_(self, t):
        v = self.eval(t.children[0])
        return (not v) if is_py_scalar(v) else Not(to_expr(v))

    def e_factor(self, t):
        op, v = str(t.children[0]), self.eval(t.children[1])
        if op == "+":
            return v
        if op == "-":
            return -v
        return (~v) if is_py_scalar(v) and not isinstance(v, bool) else Not(to_expr(v))

    # subscripts ---------------------------------------------------------------------------
    def e_getitem(self, t):
        base = self.eval(t.children[0])
        subs = t.children[1].children
        if is_view(base):
            idx = self.subscripts(base.view_shape, base.name, subs, t)
            return self.wrap(base.getitem, t, idx)
        if _is(base, "let") and len(subs) == 1:
            return self.eval(subs[0])        # x: T.let[T.float32] = ... is a let binding
        if not isinstance(base, Buffer):
            if len(subs) != 1 or subs[0].data == "slice":
                raise self.error("only buffers take several indices or slices", t)
            return base[self.eval(subs[0])]
        return make_access(base, self.subscripts(base.shape, base.name, subs, t))

    def subscripts(self, shape, name: str, subs, t) -> list:
        """Indices (expressions or values) and slices (``Range``) of ``name[subs]``."""
        idx = []
        for d, s in enumerate(subs):
            if isinstance(s, Tree) and s.data == "slice":
                idx.append(self.slice_range(shape, name, d, s))
            else:
                v = self.eval(s)
                idx.extend(v if isinstance(v, tuple) else (v,))
        if len(idx) != len(shape):
            raise self.error(f"buffer {name} has {len(shape)} dimension(s) but was "
                             f"indexed with {len(idx)} index(es); expected "
                             f"{len(shape)}", t)
        return idx

    def slice_range(self, shape, name: str, d: int, s) -> Range:
        lo = hi = None
        for c in s.children:
            if c.data == "lo":
                lo = self.eval(c.children[0])
            else:
                hi = self.eval(c.children[0])
        if d >= len(shape):
            raise self.error(f"buffer {name} has {len(shape)} dimension(s)", s)
        return span(0 if lo is None else lo, shape[d] if hi is None else hi)

    # calls --------------------------------------------------------------------------------
    def e_call(self, t):
        callee = self.eval(t.children[0])
        if _is(callee, "Let"):
            return self.let_expr(t)
        args, kwargs = [], {}
        if len(t.children) > 1:
            for a in t.children[1].children:
                if isinstance(a, Tree) and a.data == "kwarg":
                    kwargs[str(a.children[0])] = self.eval(a.children[1])
                else:
                    args.append(self.eval(a))
        if callee is call_extern and "dtype" in kwargs:
            # TVMScript's order: T.call_extern("name", *args, dtype="int32"); its void
            # (dtype="") is a call whose result is never used, Cuvil's "handle"
            dtype = kwargs.pop("dtype")
            args.insert(0, "handle" if dtype == "" else dtype)
        if isinstance(callee, Builtin):
            fn = getattr(self, "b_" + callee.name.replace(".", "_"), None)
            if fn is None:
                return Spec(callee.name, tuple(args), kwargs)
            return fn(*args, **kwargs)
        if isinstance(callee, script.ScalarType):
            if not args and not kwargs:
                return Spec("var", (None, callee.dtype))
            return scalar_const(callee.dtype, *args)
        if not callable(callee):
            raise self.error(f"{callee!r} is not callable", t.children[0])
        if any(isinstance(a, Pointer) for a in args):
            # a call receiving memory gets the region, any other the pointer expression
            mem = callee is call_extern or getattr(callee, "takes_memory", False)
            args = [(a.as_argument() if mem else a.call) if isinstance(a, Pointer) else a
                    for a in args]
        return callee(*args, **kwargs)

    def let_expr(self, t):
        args = t.children[1].children if len(t.children) > 1 else []
        pos_args = [a for a in args if not (isinstance(a, Tree) and a.data == "kwarg")]
        kw = {str(a.children[0]): self.eval(a.children[1]) for a in args
              if isinstance(a, Tree) and a.data == "kwarg"}
        if len(pos_args) != 3 or pos_args[0].data != "name":
            raise self.error("T.Let expects (name, value, body), e.g. T.Let(x, 2, x * 3)", t)
        value = to_expr(self.eval(pos_args[1]))
        var = Var(str(pos_args[0].children[0]), kw.get("dtype", value.dtype))
        self.frames.append({var.name: (var, "let")})
        try:
            body = to_expr(self.eval(pos_args[2]))
        finally:
            self.frames.pop()
        return Let(var, value, body)


def scalar_const(dtype: str, value=None, *rest):
    """``T.<dtype>(value)`` in the text form: a constant, or a cast of an expression."""
    if rest:
        raise CuvilError(f"T.{dtype} takes one value, found {1 + len(rest)}")
    if isinstance(value, Expr):
        return Cast(dtype, value)
    if isinstance(value, str) and value not in ("inf", "-inf", "nan"):
        raise CuvilError(f"T.{dtype}: expected a number or 'inf'/'-inf'/'nan', found "
                         f"{value!r}")
    return script.ScalarType(dtype)(value)


def make_access(buf: Buffer, idx: list):
    """``buf[idx]``: a load, or a region when some index is a slice (``Range``)."""
    if any(isinstance(r, Range) for r in idx):
        return BufferRegion(buf, tuple(r if isinstance(r, Range) else
                                       point_range(to_expr(r, "int32")) for r in idx))
    return BufferLoad(buf, tuple(to_expr(i, "int32") for i in idx))


def is_view(v) -> bool:
    """True for a buffer matched to a region inside a block (see :mod:`.tvmscript`)."""
    return getattr(v, "is_buffer_view", False)


def point_range(e: Expr) -> Range:
    """The one-element range ``[e, e + 1)``."""
    return Range(e, IntImm(1, e.dtype))


def span(lo, hi) -> Range:
    """``Range`` of ``lo:hi``, undoing how the printer writes ``lo + extent``."""
    if is_py_scalar(lo) and is_py_scalar(hi):
        lo, hi = to_expr(lo, "int32"), to_expr(hi, "int32")
    lo, hi = unify(lo, hi)
    if isinstance(lo, IntImm) and lo.value == 0:
        return Range(lo, hi)
    if isinstance(lo, IntImm) and isinstance(hi, IntImm):
        return Range(lo, IntImm(hi.value - lo.value, lo.dtype))
    if isinstance(hi, Add) and _same(hi.a, lo):
        return Range(lo, hi.b)
    ext = simplify(Sub(hi, lo))
    return Range(lo, ext if isinstance(ext, IntImm) else Sub(hi, lo))


def _same(a, b) -> bool:
    return same(a, b)


__all__ = ["ExprEvaluator", "Builtin", "Spec", "NAMESPACE", "to_expr", "unify", "span",
           "point_range", "scalar_const", "pos", "is_builtin", "make_access", "is_view"]
