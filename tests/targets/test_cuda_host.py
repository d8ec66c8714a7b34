"""The CUDA host program compiled as C and run with a recording launcher: the launch
sequence, temporaries and checks come from the host IR, and agree with the interpreter
running that IR."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir.ir_module import device_launch_parts, is_device_launch
from cuvil_tir.transform.gpu_threads import launch_shape
from targets.toolkit import cuda_recipes as recipes
from targets.cuda.codegen import codegen_cuda
from targets.cuda.launcher import HostProgram, Recorder

from .cuda_helpers import compile_all, rand

sys.path.insert(0, str(Path(__file__).parents[1] / "cuvil_tir"))
from test_outline import two_kernels  # noqa: E402


def _tutorial_07(m=64, n=64, k=64):
    A = T.placeholder((m, k), name="A")
    B = T.placeholder((k, n), name="B")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((m, n), lambda i, j: T.sum(A[i, r] * B[r, j], axis=r), name="C")
    sch = S.Schedule(T.create_prim_func([A, B, C]))
    recipes.gemm(sch, bm=32, bn=32, bk=8, tm=4, tn=4, vector=4, double_buffer=True)
    return targets.build(sch, targets.Target("cuda", arch="sm_80"), name="sgemm")


def _reduction():
    n = T.size_var("n")
    A = T.placeholder((n, 256), name="A")
    r = T.reduce_axis((0, 256), name="r")
    B = T.compute((n,), lambda i: T.sum(A[i, r], axis=r), name="B")
    sch = S.Schedule(T.create_prim_func([A, B]))
    recipes.row_reduce(sch, "B", threads=128)
    return targets.build(sch, "cuda", name="rowsum")


SGEMM = _tutorial_07()
TWO = targets.build(two_kernels(), "cuda", name="two")
ROWSUM = _reduction()


class _LogLaunches(T.Mutator):
    """Each launch becomes stores of (kernel, grid, block) into a log (for the
    interpreter)."""

    def __init__(self, names, log, count):
        self.names, self.log, self.count = names, log, count

    def visit_Evaluate(self, s):
        if not is_device_launch(s.value):
            return s
        name, dims, _ = device_launch_parts(s.value)
        grid, block = launch_shape(dims)
        row = self.count[T.const(0)]
        vals = [T.const(self.names.index(name))] + [T.const(x) if isinstance(x, int) else x
                                                    for x in grid + block]
        return T.seq(*(T.BufferStore(self.log, v, (row, T.const(j)))
                       for j, v in enumerate(vals)),
                     T.BufferStore(self.count, row + 1, (T.const(0),)))


def interpreted_plan(mod, *sizes) -> list:
    """What the host IR launches, by the interpreter: ``launch_plan``'s format."""
    prog = mod.runtime.program
    names = list(prog.kernels)
    host = mod.lowered.entry
    log = T.decl_buffer((64, 7), "int32", "log")
    count = T.decl_buffer((1,), "int32", "count")
    f = T.PrimFunc([*host.params, log, count],
                   _LogLaunches(names, log, count).visit(host.body))
    env = dict(zip([v.name for v in host.attr("cuvil.size_vars")], sizes))
    arrays = []
    for p in host.params:
        shape = [int(eval(str(d), {}, dict(env))) for d in p.shape]  # noqa: S307 - own IR
        arrays.append(np.zeros(shape, p.dtype))
    out, cnt = np.zeros((64, 7), "int32"), np.zeros(1, "int32")
    T.interpret(f, *arrays, out, cnt)
    return [(names[row[0]], tuple(row[1:4].tolist()), tuple(row[4:7].tolist()),
             prog.kernels[names[row[0]]].dyn_shared) for row in out[:cnt[0]]]


@pytest.mark.parametrize("mod,sizes", [(SGEMM, ()), (TWO, (3,)), (TWO, (0,)),
                                       (ROWSUM, (5,)), (ROWSUM, (1,))])
def test_compiled_launch_plan_agrees_with_the_interpreter(mod, sizes):
    assert mod.runtime.launch_plan(*sizes) == interpreted_plan(mod, *sizes)


def test_tutorial_07_launches_one_kernel_with_the_arrays_passed():
    rec = Recorder(SGEMM.runtime.program)
    HostProgram(SGEMM.runtime.program).run(rec.table(), [0x1000, 0x2000, 0x3000], [])
    assert [(x.kernel, x.grid, x.block, x.shared, x.args) for x in rec.launches] == \
        [("sgemm_kernel0", (2, 2, 1), (8, 8, 1), 0, (0x1000, 0x2000, 0x3000))]
    host = SGEMM.get_source("host")
    assert "int32_t sgemm(const cvl_device *cvl_dev, float *restrict A, float *restrict B, " \
           "float *restrict C) {" in host
    assert "cvl_dev->launch(cvl_dev->kernels[0], 2u, 2u, 1u, 8u, 8u, 1u, 0u" in host


def test_temporaries_come_from_the_table_and_are_released():
    rec = TWO.runtime.record(3)
    nbytes = 3 * 64 * 4
    assert [a[1] for a in rec.allocs] == [nbytes, nbytes]
    tmp0, tmp1 = (a[0] for a in rec.allocs)
    assert rec.released == [tmp0, tmp1]
    a, b = 1 << 32, 2 << 32            # the fake addresses of A and B
    assert [(x.kernel, x.args) for x in rec.launches] == [
        ("two_kernel0", (a, tmp0, 3, 0)), ("two_kernel1", (b, tmp0, 3)),
        ("two_kernel0", (a, tmp1, 3, 1)), ("two_kernel1", (b, tmp1, 3))]
    assert TWO.runtime.launch_plan(0) == []            # an empty grid launches nothing
    # the launch statements as data (host loops not unrolled)
    assert TWO.runtime.program.launches == (
        {"kernel": "two_kernel0", "grid": ("1", "n", "1"), "block": ("64", "1", "1"),
         "shared": 0, "args": ("A", "Tmp", "n", "r")},
        {"kernel": "two_kernel1", "grid": ("1", "n", "1"), "block": ("64", "1", "1"),
         "shared": 0, "args": ("B", "Tmp", "n")})
    x = rand((3, 64))
    y = np.zeros_like(x)
    T.interpret(TWO.lowered, x, y, check_races=True)
    np.testing.assert_allclose(y, (x + 1) * 2, rtol=1e-6)


def test_a_failed_launch_releases_and_reports_the_driver_error():
    prog = TWO.runtime.program
    rec = Recorder(prog, fail_at=1, error_code=700)
    with pytest.raises(targets.TargetError, match="a kernel launch of two failed with "
                       "CUDA error 700"):
        HostProgram(prog).run(rec.table(), [1 << 32, 2 << 32], [3])
    assert len(rec.launches) == 1 and rec.released == [rec.allocs[0][0]]


def test_a_failed_allocation_and_a_failed_check_stop_the_host():
    prog = TWO.runtime.program
    rec = Recorder(prog, fail_alloc=True)
    with pytest.raises(targets.TargetError, match="could not allocate a temporary in "
                       "device memory"):
        HostProgram(prog).run(rec.table(), [1 << 32, 2 << 32], [3])
    assert rec.launches == []
    rec = Recorder(prog)
    with pytest.raises(T.RuntimeCheckError, match="the launch of 70000 blocks along "
                       "blockIdx.y exceeds the target's limit of 65535"):
        HostProgram(prog).run(rec.table(), [1 << 32, 2 << 32], [70000])
    assert rec.launches == [] and rec.released == [rec.allocs[0][0]]


def test_the_host_cannot_touch_device_memory():
    A = T.decl_buffer((4,), "float32", "A")
    host = T.PrimFunc([A], T.IfThenElse(A[0] > 0.0, T.Evaluate(T.const(0))))
    with pytest.raises(targets.CodegenError, match="the host program reads A, which "
                       "lives in device memory"):
        codegen_cuda(host)
    host = T.PrimFunc([A], T.BufferStore(A, T.float32(0), (T.const(0),)))
    with pytest.raises(targets.CodegenError, match="the host program writes A"):
        codegen_cuda(host)
    host = T.PrimFunc([A], T.Evaluate(T.device_launch("nope", {}, A)))
    with pytest.raises(targets.CodegenError, match="launches 'nope', which is not a kernel"):
        codegen_cuda(host)


class _FakeCupy:
    """What the runtime asks cupy for when it calls the host program."""

    class cuda:
        class Device:
            id = 0

        class runtime:
            @staticmethod
            def pointerGetAttributes(ptr):
                return SimpleNamespace(type=2, device=0)

        @staticmethod
        def get_current_stream():
            return SimpleNamespace(ptr=0)


class _Dev:
    def __init__(self, shape, ptr):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f4",
                                         "strides": None, "data": (ptr, False),
                                         "version": 3}


def test_a_call_runs_the_compiled_host_with_the_device_pointers():
    mod = targets.build(two_kernels(), "cuda", name="two_call")
    rt = mod.runtime
    rec = Recorder(rt.program)
    rt._cp, rt._funcs, rt._table = _FakeCupy, [], rec.table()   # no GPU: record instead
    mod(_Dev((2, 64), 1 << 20), _Dev((2, 64), 2 << 20))
    assert [(x.kernel, x.grid, x.args[0]) for x in rec.launches] == [
        ("two_call_kernel0", (1, 2, 1), 1 << 20), ("two_call_kernel1", (1, 2, 1), 2 << 20)] * 2


def test_kernels_of_these_programs_compile_for_sm80_and_sm90():
    ptx = compile_all([SGEMM, TWO, ROWSUM])
    for text in ptx.values():
        for name in ("sgemm_kernel0", "two_kernel0", "two_kernel1", "rowsum_kernel0"):
            assert f".entry {name}(" in text


def test_the_gpu_path_fills_the_table_from_the_driver_and_cupy(monkeypatch):
    # everything of a GPU run but the GPU: cupy's compile, its stream and memory pool,
    # and the driver's cuLaunchKernel, faked at the boundary
    from targets.cuda import runtime as R
    from targets.cuda.launcher import LAUNCH_FN
    launches, allocated = [], []

    @LAUNCH_FN
    def cu_launch_kernel(kernel, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        launches.append((kernel, (gx, gy, gz), (bx, by, bz), shared, stream))
        return 0

    class Cupy(_FakeCupy):
        class RawModule:
            def __init__(self, code, options):
                self.code = code

            def get_function(self, name):
                return SimpleNamespace(kernel=SimpleNamespace(ptr=0x100 + int(name[-1])))

        class cuda(_FakeCupy.cuda):
            class runtime(_FakeCupy.cuda.runtime):
                getDeviceCount = staticmethod(lambda: 1)

            class compiler:
                CompileException = RuntimeError

            class memory:
                OutOfMemoryError = MemoryError

            get_cuda_path = staticmethod(lambda: None)
            get_current_stream = staticmethod(lambda: SimpleNamespace(ptr=77))

            @staticmethod
            def alloc(nbytes):
                allocated.append(nbytes)
                return SimpleNamespace(ptr=0x9000 * len(allocated))

    monkeypatch.setattr(R, "import_cupy", lambda why: Cupy)
    monkeypatch.setattr(R, "driver_library",
                        lambda: SimpleNamespace(cuLaunchKernel=cu_launch_kernel))
    mod = targets.build(two_kernels(), "cuda", name="two_gpu")
    mod(_Dev((2, 64), 1 << 20), _Dev((2, 64), 2 << 20))
    k0, k1 = 0x100, 0x101          # the CUfunction handles of kernel0 and kernel1
    assert launches == [(k0, (1, 2, 1), (64, 1, 1), 0, 77),
                        (k1, (1, 2, 1), (64, 1, 1), 0, 77)] * 2
    assert allocated == [2 * 64 * 4] * 2
