"""The C-family printer base: a lowered PrimFunc as C, from capabilities and an op table.

:class:`CPrinter` prints the output of a target's lowering pipeline (loops, stores,
``Allocate``; no blocks) as one C function.  What differs between C dialects is data
on the class, not code:

=====================  ==========================================================
attribute              meaning (default: portable C99)
=====================  ==========================================================
``lang``               the name in error messages (``"c"``)
``headers``            ``#include`` lines at the top
``function_prefix``    text before the return type (``'extern "C" __global__'``)
``status_type``        the return type; the function returns 0 or a status
                       (``STATUS_ALLOC_FAILED`` of :mod:`targets.llvm.codegen`);
                       ``"void"``: no status
``restrict``           the pointer qualifier for parameters (``"restrict"``,
                       ``"__restrict__"``, or ``""``)
``scalar_types``       dtype element -> C type of a value in an expression
``memory_types``       dtype element -> C type in memory, where it differs (``bool``
                       is one byte, ``float16``/``bfloat16`` are 16-bit patterns)
``loop_pragmas``       loop kind -> a ``#pragma`` line printed above such a loop
                       (``{"parallel": "#pragma omp parallel for"}``); ``{extent}``
                       is replaced by the loop's extent
``op_table``           the op registry's spelling table the dialect writes ops
                       from (:mod:`cuvil_tir.ops.spelling`; ``"c"``, filled by
                       :mod:`targets.cstyle.spellings`; CUDA's ``"cuda"`` inherits it)
``ops``                op name -> C template overriding the table for this class
                       (``{0}`` … the arguments, ``{f}`` the float32 suffix)
``stack_limit``        internal buffers up to this many bytes are arrays on the stack,
                       larger ones are ``malloc``-ed with checked sizes
``declare_externs``    print a prototype for each ``T.call_extern`` function (regions
                       as ``void *``); ``False`` when a header declares them
=====================  ==========================================================

Vector expressions (``Ramp``, ``Broadcast``, vector loads and stores, from the llvm
vectorizer or written by hand) are printed lane by lane: a vector store becomes a
loop over ``cvl_lane``.  Integer arithmetic wraps, as in the IR, without compiler
flags: ``+ - *`` on signed values computed from data (loads, scalar parameters, lets)
go through the unsigned type (``(int32_t)((uint32_t)a * (uint32_t)b)``), 8- and 16-bit
results are cast back after every operation; index arithmetic (loop variables, sizes
and constants only, which lowering keeps in range) is printed plainly, so the C
compiler may assume it does not overflow and vectorize (``-fwrapv`` costs up to 5x on
a GEMM).  Integer division by zero gives 0 and never traps.

Subclassing (CUDA C, accelerator C): set the attributes, and override the hooks
where the dialect prints something differently:

* :meth:`CPrinter.signature` — the function's parameter list and qualifiers;
* :meth:`CPrinter.print_for` — a loop (e.g. a ``thread_binding`` loop becomes
  ``int tx = threadIdx.x;`` with no loop);
* :meth:`CPrinter.print_allocate` — an internal buffer (e.g. ``__shared__`` for the
  ``shared`` scope, or a bank address for an accelerator memory);
* :meth:`CPrinter.print_call` — a ``Call`` of an op;
* :meth:`CPrinter.print_extern` — a ``T.call_extern`` (default: ``name(args)``, a
  region argument as ``&A[first element]``, see :meth:`CPrinter.extern_arg`);
* :meth:`CPrinter.prelude` — text after the includes (type definitions, a HAL
  header's ``#include``).

Example::

    >>> import cuvil_tir as T
    >>> A = T.decl_buffer((8,), "float32", "A")
    >>> i = T.var("i")
    >>> f = T.PrimFunc([A], T.For(i, T.const(0), T.const(8), "serial",
    ...                 T.BufferStore(A, T.exp(A[i]), (i,))))
    >>> print(CPrinter().print_function(f, "kernel").split("\\n\\n")[-1])
    int32_t kernel(float *restrict A) {
        int32_t cvl_status = 0;
        for (int32_t i = 0; i < 8; ++i) {
            A[i] = expf(A[i]);
        }
        return cvl_status;
    }
    <BLANKLINE>
"""

from __future__ import annotations

import re

from cuvil_tir import dtype as D
from cuvil_tir import ops
from cuvil_tir.buffer import Buffer
from cuvil_tir.errors import CodegenError
from cuvil_tir.expr import IntImm
from cuvil_tir.ir_module import single_function
from cuvil_tir.visitor import post_order_visit

# one ABI for every native CPU backend (size arguments, status codes)
from ..runtime.checks import check_sites, site_index
from ..runtime.native import STATUS_ALLOC_FAILED, size_vars_of
from .checks import print_assert, slot_lines
from .helpers import size_helpers
from .names import c_identifier
from .expressions import CExpressions



class CPrinter(CExpressions):
    """Print one lowered PrimFunc as a C function (see the module docstring).

    Example::

        >>> CPrinter.scalar_types["float16"], CPrinter.memory_types["float16"]
        ('float', 'uint16_t')
    """

    lang = "c"
    headers = ("stdint.h", "stdbool.h", "stdlib.h", "math.h")
    function_prefix = ""
    status_type = "int32_t"
    restrict = "restrict"
    scalar_types = {"bool": "bool", "int8": "int8_t", "int16": "int16_t",
                    "int32": "int32_t", "int64": "int64_t", "uint8": "uint8_t",
                    "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
                    "float16": "float", "bfloat16": "float", "float32": "float",
                    "float64": "double", "handle": "void *"}
    memory_types = {"bool": "uint8_t", "float16": "uint16_t", "bfloat16": "uint16_t"}
    loop_pragmas: dict = {}
    op_table = "c"
    ops: dict = {}
    declare_externs = True
    stack_limit = 64 << 10

    def __init__(self):
        self.lines: list[str] = []
        self.indent = 1
        self.names: dict[int, str] = {}
        self.taken: set[str] = set()
        self.helpers: dict[str, str] = {}
        self.lane: str | None = None      # set while printing one lane of a vector
        self.lets: dict[int, object] = {}  # Let variables, substituted where used
        self.in_parallel = False
        self.index_vars: set[int] = set()   # loop and size variables (see is_index)
        self.index_memo: dict = {}
        # run-time checks (targets.cstyle.checks): sites, live heap buffers, the label
        # ending the current parallel iteration
        self.check_index: dict = {}
        self.heap: list[str] = []
        self.heap_mark = 0
        self.stop_label: str | None = None
        self.stop_used = False

    # entry -----------------------------------------------------------------------------
    def print_function(self, func, name: str | None = None) -> str:
        """The C source of ``func`` (a function, or a module of one) as one string."""
        func = single_function(func, self.lang)
        name = name or func.name
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise CodegenError(f"{self.lang} codegen: function name {name!r} is not a C "
                               "identifier; use letters, digits and underscores")
        self.taken.add(name)
        post_order_visit(func.body, lambda n: self.taken.add(ops.callee(n))
                         if ops.callee(n) is not None else None)
        head = self.signature(func, name)
        self.check_index = site_index(check_sites(func))
        if self.status_type != "void":
            self.emit(f"{self.status_type} cvl_status = 0;")
        self.print_stmt(func.body)
        if self.status_type != "void":
            self.emit("return cvl_status;")
        out = [f"/* generated by cuvil ({self.lang}) */"]
        out += [f"#include <{h}>" for h in self.headers]
        pre = self.prelude()
        if pre:
            out += ["", pre.rstrip("\n")]
        if self.helpers:
            out += ["", "\n".join(t.rstrip("\n") for t in self.helpers.values())]
        before, after = slot_lines(func, name)
        out += ["", *before, head + " {", *self.lines, "}", "", *after]
        return "\n".join(out)

    def prelude(self) -> str:
        """Text printed after the includes (nothing in plain C)."""
        return ""

    def signature(self, func, name: str) -> str:
        """``<prefix> <status_type> name(<params>)``; binds parameter names.

        Buffers are ``T *restrict name``; scalars are passed as their ABI type (bool as
        ``uint8_t``, float16/bfloat16 as ``float``); symbolic sizes follow as ``int64_t``.
        """
        params = []
        for p in func.params:
            if isinstance(p, Buffer):
                params.append(f"{self.mem_type(p.dtype)} *{self.restrict} "
                              f"{self.bind(p)}".replace("  ", " "))
            else:
                v = self.bind(p)
                abi = self.abi_type(p.dtype)
                if abi == self.scalar_type(p.dtype):
                    params.append(f"{abi} {v}")
                else:
                    params.append(f"{abi} {v}_arg")
                    self.emit(f"const {self.scalar_type(p.dtype)} {v} = "
                              f"{self.round_value(f'{v}_arg', p.dtype)};")
        for v in size_vars_of(func):
            name_v = self.bind(v)
            self.index_vars.add(id(v))
            params.append(f"int64_t {name_v}_arg")
            self.emit(f"const {self.scalar_type(v.dtype)} {name_v} = "
                      f"({self.scalar_type(v.dtype)}){name_v}_arg;")
        prefix = f"{self.function_prefix} " if self.function_prefix else ""
        return f"{prefix}{self.status_type} {name}({', '.join(params) or 'void'})"

    # names and types ---------------------------------------------------------------------
    def bind(self, node) -> str:
        """A fresh C identifier for a variable or buffer (unique in the function)."""
        name = c_identifier(node.name, self.taken)
        self.taken.add(name)
        self.names[id(node)] = name
        return name

    def name_of(self, node) -> str:
        try:
            return self.names[id(node)]
        except KeyError:
            what = "buffer" if isinstance(node, Buffer) else "variable"
            raise CodegenError(f"{self.lang} codegen: {what} '{node.name}' is used but "
                               "never defined (not a parameter, loop variable, let, "
                               "allocation or size of a parameter's shape)") from None

    def use_helper(self, key: str, text: str) -> None:
        """Emit ``text`` (C definitions) once, before the function."""
        self.helpers.setdefault(key, text)

    # output ------------------------------------------------------------------------------
    def emit(self, line: str) -> None:
        """Append one line at the current indentation."""
        self.lines.append("    " * self.indent + line)

    def scope(self, head: str, body, tail: str = "}") -> None:
        """``head`` (ending in ``{``), the statement ``body`` one level in, ``tail``."""
        self.emit(head)
        self.indent += 1
        self.print_stmt(body)
        self.indent -= 1
        self.emit(tail)

    # statements --------------------------------------------------------------------------
    def print_stmt(self, s) -> None:
        fn = getattr(self, "s_" + type(s).__name__, None)
        if fn is None:
            raise CodegenError(f"{self.lang} codegen: no translation for statement "
                               f"{type(s).__name__}")
        fn(s)

    def s_SeqStmt(self, s):
        for x in s.seq:
            self.print_stmt(x)

    def s_Block(self, s):
        raise CodegenError(f"{self.lang} codegen: block '{s.name}' was not lowered; build "
                           f"with targets.build(func, '{self.lang}') or lower it first "
                           f"with T.lower(func, '{self.lang}')")

    def s_BlockRealize(self, s):
        self.s_Block(s.block)

    def s_Evaluate(self, s):
        if isinstance(s.value, IntImm):
            return
        if D.lanes(s.value.dtype) > 1:
            self._lane_loop(D.lanes(s.value.dtype), lambda: f"(void){self.expr(s.value)};")
        else:
            self.emit(f"(void){self.expr(s.value)};")

    def s_IfThenElse(self, s):
        self.scope(f"if ({self.bare(s.condition)}) {{", s.then_case)
        if s.else_case is not None:
            self.lines.pop()
            self.scope("} else {", s.else_case)

    def s_LetStmt(self, s):
        lanes = D.lanes(s.var.dtype)
        name = self.bind(s.var)
        t = self.scalar_type(s.var.dtype)
        if lanes == 1:
            self.emit(f"const {t} {name} = {self.bare(s.value)};")
        else:
            self.emit(f"{t} {name}[{lanes}];")
            self._lane_loop(lanes, lambda: f"{name}[{self.lane}] = {self.bare(s.value)};")
        self.print_stmt(s.body)

    def s_For(self, s):
        self.print_for(s)

    def print_for(self, s) -> None:
        """A loop; ``loop_pragmas[s.kind]`` is printed above it.  A parallel loop
        inside another runs serially in its task (no nested pragma)."""
        if s.kind == "thread_binding":
            raise CodegenError(f"{self.lang} codegen: loop '{s.loop_var.name}' is bound "
                               f"to {s.thread_tag}; thread bindings need a GPU target "
                               "such as 'cuda'")
        pragma = self.loop_pragmas.get(s.kind)
        nested = s.kind == "parallel" and self.in_parallel
        if pragma and not nested:
            self.emit(pragma.format(extent=self.bare(s.extent)))
        v = self.bind(s.loop_var)
        self.index_vars.add(id(s.loop_var))
        t = self.scalar_type(s.loop_var.dtype)
        lo = self.bare(s.min)
        end = self.bare(s.extent) if _is_zero(s.min) else f"{lo} + {self.expr(s.extent)}"
        outer = self.in_parallel, self.stop_label, self.stop_used, self.heap_mark
        self.in_parallel = outer[0] or s.kind == "parallel"
        # a task's loop owns the label its failed checks jump to; the loops inside
        # it pass their uses of the label up to it
        owns_label = bool(pragma) and s.kind == "parallel" and not nested
        if owns_label:
            self.stop_label, self.stop_used = f"cvl_stop_{v}", False
            self.heap_mark = len(self.heap)
        try:
            self.scope(f"for ({t} {v} = {lo}; {v} < {end}; ++{v}) {{", s.body)
            if self.stop_used and owns_label:
                self.lines.insert(len(self.lines) - 1, "    " * (self.indent + 1) +
                                  f"{self.stop_label}: ;")
        finally:
            used = self.stop_used and not owns_label
            self.in_parallel, self.stop_label, self.stop_used, self.heap_mark = outer
            self.stop_used = self.stop_used or used

    def s_Allocate(self, s):
        self.print_allocate(s)

    def print_allocate(self, s) -> None:
        """An internal buffer: a stack array up to ``stack_limit`` bytes, else
        ``malloc`` with the size computed and checked in 64 bits; when the size
        overflows or memory is short the body is skipped and the status set."""
        buf = s.buffer
        name = self.bind(buf)
        t = self.mem_type(buf.dtype)
        nbytes = buf.nbytes_const()
        if nbytes is not None and nbytes <= self.stack_limit:
            n = max(1, nbytes // D.itemsize(buf.dtype))
            self.emit("{")
            self.indent += 1
            self.emit(f"{t} {name}[{n}];")
            self.print_stmt(s.body)
            self.indent -= 1
            self.emit("}")
            return
        self.emit("{")
        self.indent += 1
        self.emit_byte_size(buf)
        self.emit(f"{t} *{name} = cvl_bad ? NULL : ({t} *)malloc("
                  "(size_t)(cvl_bytes > 0 ? cvl_bytes : 1));")
        self.emit(f"if ({name} == NULL) {{")
        self.indent += 1
        self.emit_status(STATUS_ALLOC_FAILED)
        self.indent -= 1
        self.heap.append(name)
        self.scope("} else {", s.body)
        self.heap.pop()
        self.lines.pop()
        self.emit(f"    free({name});")
        self.emit("}")
        self.indent -= 1
        self.emit("}")

    def emit_byte_size(self, buf) -> None:
        """Declare ``cvl_bytes``, the size of ``buf`` computed in exact 64-bit
        arithmetic, and ``cvl_bad``, set when it overflows."""
        self.use_helper(*size_helpers())
        self.emit("int cvl_bad = 0;")
        size = str(D.itemsize(buf.dtype))
        for dim in buf.shape:
            size = f"cvl_size_mul({size}, {self._checked_extent(dim)}, &cvl_bad)"
        self.emit(f"int64_t cvl_bytes = {size};")

    s_AssertStmt = print_assert

    def emit_check_record(self, lines: list) -> None:
        """Print the lines recording a failed check in the error slot (a parallel
        target makes them a critical section)."""
        for line in lines:
            self.emit(line)

    def emit_status(self, status: int) -> None:
        """Record a failure status; the function goes on and returns it at the end
        (an early ``return`` cannot leave a parallel loop)."""
        self.emit(f"cvl_status = {status};")

    def _checked_extent(self, dim) -> str:
        # the product/sum of sizes is recomputed in exact 64-bit arithmetic, and must
        # fit the index dtype (else the buffer's own index arithmetic would wrap)
        kind = type(dim).__name__
        if kind in ("Mul", "Add") and D.is_int(dim.dtype):
            fn = "cvl_size_mul" if kind == "Mul" else "cvl_size_add"
            v = f"{fn}({self._checked_extent(dim.a)}, {self._checked_extent(dim.b)}, &cvl_bad)"
        else:
            v = f"(int64_t){self.expr(dim)}"
        if D.is_int(dim.dtype) and D.bits(dim.dtype) < 64:
            limit = (1 << (D.bits(dim.dtype) - 1)) - 1
            v = f"cvl_size_mul({v}, 1, &cvl_bad)"
            return f"({v} > {limit} ? (cvl_bad = 1, 0) : {v})"
        return v

    def s_BufferStore(self, s):
        buf = s.buffer
        lanes = max([D.lanes(s.value.dtype)] + [ix.lanes for ix in s.indices])
        if lanes == 1:
            self.emit(f"{self.access(buf, s.indices)} = "
                      f"{self.to_memory(self.bare(s.value), s.value.dtype, buf.dtype)};")
            return
        self._lane_loop(lanes, lambda: f"{self.access(buf, s.indices)} = "
                        f"{self.to_memory(self.bare(s.value), s.value.dtype, buf.dtype)};")

    def _lane_loop(self, lanes: int, line) -> None:
        outer = self.lane
        self.lane = "cvl_lane" if outer is None else outer
        self.emit(f"for (int32_t cvl_lane = 0; cvl_lane < {lanes}; ++cvl_lane) {{")
        self.indent += 1
        try:
            self.emit(line())
        finally:
            self.lane = outer
        self.indent -= 1
        self.emit("}")

    def access(self, buf, indices) -> str:
        """``name[flat index]`` of one element (row-major for N-d buffers)."""
        flat = None
        if len(indices) == 1:
            flat = indices[0]
        else:
            for ix, st in zip(indices, buf.default_strides()):
                term = ix if isinstance(st, IntImm) and st.value == 1 else ix * st
                flat = term if flat is None else flat + term
        return f"{self.name_of(buf)}[{self.bare(flat)}]"


def _is_zero(e) -> bool:
    return isinstance(e, IntImm) and e.value == 0


__all__ = ["CPrinter", "STATUS_ALLOC_FAILED", "size_vars_of"]

