"""Launching CUDA modules, with the GPU faked at its boundary (cupy and the driver's
cuLaunchKernel): the stream a call launches on (``stream=``, the producer stream of a
``__cuda_array_interface__``), DLPack objects, the cubin kept for ``sm_90a`` builds."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from targets.cuda import runtime as R
from targets.cuda.args import DeviceArg, device_arg
from targets.cuda.launcher import LAUNCH_FN
from targets.cuda.nvcc import nvcc_available
from targets.cuda.streams import producer_stream, stream_handle


def _scale(name):
    A = T.placeholder((64,), name="A")
    B = T.compute((64,), lambda i: A[i] * 2.0, name="B")
    sch = S.Schedule(T.create_prim_func([A, B]))
    bx, tx = sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 32])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch


class _Dev:
    """A GPU array as another library describes it (cupy, numba, torch)."""

    def __init__(self, ptr, stream=None, shape=(64,)):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f4", "strides": None,
                                         "data": (ptr, False), "version": 3,
                                         "stream": stream}


class _Gpu:
    """cupy and the driver, faked: records launches (with their stream), events and
    the streams DLPack producers were asked to order themselves before."""

    def __init__(self, monkeypatch, current=77, cc="80"):
        self.launches, self.waits, self.dlpack_streams, self.modules = [], [], [], []
        gpu = self

        @LAUNCH_FN
        def cu_launch_kernel(kernel, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
            gpu.launches.append((kernel, (gx, gy, gz), stream or 0))   # NULL: None
            return 0

        class ExternalStream:
            active = []

            def __init__(self, ptr):
                self.ptr = ptr

            def wait_event(self, event):
                gpu.waits.append((event.stream, self.ptr))

            def __enter__(self):
                ExternalStream.active.append(self.ptr)

            def __exit__(self, *exc):
                ExternalStream.active.pop()

        class Event:
            def __init__(self, disable_timing=False):
                self.stream = None

            def record(self, stream):
                self.stream = stream.ptr

        class RawModule:
            def __init__(self, code=None, options=(), path=None):
                gpu.modules.append("nvrtc" if code is not None else
                                   open(path, "rb").read())

            def get_function(self, name):
                return SimpleNamespace(kernel=SimpleNamespace(ptr=0x100))

        class cupy:
            @staticmethod
            def from_dlpack(obj):
                gpu.dlpack_streams.append(list(ExternalStream.active))
                return _Dev(obj.ptr)

            class cuda:
                class Device:
                    id = 0
                    compute_capability = cc

                class runtime:
                    getDeviceCount = staticmethod(lambda: 1)
                    pointerGetAttributes = staticmethod(
                        lambda ptr: SimpleNamespace(type=2, device=0))

                class compiler:
                    CompileException = RuntimeError

                class memory:
                    OutOfMemoryError = MemoryError

                get_cuda_path = staticmethod(lambda: None)
                get_current_stream = staticmethod(lambda: SimpleNamespace(ptr=current))

        cupy.RawModule = RawModule
        cupy.cuda.ExternalStream = ExternalStream
        cupy.cuda.Event = Event
        self.cupy = cupy
        monkeypatch.setattr(R, "import_cupy", lambda why: cupy)
        monkeypatch.setattr("targets.cuda.args.import_cupy", lambda why: cupy)
        monkeypatch.setattr(R, "driver_library",
                            lambda: SimpleNamespace(cuLaunchKernel=cu_launch_kernel))


class _TorchStream:
    cuda_stream = 0x5000


class _ProtocolStream:
    def __cuda_stream__(self):
        return (0, 0x6000)


@pytest.mark.parametrize("stream, handle", [(None, 77), (SimpleNamespace(ptr=0x4000), 0x4000),
                                            (_TorchStream(), 0x5000),
                                            (_ProtocolStream(), 0x6000), (0, 0)])
def test_a_call_launches_on_its_stream(monkeypatch, stream, handle):
    gpu = _Gpu(monkeypatch)
    mod = targets.build(_scale("on_stream"), "cuda", name="on_stream")
    if stream is None:
        mod(_Dev(1 << 20), _Dev(2 << 20))
    else:
        mod(_Dev(1 << 20), _Dev(2 << 20), stream=stream)
    assert gpu.launches == [(0x100, (2, 1, 1), handle)]
    mod(_Dev(1 << 20), _Dev(2 << 20))          # the next call is back on cupy's stream
    assert gpu.launches[-1][2] == 77


def test_an_array_produced_on_another_stream_is_waited_for(monkeypatch):
    gpu = _Gpu(monkeypatch)
    mod = targets.build(_scale("waits"), "cuda", name="waits")
    mod(_Dev(1 << 20, stream=0x9000), _Dev(2 << 20, stream=77))
    assert gpu.waits == [(0x9000, 77)]         # the same stream needs no event
    mod(_Dev(1 << 20, stream=0x9000), _Dev(2 << 20), stream=0x9000)
    assert gpu.waits == [(0x9000, 77)]


def test_a_dlpack_object_is_read_on_the_launch_stream(monkeypatch):
    gpu = _Gpu(monkeypatch)

    class Tensor:                               # what torch hands over without CAI
        def __init__(self, ptr):
            self.ptr = ptr

        def __dlpack__(self, stream=None):
            raise AssertionError("read through cupy.from_dlpack")

    mod = targets.build(_scale("dlpack"), "cuda", name="dlpack")
    mod(Tensor(3 << 20), _Dev(2 << 20), stream=0x4400)
    assert gpu.dlpack_streams == [[0x4400]]
    mod(Tensor(3 << 20), _Dev(2 << 20))
    assert gpu.dlpack_streams[-1] == []         # cupy's current stream
    assert [x[2] for x in gpu.launches] == [0x4400, 77]


def test_stream_and_option_errors(monkeypatch):
    _Gpu(monkeypatch)
    mod = targets.build(_scale("bad_stream"), "cuda", name="bad_stream")
    with pytest.raises(targets.ArgumentError, match="stream=: expected a cupy or torch"):
        mod(_Dev(1 << 20), _Dev(2 << 20), stream="default")
    with pytest.raises(targets.ArgumentError, match="stream=: expected .* int >= 0, got int -1"):
        mod(_Dev(1 << 20), _Dev(2 << 20), stream=-1)
    with pytest.raises(targets.ArgumentError, match="takes the keyword stream= only, got "
                                                    "blocking="):
        mod(_Dev(1 << 20), _Dev(2 << 20), blocking=True)
    with pytest.raises(targets.ArgumentError, match="'stream' 0 is not allowed"):
        mod(_Dev(1 << 20, stream=0), _Dev(2 << 20))
    with pytest.raises(targets.ArgumentError, match="expected shape \\(64,\\), got \\(32,\\)"):
        mod(_Dev(1 << 20, shape=(32,)), _Dev(2 << 20), stream=5)
    cpu = targets.build(T.create_prim_func([T.placeholder((2,), name="X")]), name="cpu_opts")
    with pytest.raises(targets.ArgumentError, match="takes no keyword options, got stream="):
        cpu(np.zeros(2, "float32"), stream=0)


def test_stream_and_interface_helpers():
    assert stream_handle(SimpleNamespace(ptr=3)) == 3
    assert producer_stream({"stream": None}) is None and producer_stream({}) is None
    arg = device_arg(_Dev(64, stream=2))
    assert isinstance(arg, DeviceArg) and (arg.ptr, arg.stream) == (64, 2)
    assert arg.view.shape == (64,) and arg.view.dtype == np.float32


@pytest.mark.skipif(not nvcc_available(), reason="needs nvcc (CUDA 13), absent on this machine")
def test_sm90a_builds_keep_nvccs_cubin_and_load_it(monkeypatch):
    gpu = _Gpu(monkeypatch, cc="90")
    mod = targets.build(_scale("hopper"), targets.Target("cuda", arch="sm_90a"), name="hopper")
    cubin = mod.program.binaries["cubin"]
    assert cubin[:4] == b"\x7fELF"                 # machine code, not PTX
    blobs = mod.program.to_blobs()                   # what the compile cache stores
    assert blobs["binary.cubin"] == cubin
    mod(_Dev(1 << 20), _Dev(2 << 20))
    assert gpu.modules == [cubin] and len(gpu.launches) == 1
    plain = targets.build(_scale("ampere"), targets.Target("cuda", arch="sm_80"), name="ampere")
    assert "cubin" not in plain.program.binaries
    plain(_Dev(1 << 20), _Dev(2 << 20))
    assert gpu.modules[-1] == "nvrtc"


@pytest.mark.skipif(not nvcc_available(), reason="needs nvcc (CUDA 13), absent on this machine")
def test_an_sm90a_module_refuses_another_gpu(monkeypatch):
    _Gpu(monkeypatch, cc="80")
    mod = targets.build(_scale("hopper_on_a100"), targets.Target("cuda", arch="sm_90a"),
                        name="hopper_on_a100")
    with pytest.raises(targets.TargetError, match="built for sm_90a .* the GPU is sm_80"):
        mod(_Dev(1 << 20), _Dev(2 << 20))
