"""CUDA C from lowered GPU IR: one ``extern "C" __global__`` function per kernel.

The lowered function (see :func:`targets.cuda.cuda_pipeline`) is a host program whose
leaves are kernels; :func:`codegen_cuda` prints every kernel and returns a
:class:`CudaProgram`: the source, and per kernel its parameters (the ``global``
buffers and scalar variables it uses), launch dimensions and dynamic shared memory,
which the runtime needs to launch it.

Printing rules: each thread axis becomes one ``const int`` read of
``threadIdx``/``blockIdx`` at the top of the kernel; ``__launch_bounds__`` gives the
block size; ``shared`` buffers are ``__shared__ __align__(16)`` arrays (or slices of
one ``extern __shared__`` array when a kernel needs more than 48 KB, the runtime then
raises the kernel's dynamic shared memory limit); ``local`` buffers are per-thread
arrays; a contiguous vector copy whose offsets are proven multiples of its width
moves 16/8/4 bytes at once (``int4``/``int2``/``int``, a ``float4`` load for fp32),
other vector code is printed lane by lane; ``float16``/``bfloat16`` arithmetic uses
``cuda_fp16.h``/``cuda_bf16.h`` (math functions through ``float``); integer floor
division is a plain ``/`` when both operands are proven non-negative.

Example::

    >>> import cuvil_tir as T, targets
    >>> A = T.placeholder((64,), name="A")
    >>> B = T.compute((64,), lambda i: A[i] * 2.0, name="B")
    >>> sch = __import__("schedules").Schedule(T.create_prim_func([A, B]))
    >>> bx, tx = sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 32])
    >>> sch.bind(bx, "blockIdx.x"); sch.bind(tx, "threadIdx.x")
    >>> prog = codegen_cuda(T.lower(sch, targets.Target("cuda")), targets.Target("cuda"))
    >>> print(prog.text.split("extern")[1].splitlines()[0])
     "C" __global__ void __launch_bounds__(32) main_kernel0(float* __restrict__ A, float* __restrict__ B) {
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from cuvil_tir import dtype as D
from cuvil_tir.arith import Analyzer
from cuvil_tir.arith.affine import Affine
from cuvil_tir.errors import CodegenError
from cuvil_tir.expr import (Broadcast, BufferLoad, Call, FloatImm, IntImm, Ramp,
                            StringImm, Var)
from cuvil_tir.stmt import Allocate, Range
from cuvil_tir.transform.gpu_sync import is_barrier
from cuvil_tir.transform.gpu_threads import (THREAD_TAGS, kernel_free_vars, kernel_name,
                                             kernels, launch_dims, thread_vars)
from cuvil_tir.visitor import post_order_visit

from .intrinsics import PREAMBLE, c_type, call_text

STATIC_SHARED_LIMIT = 48 * 1024


@dataclass
class KernelInfo:
    """What the runtime needs to launch one kernel.

    ``params``: ``("buffer", Buffer)`` or ``("scalar", Var)`` in C parameter order;
    ``dims``: ``{tag: extent expression}``; ``dyn_shared``: bytes of dynamic shared
    memory (0: static only).

    Example::

        >>> KernelInfo("k", [], {}, 0).threads_per_block()
        1
    """

    name: str
    params: list
    dims: dict
    dyn_shared: int = 0

    def threads_per_block(self) -> int:
        """Product of the (constant) ``threadIdx`` extents."""
        n = 1
        for t in THREAD_TAGS:
            d = self.dims.get(t)
            n *= d.value if isinstance(d, IntImm) else 1
        return n


@dataclass
class CudaProgram:
    """The output of :func:`codegen_cuda`: ``text`` (CUDA C), ``kernels``
    (:class:`KernelInfo` by name, in launch order) and ``host`` (the lowered function,
    whose host statements the runtime walks).

    Example::

        >>> str(CudaProgram("x", {}, None))
        'x'
    """

    text: str
    kernels: dict = field(default_factory=dict)
    host: object = None
    aligned16: frozenset = frozenset()

    def __str__(self):
        return self.text


def shared_bytes(kernel) -> int:
    """Bytes of all ``shared`` allocations in ``kernel`` (constant shapes).

    Example::

        >>> import cuvil_tir as T
        >>> shared_bytes(T.Evaluate(T.const(0)))
        0
    """
    total = []

    def look(n):
        if isinstance(n, Allocate) and n.buffer.scope == "shared":
            total.append(_alloc_bytes(n.buffer))
    post_order_visit(kernel, look)
    return sum(total)


def _alloc_bytes(buf) -> int:
    n = 1
    for d in buf.shape:
        if not isinstance(d, IntImm):
            raise CodegenError(f"{buf.scope} buffer {buf.name} has the symbolic shape "
                               f"{tuple(str(s) for s in buf.shape)}; GPU on-chip buffers "
                               "need a constant size")
        n *= d.value
    return (n * D.bits(buf.dtype) + 7) // 8 + 15 & ~15


class _Names:
    def __init__(self):
        self.by_id: dict = {}
        self.used: set = set()

    def __call__(self, node, hint: str) -> str:
        name = self.by_id.get(id(node))
        if name is None:
            base = re.sub(r"\W", "_", hint) or "v"
            if base[0].isdigit():
                base = "v_" + base
            name, k = base, 1
            while name in self.used:
                name, k = f"{base}_{k}", k + 1
            self.used.add(name)
            self.by_id[id(node)] = name
        return name


class KernelPrinter:
    """Prints one kernel (use :func:`codegen_cuda`).

    Example::

        >>> import cuvil_tir as T
        >>> KernelPrinter(T.Evaluate(T.const(0)), "k").lines
        []
    """

    def __init__(self, kernel, name: str):
        self.kernel, self.name = kernel, name
        self.lines: list = []
        self.ind = 1
        self.names = _Names()
        self.ana = Analyzer(index_no_overflow=True)
        self.dyn = dict(getattr(kernel, "annotations", ()) or ()).get("cuda.dyn_shared", 0)
        self.dyn_offset = 0
        self.aligned16: set = set()

    # ---- the kernel -----------------------------------------------------------------
    def print(self, params) -> str:
        dims = launch_dims(self.kernel)
        nthreads = 1
        for t in THREAD_TAGS:
            nthreads *= dims[t].value
        args = []
        for kind, obj in params:
            if kind == "buffer":
                args.append(f"{c_type(obj.dtype)}* __restrict__ {self.names(obj, obj.name)}")
            else:
                args.append(f"{c_type(obj.dtype)} {self.names(obj, obj.name)}")
        head = (f'extern "C" __global__ void __launch_bounds__({nthreads}) '
                f'{self.name}({", ".join(args)}) {{')
        for tag, var in thread_vars(self.kernel).items():
            self.emit(f"const int {self.names(var, var.name)} = (int){tag};")
            self.ana.bind(var, Range(IntImm(0, var.dtype), dims[tag]))
        if self.dyn:
            self.emit("extern __shared__ __align__(16) unsigned char cuvil_dyn_smem[];")
        self.stmt(self.kernel)
        return "\n".join([head] + self.lines + ["}"])

    def emit(self, text: str) -> None:
        self.lines.append("  " * self.ind + text)

    def block(self, head: str, body, tail: str = "}") -> None:
        self.emit(head)
        self.ind += 1
        self.stmt(body)
        self.ind -= 1
        self.emit(tail)

    # ---- statements -----------------------------------------------------------------
    def stmt(self, s) -> None:
        kind = type(s).__name__
        method = getattr(self, "s_" + kind, None)
        if method is None:
            raise CodegenError(f"CUDA codegen: cannot print a {kind} statement; lower "
                               "the function first (T.lower(f, 'cuda'))")
        method(s)

    def s_SeqStmt(self, s):
        for c in s.seq:
            self.stmt(c)

    def s_For(self, s):
        if s.kind == "thread_binding":
            self.block("{", s.body)
            return
        v = self.names(s.loop_var, s.loop_var.name)
        lo, ext = self.expr(s.min), self.expr(s.extent)
        if s.kind in ("unrolled", "vectorized"):
            self.emit("#pragma unroll")
        saved = dict(self.ana.bounds)
        self.ana.bind(s.loop_var, Range(s.min, s.extent))
        t = c_type(s.loop_var.dtype)
        end = ext if _is_zero(s.min) else f"{lo} + {ext}"
        self.block(f"for ({t} {v} = {lo}; {v} < {end}; ++{v}) {{", s.body)
        self.ana.bounds = saved

    def s_IfThenElse(self, s):
        self.block(f"if ({_strip(self.expr(s.condition))}) {{", s.then_case,
                   "}" if s.else_case is None else "} else {")
        if s.else_case is not None:
            self.ind += 1
            self.stmt(s.else_case)
            self.ind -= 1
            self.emit("}")

    def s_LetStmt(self, s):
        name = self.names(s.var, s.var.name)
        self.emit(f"const {c_type(s.var.dtype)} {name} = {_strip(self.expr(s.value))};")
        self.stmt(s.body)

    def s_Allocate(self, s):
        buf = s.buffer
        name = self.names(buf, buf.name)
        t = c_type(buf.dtype)
        nbytes = _alloc_bytes(buf)
        n = nbytes * 8 // D.bits(buf.dtype)
        if buf.scope == "shared" and self.dyn:
            self.emit(f"{t}* {name} = ({t}*)(cuvil_dyn_smem + {self.dyn_offset});")
            self.dyn_offset += nbytes
        elif buf.scope == "shared":
            self.emit(f"__shared__ __align__(16) {t} {name}[{n}];")
        elif buf.scope == "local":
            self.emit(f"__align__(16) {t} {name}[{n}];")
        else:
            raise CodegenError(f"CUDA codegen: buffer {buf.name} in scope {buf.scope!r} "
                               "is allocated inside a kernel; only 'shared' and 'local' "
                               "buffers can be")
        self.stmt(s.body)

    def s_Evaluate(self, s):
        if is_barrier(s):
            self.emit("__syncthreads();")
        elif not isinstance(s.value, (IntImm, StringImm)):
            self.emit(f"(void)({_strip(self.expr(s.value))});")

    def s_BufferStore(self, s):
        n = max([ix.lanes for ix in s.indices] + [s.value.lanes])
        if n == 1:
            self.emit(f"{self.access(s.buffer, s.indices[0])} = {_strip(self.expr(s.value))};")
            return
        if self.vector_copy(s, n):
            return
        for lane in range(n):
            idx = self.expr(s.indices[0], lane)
            self.emit(f"{self.names(s.buffer, s.buffer.name)}[{_strip(idx)}] = "
                      f"{_strip(self.expr(s.value, lane))};")

    def vector_copy(self, s, n) -> bool:
        """A contiguous aligned vector copy as one 16/8/4-byte move."""
        v = s.value
        if not (isinstance(v, BufferLoad) and v.buffer.dtype == s.buffer.dtype):
            return False
        nbytes = n * D.bits(s.buffer.dtype) // 8
        vt = {16: "int4", 8: "int2", 4: "int"}.get(nbytes)
        if D.element(s.buffer.dtype) == "float32" and n in (2, 4):
            vt = f"float{n}"
        if vt is None:
            return False
        dst, src = s.indices[0], v.indices[0]
        if not (self.aligned(dst, n) and self.aligned(src, n)):
            return False
        d = f"&{self.names(s.buffer, s.buffer.name)}[{_strip(self.expr(dst.base))}]"
        r = f"&{self.names(v.buffer, v.buffer.name)}[{_strip(self.expr(src.base))}]"
        self.emit(f"*({vt}*)({d}) = *(const {vt}*)({r});")
        self.aligned16.update(b.name for b in (s.buffer, v.buffer) if b.scope == "global")
        return True

    def aligned(self, ix, n) -> bool:
        if not (isinstance(ix, Ramp) and isinstance(ix.stride, IntImm) and ix.stride.value == 1):
            return False
        try:
            aff = Affine.of(ix.base)
        except Exception:     # noqa: BLE001 - not affine: not proven
            return False
        return aff.const % n == 0 and all(c % n == 0 for _, c in aff.terms)

    def access(self, buf, ix, lane=None) -> str:
        return f"{self.names(buf, buf.name)}[{_strip(self.expr(ix, lane))}]"

    # ---- expressions ------------------------------------------------------------------
    def expr(self, e, lane=None) -> str:
        if isinstance(e, Var):
            if id(e) not in self.names.by_id:
                raise CodegenError(f"CUDA codegen: variable {e.name} is not defined in "
                                   f"kernel {self.name}")
            return self.names.by_id[id(e)]
        if isinstance(e, IntImm):
            return _int_literal(e)
        if isinstance(e, FloatImm):
            return _float_literal(e)
        if isinstance(e, Ramp):
            if lane is None:
                raise CodegenError("CUDA codegen: a vector index outside a vector store")
            return f"({self.expr(e.base)} + {lane * 1} * {self.expr(e.stride)})"
        if isinstance(e, Broadcast):
            return self.expr(e.value, None)
        if isinstance(e, BufferLoad):
            return self.access(e.buffer, e.indices[0], lane)
        kind = type(e).__name__
        if kind == "Cast":
            return _cast(e.value.dtype, e.dtype, self.expr(e.value, lane))
        if kind == "Call":
            return self.call(e, lane)
        if kind in ("Not",):
            return f"(!{self.expr(e.a, lane)})"
        if kind == "Select":
            return (f"({self.expr(e.condition, lane)} ? {self.expr(e.true_value, lane)} : "
                    f"{self.expr(e.false_value, lane)})")
        if hasattr(e, "a") and hasattr(e, "b"):
            return self.binary(kind, e, lane)
        raise CodegenError(f"CUDA codegen: cannot print a {kind} expression")

    def call(self, e: Call, lane):
        if e.op == "if_then_else":
            c, a, b = (self.expr(x, lane) for x in e.args)
            return f"({c} ? {a} : {b})"
        return call_text(e.op, D.element(e.dtype), [self.expr(a, lane) for a in e.args])

    def binary(self, kind, e, lane):
        a, b = self.expr(e.a, lane), self.expr(e.b, lane)
        dt = D.element(e.a.dtype)
        ops = {"Add": "+", "Sub": "-", "Mul": "*", "EQ": "==", "NE": "!=", "LT": "<",
               "LE": "<=", "GT": ">", "GE": ">=", "And": "&&", "Or": "||"}
        if kind in ops:
            return f"({a} {ops[kind]} {b})"
        if kind == "Div":
            return f"({a} / {b})"
        if kind == "Mod":
            return f"fmod({a}, {b})" if D.is_float(dt) else f"({a} % {b})"
        if kind in ("FloorDiv", "FloorMod"):
            if D.is_float(dt):
                q = f"floor((double){a} / (double){b})"
                return f"(({c_type(dt)})({q}))" if kind == "FloorDiv" else \
                    f"({a} - ({c_type(dt)})({q}) * {b})"
            if D.is_uint(dt) or (lane is None and self.nonneg(e.a) and self.nonneg(e.b)):
                return f"({a} {'/' if kind == 'FloorDiv' else '%'} {b})"
            return f"cuvil_{kind.lower()}({a}, {b})"
        if kind in ("Min", "Max"):
            if D.is_float(dt):
                cmp = "<" if kind == "Min" else ">"
                return f"(({a}) {cmp} ({b}) ? ({a}) : ({b}))"
            return f"{kind.lower()}({a}, {b})"
        raise CodegenError(f"CUDA codegen: cannot print a {kind} expression")

    def nonneg(self, e) -> bool:
        lo, _ = self.ana.const_int_bound(e)
        return isinstance(lo, int) and lo >= 0


def _is_zero(e) -> bool:
    return isinstance(e, IntImm) and e.value == 0


def _strip(text: str) -> str:
    if text.startswith("(") and text.endswith(")"):
        depth = 0
        for k, ch in enumerate(text):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and k < len(text) - 1:
                return text
        return text[1:-1]
    return text


def _int_literal(e: IntImm) -> str:
    dt, v = D.element(e.dtype), e.value
    if D.is_bool(dt):
        return "true" if v else "false"
    if dt == "int64":
        return f"{v}LL" if v != -(1 << 63) else "(-9223372036854775807LL - 1)"
    if dt == "uint64":
        return f"{v}ULL"
    if D.is_uint(dt):
        return f"{v}u"
    if v == -(1 << 31):
        return "(-2147483647 - 1)"
    return f"({v})" if v < 0 else str(v)


def _float_literal(e: FloatImm) -> str:
    dt, v = D.element(e.dtype), float(e.value)
    if math.isnan(v) or math.isinf(v):
        text = "__longlong_as_double(0x7ff8000000000000LL)" if math.isnan(v) else (
            "__longlong_as_double(0x7ff0000000000000LL)" if v > 0 else
            "__longlong_as_double(0xfff0000000000000LL)")
        return text if dt == "float64" else _cast("float64", dt, text)
    text = repr(v)
    if "e" not in text and "." not in text:
        text += ".0"
    if dt == "float64":
        return f"({text})" if v < 0 else text
    if dt == "float32":
        return f"({text}f)" if v < 0 else text + "f"
    return _cast("float32", dt, text + "f")


def _cast(src: str, dst: str, text: str) -> str:
    src, dst = D.element(src), D.element(dst)
    if src == dst:
        return text
    if dst == "float16":
        return f"__float2half((float)({text}))"
    if dst == "bfloat16":
        return f"__float2bfloat16((float)({text}))"
    if src in ("float16", "bfloat16"):
        text = f"(float)({text})"
    if D.is_bool(dst):
        return f"(({text}) != 0)"
    return f"(({c_type(dst)})({text}))"


def kernel_params(func, kernel) -> list:
    """``[("buffer", Buffer) | ("scalar", Var)]`` a kernel takes: the ``global``
    buffers it touches (parameters first, in their order) and its free scalars.

    Example::

        >>> import cuvil_tir as T
        >>> kernel_params(T.PrimFunc([], T.Evaluate(T.const(0))), T.Evaluate(T.const(0)))
        []
    """
    used = []
    seen = set()

    def look(n):
        if isinstance(n, (BufferLoad,)) or type(n).__name__ == "BufferStore":
            b = n.buffer
            if b.scope == "global" and id(b) not in seen:
                seen.add(id(b))
                used.append(b)
    post_order_visit(kernel, look)
    order = {id(p): k for k, p in enumerate(func.params)}
    used.sort(key=lambda b: order.get(id(b), len(order)))
    scalars = [v for v in kernel_free_vars(kernel)]
    return [("buffer", b) for b in used] + [("scalar", v) for v in scalars]


def codegen_cuda(lowered, target=None) -> CudaProgram:
    """Print every kernel of ``lowered`` (a function lowered for ``cuda``).

    Example::

        >>> import cuvil_tir as T
        >>> codegen_cuda(T.PrimFunc([], T.Evaluate(T.const(0)))).kernels
        {}
    """
    parts = [PREAMBLE]
    infos, aligned = {}, set()
    for k, kernel in enumerate(kernels(lowered.body)):
        name = kernel_name(kernel) or f"{lowered.name}_kernel{k}"
        params = kernel_params(lowered, kernel)
        p = KernelPrinter(kernel, name)
        text = p.print(params)
        dims = launch_dims(kernel)
        infos[name] = KernelInfo(name, params, dims, p.dyn_offset if p.dyn else 0)
        aligned |= p.aligned16
        parts.append(text)
    return CudaProgram("\n\n".join(parts) + "\n", infos, lowered, frozenset(aligned))


__all__ = ["CudaProgram", "KernelInfo", "KernelPrinter", "codegen_cuda", "kernel_params",
           "shared_bytes"]
