"""A ``Program`` of the ``llvm`` kind -> a callable native function.

The program holds the object code its codegen compiled (with the Python-calling
wrapper ``<entry>__cuvil_py`` of :mod:`targets.runtime.native`); loading links it into
an MCJIT engine of its own, so a program from the compile cache runs without any LLVM
compilation.

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

from cuvil_tir.expr import Var

from ..runtime import NativeCode, check_report, native_entry, size_vars_of
from .codegen import abi_type
from .engine import Library


def wrapper_ir(entry, offset: int) -> str:
    """IR of the object-taking wrapper around the lowered ``entry`` function (its
    ``global_symbol`` and parameters; see :mod:`targets.runtime.native`).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([T.decl_buffer((2,), "float32", "X")], T.Evaluate(T.const(0)))
        >>> "define i32 @main__cuvil_py(ptr %o0)" in wrapper_ir(f, 16)
        True
    """
    params, args, body = [], [], []
    for k, p in enumerate(entry.params):
        if not isinstance(p, Var):
            params.append(f"ptr %o{k}")
            body.append(f"  %a{k} = getelementptr i8, ptr %o{k}, i64 {offset}")
            body.append(f"  %d{k} = load ptr, ptr %a{k}, align 8")
            args.append(f"ptr %d{k}")
        else:
            t = abi_type(p.dtype)
            params.append(f"{t} %s{k}")
            args.append(f"{t} %s{k}")
    for k in range(len(size_vars_of(entry))):
        params.append(f"i64 %n{k}")
        args.append(f"i64 %n{k}")
    name = entry.name
    return (f"\ndefine i32 @{name}__cuvil_py({', '.join(params)}) {{\n" + "\n".join(body)
            + ("\n" if body else "") + f"  %status = call i32 @{name}({', '.join(args)})\n"
            "  ret i32 %status\n}\n")


class LLVMRuntimeModule(NativeCode):
    """The loaded object code of a program: ``raw(*arrays_and_scalars, *sizes)`` runs
    the entry with no checks (the :class:`targets.Module` checks first).

    Example::

        >>> LLVMRuntimeModule.source_formats
        ('ll', 'll-opt', 'asm', 'obj')
    """

    source_formats = ("ll", "ll-opt", "asm", "obj")

    def __init__(self, program):
        super().__init__(program.entry)
        self.program = program
        meta = program.meta
        self.source = program.sources["ll"]
        self.library = Library(self.source, meta["cpu"], meta["features"],
                               meta["opt_level"], object_code=program.binaries["obj"],
                               optimized_ir=program.sources.get("ll-opt"))
        # the getter holds the library, not self: a cycle through self would leave the
        # module to the garbage collector, whose finalizers may run under the engine lock
        library, getter = self.library, f"{self.entry_name}__cuvil_check_slot"
        report = check_report(self.source, lambda: ctypes.CFUNCTYPE(ctypes.c_void_p)(
            library.address(getter))())

        def fn_of(symbol, argtypes):
            return ctypes.CFUNCTYPE(ctypes.c_int32, *argtypes)(library.address(symbol))
        self.raw = native_entry(fn_of, program.signature, "llvm", report)

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
            return self.program.binaries["obj"]
        return self.library.assembly()


__all__ = ["LLVMRuntimeModule", "wrapper_ir"]
