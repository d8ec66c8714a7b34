"""Accelerator C: the C-family printer with the HAL header and fixed scratchpad
addresses.

The kernel is one C99 function; it includes ``<hal>_hal.h`` (which declares every call
it makes), and each scratchpad buffer is a pointer at the address the allocator chose
(``toy_npu_scratch(TOY_NPU_MEM_0) + 4096``), from the bank plan that travels in the
program (``Program.memory``).  The memory map is printed as a comment for the reader.

Example::

    >>> AccelPrinter.declare_externs
    False
"""

from __future__ import annotations

from cuvil_tir.expr import IntImm
from cuvil_tir.stmt import Evaluate, For, SeqStmt
from cuvil_tir.visitor import post_order_visit

from ..cstyle import CPrinter
from .vendor_hal import hoisted_configs, pick_vendor_call, print_hoisted, print_vendor_call


class AccelPrinter(CPrinter):
    """C99 against an accelerator's HAL (module doc).

    Example::

        >>> AccelPrinter.lang
        'accelerator C'
    """

    lang = "accelerator C"
    declare_externs = False

    def __init__(self, acc, plan):
        super().__init__()
        self.acc = acc
        self.addr = {}
        self.loop_bounds = {}       # constant loop ranges, for the vendor calls' checks
        for k, m in enumerate(acc.memories_only):
            for d in plan.get(m.scope, []):
                self.addr[d["buffer"]] = (k, d["addresses"][0])

    def prelude(self) -> str:
        return f'#include "{self.acc.hal}_hal.h"\n'

    def print_function(self, func, name=None) -> str:
        calls, on_cores = _calls(func.body), set()
        self._switch = f"{self.acc.hal}_core"
        for loop in _core_loops(func.body, self._switch):
            on_cores |= {id(e) for e in _calls(loop.body)}
        self.hoisted = hoisted_configs(self.acc, calls)
        # a configuration is per core: issued first for the calls before the cores
        # start, and after the switch to each core for the calls on the cores
        self._first, self._per_core = {}, {}
        for e in calls:
            c = pick_vendor_call(self.acc, e)
            n = c.config.name if c is not None and c.config is not None else None
            if n in self.hoisted:
                (self._per_core if id(e) in on_cores else self._first)[n] = e
        self._top = func.body
        return super().print_function(func, name)

    def print_stmt(self, s) -> None:
        if s is getattr(self, "_top", None):     # configuration issued once, first
            self._top = None
            for n, e in self._first.items():
                self.emit(f"(void){print_hoisted(self, n, e)};")
        super().print_stmt(s)
        if _callee(s) == self._switch:
            for n, e in self._per_core.items():
                self.emit(f"(void){print_hoisted(self, n, e)};")

    def print_extern(self, e) -> str:
        c = pick_vendor_call(self.acc, e) if self.acc.hal_calls else None
        return super().print_extern(e) if c is None else print_vendor_call(self, c, e)

    def print_for(self, s) -> None:
        if isinstance(s.min, IntImm) and isinstance(s.extent, IntImm):
            self.loop_bounds[s.loop_var] = (s.min.value, s.min.value + s.extent.value - 1)
        super().print_for(s)
        self.loop_bounds.pop(s.loop_var, None)

    def print_allocate(self, s) -> None:
        buf = s.buffer
        if buf.name not in self.addr:
            super().print_allocate(s)
            return
        mem, addr = self.addr[buf.name]
        t = self.mem_type(buf.dtype)
        name = self.bind(buf)
        self.emit(f"{t} *{name} = ({t} *)({self.acc.hal}_scratch({self.acc.hal.upper()}"
                  f"_MEM_{mem}) + {addr});")
        if self.acc.hal_calls:      # vendor calls may take it only as an offset
            self.emit(f"(void){name};")
        self.print_stmt(s.body)


def _calls(body) -> list:
    """The extern calls of ``body``, in order."""
    out = []
    post_order_visit(body, lambda n: out.append(n.value) if _callee(n) else None)
    return out


def _callee(s):
    """The function an ``Evaluate`` of an extern call calls, else None."""
    if isinstance(s, Evaluate) and getattr(s.value, "op", None) == "call_extern":
        return s.value.args[0].value
    return None


def _core_loops(body, switch: str) -> list:
    """The loops over the cores: those whose body switches to a core first."""
    out = []

    def look(n):
        if isinstance(n, For):
            first = n.body.seq[0] if isinstance(n.body, SeqStmt) else n.body
            if _callee(first) == switch:
                out.append(n)

    post_order_visit(body, look)
    return out


def print_kernel(acc, func, plan: dict) -> str:
    """The kernel's C source with its scratchpad buffers at the addresses of ``plan``
    (``{scope: [{"buffer": name, "addresses": [...], ...}, ...]}``, the program's
    memory plan), the memory map as a leading comment."""
    text = AccelPrinter(acc, plan).print_function(func, func.name)
    mm = func.attr("accel.memory_map", "").replace("*/", "* /")
    return f"/* memory map\n{mm}\n*/\n{text}"


__all__ = ["AccelPrinter", "print_kernel"]
