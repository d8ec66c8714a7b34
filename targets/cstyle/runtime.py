"""A ``Program`` of the C family (``c``, an accelerator's simulator) -> a callable
native function.

The generated entry has the native CPU ABI (:mod:`targets.runtime.native`): data
pointers, scalars, then one ``int64_t`` per symbolic size; it returns 0 or a status.
The kind's codegen appends a C wrapper ``<entry>__cuvil_py`` (:func:`wrapper_c`) that
reads each array's data pointer from the numpy array object, and compiles the whole
into a shared library (:mod:`targets.cstyle.compiler`; the program's ``so`` binary);
loading opens that library, once per content.

Example::

    >>> import numpy as np, cuvil_tir as T, targets
    >>> A = T.placeholder((3,), name="A")
    >>> B = T.compute((3,), lambda i: A[i] * 3.0, name="B")
    >>> mod = targets.build(T.create_prim_func([A, B]), "c")
    >>> b = np.zeros(3, "float32"); mod(np.arange(3, dtype="float32"), b); b.tolist()
    [0.0, 3.0, 6.0]
"""

from __future__ import annotations

import ctypes

from cuvil_tir.expr import Var

from ..runtime import NativeCode, check_report, native_entry, size_vars_of
from ..cstyle.compiler import load_shared


def wrapper_c(entry, offset: int, abi_type) -> str:
    """C source of the object-taking wrapper around the lowered ``entry`` function;
    ``abi_type(dtype)`` is the C type of a scalar parameter.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([T.decl_buffer((2,), "float32", "X")], T.Evaluate(T.const(0)))
        >>> print(wrapper_c(f, 16, str).strip().splitlines()[0])
        int32_t main__cuvil_py(void *o0) {
    """
    params, args = [], []
    for k, p in enumerate(entry.params):
        if not isinstance(p, Var):
            params.append(f"void *o{k}")
            args.append(f"*(void **)((char *)o{k} + {offset})")
        else:
            params.append(f"{abi_type(p.dtype)} s{k}")
            args.append(f"s{k}")
    for k in range(len(size_vars_of(entry))):
        params.append(f"int64_t n{k}")
        args.append(f"n{k}")
    name = entry.name
    return (f"\nint32_t {name}__cuvil_py({', '.join(params) or 'void'}) {{\n"
            f"    return {name}({', '.join(args)});\n}}\n")


def _slot_getter(library, name: str):
    """``() -> address`` of the error slot of ``name`` in ``library`` (holding the
    library only: no reference cycle through the runtime module)."""
    def address():
        getter = getattr(library, f"{name}__cuvil_check_slot")
        getter.restype = ctypes.c_void_p
        return getter()
    return address


class CRuntimeModule(NativeCode):
    """A loaded C library: ``raw(*arrays_and_scalars, *sizes)`` runs the entry
    unchecked (the :class:`targets.Module` checks first).  ``source`` is the C source
    whose run-time checks it reports (the kernel's, for an accelerator simulator).

    Example::

        >>> CRuntimeModule.source_formats
        ('c',)
    """

    source_formats = ("c",)

    def __init__(self, program, source: str | None = None, lang: str = "c"):
        super().__init__(program.entry)
        self.program = program
        self.source = program.sources["c"] if source is None else source
        self.library = load_shared(program.binaries["so"])
        library = self.library

        def fn_of(symbol, argtypes):
            fn = getattr(library, symbol)
            fn.argtypes = argtypes
            fn.restype = ctypes.c_int32
            return fn
        report = check_report(self.source, _slot_getter(library, self.entry_name))
        self.raw = native_entry(fn_of, program.signature, lang, report)

    def get_source(self, fmt: str | None = None) -> str:
        """``"c"``: the generated C source (without the Python-call wrapper)."""
        return self.source


__all__ = ["CRuntimeModule", "wrapper_c"]
