"""The ``cuda`` target: CUDA C for NVIDIA GPUs, compiled with NVRTC and launched
through cupy; checked everywhere through the interpreter's GPU semantics.

``Target("cuda", arch="sm_90")``: ``arch`` picks the architecture of ``--emit ptx``
and the shared-memory capacity (the runtime compiles with NVRTC for the GPU it
finds); an architecture-specific target (``sm_90a``: ``wgmma``, ``setmaxnreg``) is
compiled by ``nvcc`` at build time and its cubin kept in the program (and so in the
compile cache).
Memories: ``global``, ``shared`` (per block, as much as the architecture offers:
:func:`shared_capacity`, read through :meth:`CudaKind.memories_for`), ``local`` (per
thread).

Lowering (:func:`cuda_pipeline`): ``shared``/``local`` buffers placed and sized per
block / per thread (the memory planner), blocks to loops, one variable and launch
extent per thread axis with guards for smaller sibling loops, software pipelines
(multi-buffered shared tiles), flattening, simplification, vectorized loops of at most
16 bytes as vector code, ``unrolled`` loops of constant bounds copied out (TVM's
explicit unroll: the register tiles of a warp then sit at constant offsets), the
host/device split (each kernel outlined into a
``device_kernel`` function, the host launching it with its grid and block as
expressions), dynamic shared memory marked beyond 48 KB, barriers, verification.
The kernels are printed as CUDA C, the host function as C compiled by the system C
compiler (:mod:`targets.cuda.host`).

Thread axes (declared data, :data:`THREAD_AXES`): ``blockIdx.x`` up to 2**31 - 1
blocks, ``blockIdx.y/z`` up to 65535, ``threadIdx.x/y`` up to 1024, ``threadIdx.z``
up to 64, at most 1024 threads per block; ``vthread.x/y/z`` (virtual: serial loops
after lowering).

Example::

    >>> import targets
    >>> " ".join(m.scope for m in targets.get_target_kind("cuda").memories)
    'global shared local wmma.accumulator wmma.matrix_a wmma.matrix_b warp warpgroup'
"""

from __future__ import annotations

from dataclasses import replace

from cuvil_tir.errors import LoweringError
from cuvil_tir.ir_module import calling_conv
from cuvil_tir.target import (MEASURE_REPEAT, Memory, Option, Program, Target,
                              TargetKind, register_target)
from cuvil_tir.transform import flatten_buffers, lower_blocks, simplify, verify
from cuvil_tir.transform.dead_stores import drop_dead_stores
from cuvil_tir.transform.gpu_cooperative_fetch import cooperative_fetch
from cuvil_tir.transform.gpu_reduction import lower_cross_thread_reduction
from cuvil_tir.transform.local_stage import fold_local_stages
from cuvil_tir.transform.plan_allocation import plan_buffer_allocation
from cuvil_tir.transform.software_pipeline import inject_software_pipeline
from cuvil_tir.transform.unroll import unroll_loops
from cuvil_tir.transform.gpu_sync import insert_barriers
from cuvil_tir.transform.gpu_threads import (grid_roots, kernels, normalize_thread_bindings,
                                             split_host_device)
from cuvil_tir.transform.pass_manager import PassContext
from cuvil_tir.transform.vectorize import vectorize_loops
from cuvil_tir.printer import to_text
from cuvil_tir.swizzle import append_swizzles
from cuvil_tir.stmt import For
from cuvil_tir.thread_axes import ThreadAxis
from cuvil_tir.visitor import Mutator

from ..runtime import Module
from .codegen import STATIC_SHARED_LIMIT, codegen_cuda, shared_bytes
from .nvcc import needs_nvcc, nvcc_available, nvcc_compile
from .args import import_cupy
from .runtime import CudaRuntime
from .tensorcore import wmma_leading_dims
from .tma import tma_coordinates
from .tma_copy import lower_tma_copies
from .mbarrier import check_hopper_ops
from .cluster import check_clusters
from . import tvm_wmma  # noqa: F401 - registers TVM's wmma intrinsics and their ops
from . import tvm_mma  # noqa: F401 - registers TVM's mma.sync/ldmatrix intrinsics
from . import dp4a  # noqa: F401 - registers the dp4a ops and TVM's dp4a intrinsics

#: the thread axes of a CUDA launch and their limits
THREAD_AXES = (ThreadAxis("blockIdx.x", "grid", 0, (1 << 31) - 1),
               ThreadAxis("blockIdx.y", "grid", 1, 65535),
               ThreadAxis("blockIdx.z", "grid", 2, 65535),
               ThreadAxis("threadIdx.x", "thread", 0, 1024),
               ThreadAxis("threadIdx.y", "thread", 1, 1024),
               ThreadAxis("threadIdx.z", "thread", 2, 64),
               # TVM's virtual threads: loops the lowering makes serial, so that a
               # thread's tiles interleave by a stride (no launch dimension, no limit)
               ThreadAxis("vthread.x", "virtual", 0),
               ThreadAxis("vthread.y", "virtual", 1),
               ThreadAxis("vthread.z", "virtual", 2))
#: threads per block
MAX_THREADS = 1024

#: opt-in shared memory per block (bytes) by compute capability (``86``: sm_86), as
#: the CUDA programming guide lists it: the data-center parts (sm_80, sm_87, sm_90,
#: sm_100) offer more than the others of their major version (sm_86, sm_89, sm_120)
SHARED_CAPACITY = {70: 96 * 1024, 72: 96 * 1024, 75: 64 * 1024,
                   80: 163 * 1024, 86: 99 * 1024, 87: 163 * 1024, 89: 99 * 1024,
                   90: 227 * 1024, 100: 227 * 1024, 101: 227 * 1024, 103: 227 * 1024,
                   110: 227 * 1024, 120: 99 * 1024, 121: 99 * 1024}
#: what an architecture the table does not list may use (every one since sm_20)
PORTABLE_SHARED = 48 * 1024


def shared_capacity(arch: str) -> int:
    """Opt-in shared memory per block of ``arch`` (``sm_80`` -> 163 KB, ``sm_86`` ->
    99 KB; an ``a`` suffix changes nothing; an architecture not in
    :data:`SHARED_CAPACITY` gets :data:`PORTABLE_SHARED`).  The ``cuda`` kind's memory
    table for a target (:meth:`CudaKind.memories_for`) reads it: the lowering and the
    tuner's rules take the capacity from there.

    Example::

        >>> shared_capacity("sm_90a") // 1024, shared_capacity("sm_89") // 1024
        (227, 99)
    """
    try:
        cc = int(str(arch).removeprefix("sm_").rstrip("a"))
    except ValueError:
        return PORTABLE_SHARED
    return SHARED_CAPACITY.get(cc, PORTABLE_SHARED)


def _vectorize16(func):
    return vectorize_loops(func, 128)


_vectorize16.pass_name = "vectorize_loops"


def mark_shared_memory(func):
    """Mark kernels needing more than 48 KB of shared memory (annotation
    ``dyn_shared`` of the kernel's root loop, its bytes); more than the target's
    capacity is a ``LoweringError``.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> mark_shared_memory(f) is f
        True
    """
    target = PassContext.current().target
    target = target if target is not None else Target("cuda")
    arch = target.options["arch"]
    cap = next(m.capacity_bytes for m in target.kind_obj.memories_for(target)
               if m.scope == "shared")
    changed = {}
    for k in kernels(func.body):
        n = shared_bytes(k)
        if n > cap:
            raise LoweringError(f"kernel {func.name} needs "
                                f"{n} bytes of shared memory; {arch} offers {cap} per "
                                "block: use smaller tiles")
        if n > STATIC_SHARED_LIMIT:
            ann = dict(k.annotations)
            ann["dyn_shared"] = n
            changed[id(k)] = For(k.loop_var, k.min, k.extent, k.kind, k.body,
                                 k.thread_tag, ann)
    if not changed:
        return func

    class _Swap(Mutator):
        def visit_For(self, s):
            return changed.get(id(s)) or self.generic_visit(s)
    return func.with_body(_Swap().visit(func.body))


def cuda_pipeline() -> list:
    """The passes of the ``cuda`` target.

    Example::

        >>> from cuvil_tir.transform import pass_name
        >>> [pass_name(p) for p in cuda_pipeline()][:5]  # doctest: +NORMALIZE_WHITESPACE
        ['cooperative_fetch', 'fold_local_stages', 'lower_cross_thread_reduction',
         'grid_roots', 'plan_buffer_allocation']
    """
    return [cooperative_fetch, fold_local_stages, lower_cross_thread_reduction, grid_roots,
            plan_buffer_allocation,
            lower_blocks, lower_tma_copies, normalize_thread_bindings,
            inject_software_pipeline, wmma_leading_dims,
            tma_coordinates, append_swizzles, check_hopper_ops, check_clusters,
            flatten_buffers, drop_dead_stores,
            simplify, _vectorize16, unroll_loops, simplify, split_host_device,
            mark_shared_memory,
            insert_barriers, verify]


class CudaKind(TargetKind):
    """The ``cuda`` target kind (registered at import).

    Example::

        >>> CudaKind.options["arch"].default
        'sm_80'
    """

    name = "cuda"
    doc = "NVIDIA GPUs through CUDA C (NVRTC, cupy)"
    options = {"arch": Option("sm_80", str, pattern=r"sm_(?:[5-9]\d|1\d\d)a?",
                              doc="an architecture such as 'sm_80' or 'sm_90a'")}
    axes = THREAD_AXES
    max_threads = MAX_THREADS
    memories = (Memory("global", None, "device memory (parameters, temporaries)"),
                # the default architecture's; memories_for gives each target its own
                Memory("shared", shared_capacity(options["arch"].default),
                       "per thread block, on chip", banks=32, width_bits=32),
                Memory("local", None, "per thread: registers"),
                Memory("wmma.accumulator", None,
                       "per warp: tensor-core accumulator fragments in registers",
                       instance="warp"),
                Memory("wmma.matrix_a", None,
                       "per warp: tensor-core A operand fragments in registers",
                       instance="warp"),
                Memory("wmma.matrix_b", None,
                       "per warp: tensor-core B operand fragments in registers",
                       instance="warp"),
                Memory("warp", None, "per warp: mma.sync accumulators in the lanes' "
                       "registers", instance="warp"),
                Memory("warpgroup", None, "per warpgroup (128 threads): wgmma "
                       "accumulators in the threads' registers", instance="warp"))
    calling_conventions = ("host", "device_kernel")
    op_spellings = "cuda"
    passes = cuda_pipeline()

    def pipeline(self, target) -> list:
        """The passes of :func:`cuda_pipeline`."""
        return list(self.passes)

    def memories_for(self, target) -> tuple:
        """The memory table of ``target``: ``shared`` holds what its architecture
        offers per block (:func:`shared_capacity`).

        Example::

            >>> from cuvil_tir.target import Target
            >>> kind = CudaKind()
            >>> [m.capacity_bytes // 1024 for m in kind.memories_for(Target("cuda", arch="sm_86"))
            ...  if m.scope == "shared"]
            [99]
        """
        cap = shared_capacity(target.options.get("arch", self.options["arch"].default))
        return tuple(replace(m, capacity_bytes=cap) if m.scope == "shared" else m
                     for m in self.memories)

    def codegen(self, module, target) -> Program:
        """Every ``device_kernel`` function of the lowered module as CUDA C, the host
        function as C (compiled at the first call), the launches as data."""
        cuda = codegen_cuda(module, target)
        arch = target.options.get("arch", "sm_80")
        binaries = {}
        if needs_nvcc(arch) and nvcc_available() and cuda.kernels:
            # NVRTC through cupy compiles for the plain architecture: the build keeps
            # nvcc's machine code, so the compile cache holds it too
            binaries["cubin"] = nvcc_compile(cuda.text, arch, "cubin")
        return Program(self.name, module.entry.name,
                       sources={"cuda": cuda.text, "host": cuda.host_c,
                                "host_ir": to_text(cuda.host)},
                       binaries=binaries,
                       functions={f.name: calling_conv(f) for f in module.functions},
                       launch={"kernels": {k: {"dyn_shared": info.dyn_shared}
                                           for k, info in cuda.kernels.items()},
                               "launches": [{k: list(v) if isinstance(v, tuple) else v
                                             for k, v in x.items()}
                                            for x in cuda.launches]},
                       lowered=module)

    def call_host(self, module, arrays) -> None:
        """Copy the numpy ``arrays`` to the GPU, call ``module``, and copy every array
        back (the tuner checks candidates on host arrays)."""
        cp = import_cupy("checking a cuda module on host arrays")
        dev = [cp.asarray(a) for a in arrays]
        module(*dev)
        for a, d in zip(arrays, dev):
            a[...] = cp.asnumpy(d)

    def measure(self, module, args, min_repeat_seconds: float = 0.0) -> tuple:
        """``(seconds per call, how)``: the median of :data:`MEASURE_REPEAT` rounds
        timed with CUDA events on device copies of the numpy ``args`` (the copies
        outside the timing), each round enough calls to last ``min_repeat_seconds``."""
        cp = import_cupy("timing a cuda module")
        dev = [cp.asarray(a) for a in args]
        once = module.benchmark(*dev, repeat=1, number=1).median
        number = max(1, min(1000, int(min_repeat_seconds / max(once, 1e-7))))
        res = module.benchmark(*dev, repeat=MEASURE_REPEAT, number=number, warmup=0)
        return res.median, (f"median of {MEASURE_REPEAT} rounds of {number} "
                            "(CUDA events)")

    def load(self, program, target) -> Module:
        """A module that compiles the kernels with NVRTC (or loads the cubin nvcc made
        for an ``sm_90a``-style architecture) and the host program with the C compiler
        at its first call; its launch table is read from the lowered module."""
        lowered = program.lowered_module
        if program.from_cache:
            # the text form gives each thread loop its own variable; the code generator
            # wants the one variable per thread tag the lowering made
            lowered = lowered.map_functions(normalize_thread_bindings)
        cuda = codegen_cuda(lowered, target)
        return Module(CudaRuntime(cuda, target, program.signature,
                                  program.binaries.get("cubin")), program, target)


CUDA = register_target(CudaKind())

__all__ = ["CUDA", "CudaKind", "MAX_THREADS", "PORTABLE_SHARED", "SHARED_CAPACITY",
           "THREAD_AXES", "cuda_pipeline", "mark_shared_memory", "shared_capacity"]
