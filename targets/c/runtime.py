"""C source -> a callable native function (the ``c`` target's runtime module).

The generated entry has the llvm target's ABI (:mod:`targets.llvm.codegen`): data
pointers, scalars, then one ``int64_t`` per symbolic size; it returns 0 or a status.
As in the llvm runtime, a C wrapper ``<entry>__cuvil_py`` reads each array's data
pointer from the numpy array object (at the offset verified by
:data:`targets.llvm.runtime.DATA_OFFSET`), so a call is one ctypes call.

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

from ..checks import check_report
from ..llvm.runtime import DATA_OFFSET, _ctype, raising
from .compiler import compile_shared


def wrapper_c(signature, offset: int, abi_type) -> str:
    """C source of the object-taking wrapper around the entry ``signature.name``;
    ``abi_type(dtype)`` is the C type of a scalar parameter.

    Example::

        >>> import cuvil_tir as T
        >>> from targets.signature import Signature
        >>> sig = Signature.from_func(T.create_prim_func([T.placeholder((2,), name="X")]))
        >>> print(wrapper_c(sig, 16, str).strip().splitlines()[0])
        int32_t main__cuvil_py(void *o0) {
    """
    params, args = [], []
    for p in signature.params:
        if p.kind == "buffer":
            params.append(f"void *o{p.index}")
            args.append(f"*(void **)((char *)o{p.index} + {offset})")
        else:
            params.append(f"{abi_type(p.dtype)} s{p.index}")
            args.append(f"s{p.index}")
    for k in range(len(signature.size_vars)):
        params.append(f"int64_t n{k}")
        args.append(f"n{k}")
    name = signature.name
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


class CRuntimeModule:
    """A compiled C function: ``raw(*arrays_and_scalars, *sizes)`` runs it unchecked
    (the :class:`targets.Module` checks first).

    Example::

        >>> CRuntimeModule.source_formats
        ('c',)
    """

    source_formats = ("c",)

    def __init__(self, source: str, target, signature, abi_type, openmp: bool,
                 library=None):
        self.entry_name = signature.name
        self.signature = signature
        self.source = source
        self.openmp = openmp
        full = source if DATA_OFFSET is None else \
            source + wrapper_c(signature, DATA_OFFSET, abi_type)
        self.library = library if library is not None else compile_shared(
            full, target.options["cc"], target.options["cflags"], openmp)
        sizes = [ctypes.c_int64] * len(signature.size_vars)
        kinds = [p.kind == "buffer" for p in signature.params]
        report = check_report(source, _slot_getter(self.library, self.entry_name))
        if DATA_OFFSET is not None:
            fn = getattr(self.library, f"{self.entry_name}__cuvil_py")
            fn.argtypes = [ctypes.py_object if k else _ctype(p.dtype)
                           for k, p in zip(kinds, signature.params)] + sizes
            fn.restype = ctypes.c_int32
            self.raw = raising(fn, self.entry_name, "c", report)
            return
        fn = getattr(self.library, self.entry_name)
        fn.argtypes = [ctypes.c_void_p if k else _ctype(p.dtype)
                       for k, p in zip(kinds, signature.params)] + sizes
        fn.restype = ctypes.c_int32

        def with_pointers(*args):
            return fn(*[a.ctypes.data if k else a for a, k in zip(args, kinds)],
                      *args[len(kinds):])
        self.raw = raising(with_pointers, self.entry_name, "c", report)

    def get_source(self, fmt: str | None = None) -> str:
        """``"c"``: the generated C source (without the Python-call wrapper)."""
        return self.source
