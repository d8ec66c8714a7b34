"""The ``c`` target: portable C99 through the system C compiler, loaded with ctypes.

Options: ``cc`` (the compiler command, default ``"cc"``), ``cflags`` (default
``"-O3"``; ``-std=c99 -fPIC -shared`` are always added), ``openmp`` (default
``True``: ``parallel`` loops become ``#pragma omp parallel for`` when the compiler
supports ``-fopenmp``; without it, or with ``openmp=False``, they run serially),
``bounds_check`` (as for ``llvm``: by default only the checks that run once before a
loop; ``True``: every access is checked at run time).

Lowering (:func:`c_pipeline`): the llvm target's passes without the vectorizer --
the C compiler vectorizes ``vectorized`` loops itself at ``-O3``.  Code is printed by
:class:`CTargetPrinter`, the plain subclass of :class:`targets.cstyle.CPrinter`.  The
module has the llvm target's interface: same argument checking, ``get_source("c")``,
``benchmark``.

Example::

    >>> import numpy as np, cuvil_tir as T, targets
    >>> n = T.size_var("n")
    >>> A = T.placeholder((n,), name="A")
    >>> B = T.compute((n,), lambda i: T.sqrt(A[i]), name="B")
    >>> mod = targets.build(T.create_prim_func([A, B]), targets.Target("c", cflags="-O2"))
    >>> b = np.zeros(2, "float32"); mod(np.array([4.0, 9.0], "float32"), b); b.tolist()
    [2.0, 3.0]
"""

from __future__ import annotations

from cuvil_tir.ir_module import single_function
from cuvil_tir.target import (HOST_MEMORIES, Machine, Option, Program, TargetKind,
                              register_target)
from cuvil_tir.transform.bounds_check import with_bounds_check
from cuvil_tir.transform.pipeline import cpu_pipeline

from ..cstyle import CPrinter
from ..runtime import DATA_OFFSET, Module
from ..runtime.host import host_cpu, host_features, host_machine
from ..cstyle.compiler import compile_shared, compiler_identity, library_bytes, openmp_supported
from ..cstyle.runtime import CRuntimeModule, wrapper_c


class CTargetPrinter(CPrinter):
    """Portable C99; ``parallel`` loops through OpenMP when ``openmp`` is set.

    Example::

        >>> CTargetPrinter(openmp=True).loop_pragmas["parallel"]
        '#pragma omp parallel for'
    """

    def __init__(self, openmp: bool = False):
        super().__init__()
        self.loop_pragmas = {"parallel": "#pragma omp parallel for"} if openmp else {}

    def emit_status(self, status: int) -> None:
        if self.in_parallel and self.loop_pragmas:
            self.emit("#pragma omp atomic write")
        super().emit_status(status)

    def emit_check_record(self, lines: list) -> None:
        if self.in_parallel and self.loop_pragmas:
            self.emit("#pragma omp critical(cvl_check)")
            lines = ["{", *("    " + x for x in lines), "}"]
        super().emit_check_record(lines)


def c_pipeline() -> list:
    """The CPU pipeline without a vectorizer (the C compiler vectorizes) and without
    outlining (OpenMP runs ``parallel`` loops in place).

    Example::

        >>> from cuvil_tir.transform import pass_name
        >>> [pass_name(p) for p in c_pipeline()]  # doctest: +NORMALIZE_WHITESPACE
        ['plan_buffer_allocation', 'lower_blocks', 'inject_software_pipeline',
         'flatten_buffers', 'loop_partition', 'simplify', 'unroll_loops', 'simplify',
         'verify']
    """
    return cpu_pipeline(vectorize=None, outline=False)


def _openmp(target) -> bool:
    return target.options["openmp"] and openmp_supported(target.options["cc"])


class CTargetKind(TargetKind):
    """The ``c`` target kind.

    Example::

        >>> CTargetKind.options["cflags"].default
        '-O3'
    """

    name = "c"
    doc = "portable C99 through the system C compiler"
    options = {"cc": Option("cc", str, doc="the C compiler command"),
               "cflags": Option("-O3", str, empty_ok=True,
                                doc="flags before the required ones"),
               "openmp": Option(True, bool, doc="parallel loops through OpenMP"),
               "bounds_check": Option(False, bool, doc="check every access at run time")}
    memories = HOST_MEMORIES
    op_spellings = "c"
    passes = c_pipeline()

    def pipeline(self, target) -> list:
        """:attr:`passes`, led by the ``bounds_check`` pass when the target asks for
        run-time bounds checks (``Target("c", bounds_check=True)``)."""
        return with_bounds_check(self.passes, target)

    def codegen(self, module, target) -> Program:
        """C source of the lowered module (its one function), compiled with the
        target's compiler into a shared library."""
        func = single_function(module, "c")
        openmp = _openmp(target)
        printer = CTargetPrinter(openmp)
        source = printer.print_function(func, func.name)
        full = source if DATA_OFFSET is None else \
            source + wrapper_c(func, DATA_OFFSET, printer.abi_type)
        lib = compile_shared(full, target.options["cc"], target.options["cflags"], openmp)
        return Program(self.name, func.name, sources={"c": source},
                       binaries={"so": library_bytes(lib)}, functions={func.name: "host"},
                       meta={"openmp": openmp}, lowered=module)

    def load(self, program, target) -> Module:
        """The program's shared library, opened in this process."""
        return Module(CRuntimeModule(program), program, target)

    def machine(self, target) -> Machine:
        """This host's CPU (the C compiler compiles for it)."""
        return host_machine()

    def cache_identity(self, target) -> str:
        """What besides the IR decides the library: the compiler, OpenMP, the host
        CPU (``cflags`` may say ``-march=native``) and the numpy array layout the call
        wrapper reads."""
        return (f"cc={compiler_identity(target.options['cc'])};openmp={_openmp(target)};"
                f"cpu={host_cpu()};features={host_features()};data_offset={DATA_OFFSET}")


C = register_target(CTargetKind())
