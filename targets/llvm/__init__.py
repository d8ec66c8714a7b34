"""The ``llvm`` target: host CPU code through LLVM IR text and llvmlite's MCJIT.

Options: ``mcpu`` (``"native"``: the host's CPU and features), ``mattr`` (features,
``"+avx2,-fma"``), ``opt_level`` (0-3, the new pass manager's level), ``fast_math``
(default ``"contract"``: ``fmul`` + ``fadd`` may fuse into ``fma``, one rounding
instead of two, as every BLAS does; ``False`` for strict IEEE results; ``True`` for all
flags; or LLVM flags such as ``"contract,reassoc"`` -- ``reassoc`` is opt-in: it lets
LLVM reorder reductions, so sums change in the last bits and vectorize (one loop
at a time: annotation ``pragma_reassoc``); ``afn`` is opt-in too: the looser grade of
the vector ``exp``/``log``/``tanh``/``sigmoid``, which by default run in vector
registers within 2 ulp (:mod:`targets.llvm.vector_math`), not one libm call per
lane).

``bounds_check`` (default ``False``: only the cheap checks, each run once before its
loop or once per call; ``True``: every buffer access not proven in bounds is checked
at run time); an access out of bounds raises ``T.BoundsCheckError`` before it happens
(see :mod:`cuvil_tir.transform.bounds_check`).

Lowering: :func:`llvm_pipeline` -- the default pipeline plus local-buffer
compaction, loop partitioning (guard-free main ranges of non-dividing splits), loop
vectorization at the host's vector width, full unrolling of ``unrolled`` loops (so
small ``local`` buffers live in registers), and outlining of ``parallel`` loops into
the module's ``parallel_task`` functions.

Code generation compiles the LLVM IR to object code at once (the ``Program``'s
``obj`` binary, with its ``ll`` and ``ll-opt`` sources); loading links that object, so
a program from the compile cache runs without LLVM compiling anything.  Registered
with :func:`targets.register_target` (the ``cuvil.targets`` entry point ``llvm``).

Example::

    >>> import targets
    >>> targets.get_target_kind("llvm").options["opt_level"].default
    3
"""

from __future__ import annotations

import llvmlite
import llvmlite.binding as llvm

from cuvil_tir.errors import HostFeatureError, TargetError
from cuvil_tir.ir_module import calling_conv
from cuvil_tir.target import (HOST_MEMORIES, Machine, Option, Program, TargetKind,
                              register_target)
from cuvil_tir.transform.bounds_check import with_bounds_check
from cuvil_tir.transform.pass_manager import PassContext
from cuvil_tir.transform.pipeline import cpu_pipeline
from cuvil_tir.transform.vectorize import vectorize_loops

from ..runtime import DATA_OFFSET, Module
from .codegen import codegen_llvm
from .cpu import CPUInfo, check_cpu, cpu_info, missing_host_features
from .engine import compile_object, host_cpu, host_features, process_triple, resolve_cpu
from .runtime import LLVMRuntimeModule, wrapper_ir
from . import x86_dot  # noqa: F401 - registers the dot-product ops' spellings

_FM_FLAGS = ("nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc", "fast")


def fast_math_flags(value) -> str:
    """LLVM fast-math flags text of the ``fast_math`` option.

    Example::

        >>> fast_math_flags(True), fast_math_flags("contract,reassoc"), fast_math_flags(False)
        ('fast', 'contract reassoc', '')
    """
    if value is True:
        return "fast"
    if not value:
        return ""
    flags = [f for f in str(value).replace(" ", ",").split(",") if f]
    for f in flags:
        if f not in _FM_FLAGS:
            raise TargetError(f"llvm: unknown fast-math flag {f!r}; expected some of "
                              f"{', '.join(_FM_FLAGS)}")
    return " ".join(flags)


def host_vector_bits() -> int:
    """Width of the host's vector registers in bits (512 with AVX-512, 256 with AVX,
    else 128).

    Example::

        >>> host_vector_bits() in (128, 256, 512)
        True
    """
    feats = host_features().split(",")
    if "+avx512f" in feats:
        return 512
    return 256 if "+avx" in feats else 128


def target_vector_bits(target=None) -> int:
    """Vector bits of the target being lowered for (``PassContext.current().target``
    by default): its CPU's, never the host's unless the target is ``native`` or the
    lowering is target-blind.

    Example::

        >>> import targets
        >>> target_vector_bits(targets.Target("llvm", mcpu="x86-64"))
        128
    """
    target = PassContext.current().target if target is None else target
    if target is None:
        return host_vector_bits()
    return cpu_info(target).vector_bits


def vectorize_for_host(func):
    """:func:`~cuvil_tir.transform.vectorize.vectorize_loops` at the width of the
    target in the pass context (:func:`target_vector_bits`).

    Example::

        >>> vectorize_for_host.pass_name
        'vectorize_loops'
    """
    return vectorize_loops(func, target_vector_bits())


vectorize_for_host.pass_name = "vectorize_loops"


def llvm_pipeline() -> list:
    """The CPU pipeline (:func:`cuvil_tir.transform.pipeline.cpu_pipeline`) with
    ``vectorize_loops`` at the target's vector width and the outlining of ``parallel``
    loops into the module's ``parallel_task`` functions.

    Example::

        >>> from cuvil_tir.transform import pass_name
        >>> [pass_name(p) for p in llvm_pipeline()]  # doctest: +NORMALIZE_WHITESPACE
        ['plan_buffer_allocation', 'lower_blocks', 'inject_software_pipeline',
         'flatten_buffers', 'loop_partition', 'simplify', 'vectorize_loops', 'unroll_loops',
         'simplify', 'outline_parallel', 'verify']
    """
    return cpu_pipeline(vectorize_for_host, outline=True)


class LLVMTargetKind(TargetKind):
    """The host CPU target kind.

    Example::

        >>> LLVMTargetKind.name, LLVMTargetKind.calling_conventions
        ('llvm', ('host', 'parallel_task'))
    """

    name = "llvm"
    doc = "the host CPU through LLVM IR (llvmlite)"
    options = {
        "mcpu": Option("native", str, doc="an LLVM CPU name, or 'native' for this host"),
        "mattr": Option("", str, doc="LLVM features such as '+avx2,-fma'"),
        "opt_level": Option(3, int, min=0, max=3, doc="LLVM's optimisation level"),
        "fast_math": Option("contract", (bool, str), empty_ok=True,
                            check_value=fast_math_flags,
                            doc="True, False or LLVM fast-math flags"),
        "num_cores": Option(0, int, min=0, doc="0: this host's cores"),
        "l1d_kb": Option(0, int, min=0, doc="0: this host's L1d"),
        "l2_kb": Option(0, int, min=0, doc="0: this host's L2"),
        "bounds_check": Option(False, bool, doc="check every access at run time"),
    }
    memories = HOST_MEMORIES
    op_spellings = "llvm"
    calling_conventions = ("host", "parallel_task")
    passes = llvm_pipeline()

    def pipeline(self, target) -> list:
        """:attr:`passes`, led by the ``bounds_check`` pass when the target asks for
        run-time bounds checks (``Target("llvm", bounds_check=True)``)."""
        return with_bounds_check(self.passes, target)

    def describe(self, target) -> dict:
        """What code for ``target`` depends on: the resolved CPU name and features
        (``native`` stands for this host's), the triple and the other options.

        Example::

            >>> import targets
            >>> d = LLVM.describe(targets.Target("llvm", mcpu="haswell", mattr="+avx2"))
            >>> d["cpu"], d["features"], d["opt_level"]
            ('haswell', '+avx2', 3)
        """
        cpu, features = resolve_cpu(target)
        rest = {k: v for k, v in target.options.items() if k not in ("mcpu", "mattr")}
        return {"kind": self.name, "cpu": cpu, "features": features,
                "triple": process_triple(), **rest}

    def tool_versions(self, target) -> dict:
        """Cuvil's, LLVM's and llvmlite's versions."""
        return {**super().tool_versions(target),
                "llvm": ".".join(str(v) for v in llvm.llvm_version_info),
                "llvmlite": llvmlite.__version__}

    def cache_identity(self, target) -> str:
        """What decides the machine code beyond the build key (which already holds the
        resolved CPU, features and LLVM's version): the numpy array layout the call
        wrapper reads."""
        return f"data_offset={DATA_OFFSET}"

    def machine(self, target) -> Machine:
        """The CPU ``target`` names (:func:`cpu_info`) as a tuning ``Machine``.

        Example::

            >>> import targets
            >>> LLVM.machine(targets.Target("llvm", mcpu="skylake-avx512")).vector_bits
            512
        """
        info = cpu_info(target)
        return Machine(info.vector_bits, info.vector_registers, info.l1d_bytes,
                       info.l2_bytes, info.cores, info.name,
                       # mattr's entries, then what the CPU has besides (tensor
                       # intrinsics' requires read them)
                       tuple(info.features) + tuple(f"+{f}" for f in info.isa
                                                    if f"+{f}" not in info.features))

    def codegen(self, module, target) -> Program:
        """The lowered module as LLVM IR, compiled to object code for ``target``'s CPU."""
        cpu, features = check_cpu(target)
        entry = module.entry
        text = codegen_llvm(module, entry.name, cpu=cpu, features=features,
                            vector_bits=cpu_info(target).vector_bits,
                            fast_math=fast_math_flags(target.options["fast_math"]),
                            triple=process_triple())
        full = text if DATA_OFFSET is None else text + wrapper_ir(entry, DATA_OFFSET)
        opt_level = target.options["opt_level"]
        optimized, obj = compile_object(full, cpu, features, opt_level)
        return Program(self.name, entry.name, sources={"ll": text, "ll-opt": optimized},
                       binaries={"obj": obj},
                       functions={f.name: calling_conv(f) for f in module.functions},
                       meta={"cpu": cpu, "features": features, "opt_level": opt_level},
                       lowered=module)

    def load(self, program, target) -> Module:
        """The program's object code linked into this process."""
        return Module(_guard_host(LLVMRuntimeModule(program), target), program, target)


def _guard_host(runtime, target):
    """Code that may use CPU features this host lacks would die of SIGILL: such a
    module still builds and shows its sources, but calling it (or timing it) is a
    HostFeatureError naming the missing features."""
    missing = missing_host_features(target)
    if missing:
        opts = target.options
        built = ", ".join(f"{k}={opts[k]!r}" for k in ("mcpu", "mattr") if opts.get(k))
        names = ", ".join("+" + f for f in missing)

        def refuse(*args):
            raise HostFeatureError(
                f"llvm: this module was built for {built}, whose code may use CPU "
                f"features this host ({host_cpu()}) lacks: {names}; running it would "
                "stop the process with an illegal instruction (SIGILL). Read its code "
                "with get_source(), run it on a machine with those features, or build "
                "with mcpu='native' (or an mcpu/mattr this host has) to run it here",
                missing)
        runtime.raw = refuse
    return runtime


LLVM = register_target(LLVMTargetKind())
