"""The CUDA runtime module: NVRTC through cupy at first call, kept; the compiled host
program; launches; timing.

Nothing touches the GPU until the module is first called: building (and printing CUDA
C, PTX, the host C) works on any machine.  At the first call the kernels are compiled
with NVRTC through ``cupy.RawModule`` for the current device and kept for the
module's lifetime (NVRTC errors become :class:`CodegenError` quoting the line), and
the host program is compiled with the system C compiler
(:class:`~targets.cuda.launcher.HostProgram`).  A call runs the host program with the
driver's device table: it computes each grid from the symbolic sizes, allocates the
``global`` temporaries, checks what the IR checks and launches each kernel with
``cuLaunchKernel`` on cupy's current stream (a grid of 0 blocks launches nothing:
the IR guards it).

``launch_plan(*sizes)`` runs the same compiled host program with a recording table
(:class:`~targets.cuda.launcher.Recorder`): the launches a call with those sizes
makes, in order, on any machine.

Example::

    >>> import cuvil_tir as T, targets
    >>> A = T.placeholder((64,), name="A")
    >>> B = T.compute((64,), lambda i: A[i] + 1.0, name="B")
    >>> sch = __import__("schedules").Schedule(T.create_prim_func([A, B]))
    >>> bx, tx = sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 64])
    >>> sch.bind(bx, "blockIdx.x"); sch.bind(tx, "threadIdx.x")
    >>> mod = targets.build(sch, "cuda")
    >>> mod.runtime.launch_plan(64)
    [('main_kernel0', (1, 1, 1), (64, 1, 1), 0)]
"""

from __future__ import annotations

import ctypes
import os
import tempfile

from cuvil_tir.buffer import Buffer
from cuvil_tir.errors import ArgumentError, TargetError
from cuvil_tir.printer import to_text

from cuvil_tir.target import BenchmarkResult

from ..runtime import NativeCode

from .args import check_device, device_pointer, import_cupy, make_device_caller
from .launcher import (ALLOC_FN, ENCODE_FN, LAUNCH_FN, RELEASE_FN, DeviceTable, HostProgram, Recorder,
                       Table)
from .nvcc import needs_nvcc, nvcc_compile, nvcc_ptx, source_error
from .streams import stream_handle, wait_for


def nvrtc_options(cp) -> tuple:
    """NVRTC options: C++17, and the toolkit's headers (``mma.h`` for tensor cores)
    when cupy knows where the toolkit is.

    Example::

        >>> class FakeCupy:
        ...     class cuda:
        ...         get_cuda_path = staticmethod(lambda: "/usr/local/cuda")
        >>> nvrtc_options(FakeCupy)
        ('-std=c++17', '-I/usr/local/cuda/include')
    """
    opts = ["-std=c++17"]
    try:
        path = cp.cuda.get_cuda_path()
    except Exception:  # noqa: BLE001 - no toolkit found: NVRTC's built-in headers only
        path = None
    if path:
        opts.append("-I" + os.path.join(path, "include"))
    return tuple(opts)


class CudaRuntime(NativeCode):
    """Compiled-at-first-use CUDA module (see the module docstring).

    ``source_formats``: ``cuda`` (default), ``ptx`` (needs nvcc), ``host`` (the host
    program's C), ``host_ir`` (the lowered module: host function and kernels).

    Example::

        >>> CudaRuntime.source_formats
        ('cuda', 'ptx', 'host', 'host_ir')
    """

    source_formats = ("cuda", "ptx", "host", "host_ir")

    def __init__(self, program, target, signature, cubin: bytes | None = None):
        super().__init__(signature.name)
        self.program, self.target, self.signature = program, target, signature
        self.cubin = cubin
        self._funcs = None
        self._cp = None
        self._host = None
        self._table = None
        self._stream = None           # a call's stream= (None: cupy's current stream)
        self.params = program.host.params

    # ---- sources ----------------------------------------------------------------------
    def get_source(self, fmt=None) -> str:
        """``cuda`` (default), ``ptx``, ``host`` or ``host_ir``."""
        if fmt in (None, "cuda"):
            return self.program.text
        if fmt == "ptx":
            return nvcc_ptx(self.program.text, self.target.options.get("arch", "sm_80"))
        if fmt == "host":
            return self.program.host_c
        return to_text(self.program.host)

    # ---- compiling ----------------------------------------------------------------------
    def host_program(self) -> HostProgram:
        """The host program, compiled at first use."""
        if self._host is None:
            self._host = HostProgram(self.program)
        return self._host

    def _compile(self):
        cp = import_cupy("running a CUDA module")
        if cp.cuda.runtime.getDeviceCount() == 0:
            raise TargetError("the cuda target found no NVIDIA GPU (cupy sees 0 devices); "
                              "check the results on this machine with "
                              "T.interpret(T.lower(sch, 'cuda'), ...)")
        try:
            mod = self._module(cp)
            funcs = []
            for name, info in self.program.kernels.items():
                fn = mod.get_function(name)
                if info.dyn_shared:
                    fn.max_dynamic_shared_size_bytes = info.dyn_shared
                funcs.append(fn)
            # a RawKernel's CUfunction on the current device (compiles the module)
            handles = [fn.kernel.ptr for fn in funcs]
        except cp.cuda.compiler.CompileException as err:
            raise source_error(str(err), self.program.text, "NVRTC") from None
        self._table = driver_table(cp, handles)
        self.host_program()
        self._cp, self._funcs = cp, funcs

    def _module(self, cp):
        """The kernels as a ``cupy.RawModule``: NVRTC at first use, or the cubin nvcc
        made for an ``sm_90a``-style architecture (kept by the compile cache)."""
        arch = self.target.options.get("arch", "sm_80")
        if self.cubin is None and not needs_nvcc(arch):
            return cp.RawModule(code=self.program.text, options=nvrtc_options(cp))
        have = "sm_" + cp.cuda.Device().compute_capability
        if have != arch.rstrip("a"):
            raise TargetError(f"cuda: this module was built for {arch} (its kernels use "
                              f"features of that architecture only), but the GPU is {have}; "
                              f"build it with targets.Target('cuda', arch='{have}')")
        cubin = self.cubin if self.cubin is not None else \
            nvcc_compile(self.program.text, arch, "cubin")
        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as fh:
            fh.write(cubin)
        try:
            mod = cp.RawModule(path=fh.name)
            for name in self.program.kernels:    # loads the module while the file exists
                mod.get_function(name)
        finally:
            os.unlink(fh.name)
        return mod

    # ---- launching --------------------------------------------------------------------
    def _values(self, args) -> tuple:
        n = len(self.params)
        values = [device_pointer(a) if isinstance(p, Buffer) else a
                  for p, a in zip(self.params, args[:n])]
        return values, args[n:]

    def raw(self, *args):
        """Run the host program on checked arguments (:class:`~targets.cuda.args.DeviceArg`
        per array, scalars, sizes) on the call's stream."""
        if self._funcs is None:
            self._compile()
        arrays = [a for a, p in zip(args, self.params) if isinstance(p, Buffer)]
        check_device(self._cp, arrays, [p.name for p in self.params if isinstance(p, Buffer)])
        stream = self.launch_stream()
        wait_for(self._cp, [a.stream for a in arrays if getattr(a, "stream", None)], stream)
        values, sizes = self._values(args)
        self._table.struct.stream = stream
        self.host_program().run(self._table, values, sizes)

    def launch_stream(self) -> int:
        """The stream this call launches on: its ``stream=``, else cupy's current one."""
        if self._stream is not None:
            return self._stream
        return self._cp.cuda.get_current_stream().ptr

    def call_with(self, call, args, options) -> None:
        """``mod(*args, stream=s)``: the call launched on ``s`` (:mod:`targets.cuda.streams`)."""
        unknown = sorted(set(options) - {"stream"})
        if unknown:
            raise ArgumentError(f"a cuda module call takes the keyword stream= only, got "
                                f"{', '.join(unknown)}=")
        saved = self._stream
        self._stream = stream_handle(options["stream"])
        try:
            call(args)
        finally:
            self._stream = saved

    def launch_plan(self, *sizes, **scalars) -> list:
        """``[(kernel, grid, block, dynamic shared bytes)]``: the launches a call with
        the symbolic ``sizes`` (in ``signature.size_vars`` order) and scalar
        parameters ``scalars`` (by name; 0 when not given) makes, in order -- the
        compiled host program run with a recording table, on any machine."""
        return [x.plan() for x in self.record(*sizes, **scalars).launches]

    def record(self, *sizes, **scalars) -> Recorder:
        """The :class:`~targets.cuda.launcher.Recorder` of one run of the host program
        (``launch_plan``'s arguments; buffers at fake device addresses)."""
        rec = Recorder(self.program)
        values = [(k + 1) << 32 if isinstance(p, Buffer) else scalars.get(p.name, 0)
                  for k, p in enumerate(self.params)]
        self.host_program().run(rec.table(), values, sizes)
        return rec

    # ---- calling convention hooks for targets.Module ---------------------------------
    def make_caller(self, signature, raw):
        """The argument checker for GPU arrays (:mod:`targets.cuda.args`)."""
        return make_device_caller(signature, raw, self.program.alignment,
                                  lambda: self._stream)

    def benchmark(self, call, repeat=5, number=None, warmup=1) -> BenchmarkResult:
        """Time ``call()`` (checked launches) with CUDA events after ``warmup`` calls."""
        if self._funcs is None:
            self._compile()
        cp = self._cp
        for _ in range(warmup):
            call()
        number = number or 10
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        out = []
        for _ in range(repeat):
            start.record()
            for _ in range(number):
                call()
            stop.record()
            stop.synchronize()
            out.append(cp.cuda.get_elapsed_time(start, stop) / 1e3 / number)
        return BenchmarkResult(tuple(out), number=number)


#: ``CUDA_ERROR_NOT_SUPPORTED``
NOT_SUPPORTED = 801


def driver_library():
    """The CUDA driver library (``libcuda.so.1``); a ``TargetError`` without one.

    Example::

        >>> driver_library.__name__
        'driver_library'
    """
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError as err:
        raise TargetError(f"cuda: the CUDA driver library libcuda.so.1 could not be "
                          f"loaded ({err}); install the NVIDIA driver") from None


def driver_table(cp, handles) -> Table:
    """The device table of a real GPU: the driver's ``cuLaunchKernel``, the kernels'
    ``CUfunction`` handles (ints, in the program's order) and temporaries from cupy's
    memory pool.

    Example::

        >>> driver_table.__name__
        'driver_table'
    """
    libcuda = driver_library()
    launch = LAUNCH_FN(ctypes.cast(libcuda.cuLaunchKernel, ctypes.c_void_p).value)
    handles = (ctypes.c_void_p * max(1, len(handles)))(*handles)
    live: dict = {}

    def alloc(ctx, nbytes, out):
        try:
            mem = cp.cuda.alloc(int(nbytes))
        except cp.cuda.memory.OutOfMemoryError:
            return 1
        live[mem.ptr] = mem
        out[0] = mem.ptr
        return 0

    def release(ctx, ptr):
        live.pop(ptr, None)
        return 0
    fa, fr = ALLOC_FN(alloc), RELEASE_FN(release)
    struct = DeviceTable(launch, ctypes.cast(handles, ctypes.POINTER(ctypes.c_void_p)),
                         None, fa, fr, None)
    # tensor maps (targets.cuda.tma) are encoded by the driver itself; a driver
    # before CUDA 12 has no encoder: CUDA_ERROR_NOT_SUPPORTED
    fn = getattr(libcuda, "cuTensorMapEncodeTiled", None)
    encode = ENCODE_FN(ctypes.cast(fn, ctypes.c_void_p).value) if fn is not None else \
        ENCODE_FN(lambda *args: NOT_SUPPORTED)
    struct.encode_tiled = encode
    return Table(struct, [libcuda, handles, launch, fa, fr, live, encode])


__all__ = ["CudaRuntime", "driver_library", "driver_table"]
