"""CUDA streams as callers hand them over, and the stream an array was produced on.

``mod(a, b, c, stream=s)`` launches on ``s``: a ``cupy.cuda.Stream``, a
``torch.cuda.Stream``, any object with the CUDA stream protocol's
``__cuda_stream__()`` (``(version, handle)``), or a raw ``cudaStream_t`` as an int
(0 is the legacy default stream).  Without ``stream=`` a call launches on cupy's
current stream, as cupy itself does.

An array handed over through ``__cuda_array_interface__`` (version 3) may name the
stream that produced it (torch names its current stream): the launch stream then
waits for that stream with an event first, as the interface asks of a consumer
(``None``: nothing to wait for; 1 and 2 are the legacy and per-thread default
streams).  A ``__dlpack__`` object is asked for its data on the launch stream, so
the producer orders itself (DLPack's ``stream=`` argument).

Example::

    >>> from types import SimpleNamespace
    >>> stream_handle(SimpleNamespace(ptr=0x1234)), stream_handle(SimpleNamespace(cuda_stream=7))
    (4660, 7)
    >>> class Protocol:
    ...     def __cuda_stream__(self):
    ...         return (0, 99)
    >>> stream_handle(Protocol()), stream_handle(0)
    (99, 0)
"""

from __future__ import annotations

from cuvil_tir.errors import ArgumentError

#: the handles CUDA gives the two default streams in ``__cuda_array_interface__``
LEGACY_DEFAULT, PER_THREAD_DEFAULT = 1, 2


def stream_handle(stream) -> int:
    """The ``cudaStream_t`` of ``stream`` (module doc) as an int.

    Example::

        >>> try:
        ...     stream_handle("s0")
        ... except ArgumentError as err:
        ...     print(err.message[:58])
        stream=: expected a cupy or torch CUDA stream, an object w
    """
    if isinstance(stream, bool):
        pass
    elif isinstance(stream, int):
        if stream >= 0:
            return stream
    elif hasattr(stream, "__cuda_stream__"):
        version_handle = stream.__cuda_stream__()
        if isinstance(version_handle, tuple) and len(version_handle) == 2:
            return int(version_handle[1])
    else:
        for attr in ("ptr", "cuda_stream", "handle"):
            value = getattr(stream, attr, None)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
    raise ArgumentError("stream=: expected a cupy or torch CUDA stream, an object with "
                        "__cuda_stream__(), or a cudaStream_t handle as an int >= 0, got "
                        f"{type(stream).__name__} {stream!r}")


def producer_stream(cai: dict) -> int | None:
    """The stream a ``__cuda_array_interface__`` says its data was produced on, or
    None when the consumer need not wait (no ``stream`` key, or ``None``).

    Example::

        >>> producer_stream({"stream": 5}), producer_stream({"version": 2})
        (5, None)
        >>> try:
        ...     producer_stream({"stream": 0})
        ... except ArgumentError as err:
        ...     print(err.message[:60])
        __cuda_array_interface__: 'stream' 0 is not allowed (the int
    """
    s = cai.get("stream")
    if s is None:
        return None
    if isinstance(s, bool) or not isinstance(s, int) or s <= 0:
        raise ArgumentError(f"__cuda_array_interface__: 'stream' {s!r} is not allowed (the "
                            "interface's version 3 forbids 0; use None when no "
                            "synchronisation is needed, 1 or 2 for the default streams, "
                            "or a cudaStream_t)")
    return s


def wait_for(cp, producers, launch_stream: int) -> None:
    """Make ``launch_stream`` wait for each stream of ``producers`` (handles) that is
    not itself: an event recorded on the producer, waited on by the launch stream.

    Example::

        >>> wait_for(None, [3, 3], 3)      # the same stream: nothing to order
    """
    for s in dict.fromkeys(producers):
        if s == launch_stream:
            continue
        event = cp.cuda.Event(disable_timing=True)
        event.record(cp.cuda.ExternalStream(s))
        cp.cuda.ExternalStream(launch_stream).wait_event(event)


__all__ = ["LEGACY_DEFAULT", "PER_THREAD_DEFAULT", "producer_stream", "stream_handle",
           "wait_for"]
