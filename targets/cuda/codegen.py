"""CUDA C from a lowered GPU module: one ``extern "C" __global__`` function per
``device_kernel`` function, and the host function as C.

The lowered module (see :func:`targets.cuda.cuda_pipeline`) holds a host function
that launches kernels (``T.device_launch``) and one ``device_kernel`` function per
kernel, its parameters the ``global`` buffers and scalars the kernel uses (the
outlining pass, :mod:`cuvil_tir.transform.outline`).  :func:`codegen_cuda` prints
every kernel and the host program (:mod:`targets.cuda.host`) and returns a
:class:`CudaProgram`: both sources, and per kernel its parameters, launch dimensions
and dynamic shared memory.

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
from dataclasses import dataclass, field

from cuvil_tir import dtype as D
from cuvil_tir import ops
from cuvil_tir.arith import Analyzer
from cuvil_tir.arith.affine import Affine
from cuvil_tir.errors import CodegenError, CuvilError
from cuvil_tir.expr import BufferLoad, IntImm, Ramp
from cuvil_tir.buffer import Buffer
from cuvil_tir.ir_module import as_module, calling_conv, device_launch_parts, is_device_launch
from cuvil_tir.stmt import Allocate, Range
from cuvil_tir.transform.gpu_sync import is_barrier
from cuvil_tir.transform.gpu_threads import launch_dims, launch_shape, thread_vars
from cuvil_tir.visitor import Visitor, post_order_visit

from ..cstyle import CPrinter
from .host import print_host
from .intrinsics import PREAMBLE
from .tensorcore import WMMA_OP, wmma_text
from .mma_fp8 import FP8_OP, mma_fp8_text
from .fragments import (FILL_OP, FRAGMENT_SCOPES, STORE_OP, declare_fragments,
                        fill_text, store_text)
from .asynccopy import SPELLINGS as ASYNC_SPELLINGS
from .mma import SPELLINGS as MMA_SPELLINGS, WARP_SCOPE, declare_registers
from .mbarrier import SPELLINGS as MBARRIER_SPELLINGS
from .cluster import SPELLINGS as CLUSTER_SPELLINGS, cluster_attribute
from .tma import SPELLINGS as TMA_SPELLINGS, TMAP_TYPE, box_alignment
from .wgmma import SPELLINGS as WGMMA_SPELLINGS, WARPGROUP_SCOPE, shared_alignment
from .wgmma_async import SPELLINGS as WGMMA_ASYNC_SPELLINGS
from .setmaxnreg import SPELLINGS as SETMAXNREG_SPELLINGS

STATIC_SHARED_LIMIT = 48 * 1024


@dataclass
class KernelInfo:
    """What the runtime needs to launch one kernel.

    ``params``: ``("buffer", Buffer)`` or ``("scalar", Var)`` in C parameter order
    (the ``device_kernel`` function's); ``dims``: ``{tag: extent expression}`` in the
    kernel's variables; ``dyn_shared``: bytes of dynamic shared memory (0: static
    only); ``param_types``: the C type of each parameter; ``tensor_maps``: the
    ``CUtensorMap`` parameters after those (:class:`targets.cuda.tma.TensorMap`).

    Example::

        >>> KernelInfo("k", [], {}, 0).threads_per_block()
        1
    """

    name: str
    params: list
    dims: dict
    dyn_shared: int = 0
    param_types: tuple = ()
    tensor_maps: tuple = ()

    def threads_per_block(self) -> int:
        """Product of the (constant) block extents."""
        n = 1
        for d in launch_shape(self.dims)[1]:
            n *= d.value if isinstance(d, IntImm) else 1
        return n


@dataclass
class CudaProgram:
    """The output of :func:`codegen_cuda`: ``text`` (CUDA C), ``kernels``
    (:class:`KernelInfo` by name, in the module's order: the host's table), ``host``
    (the lowered host function), ``host_c`` (it as C, :mod:`targets.cuda.host`),
    ``entry`` (the C name of the host function) and ``launches`` (each launch
    statement of the host as data, :func:`launch_spec`, in program order).

    Example::

        >>> str(CudaProgram("x", {}, None))
        'x'
    """

    text: str
    kernels: dict = field(default_factory=dict)
    host: object = None
    alignment: dict = field(default_factory=dict)
    helpers: dict = field(default_factory=dict)
    bodies: tuple = ()
    host_c: str = ""
    entry: str = ""
    launches: tuple = ()

    def __str__(self):
        return self.text


class _IndexUses(Visitor):
    """The variables an expression of a kernel reads (a loop's own variable is a
    definition, not a use)."""

    def __init__(self):
        self.ids: set = set()

    def visit_For(self, s):
        self.visit(s.min)
        self.visit(s.extent)
        self.visit(s.body)

    def visit_Var(self, v):
        self.ids.add(id(v))

    visit_SizeVar = visit_Var


def _used_indices(kernel) -> set:
    uses = _IndexUses()
    uses.visit(kernel)
    return uses.ids


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


class KernelPrinter(CPrinter):
    """Prints one kernel: the C printer base with CUDA's qualifiers, thread indices,
    ``__shared__`` buffers, barriers, warp shuffles and vector copies (use
    :func:`codegen_cuda`).

    Example::

        >>> KernelPrinter.function_prefix, KernelPrinter.status_type
        ('extern "C" __global__', 'void')
    """

    lang = "cuda"
    op_table = "cuda"
    headers = ("cuda_fp16.h", "cuda_bf16.h")
    function_prefix = 'extern "C" __global__'
    status_type = "void"
    restrict = "__restrict__"
    memory_types = {"float16": "half", "bfloat16": "__nv_bfloat16",
                    "float8_e4m3fn": "__nv_fp8_e4m3", "float8_e5m2": "__nv_fp8_e5m2"}
    # fp8 values are computed in float, as float16 and bfloat16 are
    scalar_types = {**CPrinter.scalar_types, "float8_e4m3fn": "float", "float8_e5m2": "float"}
    loop_pragmas = {"unrolled": "#pragma unroll", "vectorized": "#pragma unroll"}
    #: how CUDA C reads each thread axis (cuvil_tir.thread_axes)
    axis_spelling = {"blockIdx.x": "blockIdx.x", "blockIdx.y": "blockIdx.y",
                     "blockIdx.z": "blockIdx.z", "threadIdx.x": "threadIdx.x",
                     "threadIdx.y": "threadIdx.y", "threadIdx.z": "threadIdx.z"}

    def __init__(self, func):
        super().__init__()
        self.func, self.name, self.kernel = func, func.name, func.body
        self.ana = Analyzer(index_no_overflow=True)
        self.dyn = dict(getattr(self.kernel, "annotations", ()) or ()).get("dyn_shared", 0)
        self.dyn_offset = 0
        self.dyn_align = 32           # the largest alignment a dynamic buffer needs
        self.alignment: dict = {}     # global buffer -> bytes its pointer needs
        self.param_types: list = []   # the C type of each parameter
        self.tensor_maps: dict = {}   # CUtensorMap parameters (targets.cuda.tma)

    # ---- the kernel -----------------------------------------------------------------
    def print_kernel(self) -> str:
        """The ``__global__`` function (helpers it uses are in ``self.helpers``)."""
        self.taken.add(self.name)
        dims = launch_dims(self.kernel)
        nthreads = 1
        for d in launch_shape(dims)[1]:
            nthreads *= d if isinstance(d, int) else d.value
        args = []
        for p in self.func.params:
            if isinstance(p, Buffer):
                if p.scope != "global":
                    raise CodegenError(f"cuda codegen: kernel {self.name} takes buffer "
                                       f"{p.name} in scope {p.scope!r}; a kernel's buffer "
                                       "parameters live in 'global' memory")
                t = f"{self.mem_type(p.dtype)}*"
                args.append(f"{t} {self.restrict} {self.bind(p)}")
            else:
                t = self.scalar_type(p.dtype)
                args.append(f"{t} {self.bind(p)}")
            self.param_types.append(t)
        used = _used_indices(self.kernel)
        for tag, var in thread_vars(self.kernel).items():
            if tag not in self.axis_spelling:
                raise CodegenError(f"cuda codegen: kernel {self.name} binds a loop to "
                                   f"{tag}, which CUDA does not have; bind it to one of "
                                   f"{', '.join(self.axis_spelling)}")
            self.ana.bind(var, Range(IntImm(0, var.dtype), dims[tag]))
            if id(var) in used:
                # an index nothing reads (an extent-1 grid axis) is not declared: nvcc
                # warns about an unused variable
                self.emit(f"const int {self.bind(var)} = (int){self.axis_spelling[tag]};")
        if self.dyn:
            self.emit("extern __shared__ __align__(32) unsigned char cvl_dyn_smem[];")
            at = len(self.lines) - 1
        self.print_stmt(self.kernel)
        if self.dyn and self.dyn_align > 32:
            # a tile placed on 1024 bytes (wgmma, swizzled tensor copies): the dynamic
            # window's base is aligned at run time, in bytes the launch adds
            pad, ind = self.dyn_align, self.lines[at][:len(self.lines[at])
                                                      - len(self.lines[at].lstrip())]
            self.lines[at:at + 1] = [
                f"{ind}extern __shared__ __align__({pad}) unsigned char cvl_dyn_raw[];",
                f"{ind}unsigned char* cvl_dyn_smem = cvl_dyn_raw + (({pad}u - ((unsigned)"
                f"__cvta_generic_to_shared(cvl_dyn_raw) & {pad - 1}u)) & {pad - 1}u);"]
            self.dyn_offset += pad
        for tm in self.tensor_maps.values():
            # the tensor engine reads its map from the parameter space (tma.py)
            args.append(f"const __grid_constant__ {TMAP_TYPE} {tm.name}")
            self.param_types.append(TMAP_TYPE)
        head = (f"{self.function_prefix} void __launch_bounds__({nthreads}) "
                f"{cluster_attribute(self.kernel)}{self.name}({', '.join(args)})")
        return "\n".join([head + " {"] + self.lines + ["}"])

    def use_helper(self, key: str, text: str) -> None:
        super().use_helper(key, text.replace("static inline",
                                             "static __device__ __forceinline__"))

    # ---- statements -----------------------------------------------------------------
    def print_for(self, s) -> None:
        if s.kind == "thread_binding":
            self.scope("{", s.body)       # the index was read once at the top
            return
        saved = dict(self.ana.bounds)
        self.ana.bind(s.loop_var, Range(s.min, s.extent))
        try:
            super().print_for(s)
        finally:
            self.ana.bounds = saved

    def print_allocate(self, s) -> None:
        buf = s.buffer
        name = self.bind(buf)
        t = self.mem_type(buf.dtype)
        nbytes = _alloc_bytes(buf)
        n = nbytes * 8 // D.bits(buf.dtype)
        align = max(shared_alignment(buf, s.body), box_alignment(buf, s.body)) \
            if buf.scope == "shared" else 32
        if buf.scope == "shared" and self.dyn:
            at = -(-self.dyn_offset // align) * align
            self.dyn_align = max(self.dyn_align, align)
            self.emit(f"{t}* {name} = ({t}*)(cvl_dyn_smem + {at});")
            self.dyn_offset = at + ((nbytes + 31) & ~31)    # tensor-core tiles need 32
        elif buf.scope == "shared":
            self.emit(f"__shared__ __align__({align}) {t} {name}[{n}];")
        elif buf.scope == "local":
            self.emit(f"__align__(16) {t} {name}[{n}];")
        elif buf.scope in FRAGMENT_SCOPES:
            declare_fragments(self, buf, name, n)
        elif buf.scope in (WARP_SCOPE, WARPGROUP_SCOPE):
            declare_registers(self, buf, name, n)
        else:
            raise CodegenError(f"cuda codegen: buffer {buf.name} in scope {buf.scope!r} "
                               "is allocated inside a kernel; only 'shared', 'local', "
                               f"'{WARP_SCOPE}' and wmma.* fragment buffers can be")
        self.print_stmt(s.body)

    def s_Evaluate(self, s):
        if is_barrier(s):
            self.emit(ops.spelling(self.op_table, s.value.op) + ";")
        else:
            super().s_Evaluate(s)

    def s_BufferStore(self, s):
        n = max([ix.lanes for ix in s.indices] + [s.value.lanes])
        if n > 1 and self.vector_copy(s, n):
            return
        v = s.value
        if n == 1 and isinstance(v, BufferLoad) and v.buffer.dtype == s.buffer.dtype:
            # a copy moves the stored bits (no float16 round trip through float)
            self.emit(f"{self.access(s.buffer, s.indices)} = {self.access(v.buffer, v.indices)};")
            return
        super().s_BufferStore(s)

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
        d = f"&{self.name_of(s.buffer)}[{self.bare(dst.base)}]"
        r = f"&{self.name_of(v.buffer)}[{self.bare(src.base)}]"
        self.emit(f"*({vt}*)({d}) = *(const {vt}*)({r});")
        for b in (s.buffer, v.buffer):
            if b.scope == "global":
                self.alignment[b.name] = max(self.alignment.get(b.name, 0), nbytes)
        return True

    @staticmethod
    def aligned(ix, n) -> bool:
        """A unit-stride ``Ramp`` whose base is provably a multiple of ``n``."""
        if not (isinstance(ix, Ramp) and isinstance(ix.stride, IntImm)
                and ix.stride.value == 1):
            return False
        try:
            aff = Affine.of(ix.base)
        except CuvilError:
            return False
        return aff.const % n == 0 and all(c % n == 0 for _, c in aff.terms)

    # ---- values -----------------------------------------------------------------------
    def mem_type(self, dt: str) -> str:
        if D.is_float8(dt):
            self.use_helper("cuda_fp8", "#include <cuda_fp8.h>")
        return super().mem_type(dt)

    def to_memory(self, text, vdt, mdt):
        e = D.element(mdt)
        if D.is_float8(e):
            # nearest, ties to even, saturating to the largest finite value (as the
            # interpreter rounds: cuvil_tir.float8)
            return f"{self.mem_type(e)}((float)({text}))"
        if e == "float16":
            return f"__float2half_rn({text})"
        if e == "bfloat16":
            return f"__float2bfloat16_rn({text})"
        return text if e == "bool" else super().to_memory(text, vdt, mdt)

    def from_memory(self, text, mdt):
        e = D.element(mdt)
        if D.is_float8(e):
            return f"((float)({text}))"
        if e == "float16":
            return f"__half2float({text})"
        if e == "bfloat16":
            return f"__bfloat162float({text})"
        return text if e == "bool" else super().from_memory(text, mdt)

    def round_value(self, text, dt):
        e = D.element(dt)
        if e in ("float16", "bfloat16") or D.is_float8(e):
            return self.from_memory(self.to_memory(text, dt, e), e)
        return super().round_value(text, dt)

    def float_literal(self, value, e):
        if math.isnan(value) or math.isinf(value):
            bits = "0x7fffffff" if math.isnan(value) else (
                "0x7f800000" if value > 0 else "0xff800000")
            text = f"__int_as_float({bits})"
            return f"(double){text}" if e == "float64" else text
        return super().float_literal(value, e)

    def e_BinaryOp(self, e):
        kind = type(e).__name__
        dt = D.element(e.a.dtype)
        if (kind in ("FloorDiv", "FloorMod") and D.is_integer(dt) and self.lane is None
                and self.nonneg(e.a) and self.positive(e.b)):
            op = "/" if kind == "FloorDiv" else "%"
            return f"({self.expr(e.a)} {op} {self.expr(e.b)})"
        return super().e_BinaryOp(e)

    def nonneg(self, e) -> bool:
        lo, _ = self.ana.const_int_bound(e)
        return isinstance(lo, int) and lo >= 0

    def positive(self, e) -> bool:
        lo, _ = self.ana.const_int_bound(e)
        return isinstance(lo, int) and lo > 0

    def access(self, buf, indices) -> str:
        if buf.scope in FRAGMENT_SCOPES:    # wmma_leading_dims refused these already
            raise CodegenError(f"cuda codegen: {buf.name} is a tensor-core fragment "
                               f"({buf.scope}); only the tensor-core ops reach it")
        return super().access(buf, indices)

    def wmma(self, e) -> str:
        """A tensor-core step; its global tiles need 32-byte aligned pointers."""
        for x in e.args[:3]:
            if x.buffer.scope == "global":
                self.alignment[x.buffer.name] = 32
        return wmma_text(self, e)

    def mma_fp8(self, e) -> str:
        """An fp8 tensor-core step; its global tiles are read in 4-byte words."""
        for x in e.args[:3]:
            if x.buffer.scope == "global":
                self.alignment[x.buffer.name] = 16
        return mma_fp8_text(self, e)


def _warp_reduction(p, e) -> str:
    # the value is already of the dtype: no rounding back
    return f"cvl_{e.op}({p.bare(e.args[0])}, {p.bare(e.args[1])})"


# CUDA C writes ops as C does (the "c" table), except where it says otherwise here
ops.register_backend("cuda", parent="c")
ops.register_spellings("cuda", {
    # the arms are values of the dtype already: no rounding back (on CUDA a float16
    # or bfloat16 round is a conversion to memory and back)
    "if_then_else": lambda p, e: "({} ? {} : {})".format(*(p.expr(x) for x in e.args)),
    # the GPU ops of the registry (cuvil_tir.ops.gpu) and CUDA's tensor-core step
    "tvm_storage_sync": "__syncthreads()",
    "warp_sum": _warp_reduction, "warp_max": _warp_reduction, "warp_min": _warp_reduction,
    WMMA_OP: KernelPrinter.wmma, FILL_OP: fill_text, STORE_OP: store_text,
    FP8_OP: KernelPrinter.mma_fp8,
    **ASYNC_SPELLINGS, **MMA_SPELLINGS, **MBARRIER_SPELLINGS, **WGMMA_SPELLINGS,
    **TMA_SPELLINGS, **WGMMA_ASYNC_SPELLINGS, **CLUSTER_SPELLINGS, **SETMAXNREG_SPELLINGS,
})


def codegen_cuda(lowered, target=None) -> CudaProgram:
    """Print every kernel of ``lowered`` (a module lowered for ``cuda``) and its host
    function.

    Example::

        >>> import cuvil_tir as T
        >>> codegen_cuda(T.PrimFunc([], T.Evaluate(T.const(0)))).kernels
        {}
    """
    mod = as_module(lowered)
    parts, helpers, infos, aligned = [], {}, {}, {}
    for func in mod.functions:
        if calling_conv(func) != "device_kernel":
            continue
        p = KernelPrinter(func)
        parts.append(p.print_kernel())
        helpers.update(p.helpers)
        params = [("buffer" if isinstance(x, Buffer) else "scalar", x) for x in func.params]
        infos[func.name] = KernelInfo(func.name, params, launch_dims(func.body),
                                      p.dyn_offset if p.dyn else 0, tuple(p.param_types),
                                      tuple(p.tensor_maps.values()))
        for b, n in p.alignment.items():
            aligned[(func.name, b)] = n
    host = mod.entry
    host_c = print_host(host, host.name, list(infos),
                        {k: i.param_types for k, i in infos.items()},
                        {k: i.dyn_shared for k, i in infos.items()},
                        {k: ([x for _, x in i.params], i.tensor_maps)
                         for k, i in infos.items() if i.tensor_maps})
    launches = _launches(host)
    alignment = {}
    for name, _, args in launches:
        for p, a in zip(mod[name].params, args):
            need = aligned.get((name, p.name), 0)
            if need and isinstance(a, Buffer):
                alignment[a.name] = max(alignment.get(a.name, 0), need)
    plan = tuple(launch_spec(name, dims, args, infos[name].dyn_shared)
                 for name, dims, args in launches)
    return CudaProgram(source_text(helpers, parts), infos, host, alignment, helpers,
                       tuple(parts), host_c, host.name, plan)


def _launches(host) -> list:
    out = []
    post_order_visit(host.body, lambda n: out.append(device_launch_parts(n))
                     if is_device_launch(n) else None)
    return out


def launch_spec(name: str, dims: dict, args, shared: int) -> dict:
    """One launch statement of the host as data: the kernel, its grid and block as
    expression text (of the host's parameters, sizes and loop variables), the dynamic
    shared bytes and the arguments' names.

    Example::

        >>> import cuvil_tir as T
        >>> n = T.size_var("n")
        >>> launch_spec("k", {"blockIdx.x": (n + 7) // 8, "threadIdx.x": 8}, (n,), 0)["grid"]
        ('(n + 7) // 8', '1', '1')
    """
    grid, block = launch_shape(dims)
    text = tuple(str(e) for e in grid + block)
    return {"kernel": name, "grid": text[:3], "block": text[3:], "shared": shared,
            "args": tuple(a.name for a in args)}


def source_text(helpers: dict, kernels_text) -> str:
    """A complete CUDA source: includes, the preamble, helpers, kernels.

    Example::

        >>> source_text({}, []).splitlines()[0]
        '// generated by cuvil (cuda)'
    """
    head = [f"// generated by cuvil ({KernelPrinter.lang})"]
    head += [f"#include <{h}>" for h in KernelPrinter.headers]
    head += [PREAMBLE.rstrip("\n")] + [t.rstrip("\n") for t in helpers.values()]
    return "\n".join(head) + "\n\n" + "\n\n".join(kernels_text) + "\n"


def combine(programs) -> str:
    """One source holding the kernels of several programs (distinct kernel names),
    e.g. to compile many builds with one ``nvcc`` call.

    Example::

        >>> combine([]).count("__global__")
        0
    """
    helpers, parts = {}, []
    for p in programs:
        helpers.update(p.helpers)
        parts.extend(p.bodies)
    return source_text(helpers, parts)


__all__ = ["CudaProgram", "KernelInfo", "KernelPrinter", "codegen_cuda", "combine",
           "shared_bytes", "source_text"]
