"""How :class:`~targets.cstyle.printer.CPrinter` prints expressions (a mixin).

Expressions are printed as C expressions, parenthesised when compound; vector
expressions only inside a vector store, lane by lane (``cvl_lane``).  Integer
arithmetic on values computed from data wraps through the unsigned type; index
arithmetic is printed plainly (see the printer's module docstring for why).

Example::

    >>> import cuvil_tir as T
    >>> from targets.cstyle.printer import CPrinter
    >>> p = CPrinter()
    >>> p.lane = None
    >>> p.expr(T.const(2.5, "float32"))
    '2.5f'
"""

from __future__ import annotations

from cuvil_tir import dtype as D
from cuvil_tir import ops
from cuvil_tir.errors import CodegenError
from cuvil_tir.expr import BufferLoad, Call, Var
from cuvil_tir.stmt import BufferRegion
from cuvil_tir.visitor import post_order_visit

from . import spellings  # noqa: F401 - registers the C spellings of the ops
from .helpers import helper
from .values import CValues

_INFIX = {"Add": "+", "Sub": "-", "Mul": "*", "EQ": "==", "NE": "!=", "LT": "<",
          "LE": "<=", "GT": ">", "GE": ">=", "And": "&&", "Or": "||"}
_HELPER_OPS = {"Div": "div", "Mod": "mod", "FloorDiv": "floordiv", "FloorMod": "floormod",
               "Min": "min", "Max": "max"}


class CExpressions(CValues):
    """The expression half of the C printer: ``expr``/``bare`` and one ``e_<Node>``
    method per expression node; ``print_call``/``print_extern`` are the hooks a
    dialect overrides."""

    def bare(self, e) -> str:
        """``e`` printed without its outer parentheses (a full C expression)."""
        text = self.expr(e)
        if text.startswith("(") and _balanced_outer(text):
            return text[1:-1]
        return text

    def expr(self, e) -> str:
        """``e`` printed as a C expression (parenthesised when compound)."""
        if self.lane is None and D.lanes(e.dtype) > 1 and type(e).__name__ != "Var":
            raise CodegenError(f"{self.lang} codegen: vector expression of dtype "
                               f"{e.dtype} outside a vector store ({e})")
        for klass in type(e).__mro__:
            fn = getattr(self, "e_" + klass.__name__, None)
            if fn is not None:
                return fn(e)
        raise CodegenError(f"{self.lang} codegen: no translation for expression "
                           f"{type(e).__name__} ({e})")

    def e_Var(self, v):
        if id(v) in self.lets:
            return self.expr(self.lets[id(v)])
        name = self.name_of(v)
        if D.lanes(v.dtype) > 1:
            return f"{name}[{self.lane}]"
        return name

    def e_IntImm(self, c):
        return self.int_literal(c.value, D.element(c.dtype))

    def e_FloatImm(self, c):
        return self.float_literal(c.value, D.element(c.dtype))

    def e_StringImm(self, s):
        return '"' + s.value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    def e_Cast(self, c):
        src, dst = D.element(c.value.dtype), D.element(c.dtype)
        v = self.expr(c.value)
        if src == dst:
            return v
        if dst == "bool":
            return f"({v} != 0)"
        if dst in ("float16", "bfloat16"):
            return self.round_value(f"(float){v}", dst)
        return f"(({self.scalar_type(dst)}){v})"

    def e_BinaryOp(self, e):
        kind = type(e).__name__
        dt = D.element(e.a.dtype)
        a, b = self.expr(e.a), self.expr(e.b)
        if kind in ("Add", "Sub", "Mul") and D.is_integer(dt):
            return self._int_arith(e, _INFIX[kind], a, b, dt)
        if kind in _INFIX:
            text = f"({a} {_INFIX[kind]} {b})"
            return self.round_value(text, dt) if kind in ("Add", "Sub", "Mul") else text
        if kind == "Div" and D.is_float(dt):
            return self.round_value(f"({a} / {b})", dt)
        if kind == "Mod" and D.is_float(dt):
            return self.round_value(f"fmod{self._fsuffix(dt)}({a}, {b})", dt)
        if kind == "FloorDiv" and D.is_float(dt):
            return self.round_value(f"floor{self._fsuffix(dt)}({a} / {b})", dt)
        if kind in _HELPER_OPS:
            name, text = helper(_HELPER_OPS[kind], dt, self.scalar_type(dt))
            self.use_helper(name, text)
            return self.round_value(f"{name}({a}, {b})", dt) if D.is_float(dt) \
                else f"{name}({a}, {b})"
        raise CodegenError(f"{self.lang} codegen: binary operator {kind} on {dt}")

    def _int_arith(self, e, op: str, a: str, b: str, dt: str) -> str:
        bits = D.bits(dt)
        if bits < 32:   # promoted to int: cast back (unsigned 16-bit products via uint32)
            if op == "*" and D.is_uint(dt):
                a, b = f"(uint32_t){a}", f"(uint32_t){b}"
            return self.round_value(f"({a} {op} {b})", dt)
        if D.is_uint(dt) or self.is_index(e):
            return f"({a} {op} {b})"
        u = f"uint{bits}_t"
        return f"(({self.scalar_type(dt)})(({u}){a} {op} ({u}){b}))"

    def is_index(self, e) -> bool:
        """True when ``e`` only combines loop variables, sizes and constants."""
        key = id(e)
        if key not in self.index_memo:
            found = []
            post_order_visit(e, lambda n: found.append(1) if isinstance(
                n, (BufferLoad, Call)) or (isinstance(n, Var) and id(n) not in
                                            self.index_vars) else None)
            self.index_memo[key] = (not found, e)   # e kept alive: its id stays unique
        return self.index_memo[key][0]

    def e_Not(self, e):
        return f"(!{self.expr(e.a)})"

    def e_Select(self, e):
        return (f"({self.expr(e.condition)} ? {self.expr(e.true_value)} : "
                f"{self.expr(e.false_value)})")

    def e_Let(self, e):
        # C99 has no expression-level let: the value is substituted where used (it is
        # pure), which keeps if_then_else lazy
        old = self.lets.get(id(e.var))
        self.lets[id(e.var)] = e.value
        try:
            return self.expr(e.body)
        finally:
            if old is None:
                self.lets.pop(id(e.var), None)
            else:
                self.lets[id(e.var)] = old

    def e_Ramp(self, e):
        if self.lane is None:
            raise CodegenError(f"{self.lang} codegen: a Ramp outside a vector access ({e})")
        return f"({self.expr(e.base)} + {self.expr(e.stride)} * {self.lane})"

    def e_Broadcast(self, e):
        outer, self.lane = self.lane, None
        try:
            return self.expr(e.value)
        finally:
            self.lane = outer

    def e_BufferLoad(self, e):
        return self.from_memory(self.access(e.buffer, e.indices), e.buffer.dtype)

    def e_Call(self, e):
        return self.print_call(e)

    def print_extern(self, e) -> str:
        """``T.call_extern(dtype, name, *args)`` as ``name(args)`` (with a prototype
        when ``declare_externs``)."""
        name = e.args[0].value
        if self.declare_externs:
            self.use_helper(f"extern {name}", _extern_prototype(self, e))
        return f"{name}({', '.join(self.extern_arg(a) for a in e.args[2:])})"

    def extern_arg(self, a) -> str:
        """An extern call's argument: a region is the address of its first element."""
        if isinstance(a, BufferRegion):
            return f"&{self.access(a.buffer, tuple(r.min for r in a.region))}"
        return self.bare(a)

    def print_call(self, e) -> str:
        """A ``Call``: the class's ``ops`` template, else the op registry's spelling for
        the dialect's table (``op_table``, see :mod:`targets.cstyle.spellings`);
        float16/bfloat16 run in float and round back."""
        sp = self.ops.get(e.op)
        if sp is None:
            sp = ops.spelling(self.op_table, e.op)
        if sp is ops.EXPAND:
            return self.expr(ops.get_op(e.op).expand(*e.args))   # e.g. sigmoid
        if callable(sp):
            return sp(self, e)
        dt = D.element(e.dtype)
        text = sp.format(*(self.bare(a) for a in e.args), f="" if dt == "float64" else "f")
        return self.round_value(text, dt) if D.is_float(dt) else text

    def call_helper(self, named: tuple, *args: str) -> str:
        """A call of the generated helper ``named`` (``(name, C definition)`` from
        :func:`targets.cstyle.helpers.helper`), defined once per function."""
        name, text = named
        self.use_helper(name, text)
        return f"{name}({', '.join(args)})"


def _extern_prototype(printer, e) -> str:
    params = ["void *" if isinstance(a, BufferRegion) else printer.scalar_type(a.dtype)
              for a in e.args[2:]]
    ret = printer.scalar_type(e.dtype)
    return f"extern {ret} {e.args[0].value}({', '.join(params) or 'void'});\n"



def _balanced_outer(text: str) -> bool:
    """True when the first ``(`` of ``text`` closes at its last character."""
    depth = 0
    for k, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return k == len(text) - 1
    return False
