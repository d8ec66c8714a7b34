"""llvmlite plumbing: host CPU, target machines, the optimiser, MCJIT.

Layered as numba's ``codegen.py``: codegen (``targets.llvm.codegen``, IR text), library
(:class:`Library`: one compiled LLVM module -- source, optimised IR, assembly and
object code on demand) and engine (:class:`JITEngine`: ONE long-lived MCJIT engine per
process and machine description -- CPU, features, optimisation level -- into which
every library of that machine is added).  A library's symbols get a suffix unique in
its engine, so every build may call its entry ``main``; the module leaves the engine
when the library is collected.  Object code (:meth:`Library.object_code`) is emitted
from the optimised IR with the original names, and a library loaded from object code
gets an engine of its own (the same object may be loaded twice).  LLVM itself is
initialised once per process, and libm is loaded once so MCJIT resolves ``tanhf``,
``erff`` … by symbol.

Example::

    >>> lib = Library("define void @f() {\\n  ret void\\n}\\n", cpu=host_cpu())
    >>> lib.address("f") != 0
    True
"""

from __future__ import annotations

import ctypes.util
import re
import threading
import weakref
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


def unresolved(names) -> list:
    """The names among ``names`` that no library loaded into this process defines (MCJIT
    would leave a call to one jumping to address 0).

    Example::

        >>> unresolved(["memcpy", "cuvil_no_such_function"])
        ['cuvil_no_such_function']
    """
    _init()
    return sorted({n for n in names if not llvm.address_of_symbol(n)})


def check_externs(names) -> None:
    """Refuse a module calling a function this process does not define, at build time
    (a call through the unresolved symbol would crash the process).

    Example::

        >>> check_externs(["memcpy"])
    """
    missing = unresolved(names)
    if missing:
        listed = ", ".join(repr(n) for n in missing)
        raise CodegenError(
            f"llvm: the module calls the external function{'s' * (len(missing) > 1)} "
            f"{listed}, which no library loaded into this process defines (expected every "
            "T.call_extern to name a defined function; a call would jump to address 0); "
            "load the library that defines it before building "
            "(llvmlite.binding.load_library_permanently(path)), or build for a target "
            "that provides it")


def _declared(mod) -> list:
    # the external functions a module still calls after optimisation
    return [f.name for f in mod.functions
            if f.is_declaration and not f.name.startswith("llvm.")]


#: ``declare <type> @name(`` in LLVM IR text (a quoted name keeps its quotes out)
_DECLARE = re.compile(r'^declare [^@]*@(?:"([^"]+)"|([\w.$]+))\(', re.M)


def _numbered(source: str) -> str:
    return "\n".join(f"{k + 1:4d} {line}" for k, line in enumerate(source.splitlines()))


class JITEngine:
    """One long-lived MCJIT engine for one machine description; libraries are added
    to it.  Use :func:`jit_engine` (one per description per process).

    Example::

        >>> jit_engine(host_cpu(), host_features(), 3) is jit_engine(host_cpu(), host_features(), 3)
        True
    """

    def __init__(self, cpu: str, features: str, opt_level: int):
        _init()
        self.tm = target_machine(cpu, features, opt_level)
        empty = llvm.parse_assembly("")
        empty.triple = self.tm.triple
        self._engine = llvm.create_mcjit_compiler(empty, self.tm)
        self._count = 0
        self.modules = 0
        self._pending: list = []  # modules whose removal waits for the lock

    def add(self, mod) -> str:
        """Rename ``mod``'s definitions with a fresh suffix, compile it into the engine
        and return the suffix (the caller holds ``_LOCK``)."""
        self._count += 1
        suffix = f".cuvil{self._count}"
        for value in list(mod.functions) + list(mod.global_variables):
            if not value.is_declaration and not value.name.startswith("llvm."):
                value.name = value.name + suffix
        self._drain()
        self._engine.add_module(mod)
        self._engine.finalize_object()
        self.modules += 1
        return suffix

    def remove(self, mod) -> None:
        """Take ``mod`` out of the engine (its library was collected).

        This runs from a garbage-collection finalizer, which can fire in a thread that
        already holds ``_LOCK`` (in the middle of a build): blocking there would hang
        that thread for ever.  So the removal is only queued unless the lock is free
        now; whoever takes the lock next finishes it.
        """
        self._pending.append(mod)
        if _LOCK.acquire(blocking=False):
            try:
                self._drain()
            finally:
                _LOCK.release()

    def _drain(self) -> None:
        """Remove the queued modules (the caller holds ``_LOCK``)."""
        while self._pending:
            self._engine.remove_module(self._pending.pop())
            self.modules -= 1

    def address(self, name: str) -> int:
        """The address of ``name`` (already suffixed), 0 when absent."""
        with _LOCK:
            self._drain()
            return self._engine.get_function_address(name)


_ENGINES: dict = {}


def jit_engine(cpu: str, features: str, opt_level: int) -> JITEngine:
    """The process's engine for this machine description, created on first use
    (the caller may hold ``_LOCK``: creation does not take it)."""
    key = (cpu, features, max(0, min(3, opt_level)))
    eng = _ENGINES.get(key)
    if eng is None:
        eng = _ENGINES[key] = JITEngine(*key)
    return eng


def _optimized(source: str, cpu: str, features: str, opt_level: int):
    """``(module, target machine)``: ``source`` parsed, verified and optimised with the
    new pass manager at ``opt_level`` (the caller holds ``_LOCK``)."""
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
    return mod, tm


def compile_object(source: str, cpu: str, features: str = "",
                   opt_level: int = 3) -> tuple:
    """``(optimised IR text, object code)`` of LLVM IR ``source`` for the CPU ``cpu``
    with ``features``: what the ``llvm`` kind's codegen puts in its Program.

    Example::

        >>> ir, obj = compile_object("define i32 @one() {\\n  ret i32 1\\n}\\n", host_cpu())
        >>> "ret i32 1" in ir, obj[:4]
        (True, b'\\x7fELF')
    """
    _init()
    with _LOCK:
        mod, tm = _optimized(source, cpu, features, opt_level)
        return str(mod), tm.emit_object(mod)


class Library:
    """One LLVM module compiled for the host, added to the long-lived engine of its
    machine description (:func:`jit_engine`).

    ``source`` is the LLVM IR text; it is verified, optimised with the new pass
    manager at ``opt_level`` and compiled.  ``optimized_ir`` and ``assembly()`` show
    the results.  ``emit_object=True``: the machine code is emitted as an object
    (:meth:`object_code`, for the compile cache) and that object is what runs, in an
    engine of its own; ``object_code=`` links code compiled earlier
    (:func:`compile_object`), ``optimized_ir=`` its optimised IR when known.

    Example::

        >>> lib = Library("define i32 @one() {\\n  ret i32 1\\n}\\n", cpu=host_cpu())
        >>> "ret i32 1" in lib.optimized_ir
        True
    """

    def __init__(self, source: str, cpu: str, features: str = "", opt_level: int = 3,
                 object_code: bytes | None = None, emit_object: bool = False,
                 optimized_ir: str | None = None):
        self.source = source
        self.cpu, self.features, self.opt_level = cpu, features, opt_level
        self._asm = None
        if object_code is None and emit_object:
            # whoever stores the object code runs that machine code: generated once,
            # not once for the JIT and again for the object
            optimized_ir, object_code = compile_object(source, cpu, features, opt_level)
        if object_code is not None:
            self._load_object(object_code)
            self.optimized_ir = optimized_ir
            return
        with _LOCK:  # LLVM contexts are not safe for concurrent use
            mod, tm = _optimized(source, cpu, features, opt_level)
            self.optimized_ir = str(mod)      # before the engine renames its symbols
            from . import threadpool  # registers the runtime's symbols with LLVM
            if threadpool.uses_runtime(source):
                threadpool.ensure_loaded()
            check_externs(_declared(mod))
            self._jit = jit_engine(cpu, features, opt_level)
            self._suffix = self._jit.add(mod)
            self._module = mod
            self._tm = tm
            self._object = None
        fin = weakref.finalize(self, self._jit.remove, mod)
        fin.atexit = False  # at exit the engine goes with the process

    def _load_object(self, data: bytes) -> None:
        """Machine code compiled earlier (see :meth:`object_code`), linked into a fresh
        engine: no parsing, optimising or code generation."""
        _init()
        with _LOCK:
            tm = target_machine(self.cpu, self.features, self.opt_level)
            empty = llvm.parse_assembly("")
            empty.triple = tm.triple
            self._engine = llvm.create_mcjit_compiler(empty, tm)
            from . import threadpool
            if threadpool.uses_runtime(data):
                threadpool.ensure_loaded()
            # the source's declarations that the machine code still calls (the
            # optimiser may have removed a call, e.g. an allocation it elided)
            check_externs(n for n in (a or b for a, b in _DECLARE.findall(self.source))
                          if not n.startswith("llvm.") and n.encode() in data)
            self._engine.add_object_file(llvm.ObjectFileRef.from_data(data))
            self._engine.finalize_object()
            self._module, self._tm, self._object = empty, tm, data
            self._jit, self._suffix = None, ""
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
        if self._jit is not None:
            addr = self._jit.address(symbol + self._suffix)
        else:
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
