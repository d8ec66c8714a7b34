"""llvmlite plumbing: host CPU, target machines, the optimiser, MCJIT.

Layered as numba's ``codegen.py``: :class:`Library` is one compiled LLVM module
(source, optimised IR, assembly on demand) owned by one MCJIT execution engine, so
the machine code lives exactly as long as the library (and the ``Module`` holding
it) is referenced.  LLVM itself is initialised once per process, and libm is loaded
once so MCJIT resolves ``tanhf``, ``erff`` … by symbol.

Example::

    >>> lib = Library("define void @f() {\\n  ret void\\n}\\n", cpu=host_cpu())
    >>> lib.address("f") != 0
    True
"""

from __future__ import annotations

import ctypes.util
import threading
from functools import lru_cache

import llvmlite.binding as llvm

from cuvil_tir.errors import CodegenError, TargetError

_LOCK = threading.Lock()


@lru_cache(maxsize=None)
def _init() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    for name in ("m", "c"):
        path = ctypes.util.find_library(name)
        if path:
            llvm.load_library_permanently(path)


def host_cpu() -> str:
    """The host CPU name as LLVM knows it (``znver3`` …).

    Example::

        >>> isinstance(host_cpu(), str)
        True
    """
    _init()
    return llvm.get_host_cpu_name()


@lru_cache(maxsize=None)
def host_features() -> str:
    """The host's enabled CPU features, ``+avx2,+fma,…`` (disabled ones left out).

    Example::

        >>> "+" in host_features() or host_features() == ""
        True
    """
    _init()
    feats = llvm.get_host_cpu_features()
    return ",".join(f"+{k}" for k, on in sorted(feats.items()) if on)


def process_triple() -> str:
    """The triple of this process (``x86_64-unknown-linux-gnu`` …)."""
    _init()
    return llvm.get_process_triple()


def resolve_cpu(target) -> tuple[str, str]:
    """``(cpu, features)`` of an llvm target: ``mcpu="native"`` means the host's
    name and features; ``mattr`` adds to (``native``) or replaces the features.

    Example::

        >>> import targets
        >>> resolve_cpu(targets.Target("llvm -mcpu=znver2 -mattr=+avx2"))
        ('znver2', '+avx2')
    """
    cpu = target.options.get("mcpu", "native") or "native"
    mattr = target.options.get("mattr", "") or ""
    if cpu in ("native", "host"):
        feats = host_features()
        return host_cpu(), (feats + "," + mattr) if mattr and feats else (mattr or feats)
    return cpu, mattr


def target_machine(cpu: str, features: str, opt_level: int = 3):
    """A target machine for the host triple with ``cpu`` and ``features``.

    Example::

        >>> target_machine(host_cpu(), host_features()).triple != ""
        True
    """
    _init()
    try:
        tgt = llvm.Target.from_triple(process_triple())
        return tgt.create_target_machine(cpu=cpu, features=features,
                                         opt=max(0, min(3, opt_level)),
                                         reloc="default", codemodel="jitdefault")
    except RuntimeError as err:
        raise TargetError(f"llvm: cannot create a target machine for cpu {cpu!r}, "
                          f"features {features!r}: {err}") from None


def _parse(source: str):
    try:
        mod = llvm.parse_assembly(source)
        mod.verify()
    except RuntimeError as err:
        raise CodegenError(f"llvm: the generated IR is invalid: {err}\n--- IR ---\n"
                           f"{_numbered(source)}") from None
    return mod


def _numbered(source: str) -> str:
    return "\n".join(f"{k + 1:4d} {line}" for k, line in enumerate(source.splitlines()))


class Library:
    """One LLVM module compiled for the host by its own MCJIT engine.

    ``source`` is the LLVM IR text; it is verified, optimised with the new pass
    manager at ``opt_level`` and compiled.  ``optimized_ir`` and ``assembly()`` show
    the results.

    Example::

        >>> lib = Library("define i32 @one() {\\n  ret i32 1\\n}\\n", cpu=host_cpu())
        >>> "ret i32 1" in lib.optimized_ir
        True
    """

    def __init__(self, source: str, cpu: str, features: str = "", opt_level: int = 3,
                 object_code: bytes | None = None):
        self.source = source
        self.cpu, self.features, self.opt_level = cpu, features, opt_level
        self._asm = None
        if object_code is not None:
            self._load_object(object_code)
            return
        with _LOCK:  # LLVM contexts are not safe for concurrent use
            mod = _parse(source)
            tm = target_machine(cpu, features, opt_level)
            mod.triple = tm.triple
            mod.data_layout = str(tm.target_data)
            if opt_level > 0:
                pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
                pto.loop_vectorization = True
                pto.slp_vectorization = True
                pb = llvm.create_pass_builder(tm, pto)
                pb.getModulePassManager().run(mod, pb)
            self.optimized_ir = str(mod)
            self._engine = llvm.create_mcjit_compiler(mod, tm)
            if "@cuvil_parallel_launch" in source:
                from . import threadpool  # registers the pool's symbols with LLVM
                threadpool.ensure_loaded()
            self._engine.finalize_object()
            self._module = mod
            self._tm = tm
            self._object = None

    def _load_object(self, data: bytes) -> None:
        """Machine code compiled earlier (see :meth:`object_code`), linked into a fresh
        engine: no parsing, optimising or code generation."""
        _init()
        with _LOCK:
            tm = target_machine(self.cpu, self.features, self.opt_level)
            empty = llvm.parse_assembly("")
            empty.triple = tm.triple
            self._engine = llvm.create_mcjit_compiler(empty, tm)
            if b"cuvil_parallel_launch" in data:
                from . import threadpool
                threadpool.ensure_loaded()
            self._engine.add_object_file(llvm.ObjectFileRef.from_data(data))
            self._engine.finalize_object()
            self._module, self._tm, self._object = empty, tm, data
        self.optimized_ir = None

    def object_code(self) -> bytes:
        """The module's relocatable machine code (an ELF object), computed once.

        Example::

            >>> lib = Library("define i32 @one() {\\n  ret i32 1\\n}\\n", cpu=host_cpu())
            >>> again = Library("", cpu=host_cpu(), object_code=lib.object_code())
            >>> again.address("one") != 0
            True
        """
        if self._object is None:
            with _LOCK:
                mod = llvm.parse_assembly(self.optimized_ir)
                self._object = self._tm.emit_object(mod)
        return self._object

    def _recompile(self) -> None:
        """A library loaded from object code has no IR: rebuild it from the source
        (only when someone asks for the optimised IR or the assembly)."""
        self.optimized_ir = Library(self.source, self.cpu, self.features,
                                    self.opt_level).optimized_ir

    def optimized(self) -> str:
        """The optimised LLVM IR (recompiled from the source for a cached library)."""
        if self.optimized_ir is None:
            self._recompile()
        return self.optimized_ir

    def address(self, symbol: str) -> int:
        """The address of a compiled function (nonzero), or ``CodegenError``."""
        addr = self._engine.get_function_address(symbol)
        if not addr:
            raise CodegenError(f"llvm: symbol {symbol!r} not found in the compiled module")
        return addr

    def assembly(self) -> str:
        """Host assembly of the optimised module (computed once, on demand)."""
        if self.optimized_ir is None:
            self._recompile()
        if self._asm is None:
            with _LOCK:
                mod = llvm.parse_assembly(self.optimized_ir)
                tm = target_machine(self.cpu, self.features, self.opt_level)
                self._asm = tm.emit_assembly(mod)
        return self._asm
