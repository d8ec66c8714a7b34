"""The native calling ABI every CPU backend (``llvm``, ``c``, accelerator simulators)
compiles to, and the ctypes side of calling it.

The generated entry is a plain C function::

    int32_t <name>(ptr A, ptr B, ..., <scalar params>, int64_t n0, int64_t n1, ...)

buffer parameters as data pointers, interleaved with scalar parameters exactly as in
``func.params`` (bool passed as an 8-bit integer, float16/bfloat16 as ``float``), then
one ``int64`` per symbolic size (:func:`size_vars_of`).  It returns 0, or a status
(:data:`STATUS_MESSAGES`) when it stopped early.  For speed each backend adds a
wrapper ``<entry>__cuvil_py`` that receives the numpy array *objects* and reads each
one's data pointer at :data:`DATA_OFFSET` (``PyArrayObject.data``, verified at import
against ``ndarray.ctypes.data``), so a call is one ctypes call.

Example::

    >>> scalar_ctype("bool") is ctypes.c_uint8, scalar_ctype("float16") is ctypes.c_float
    (True, True)
    >>> raising(lambda: 0, "main")()
"""

from __future__ import annotations

import ctypes

import numpy as np

from cuvil_tir import dtype as D
from cuvil_tir.buffer import Buffer
from cuvil_tir.errors import TargetError
from cuvil_tir.expr import Var
from cuvil_tir.visitor import used_vars

from .checks import STATUS_CHECK_FAILED

#: status returned by the generated function when an internal buffer cannot be
#: allocated (its size overflows 64 bits or its index dtype, or the C library has no
#: memory for it)
STATUS_ALLOC_FAILED = 1

#: what each non-zero status means (raised by the runtime as ``TargetError``)
STATUS_MESSAGES = {STATUS_ALLOC_FAILED: "an internal buffer could not be allocated (its "
                   "size overflows 64 bits or its index dtype, or the process is out "
                   "of memory)",
                   STATUS_CHECK_FAILED: "a run-time check (T.assert_) failed"}

_SIGNED = {8: ctypes.c_int8, 16: ctypes.c_int16, 32: ctypes.c_int32, 64: ctypes.c_int64}
_UNSIGNED = {8: ctypes.c_uint8, 16: ctypes.c_uint16, 32: ctypes.c_uint32,
             64: ctypes.c_uint64}


def size_vars_of(func) -> list:
    """The symbolic sizes passed after the parameters, in ABI order: the function's
    ``cuvil.size_vars`` attribute (set by the build driver), else the size variables of
    the parameters' shapes in order of first use.

    Example::

        >>> import cuvil_tir as T
        >>> n = T.size_var("n")
        >>> [v.name for v in size_vars_of(T.PrimFunc([T.decl_buffer((n, 4), "float32", "A")],
        ...                                          T.Evaluate(T.const(0))))]
        ['n']
    """
    attr = func.attr("cuvil.size_vars")
    if attr is not None:
        return list(attr)
    scalars = {id(p) for p in func.params if isinstance(p, Var)}
    out = []
    for p in func.params:
        if isinstance(p, Buffer):
            for v in used_vars(p.shape):
                if id(v) not in scalars and all(v is not o for o in out):
                    out.append(v)
    return out


def scalar_ctype(dt: str):
    """The ctypes type a scalar parameter of dtype ``dt`` is passed as.

    Example::

        >>> scalar_ctype("int64") is ctypes.c_int64, scalar_ctype("uint16") is ctypes.c_uint16
        (True, True)
    """
    e = D.element(dt)
    if e == "bool":
        return ctypes.c_uint8
    if e in ("float16", "bfloat16", "float32"):
        return ctypes.c_float
    if e == "float64":
        return ctypes.c_double
    return (_UNSIGNED if D.is_uint(e) else _SIGNED)[D.bits(e)]


def _data_offset() -> int | None:
    probe = np.zeros(3, "float32")
    for off in (16, 24, 32):
        if ctypes.c_void_p.from_address(id(probe) + off).value == probe.ctypes.data:
            return off
    return None


#: byte offset of ``data`` in numpy's array struct, or None when it cannot be trusted
DATA_OFFSET = _data_offset()


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
    :class:`targets.runtime.checks.CheckReport`)."""
    def raw(*args):
        status = call(*args)
        if status:
            if status == STATUS_CHECK_FAILED and report is not None:
                raise report.error(name, lang)
            raise status_error(name, status, lang)
    return raw


def native_entry(fn_of, signature, lang: str, report):
    """``raw(*args)`` calling the compiled entry ``signature.name``: through its
    object-taking wrapper when :data:`DATA_OFFSET` is known, else with data pointers
    read in Python.  ``fn_of(symbol, argtypes)`` returns the ctypes function of a
    symbol of the loaded code.

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.target import Signature
        >>> sig = Signature.from_func(T.create_prim_func([T.placeholder((2,), name="X")]))
        >>> raw = native_entry(lambda sym, types: (lambda *a: 0), sig, "c", None)
        >>> raw(np.zeros(2, "float32"))
    """
    sizes = [ctypes.c_int64] * len(signature.size_vars)
    kinds = [p.kind == "buffer" for p in signature.params]
    if DATA_OFFSET is not None:
        types = [ctypes.py_object if k else scalar_ctype(p.dtype)
                 for k, p in zip(kinds, signature.params)] + sizes
        return raising(fn_of(f"{signature.name}__cuvil_py", types), signature.name, lang,
                       report)
    types = [ctypes.c_void_p if k else scalar_ctype(p.dtype)
             for k, p in zip(kinds, signature.params)] + sizes
    fn = fn_of(signature.name, types)

    def with_pointers(*args):
        return fn(*[a.ctypes.data if k else a for a, k in zip(args, kinds)],
                  *args[len(kinds):])
    return raising(with_pointers, signature.name, lang, report)


__all__ = ["DATA_OFFSET", "STATUS_ALLOC_FAILED", "STATUS_CHECK_FAILED", "STATUS_MESSAGES",
           "native_entry", "raising", "scalar_ctype", "size_vars_of", "status_error"]
