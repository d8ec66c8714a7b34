"""Checking GPU arguments with the same rules as CPU ones (:mod:`targets.runtime.argcheck`).

A GPU array is anything with ``__cuda_array_interface__`` (cupy, numba, torch on the
GPU) or ``__dlpack__`` (a torch or JAX array, read through cupy's ``from_dlpack`` on
the launch stream).  Each is read once per call into a :class:`DeviceArg` (its
address, the stream that produced it, the object that owns the memory) and described
to the shared checker by a *shadow*: a zero-storage numpy view with the array's
dtype, shape and strides, so count, dtype, rank, constant and symbolic shapes,
contiguity and writeability are checked by one rule set for every target.  On top:
the pointer's alignment (16 bytes when the kernels move vectors of it) and, at launch,
the device it lives on.  cupy itself checks none of this, so without it a wrong shape
would read out of bounds on the GPU.

Example::

    >>> import numpy as np
    >>> class Fake:   # a GPU array as another library would describe it
    ...     __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "strides": None,
    ...                                 "data": (256, False), "version": 3}
    >>> arg = device_arg(Fake())
    >>> arg.view.shape, arg.ptr, arg.stream
    ((4,), 256, None)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from cuvil_tir.errors import ArgumentError, TargetError

from ..runtime.argcheck import check_overlap, make_caller
from .streams import producer_stream


@dataclass(frozen=True)
class DeviceArg:
    """One GPU array argument as a launch needs it: ``ptr`` (its device address),
    ``stream`` (the stream its producer named, or None), ``view`` (the zero-storage
    shadow the checker reads) and ``owner`` (what keeps the memory alive).

    Example::

        >>> DeviceArg(64, None, None, None).ptr
        64
    """

    ptr: int
    stream: int | None
    view: object
    owner: object


def _interface(a, stream=None):
    cai = getattr(a, "__cuda_array_interface__", None)
    if cai is not None:
        return cai, a
    if hasattr(a, "__dlpack__") and not isinstance(a, np.ndarray):
        cp = import_cupy("a __dlpack__ argument")
        if stream is None:
            owner = cp.from_dlpack(a)
        else:               # the producer orders itself before the launch stream
            with cp.cuda.ExternalStream(stream):
                owner = cp.from_dlpack(a)
        return owner.__cuda_array_interface__, owner
    return None, a


def _view(cai):
    dtype = np.dtype(cai["typestr"])
    shape = tuple(int(d) for d in cai["shape"])
    strides = cai.get("strides")
    if strides is None:
        strides, step = [], dtype.itemsize
        for d in reversed(shape):
            strides.append(step)
            step *= max(d, 1)
        strides = tuple(reversed(strides))
    readonly = bool(cai["data"][1])
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, tuple(strides),
                                           writeable=not readonly)


def device_arg(a, stream: int | None = None) -> DeviceArg | None:
    """``a`` read as a GPU array (module doc), or None when it is not one.  ``stream``:
    the launch stream a ``__dlpack__`` producer is asked to order itself before.

    Example::

        >>> device_arg(np.zeros(2)) is None
        True
    """
    if isinstance(a, np.ndarray):
        return None
    cai, owner = _interface(a, stream)
    if cai is None:
        return None
    return DeviceArg(int(cai["data"][0]), producer_stream(cai), _view(cai), owner)


def device_pointer(a) -> int:
    """The device address of a GPU array.

    Example::

        >>> class Fake:
        ...     __cuda_array_interface__ = {"shape": (), "typestr": "<f4", "data": (64, False)}
        >>> device_pointer(Fake())
        64
    """
    if isinstance(a, DeviceArg):
        return a.ptr
    return int(_interface(a)[0]["data"][0])


def device_view(a):
    """A zero-storage numpy view with ``a``'s dtype, shape, strides and read-only flag,
    or None when ``a`` is not a GPU array.

    Example::

        >>> device_view(np.zeros(2)) is None
        True
    """
    arg = device_arg(a)
    return None if arg is None else arg.view


def import_cupy(why: str):
    """``cupy``, or a ``TargetError`` saying how to install it.

    Example::

        >>> try:
        ...     import_cupy("the doctest")
        ... except TargetError as err:
        ...     "pip install" in str(err)
        ... else:
        ...     True
        True
    """
    try:
        import cupy
    except ImportError:
        raise TargetError(f"the cuda target needs cupy for {why}: install it with "
                          "pip install 'cuvil[cuda]' (cupy-cuda13x), on a machine with "
                          "an NVIDIA GPU and driver") from None
    return cupy


def _device_range(arg: DeviceArg) -> tuple[int, int] | None:
    v = arg.view
    if v.size == 0:
        return None
    lo = sum(min(0, (d - 1) * s) for d, s in zip(v.shape, v.strides))
    hi = sum(max(0, (d - 1) * s) for d, s in zip(v.shape, v.strides)) + v.dtype.itemsize
    return arg.ptr + lo, arg.ptr + hi


def _device_overlap(a: DeviceArg, b: DeviceArg) -> bool:
    ra, rb = _device_range(a), _device_range(b)
    return ra is not None and rb is not None and ra[0] < rb[1] and rb[0] < ra[1]


def _fail(p, text: str):
    raise ArgumentError(f"argument {p.index} '{p.name}': {text}")


def make_device_caller(sig, raw, alignment=None, stream_of=None):
    """``call(args)`` that checks GPU arguments then returns ``raw(...)`` with a
    :class:`DeviceArg` per array, the scalars converted and one int per symbolic size.

    ``alignment``: ``{buffer name: bytes}`` the kernels need beyond the element size
    (16 for vector copies, 32 for tensor-core tiles); ``stream_of()``: the launch
    stream, handed to ``__dlpack__`` producers (None: cupy's current one).

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.target import Signature
        >>> f = T.create_prim_func([T.placeholder((4,), name="X")])
        >>> call = make_device_caller(Signature.from_func(f), lambda x: "launched")
        >>> try:
        ...     call((np.zeros(4, "float32"),))
        ... except ArgumentError as err:
        ...     print(err.message[:60])
        argument 0 'X': expected a GPU array (cupy, or an object wit
    """
    # the shadows hold no memory, so whether two arguments overlap is a question for
    # their device addresses (numpy would compare the shadows' made-up host ranges)
    check = make_caller(replace(sig, allow_inplace=True), lambda *xs: xs)
    n = len(sig.params)

    def call(args):
        if len(args) != n:
            return check(args)
        stream = stream_of() if stream_of is not None else None
        shadows, found = list(args), {}
        for p in sig.buffers:
            a = args[p.index]
            arg = device_arg(a, stream)
            if arg is None:
                hint = "; copy it with cupy.asarray(x)" if isinstance(a, np.ndarray) else ""
                raise ArgumentError(
                    f"argument {p.index} '{p.name}': expected a GPU array (cupy, or an "
                    f"object with __cuda_array_interface__ or __dlpack__) of {p.dtype} "
                    f"with shape {p.shape_text()}, got {type(a).__module__}."
                    f"{type(a).__name__}{hint}")
            shadows[p.index], found[p.index] = arg.view, arg
        checked = check(tuple(shadows))
        for p in sig.buffers:
            ptr = found[p.index].ptr
            need = max((alignment or {}).get(p.name, 0), shadows[p.index].dtype.itemsize)
            if ptr % need:
                raise ArgumentError(f"argument {p.index} '{p.name}': expected a device "
                                    f"pointer aligned to {need} bytes, got 0x{ptr:x} (a "
                                    "slice of another array?); pass a fresh copy")
        check_overlap(sig, found, _device_overlap, _fail)
        out = [found[p.index] if p.kind == "buffer" else checked[p.index] for p in sig.params]
        return raw(*out, *checked[n:])
    call.check = check
    return call


def check_device(cp, arrays, names) -> None:
    """Every array lives on the current device (``ArgumentError`` otherwise).

    Example::

        >>> check_device(None, [], [])
    """
    if not arrays:
        return
    dev = cp.cuda.Device().id
    for a, name in zip(arrays, names):
        attrs = cp.cuda.runtime.pointerGetAttributes(device_pointer(a))
        if getattr(attrs, "type", 2) not in (2, 3) or attrs.device != dev:
            raise ArgumentError(f"argument '{name}': expected an array on GPU {dev} (the "
                                f"current cupy device), got one on device {attrs.device} "
                                f"(memory type {getattr(attrs, 'type', '?')}); move it with "
                                "cupy.asarray under the right cupy.cuda.Device")


__all__ = ["DeviceArg", "check_device", "device_arg", "device_pointer", "device_view",
           "import_cupy", "make_device_caller"]
