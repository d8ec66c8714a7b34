"""Lowered module (or PrimFunc) -> LLVM IR text for the host CPU.

The input is the output of the lowering pipeline: a module of the host entry and its
``parallel_task`` functions (a PrimFunc's ``parallel`` loops are outlined first, with
:func:`cuvil_tir.transform.outline.outline_parallel`); no blocks, buffers
usually flat (N-d buffers are accepted and indexed row-major), ``Allocate`` for
internal buffers.  Expressions are translated by :mod:`targets.llvm.codegen_expr`,
parallel launches and tasks by :mod:`targets.llvm.parallel`.

ABI of the generated function (a plain C function)::

    int32_t <name>(ptr A, ptr B, ..., <scalar params>, i64 n0, i64 n1, ...)

buffer parameters come first as data pointers, in parameter order, interleaved with
scalar ``Var`` parameters exactly as in ``func.params`` (bool passed as ``i8``,
float16/bfloat16 as ``float``), then one ``i64`` per symbolic size (the function's
``cuvil.size_vars`` attribute, set by the build driver, or the size variables of
the parameters' shapes in order of first use): the native ABI of
:mod:`targets.runtime.native`, shared with the ``c`` target.  Buffer pointers are ``noalias``:
arguments must not overlap.  Parallel tasks run on the native thread pool
(:mod:`targets.llvm.parallel`; ``parallel`` loops inside a task run serially); ``vectorized``
loops are serial loops carrying ``llvm.loop.vectorize.enable``; ``unrolled`` loops
carry ``llvm.loop.unroll.full``.  The function returns 0, or a non-zero status
(:data:`targets.runtime.native.STATUS_MESSAGES`) when it stopped early: an internal heap buffer whose size
overflows 64 bits or its index dtype, or that the C library could not allocate.  Buffers already
allocated by that call are then not freed (the process is out of memory anyway);
nothing is written out of bounds.

Example::

    >>> import cuvil_tir as T
    >>> A = T.decl_buffer((4,), "float32", "A")
    >>> i = T.var("i")
    >>> f = T.PrimFunc([A], T.For(i, T.const(0), T.const(4), "serial",
    ...                 T.BufferStore(A, T.const(1.0), (i,))))
    >>> "define i32 @main(ptr noalias align 4 %arg0.A" in codegen_llvm(f)
    True
"""

from __future__ import annotations

import copy
import re

from cuvil_tir import dtype as D
from cuvil_tir.buffer import Buffer
from cuvil_tir.errors import CodegenError
from cuvil_tir.expr import Add, IntImm, Mul
from cuvil_tir.ir_module import calling_conv, is_launch
from cuvil_tir.transform.outline import outline_parallel

from ..runtime.native import STATUS_ALLOC_FAILED, size_vars_of
from . import intrinsics as I
from .builder import IRBuilder
from .checks import emit_assert, slot_definitions
from .codegen_expr import NONTEMPORAL, REASSOC, ExprEmitter, _symbol
from .parallel import emit_launch, emit_task
from .types import mem_type, reg_type
from .workspace_ir import DECLARATIONS as WORKSPACE

#: stack-allocate internal buffers up to this many bytes; larger ones use the heap
STACK_LIMIT = 64 << 10

def abi_type(dt: str) -> str:
    """The LLVM type a scalar parameter of dtype ``dt`` is passed as.

    Example::

        >>> abi_type("bool"), abi_type("float16"), abi_type("int64")
        ('i8', 'float', 'i64')
    """
    e = D.element(dt)
    if e == "bool":
        return "i8"
    if e in ("float16", "bfloat16"):
        return "float"
    return reg_type(e)


class LLVMCodegen(ExprEmitter):
    """Translate one lowered module (or PrimFunc); ``emit()`` returns the LLVM module
    text: the entry (symbol ``name``), other host functions, and the parallel tasks.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> "ret i32 0" in LLVMCodegen(f).emit()
        True
    """

    def __init__(self, func, name: str | None = None, cpu: str = "", features: str = "",
                 fast_math: str = "", triple: str = "", vector_bits: int = 0):
        self.module = outline_parallel(func)
        self.func = self.module.entry
        self.vector_bits = vector_bits
        self.name = name or self.func.name
        self.cpu, self.features, self.triple = cpu, features, triple
        self.fm = (fast_math + " ") if fast_math else ""
        self.b = IRBuilder()
        self.vars: dict[int, str] = {}
        self.bufs: dict[int, str] = {}
        self.functions: list[str] = []   # the module's other functions, as text
        self.nontemporal = False         # inside a loop annotated pragma_nontemporal
        self.heap: list[str] = []        # heap buffers live here (freed by a failed check)
        self.root_name = self.name       # the entry's symbol: names the error slot

    def child(self, func) -> "LLVMCodegen":
        """A code generator for another function ``func`` of the same module (shared
        declarations, metadata numbering and function list)."""
        sub = copy.copy(self)
        sub.func, sub.name = func, func.name
        sub.b = IRBuilder()
        sub.b.declarations = self.b.declarations
        sub.b.metadata = self.b.metadata
        sub.vars, sub.bufs = {}, {}
        sub.nontemporal = False
        sub.heap = []
        return sub

    # driver -------------------------------------------------------------------------
    def emit(self) -> str:
        main = self.host_function()
        for f in self.module.functions:
            if f is self.func:
                continue
            conv = calling_conv(f)
            if conv == "parallel_task":
                emit_task(self, f)
            elif conv == "host":
                self.functions.append(self.child(f).host_function())
            else:
                raise CodegenError(f"llvm codegen: function '{f.name}' has calling_conv "
                                   f"{conv!r}; the llvm target runs host functions and "
                                   "parallel tasks (a device kernel needs a GPU target)")
        b = self.b
        out = ["; generated by cuvil targets.llvm", 'source_filename = "cuvil"']
        if self.triple:
            out.append(f'target triple = "{self.triple}"')
        out.append("")
        out.extend(b.declarations.values())
        out.append("")
        out.append(main)
        out.append("")
        out.extend(f + "\n" for f in self.functions)
        out.extend(slot_definitions(self.module, self.root_name))
        attrs = ["nounwind"]
        if self.cpu:
            attrs.append(f'"target-cpu"="{self.cpu}"')
        if self.features:
            attrs.append(f'"target-features"="{self.features}"')
        if self.vector_bits >= 512:
            # LLVM splits 512-bit vectors on CPUs that "prefer" 256 bits unless told
            # the function was written for them, as our vectorizer's chunks are
            attrs.append(f'"min-legal-vector-width"="{self.vector_bits}"')
            attrs.append(f'"prefer-vector-width"="{self.vector_bits}"')
        out.append(f"attributes #0 = {{ {' '.join(attrs)} }}")
        out.extend(b.metadata)
        return "\n".join(out) + "\n"

    def host_function(self) -> str:
        """The text of ``self.func`` with the C ABI of the module docstring."""
        b = self.b
        params = []
        for k, p in enumerate(self.func.params):
            if isinstance(p, Buffer):
                ptr = f"%arg{k}.{_clean(p.name)}"
                params.append(f"ptr noalias align {D.itemsize(p.dtype)} {ptr}")
                self.bufs[id(p)] = ptr
            else:
                raw = f"%arg{k}.{_clean(p.name)}"
                params.append(f"{abi_type(p.dtype)} {raw}")
                self.vars[id(p)] = self._from_abi(raw, p.dtype)
        for k, v in enumerate(size_vars_of(self.func)):
            raw = f"%size{k}.{_clean(v.name)}"
            params.append(f"i64 {raw}")
            self.vars[id(v)] = I.convert(b, raw, "int64", v.dtype)
        self.stmt(self.func.body)
        b.raw("ret i32 0")
        out = [f"define i32 @{_symbol(self.name)}({', '.join(params)}) #0 {{", "entry:"]
        out.extend(b.entry_lines)
        out.extend(b.lines)
        out.append("}")
        return "\n".join(out)

    def _from_abi(self, raw: str, dt: str) -> str:
        e = D.element(dt)
        if e == "bool":
            return self.b.op(f"icmp ne i8 {raw}, 0")
        if e in ("float16", "bfloat16"):
            return I.narrow(self.b, raw, dt)
        return raw

    # statements -------------------------------------------------------------------------
    def stmt(self, s) -> None:
        fn = getattr(self, "s_" + type(s).__name__, None)
        if fn is None:
            raise CodegenError(f"llvm codegen: no translation for statement "
                               f"{type(s).__name__}")
        fn(s)

    def s_Block(self, s):
        raise CodegenError(f"llvm codegen: block '{s.name}' was not lowered; build with "
                           "targets.build(func, 'llvm') or lower first with "
                           "T.lower(func, 'llvm')")

    def s_BlockRealize(self, s):
        self.s_Block(s.block)

    def s_SeqStmt(self, s):
        for x in s.seq:
            self.stmt(x)

    def s_Evaluate(self, s):
        if is_launch(s.value):
            emit_launch(self, s.value)
        elif not isinstance(s.value, IntImm):
            self.expr(s.value)

    def s_AssertStmt(self, s):
        emit_assert(self, s)

    def s_BufferStore(self, s):
        buf, b = s.buffer, self.b
        v, vdt = self.expr(s.value), s.value.dtype
        ptr, lanes = self._address(buf, s.indices)
        if ptr is not None and lanes != D.lanes(vdt):
            v, vdt = self._broadcast(v, vdt, lanes), D.with_lanes(vdt, lanes)
        if D.is_bool(buf.dtype):
            v = b.op(f"zext {reg_type(vdt)} {v} to {mem_type(vdt)}")
        al = D.itemsize(buf.dtype)
        if ptr is not None:
            md = ""
            if self.nontemporal and lanes != 1:
                md = ", !nontemporal " + b.nontemporal_metadata()
            b.raw(f"store {mem_type(vdt)} {v}, ptr {ptr}, align {al}{md}")
            return
        st = mem_type(buf.dtype)
        for k, p in enumerate(lanes):
            x = v if D.lanes(vdt) == 1 else b.op(f"extractelement {mem_type(vdt)} {v}, i32 {k}")
            b.raw(f"store {st} {x}, ptr {p}, align {al}")

    def s_For(self, s):
        if s.kind == "thread_binding":
            raise CodegenError(f"llvm codegen: loop '{s.loop_var.name}' is bound to "
                               f"{s.thread_tag}; thread bindings need a GPU target "
                               "such as 'cuda'")
        outer, fm = self.nontemporal, self.fm
        ann = dict(s.annotations)
        self.nontemporal = outer or bool(ann.get(NONTEMPORAL, False))
        if ann.get(REASSOC) and "reassoc" not in fm and "fast" not in fm:
            self.fm = fm + "reassoc "
        try:
            self._for(s)
        finally:
            self.nontemporal, self.fm = outer, fm

    def _for(self, s):
        # a parallel loop still here is nested in a task (the outer one was outlined)
        b = self.b
        dt = s.loop_var.dtype
        t = reg_type(dt)
        lo = I.convert(b, self.expr(s.min), s.min.dtype, dt)
        ext = I.convert(b, self.expr(s.extent), s.extent.dtype, dt)
        end = b.op(f"add {t} {lo}, {ext}")
        pre = b.current
        head, body, latch, done = (b.label("for.head"), b.label("for.body"),
                                   b.label("for.latch"), b.label("for.end"))
        b.raw(f"br label %{head}")
        b.start(head)
        i, nxt = b.tmp(), b.tmp()
        b.lines.append(f"  {i} = phi {t} [{lo}, %{pre}], [{nxt}, %{latch}]")
        c = b.op(f"icmp {'s' if D.is_int(dt) else 'u'}lt {t} {i}, {end}")
        b.raw(f"br i1 {c}, label %{body}, label %{done}")
        b.start(body)
        old = self.vars.get(id(s.loop_var))
        self.vars[id(s.loop_var)] = i
        self.stmt(s.body)
        self._restore(s.loop_var, old)
        b.raw(f"br label %{latch}")
        b.start(latch)
        # i < end, so i + 1 cannot overflow the loop variable's own signedness (an
        # unsigned "nuw" on a signed counter was poison when a loop from -3 crossed 0)
        b.lines.append(f"  {nxt} = add {'nsw' if D.is_int(dt) else 'nuw'} {t} {i}, 1")
        md = ""
        if s.kind == "unrolled":
            md = ", !llvm.loop " + b.loop_metadata('!"llvm.loop.unroll.full"')
        elif s.kind == "vectorized":
            md = ", !llvm.loop " + b.loop_metadata('!"llvm.loop.vectorize.enable", i1 true')
        b.raw(f"br label %{head}{md}")
        b.start(done)

    def s_IfThenElse(self, s):
        b = self.b
        c = self.expr(s.condition)
        then, other, end = b.label("if.then"), b.label("if.else"), b.label("if.end")
        b.raw(f"br i1 {c}, label %{then}, label %{other if s.else_case else end}")
        b.start(then)
        self.stmt(s.then_case)
        b.raw(f"br label %{end}")
        if s.else_case is not None:
            b.start(other)
            self.stmt(s.else_case)
            b.raw(f"br label %{end}")
        b.start(end)

    def s_LetStmt(self, s):
        old = self.vars.get(id(s.var))
        self.vars[id(s.var)] = I.convert(self.b, self.expr(s.value), s.value.dtype,
                                         s.var.dtype)
        self.stmt(s.body)
        self._restore(s.var, old)

    def _checked_op(self, op: str, x: str, y: str) -> tuple[str, str]:
        """``x op y`` in i64 with LLVM's overflow intrinsic: (value, overflowed)."""
        b = self.b
        b.declare(f"{op}.ov", f"declare {{i64, i1}} @llvm.{op}.with.overflow.i64(i64, i64)")
        r = b.op(f"call {{i64, i1}} @llvm.{op}.with.overflow.i64(i64 {x}, i64 {y})")
        return b.op(f"extractvalue {{i64, i1}} {r}, 0"), b.op(f"extractvalue {{i64, i1}} {r}, 1")

    def _checked_extent(self, dim) -> tuple[str, str]:
        """An allocation extent in exact 64-bit arithmetic: (value, bad).

        The flattened extent of an internal buffer is a product of sizes (``m*n*n``)
        that would wrap around in the index dtype; products and sums are redone in
        i64 with overflow checks, and the result must be non-negative and fit the
        index dtype (else the buffer's own index arithmetic would wrap).
        """
        b = self.b
        if isinstance(dim, (Mul, Add)) and D.is_int(dim.dtype):
            x, ox = self._checked_extent(dim.a)
            y, oy = self._checked_extent(dim.b)
            v, o = self._checked_op("smul" if isinstance(dim, Mul) else "sadd", x, y)
            bad = b.op(f"or i1 {ox}, {b.op(f'or i1 {oy}, {o}')}")
        else:
            v, bad = I.convert(b, self.expr(dim), dim.dtype, "int64"), "false"
        neg = b.op(f"icmp slt i64 {v}, 0")
        big = "false"
        if D.is_int(dim.dtype) and D.bits(dim.dtype) < 64:
            big = b.op(f"icmp sgt i64 {v}, {_index_limit(dim.dtype)}")
        return v, b.op(f"or i1 {bad}, {b.op(f'or i1 {neg}, {big}')}")

    def s_Allocate(self, s):
        buf, b = s.buffer, self.b
        mt = mem_type(buf.dtype)
        nbytes = buf.nbytes_const()
        if nbytes is not None and nbytes <= STACK_LIMIT:
            n = max(1, nbytes // D.itemsize(buf.dtype))
            self.bufs[id(buf)] = b.entry_alloca(f"alloca [{n} x {mt}], align 64")
            self.stmt(s.body)
            return
        # the byte count in unsigned 64-bit arithmetic, every step checked: a size
        # that overflows must fail the call, not allocate a wrapped-around buffer
        size, overflow = str(D.itemsize(buf.dtype)), "false"
        for dim in buf.shape:
            d, o = self._checked_extent(dim)
            size, o2 = self._checked_op("umul", size, d)
            overflow = b.op(f"or i1 {overflow}, {b.op(f'or i1 {o}, {o2}')}")
        # from the runtime's workspace cache (targets.llvm.workspace_ir): a block
        # freed by an earlier call comes back without faulting its pages in again
        for name, decl in WORKSPACE.items():
            b.declare(name, decl)
        try_alloc, fail, ok = b.label("alloc.try"), b.label("alloc.fail"), b.label("alloc.ok")
        b.raw(f"br i1 {overflow}, label %{fail}, label %{try_alloc}")
        b.start(try_alloc)
        ptr = b.op(f"call ptr @cuvil_workspace_alloc(i64 {size})")
        null = b.op(f"icmp eq ptr {ptr}, null")
        b.raw(f"br i1 {null}, label %{fail}, label %{ok}")
        b.start(fail)
        b.raw(f"ret i32 {STATUS_ALLOC_FAILED}")
        b.start(ok)
        self.bufs[id(buf)] = ptr
        self.heap.append(ptr)
        self.stmt(s.body)
        self.heap.pop()
        b.raw(f"call void @cuvil_workspace_free(ptr {ptr})")


def _index_limit(dtype: str) -> int:
    return (1 << (D.bits(dtype) - 1)) - 1


def _clean(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def codegen_llvm(func, name: str | None = None, **options) -> str:
    """LLVM IR text of a lowered module or PrimFunc (see :class:`LLVMCodegen` for
    options); ``name`` is the entry's symbol.

    Example::

        >>> import cuvil_tir as T
        >>> "define i32 @f()" in codegen_llvm(T.PrimFunc([], T.Evaluate(T.const(0))), "f")
        True
    """
    return LLVMCodegen(func, name, **options).emit()
