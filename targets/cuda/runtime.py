"""The CUDA runtime module: NVRTC through cupy at first call, kept; launches; timing.

Nothing touches the GPU until the module is first called: building (and printing CUDA
C, PTX, the host program) works on any machine.  At the first call the source is
compiled with NVRTC through ``cupy.RawModule`` for the current device and kept for
the module's lifetime; NVRTC errors become :class:`CodegenError` quoting the line.
A call runs the host program: ``global`` temporaries are ``cupy.empty`` arrays, host
loops run in Python, each kernel is launched with its grid and block computed from
the symbolic sizes bound by the arguments (a grid of 0 blocks launches nothing).

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

import os

from cuvil_tir.errors import CodegenError
from cuvil_tir.expr import Var
from cuvil_tir.printer import to_text
from cuvil_tir.stmt import Allocate, For, IfThenElse, LetStmt, SeqStmt
from cuvil_tir.transform.gpu_threads import (BLOCK_TAGS, THREAD_TAGS, is_thread_loop,
                                             kernel_name)

from cuvil_tir.target import BenchmarkResult

from ..runtime import NativeCode
from ..runtime.argcheck import _py_expr
from .args import check_device, import_cupy, make_device_caller
from .nvcc import nvcc_ptx, source_error


def _evaluator(expr, env_names: dict):
    src = _py_expr(expr, env_names)
    code = compile(src, "<cuda launch>", "eval")
    return lambda env: eval(code, {"min": min, "max": max}, env)  # noqa: S307 - own source


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

    ``source_formats``: ``cuda`` (default), ``ptx`` (needs nvcc), ``host`` (the
    lowered host program).

    Example::

        >>> CudaRuntime.source_formats
        ('cuda', 'ptx', 'host')
    """

    source_formats = ("cuda", "ptx", "host")

    def __init__(self, program, target, signature):
        super().__init__(signature.name)
        self.program, self.target, self.signature = program, target, signature
        self._funcs = None
        self._cp = None
        host = program.host
        self.size_vars = tuple(host.attr("cuvil.size_vars", signature.size_vars) or ())
        self.params = host.params

    # ---- sources ----------------------------------------------------------------------
    def get_source(self, fmt=None) -> str:
        """``cuda`` (default), ``ptx`` or ``host``."""
        if fmt in (None, "cuda"):
            return self.program.text
        if fmt == "ptx":
            return nvcc_ptx(self.program.text, self.target.options.get("arch", "sm_80"))
        return to_text(self.program.host)

    # ---- compiling ----------------------------------------------------------------------
    def _compile(self):
        cp = import_cupy("running a CUDA module")
        if cp.cuda.runtime.getDeviceCount() == 0:
            from cuvil_tir.errors import TargetError
            raise TargetError("the cuda target found no NVIDIA GPU (cupy sees 0 devices); "
                              "check the results on this machine with "
                              "T.interpret(T.lower(sch, 'cuda'), ...)")
        try:
            mod = cp.RawModule(code=self.program.text, options=nvrtc_options(cp))
            funcs = {}
            for name, info in self.program.kernels.items():
                fn = mod.get_function(name)
                if info.dyn_shared:
                    fn.max_dynamic_shared_size_bytes = info.dyn_shared
                funcs[name] = fn
        except cp.cuda.compiler.CompileException as err:
            raise source_error(str(err), self.program.text, "NVRTC") from None
        self._cp, self._funcs = cp, funcs

    # ---- launching --------------------------------------------------------------------
    def raw(self, *args):
        """Run the host program on checked arguments (arrays, scalars, sizes)."""
        if self._funcs is None:
            self._compile()
        cp = self._cp
        nparams = len(self.params)
        check_device(cp, [a for a, p in zip(args, self.params) if not isinstance(p, Var)],
                     [p.name for p in self.params if not isinstance(p, Var)])
        env = {}
        for p, a in zip(self.params, args[:nparams]):
            env[id(p)] = a
        for v, a in zip(self.size_vars, args[nparams:]):
            env[id(v)] = int(a)
        self._run(self.program.host.body, env)

    def _int(self, e, env):
        names = {k: f"_v{k}" for k in env}
        return int(_evaluator(e, names)({f"_v{k}": v for k, v in env.items()
                                         if isinstance(v, (int, float))}))

    def _run(self, s, env):
        if is_thread_loop(s):
            self._launch(s, env)
        elif isinstance(s, SeqStmt):
            for c in s.seq:
                self._run(c, env)
        elif isinstance(s, Allocate):
            shape = tuple(self._int(d, env) for d in s.buffer.shape)
            from cuvil_tir import dtype as D
            env[id(s.buffer)] = self._cp.empty(shape, D.to_numpy(s.buffer.dtype))
            self._run(s.body, env)
            del env[id(s.buffer)]
        elif isinstance(s, For):
            lo = self._int(s.min, env)
            for v in range(lo, lo + self._int(s.extent, env)):
                env[id(s.loop_var)] = v
                self._run(s.body, env)
        elif isinstance(s, LetStmt):
            env[id(s.var)] = self._int(s.value, env)
            self._run(s.body, env)
        elif isinstance(s, IfThenElse):
            if self._int(s.condition, env):
                self._run(s.then_case, env)
            elif s.else_case is not None:
                self._run(s.else_case, env)
        else:
            raise CodegenError(f"cuda host: cannot run `{to_text(s)}` on the host")

    def _dims(self, info, env):
        grid = tuple(self._int(info.dims[t], env) for t in BLOCK_TAGS)
        block = tuple(self._int(info.dims[t], env) for t in THREAD_TAGS)
        return grid, block

    def _launch(self, kernel, env):
        import numpy as np
        from cuvil_tir import dtype as D
        info = self.program.kernels[kernel_name(kernel)]
        grid, block = self._dims(info, env)
        if min(grid) <= 0:
            return
        args = []
        for kind, obj in info.params:
            if kind == "buffer":
                args.append(env[id(obj)])
            else:
                args.append(np.dtype(D.to_numpy(obj.dtype)).type(env[id(obj)]))
        self._funcs[info.name](grid, block, tuple(args), shared_mem=info.dyn_shared)

    def launch_plan(self, *sizes) -> list:
        """``[(kernel, grid, block, dynamic shared bytes)]`` for the given symbolic sizes
        (in ``signature.size_vars`` order), kernels at host level only; for tests
        and for reading what a call will launch."""
        env = {id(v): int(s) for v, s in zip(self.size_vars, sizes)}
        out = []
        for name, info in self.program.kernels.items():
            grid, block = self._dims(info, env)
            out.append((name, grid, block, info.dyn_shared))
        return out

    # ---- calling convention hooks for targets.Module ---------------------------------
    def make_caller(self, signature, raw):
        """The argument checker for GPU arrays (:mod:`targets.cuda.args`)."""
        return make_device_caller(signature, raw, self.program.alignment)

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


__all__ = ["CudaRuntime"]
