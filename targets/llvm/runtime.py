"""LLVM IR text -> a callable native function (the llvm target's runtime module).

The generated entry is a plain C function (see :mod:`targets.llvm.codegen` for its
ABI).  For speed the runtime adds a wrapper ``<entry>__cuvil_py`` that receives the
numpy array *objects* and reads each one's data pointer from the array struct
(``PyArrayObject.data``, at an offset verified against ``ndarray.ctypes.data`` at
import), so a call costs one ctypes call instead of one ``.ctypes`` lookup per
array.  If the offset cannot be verified, data pointers are passed from Python.

Example::

    >>> import numpy as np, cuvil_tir as T, targets
    >>> A = T.placeholder((4,), name="A")
    >>> B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
    >>> mod = targets.build(T.create_prim_func([A, B]), "llvm")
    >>> a, b = np.arange(4, dtype="float32"), np.zeros(4, "float32")
    >>> mod(a, b); b.tolist()
    [0.0, 2.0, 4.0, 6.0]
"""

from __future__ import annotations

import ctypes

import numpy as np

from cuvil_tir import dtype as D

from cuvil_tir.errors import TargetError

from ..checks import STATUS_CHECK_FAILED, check_report
from .codegen import STATUS_MESSAGES, abi_type
from .engine import Library, resolve_cpu

_CTYPES = {"i8": ctypes.c_int8, "i16": ctypes.c_int16, "i32": ctypes.c_int32,
           "i64": ctypes.c_int64, "float": ctypes.c_float, "double": ctypes.c_double}
_UNSIGNED = {"i8": ctypes.c_uint8, "i16": ctypes.c_uint16, "i32": ctypes.c_uint32,
             "i64": ctypes.c_uint64}


def _data_offset() -> int | None:
    probe = np.zeros(3, "float32")
    for off in (16, 24, 32):
        if ctypes.c_void_p.from_address(id(probe) + off).value == probe.ctypes.data:
            return off
    return None


#: byte offset of ``data`` in numpy's array struct, or None when it cannot be trusted
DATA_OFFSET = _data_offset()


def _ctype(dt: str):
    t = abi_type(dt)
    if D.is_uint(dt) or D.is_bool(dt):
        return _UNSIGNED[t]
    return _CTYPES[t]


def wrapper_ir(signature, offset: int) -> str:
    """IR of the object-taking wrapper around the entry ``signature.name``.

    Example::

        >>> import cuvil_tir as T
        >>> from targets.signature import Signature
        >>> sig = Signature.from_func(T.create_prim_func([T.placeholder((2,), name="X")]))
        >>> "define i32 @main__cuvil_py(ptr %o0)" in wrapper_ir(sig, 16)
        True
    """
    params, args, body = [], [], []
    for p in signature.params:
        if p.kind == "buffer":
            params.append(f"ptr %o{p.index}")
            body.append(f"  %a{p.index} = getelementptr i8, ptr %o{p.index}, i64 {offset}")
            body.append(f"  %d{p.index} = load ptr, ptr %a{p.index}, align 8")
            args.append(f"ptr %d{p.index}")
        else:
            t = abi_type(p.dtype)
            params.append(f"{t} %s{p.index}")
            args.append(f"{t} %s{p.index}")
    for k in range(len(signature.size_vars)):
        params.append(f"i64 %n{k}")
        args.append(f"i64 %n{k}")
    name = signature.name
    return (f"\ndefine i32 @{name}__cuvil_py({', '.join(params)}) {{\n" + "\n".join(body)
            + ("\n" if body else "") + f"  %status = call i32 @{name}({', '.join(args)})\n"
            "  ret i32 %status\n}\n")


def status_error(name: str, status: int, lang: str = "llvm") -> TargetError:
    """The error for a non-zero status returned by the compiled function ``name``.

    Example::

        >>> status_error("main", 1).message.startswith("llvm: main stopped")
        True
    """
    why = STATUS_MESSAGES.get(status, f"unknown status {status}")
    return TargetError(f"{lang}: {name} stopped before finishing: {why}; outputs may be "
                       "partly written")


def raising(call, name: str, lang: str = "llvm", report=None):
    """``call`` (returning the native status) as a function that raises on failure;
    a failed run-time check is reported by ``report`` (a
    :class:`targets.checks.CheckReport`).

    Example::

        >>> raising(lambda: 0, "main")()
    """
    def raw(*args):
        status = call(*args)
        if status:
            if status == STATUS_CHECK_FAILED and report is not None:
                raise report.error(name, lang)
            raise status_error(name, status, lang)
    return raw


class LLVMRuntimeModule:
    """Compiled code of one function: ``raw`` is its checked-arguments entry.

    ``raw(*arrays_and_scalars, *sizes)`` runs the native code with no checks (the
    :class:`targets.Module` checks first).

    Example::

        >>> LLVMRuntimeModule.source_formats
        ('ll', 'll-opt', 'asm', 'obj')
    """

    source_formats = ("ll", "ll-opt", "asm", "obj")

    def __init__(self, source: str, target, signature, object_code: bytes | None = None,
                 emit_object: bool = False):
        self.entry_name = signature.name
        self.signature = signature
        self.source = source
        cpu, features = resolve_cpu(target)
        full = source if DATA_OFFSET is None else source + wrapper_ir(signature, DATA_OFFSET)
        self.library = Library(full, cpu, features, target.options.get("opt_level", 3),
                               object_code=object_code, emit_object=emit_object)
        sizes = [ctypes.c_int64] * len(signature.size_vars)
        # the getter holds the library, not self: a cycle through self would leave the
        # module to the garbage collector, whose finalizers may run under the engine lock
        library, getter = self.library, f"{self.entry_name}__cuvil_check_slot"
        report = check_report(source, lambda: ctypes.CFUNCTYPE(ctypes.c_void_p)(
            library.address(getter))())
        if DATA_OFFSET is not None:
            addr = self.library.address(f"{self.entry_name}__cuvil_py")
            argtypes = [ctypes.py_object if p.kind == "buffer" else _ctype(p.dtype)
                        for p in signature.params] + sizes
            self.raw = raising(ctypes.CFUNCTYPE(ctypes.c_int32, *argtypes)(addr),
                                self.entry_name, report=report)
        else:
            addr = self.library.address(self.entry_name)
            argtypes = [ctypes.c_void_p if p.kind == "buffer" else _ctype(p.dtype)
                        for p in signature.params] + sizes
            cfunc = ctypes.CFUNCTYPE(ctypes.c_int32, *argtypes)(addr)
            kinds = [p.kind == "buffer" for p in signature.params]

            def with_pointers(*args):
                return cfunc(*[a.ctypes.data if k else a for a, k in zip(args, kinds)],
                             *args[len(kinds):])
            self.raw = raising(with_pointers, self.entry_name, report=report)

    def get_source(self, fmt: str | None = None) -> str | bytes:
        """``"ll"`` (generated IR, default), ``"ll-opt"`` (optimised), ``"asm"``, or
        ``"obj"``: the relocatable object code as ``bytes`` (an ELF object on Linux; it
        also holds the Python-calling wrapper, and parallel code calls the pool's
        ``cuvil_parallel_launch``), loadable again with
        ``engine.Library("", cpu, features, object_code=...)``."""
        fmt = fmt or "ll"
        if fmt == "ll":
            return self.source
        if fmt == "ll-opt":
            return self.library.optimized()
        if fmt == "obj":
            return self.library.object_code()
        return self.library.assembly()
