"""The compiled CUDA host program, loaded with ctypes, and what it launches through.

:class:`HostProgram` compiles the host C of a :class:`~targets.cuda.codegen.CudaProgram`
with the system C compiler and calls it with a *device table* (the C struct of
:data:`targets.cuda.host.DEVICE_TABLE`).  Two tables exist:

* the driver's (:func:`driver_table`, used by :class:`targets.cuda.runtime.CudaRuntime`
  on a GPU): ``cuLaunchKernel`` of ``libcuda`` itself, the kernels' ``CUfunction``
  handles, the current stream, temporaries from cupy's memory pool;
* a :class:`Recorder`: a ``launch`` that records each launch (kernel, grid, block,
  dynamic shared bytes and the argument values, read as the kernel's parameter
  types) and temporaries at fake addresses.  ``mod.runtime.launch_plan(...)`` runs
  the compiled host with one, on any machine; tests compare what it records with the
  interpreter.

Example::

    >>> import cuvil_tir as T, schedules as S, targets
    >>> A = T.placeholder((64,), name="A")
    >>> B = T.compute((64,), lambda i: A[i] + 1.0, name="B")
    >>> sch = S.Schedule(T.create_prim_func([A, B]))
    >>> bx, tx = sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 32])
    >>> sch.bind(bx, "blockIdx.x"); sch.bind(tx, "threadIdx.x")
    >>> prog = targets.build(sch, "cuda").runtime.program
    >>> rec = Recorder(prog)
    >>> HostProgram(prog).run(rec.table(), [0x1000, 0x2000], [])
    >>> [(r.kernel, r.grid, r.block, r.args) for r in rec.launches]
    [('main_kernel0', (2, 1, 1), (32, 1, 1), (4096, 8192))]
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from cuvil_tir.buffer import Buffer
from cuvil_tir.errors import CodegenError, TargetError

from ..cstyle.compiler import compile_shared
from ..runtime.checks import STATUS_CHECK_FAILED, check_report
from ..cstyle import CPrinter
from ..cstyle.printer import size_vars_of
from .host import STATUS_ENCODE_FAILED, STATUS_LAUNCH_FAILED
from .tma import TMAP_TYPE

_C = ctypes
LAUNCH_FN = _C.CFUNCTYPE(_C.c_int, _C.c_void_p, *([_C.c_uint32] * 7), _C.c_void_p,
                         _C.POINTER(_C.c_void_p), _C.POINTER(_C.c_void_p))
ALLOC_FN = _C.CFUNCTYPE(_C.c_int32, _C.c_void_p, _C.c_int64, _C.POINTER(_C.c_void_p))
RELEASE_FN = _C.CFUNCTYPE(_C.c_int32, _C.c_void_p, _C.c_void_p)
#: ``cuTensorMapEncodeTiled``'s signature (targets.cuda.tma)
ENCODE_FN = _C.CFUNCTYPE(_C.c_int32, _C.c_void_p, _C.c_int32, _C.c_uint32, _C.c_void_p,
                         _C.POINTER(_C.c_uint64), _C.POINTER(_C.c_uint64),
                         _C.POINTER(_C.c_uint32), _C.POINTER(_C.c_uint32), _C.c_int32,
                         _C.c_int32, _C.c_int32, _C.c_int32)
#: a ``CUtensorMap``: 16 opaque 64-bit words
TMAP_CTYPE = _C.c_uint64 * 16
#: C type -> ctypes type, for scalar parameters of the host and of kernels
CTYPES = {"bool": _C.c_bool, "int8_t": _C.c_int8, "int16_t": _C.c_int16,
          "int32_t": _C.c_int32, "int64_t": _C.c_int64, "uint8_t": _C.c_uint8,
          "uint16_t": _C.c_uint16, "uint32_t": _C.c_uint32, "uint64_t": _C.c_uint64,
          "float": _C.c_float, "double": _C.c_double}


class DeviceTable(_C.Structure):
    """The ``cvl_device`` struct the host program takes.

    Example::

        >>> [name for name, _ in DeviceTable._fields_][:3]
        ['launch', 'kernels', 'stream']
    """

    _fields_ = [("launch", LAUNCH_FN), ("kernels", _C.POINTER(_C.c_void_p)),
                ("stream", _C.c_void_p), ("alloc", ALLOC_FN), ("release", RELEASE_FN),
                ("ctx", _C.c_void_p), ("error", _C.POINTER(_C.c_int32)),
                ("encode_tiled", ENCODE_FN)]


def ctype_of(c_type: str):
    """The ctypes type of a parameter's C type (a pointer for ``T*``).

    Example::

        >>> ctype_of("float*") is ctypes.c_void_p, ctype_of("int32_t") is ctypes.c_int32
        (True, True)
    """
    if c_type.rstrip().endswith("*"):
        return _C.c_void_p
    if c_type == TMAP_TYPE:
        return TMAP_CTYPE
    try:
        return CTYPES[c_type]
    except KeyError:
        raise CodegenError(f"cuda host: no ctypes type for the C type {c_type!r}") from None


class Table:
    """A filled device table and the objects it points into (kept alive with it).

    Example::

        >>> t = Table(DeviceTable(), [])
        >>> t.error[0]
        0
    """

    def __init__(self, struct: DeviceTable, keep: list):
        self.struct, self.keep = struct, keep
        self.error = (_C.c_int32 * 1)()
        struct.error = self.error


@dataclass(frozen=True)
class Launch:
    """One recorded launch: the kernel's name, grid and block (x, y, z), dynamic
    shared memory in bytes, and the argument values (device addresses for buffers).

    Example::

        >>> Launch("k", (1, 1, 1), (32, 1, 1), 0, ()).plan()
        ('k', (1, 1, 1), (32, 1, 1), 0)
    """

    kernel: str
    grid: tuple
    block: tuple
    shared: int
    args: tuple

    def plan(self) -> tuple:
        """``(kernel, grid, block, dynamic shared bytes)``."""
        return self.kernel, self.grid, self.block, self.shared


class Recorder:
    """A device table that launches nothing: it records (module docstring).

    ``fail_at``: the launch (0, 1, …) that returns the driver error ``error_code``
    instead; ``fail_alloc``: every temporary's allocation fails; ``fail_encode``:
    encoding a tensor map returns that driver error (tests of the error paths).
    ``encodings`` holds the arguments of each ``cuTensorMapEncodeTiled`` call (the
    table's ``encode_tiled``, as :meth:`targets.cuda.tma.TensorMap.encoding` gives
    them); the map it fills holds the call's number and the address, which a
    recorded launch then passes.

    Example::

        >>> from targets.cuda.codegen import CudaProgram
        >>> Recorder(CudaProgram("", {})).launches
        []
    """

    def __init__(self, program, fail_at: int | None = None, error_code: int = 700,
                 fail_alloc: bool = False, fail_encode: int = 0):
        self.names = list(program.kernels)
        self.types = [[ctype_of(t) for t in info.param_types]
                      for info in program.kernels.values()]
        self.launches: list[Launch] = []
        self.allocs: list = []          # (address, bytes) of each temporary, in order
        self.released: list = []
        self.fail_at, self.error_code, self.fail_alloc = fail_at, error_code, fail_alloc
        self.next_address = 1 << 40
        self.encodings: list = []
        self.fail_encode = fail_encode

    def table(self) -> Table:
        """A fresh device table recording into this recorder."""
        handles = (_C.c_void_p * max(1, len(self.names)))(
            *[k + 1 for k in range(len(self.names))])
        launch, alloc, release = LAUNCH_FN(self._launch), ALLOC_FN(self._alloc), \
            RELEASE_FN(self._release)
        encode = ENCODE_FN(self._encode)
        s = DeviceTable(launch, _C.cast(handles, _C.POINTER(_C.c_void_p)), None, alloc,
                        release, None)
        s.encode_tiled = encode
        return Table(s, [handles, launch, alloc, release, encode])

    def _encode(self, tmap, dtype, rank, address, dims, strides, box, steps, interleave,
                swizzle, l2, fill):
        if self.fail_encode:
            return self.fail_encode
        self.encodings.append((dtype, rank, address or 0, tuple(dims[:rank]),
                               tuple(strides[:rank - 1]), tuple(box[:rank]),
                               tuple(steps[:rank]), interleave, swizzle, l2, fill))
        words = _C.cast(tmap, _C.POINTER(TMAP_CTYPE))[0]
        words[0], words[1] = len(self.encodings), address or 0
        return 0

    def _launch(self, kernel, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        k = int(kernel) - 1
        args = tuple(_C.cast(params[n], _C.POINTER(t))[0]
                     for n, t in enumerate(self.types[k]))
        args = tuple(tuple(a) if isinstance(a, _C.Array) else a for a in args)
        if len(self.launches) == self.fail_at:
            return self.error_code
        self.launches.append(Launch(self.names[k], (gx, gy, gz), (bx, by, bz), shared,
                                    args))
        return 0

    def _alloc(self, ctx, nbytes, out):
        if self.fail_alloc:
            return 1
        out[0] = self.next_address
        self.allocs.append((self.next_address, nbytes))
        self.next_address += (nbytes + 255) // 256 * 256
        return 0

    def _release(self, ctx, ptr):
        self.released.append(ptr)
        return 0


class HostProgram:
    """The host C of ``program`` compiled (``cc`` and ``cflags``) and loaded.

    Example::

        >>> HostProgram.__name__
        'HostProgram'
    """

    def __init__(self, program, cc: str = "cc", cflags: str = "-O2"):
        self.program = program
        self.library = compile_shared(program.host_c, cc, cflags, False)
        host = program.host
        self.nsizes = len(size_vars_of(host))
        printer = CPrinter()
        self.kinds = [isinstance(p, Buffer) for p in host.params]
        fn = getattr(self.library, program.entry)
        fn.argtypes = ([_C.POINTER(DeviceTable)]
                       + [_C.c_void_p if k else ctype_of(printer.abi_type(p.dtype))
                          for k, p in zip(self.kinds, host.params)]
                       + [_C.c_int64] * self.nsizes)
        fn.restype = _C.c_int32
        self.fn = fn
        library = self.library
        name = program.entry

        def slot():
            getter = getattr(library, f"{name}__cuvil_check_slot")
            getter.restype = _C.c_void_p
            return getter()
        self.report = check_report(program.host_c, slot)

    def run(self, table: Table, values, sizes) -> None:
        """Run the host program: ``values`` are the parameters (device addresses for
        buffers), ``sizes`` the symbolic sizes; a failed check or launch raises."""
        status = self.fn(_C.byref(table.struct), *values, *(int(s) for s in sizes))
        if status == 0:
            return
        name = self.program.entry
        if status == STATUS_CHECK_FAILED and self.report is not None:
            raise self.report.error(name, "cuda")
        if status == STATUS_ENCODE_FAILED:
            raise TargetError(f"cuda: {name} could not encode a tensor map "
                              f"(cuTensorMapEncodeTiled failed with CUDA error "
                              f"{table.error[0]}, {driver_error_name(table.error[0])}): a "
                              "tensor copy's source must start on 16 bytes, with rows a "
                              "multiple of 16 bytes apart")
        if status == STATUS_LAUNCH_FAILED:
            raise TargetError(f"cuda: a kernel launch of {name} failed with CUDA error "
                              f"{table.error[0]} ({driver_error_name(table.error[0])})")
        raise TargetError(f"cuda: {name} could not allocate a temporary in device memory "
                          f"(status {status}); free GPU memory or use smaller sizes")


def driver_error_name(code: int) -> str:
    """The driver's name of a ``CUresult`` (``"unknown"`` without a driver).

    Example::

        >>> isinstance(driver_error_name(1), str)
        True
    """
    try:
        cuda = _C.CDLL("libcuda.so.1")
        out = _C.c_char_p()
        if cuda.cuGetErrorName(int(code), _C.byref(out)) == 0 and out.value:
            return out.value.decode()
    except OSError:
        pass
    return "unknown"


__all__ = ["CTYPES", "DeviceTable", "ENCODE_FN", "TMAP_CTYPE", "HostProgram", "Launch", "Recorder", "Table",
           "ctype_of", "driver_error_name"]
