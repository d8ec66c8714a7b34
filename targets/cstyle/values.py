"""Values in C: types, literals, memory conversions and rounding (a mixin of
:class:`targets.cstyle.CPrinter`, reading its ``scalar_types`` and ``memory_types``).

Example::

    >>> from targets.cstyle import CPrinter
    >>> p = CPrinter()
    >>> p.int_literal(-128, "int8"), p.float_literal(0.5, "float32"), p.mem_type("bool")
    ('(int8_t)(-127 - 1)', '0.5f', 'uint8_t')
"""

from __future__ import annotations

import math

from cuvil_tir import dtype as D
from cuvil_tir.errors import CodegenError

from .helpers import half_helpers


class CValues:
    """Types, literals and conversions of C values (see the module docstring)."""

    def scalar_type(self, dt: str) -> str:
        """The C type of a value of ``dt``'s element in an expression."""
        e = D.element(dt)
        if e not in self.scalar_types:
            hint = ("; the fp8 dtypes are compiled by the cuda target" if D.is_float8(e)
                    else "")
            raise CodegenError(f"{self.lang} codegen: no C type for dtype {dt!r}{hint}")
        return self.scalar_types[e]

    def mem_type(self, dt: str) -> str:
        """The C type of ``dt``'s element in memory."""
        e = D.element(dt)
        return self.memory_types.get(e) or self.scalar_type(e)

    def abi_type(self, dt: str) -> str:
        """The C type a scalar parameter of ``dt`` is passed as."""
        e = D.element(dt)
        return "uint8_t" if e == "bool" else self.scalar_type(e)

    def to_memory(self, text: str, vdt: str, mdt: str) -> str:
        """A value of ``vdt`` as stored in memory of element dtype ``mdt``."""
        e = D.element(mdt)
        if e == "bool":
            return f"(uint8_t)({text})"
        if e in ("float16", "bfloat16"):
            key, defs = half_helpers(e)
            self.use_helper(key, defs)
            return f"cvl_f32_to_{key}({text})"
        return text

    def from_memory(self, text: str, mdt: str) -> str:
        """An element of memory dtype ``mdt`` as a value."""
        e = D.element(mdt)
        if e == "bool":
            return f"({text} != 0)"
        if e in ("float16", "bfloat16"):
            key, defs = half_helpers(e)
            self.use_helper(key, defs)
            return f"cvl_{key}_to_f32({text})"
        return text

    def round_value(self, text: str, dt: str) -> str:
        """A computed value rounded to ``dt`` (8/16-bit wrap, float16/bfloat16 round)."""
        e = D.element(dt)
        if e in ("float16", "bfloat16"):
            key, defs = half_helpers(e)
            self.use_helper(key, defs)
            return f"cvl_round_{key}({text})"
        if e == "bool":
            return f"({text} != 0)"
        if D.is_integer(e) and D.bits(e) < 32:
            return f"({self.scalar_type(e)})({text})"
        return text

    def int_literal(self, value: int, e: str) -> str:
        """An integer constant of element dtype ``e`` as C text."""
        if e == "bool":
            return "true" if value else "false"
        lo = D.int_range(e)[0]
        if D.bits(e) == 64:
            if value == lo and D.is_int(e):
                return "INT64_MIN"
            return f"{'UINT' if D.is_uint(e) else 'INT'}64_C({value})"
        if e == "uint32":
            return f"{value}u"
        if value == lo and D.is_int(e):
            return f"({self.scalar_type(e)})({value + 1} - 1)"
        return str(value) if value >= 0 else f"({value})"

    def float_literal(self, value: float, e: str) -> str:
        """A float constant of element dtype ``e`` as C text."""
        suffix = "" if e == "float64" else "f"
        cast = "(double)" if e == "float64" else ""
        if math.isnan(value):
            return f"({cast}NAN)"
        if math.isinf(value):
            return f"({'-' if value < 0 else ''}{cast}INFINITY)"
        text = repr(float(value))
        if "e" not in text and "." not in text:
            text += ".0"
        return f"({text}{suffix})" if value < 0 else text + suffix

    def _fsuffix(self, dt: str) -> str:
        return "" if D.element(dt) == "float64" else "f"
