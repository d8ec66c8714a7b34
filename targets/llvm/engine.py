"""llvmlite plumbing: target machines, the optimiser, object code, MCJIT.

Layered as numba's ``codegen.py``: codegen (``targets.llvm.codegen``, IR text),
compilation (:func:`compile_object`: the IR optimised and compiled to relocatable
object code, what the ``llvm`` kind's Program holds) and loading (:class:`Library`:
one object linked into an MCJIT engine of its own, so every build may call its entry
``main`` and a program from the compile cache loads without compiling).  The
optimised IR and the assembly are shown on demand.  LLVM itself is initialised once
per process (:mod:`targets.runtime.host`), and libm is loaded once so MCJIT resolves
``tanhf``, ``erff`` … by symbol.

Example::

    >>> lib = Library("define void @f() {\\n  ret void\\n}\\n", cpu=host_cpu())
    >>> lib.address("f") != 0
    True
"""

from __future__ import annotations

import re
import threading

import llvmlite.binding as llvm

from cuvil_tir.errors import CodegenError, TargetError

from ..runtime.host import host_cpu, host_features, init_llvm
from . import threadpool

_LOCK = threading.Lock()


def process_triple() -> str:
    """The triple of this process (``x86_64-unknown-linux-gnu`` …)."""
    init_llvm()
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
    init_llvm()
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
    init_llvm()
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


#: ``declare <type> @name(`` in LLVM IR text (a quoted name keeps its quotes out)
_DECLARE = re.compile(r'^declare [^@]*@(?:"([^"]+)"|([\w.$]+))\(', re.M)


def _numbered(source: str) -> str:
    return "\n".join(f"{k + 1:4d} {line}" for k, line in enumerate(source.splitlines()))


def _pipeline(source: str, tm, opt_level: int, slp: bool):
    mod = _parse(source)
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    if opt_level > 0:
        pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
        pto.loop_vectorization = True
        pto.slp_vectorization = slp
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
    return mod


def _verify_optimized(mod) -> str | None:
    """The verifier's message for the optimiser's output, ``None`` when it is valid."""
    try:
        mod.verify()
    except RuntimeError as err:
        return str(err).strip()
    return None


def _optimized(source: str, cpu: str, features: str, opt_level: int):
    """``(module, target machine)``: ``source`` parsed, verified and optimised with the
    new pass manager at ``opt_level`` (the caller holds ``_LOCK``).

    The optimiser's output is verified before anything compiles it.  LLVM 22's SLP
    vectorizer can produce IR that does not verify (an instruction used before it is
    defined, next to a gapped ``llvm.masked.load``), and instruction selection of such IR
    fails an assertion that aborts the process.  Such a module is optimised again without
    the SLP vectorizer (loops still vectorize); if that is invalid too, the build is
    refused with a :class:`CodegenError` instead of crashing.
    """
    tm = target_machine(cpu, features, opt_level)
    mod = _pipeline(source, tm, opt_level, slp=True)
    problem = _verify_optimized(mod) if opt_level > 0 else None
    if problem is None:
        return mod, tm
    mod = _pipeline(source, tm, opt_level, slp=False)
    second = _verify_optimized(mod)
    if second is None:
        return mod, tm
    raise CodegenError(
        f"llvm: the optimiser (opt_level={opt_level}, cpu {cpu!r}) turned valid IR into "
        f"invalid IR, with and without the SLP vectorizer: {second.splitlines()[0]} "
        "(expected LLVM to keep the module valid; this is an LLVM defect). Build with "
        "opt_level=0 to avoid the optimiser, and report the IR "
        "(Module.source) to Cuvil\n--- IR ---\n" + _numbered(source))


def compile_object(source: str, cpu: str, features: str = "",
                   opt_level: int = 3) -> tuple:
    """``(optimised IR text, object code)`` of LLVM IR ``source`` for the CPU ``cpu``
    with ``features``: what the ``llvm`` kind's codegen puts in its Program.

    Example::

        >>> ir, obj = compile_object("define i32 @one() {\\n  ret i32 1\\n}\\n", host_cpu())
        >>> "ret i32 1" in ir, obj[:4]
        (True, b'\\x7fELF')
    """
    init_llvm()
    with _LOCK:
        mod, tm = _optimized(source, cpu, features, opt_level)
        return str(mod), tm.emit_object(mod)


class Library:
    """Machine code of one LLVM module, linked into an MCJIT engine of its own.

    ``source`` is the LLVM IR text; it is verified, optimised with the new pass manager
    at ``opt_level`` and compiled (:func:`compile_object`), unless ``object_code``
    compiled earlier is given (then ``optimized_ir`` is its optimised IR when known).
    ``optimized()`` and ``assembly()`` show the results.

    Example::

        >>> lib = Library("define i32 @one() {\\n  ret i32 1\\n}\\n", cpu=host_cpu())
        >>> "ret i32 1" in lib.optimized(), lib.address("one") != 0
        (True, True)
    """

    def __init__(self, source: str, cpu: str, features: str = "", opt_level: int = 3,
                 object_code: bytes | None = None, optimized_ir: str | None = None):
        self.source = source
        self.cpu, self.features, self.opt_level = cpu, features, opt_level
        if object_code is None:
            optimized_ir, object_code = compile_object(source, cpu, features, opt_level)
        self.optimized_ir = optimized_ir
        self._asm = None
        init_llvm()
        with _LOCK:
            tm = target_machine(cpu, features, opt_level)
            empty = llvm.parse_assembly("")
            empty.triple = tm.triple
            self._engine = llvm.create_mcjit_compiler(empty, tm)
            if threadpool.uses_runtime(object_code):
                threadpool.ensure_loaded()
            # the source's declarations that the machine code still calls (the
            # optimiser may have removed a call, e.g. an allocation it elided)
            check_externs(n for n in (a or b for a, b in _DECLARE.findall(source))
                          if not n.startswith("llvm.") and n.encode() in object_code)
            self._engine.add_object_file(llvm.ObjectFileRef.from_data(object_code))
            self._engine.finalize_object()
        self._object = object_code

    def object_code(self) -> bytes:
        """The module's relocatable machine code (an ELF object on Linux).

        Example::

            >>> lib = Library("define i32 @one() {\\n  ret i32 1\\n}\\n", cpu=host_cpu())
            >>> again = Library("", cpu=host_cpu(), object_code=lib.object_code())
            >>> again.address("one") != 0
            True
        """
        return self._object

    def optimized(self) -> str:
        """The optimised LLVM IR (compiled again from the source when the object came
        without it)."""
        if self.optimized_ir is None:
            self.optimized_ir = compile_object(self.source, self.cpu, self.features,
                                               self.opt_level)[0]
        return self.optimized_ir

    def address(self, symbol: str) -> int:
        """The address of a compiled function (nonzero), or ``CodegenError``."""
        addr = self._engine.get_function_address(symbol)
        if not addr:
            raise CodegenError(f"llvm: symbol {symbol!r} not found in the compiled module")
        return addr

    def assembly(self) -> str:
        """Host assembly of the optimised module (computed once, on demand)."""
        if self._asm is None:
            text = self.optimized()
            with _LOCK:
                tm = target_machine(self.cpu, self.features, self.opt_level)
                self._asm = tm.emit_assembly(llvm.parse_assembly(text))
        return self._asm
