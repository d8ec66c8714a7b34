"""Thread axes: the hardware indices a ``thread_binding`` loop may be bound to.

A :class:`ThreadAxis` is data: its tag (what the IR and ``sch.bind`` call it), its
*level* -- ``"grid"`` (one index per block of threads, or per core of an
accelerator), ``"thread"`` (one per thread of a block, all running together and
sharing the block's memory) or ``"virtual"`` (a loop the lowering makes serial) --,
its dimension (0, 1, 2: x, y, z of a launch) and the largest extent a target allows
(``None``: the core sets no limit).  The core knows the axes only through this
table: passes, the interpreter's GPU semantics and the outlining ask an axis for its
level and dimension, never for its name.

The built-in vocabulary is TVM's (``blockIdx.x`` … ``threadIdx.z``, ``vthread.x`` …),
the names every GPU target of TVM uses in its IR; a target kind declares which axes
it has and their limits, and spells them in its own language (CUDA's
``threadIdx.x``, OpenCL's ``get_local_id(0)``).  A target with other hardware
indices (an NPU's cores) registers them with :func:`register_thread_axis`.

Example::

    >>> thread_axis("threadIdx.y").level, thread_axis("threadIdx.y").dim
    ('thread', 1)
    >>> tags("grid")[:3]      # then any axes targets registered (an NPU's cores)
    ('blockIdx.x', 'blockIdx.y', 'blockIdx.z')
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import LoweringError

#: the levels of a thread axis, outermost first
LEVELS = ("grid", "thread", "virtual")


@dataclass(frozen=True)
class ThreadAxis:
    """One hardware index (module docstring).

    Example::

        >>> ThreadAxis("core.x", "grid", 0, limit=4).limit
        4
    """

    tag: str
    level: str
    dim: int = 0
    limit: int | None = None

    def __post_init__(self):
        if not isinstance(self.tag, str) or not self.tag:
            raise LoweringError(f"ThreadAxis: the tag is a non-empty string, found "
                                f"{self.tag!r}")
        if self.level not in LEVELS:
            raise LoweringError(f"ThreadAxis {self.tag!r}: level must be one of "
                                f"{', '.join(LEVELS)}, found {self.level!r}")
        if self.dim not in (0, 1, 2):
            raise LoweringError(f"ThreadAxis {self.tag!r}: dim must be 0, 1 or 2 (x, y, "
                                f"z), found {self.dim!r}")
        if self.limit is not None and (not isinstance(self.limit, int) or self.limit < 1):
            raise LoweringError(f"ThreadAxis {self.tag!r}: limit must be a positive int "
                                f"or None, found {self.limit!r}")

    @property
    def launched(self) -> bool:
        """Whether the axis is a dimension of a launch (not a virtual one)."""
        return self.level != "virtual"


#: TVM's GPU vocabulary (no limits: a target kind declares its own)
GPU_AXES = tuple(ThreadAxis(f"{name}.{c}", level, d)
                 for name, level in (("blockIdx", "grid"), ("threadIdx", "thread"),
                                     ("vthread", "virtual"))
                 for d, c in enumerate("xyz"))

_AXES: dict[str, ThreadAxis] = {a.tag: a for a in GPU_AXES}


def register_thread_axis(axis: ThreadAxis) -> ThreadAxis:
    """Add ``axis`` to the vocabulary (a target whose hardware has other indices);
    registering the same axis again is harmless, another axis under a known tag is a
    ``LoweringError``.

    Example::

        >>> register_thread_axis(ThreadAxis("blockIdx.x", "grid", 0)).tag in tags("grid")
        True
    """
    if not isinstance(axis, ThreadAxis):
        raise LoweringError(f"register_thread_axis: expected a ThreadAxis, found "
                            f"{type(axis).__name__}")
    old = _AXES.get(axis.tag)
    if old is not None and (old.level, old.dim) != (axis.level, axis.dim):
        raise LoweringError(f"thread axis {axis.tag!r} is already registered as "
                            f"{old.level} dim {old.dim}; found {axis.level} dim {axis.dim}")
    _AXES.setdefault(axis.tag, ThreadAxis(axis.tag, axis.level, axis.dim))
    return axis


def is_thread_axis(tag) -> bool:
    """Whether ``tag`` names a registered axis.

    Example::

        >>> is_thread_axis("threadIdx.x"), is_thread_axis("warp.x")
        (True, False)
    """
    return isinstance(tag, str) and tag in _AXES


def thread_axis(tag: str) -> ThreadAxis:
    """The registered axis ``tag``; an unknown tag is a ``LoweringError`` listing
    the known ones.

    Example::

        >>> thread_axis("vthread.x").launched
        False
    """
    try:
        return _AXES[tag]
    except (KeyError, TypeError):
        raise LoweringError(f"unknown thread axis {tag!r}; known axes: "
                            f"{', '.join(_AXES)}") from None


def tags(level: str | None = None) -> tuple:
    """The registered tags (of one level), by level then dimension.

    Example::

        >>> tags("thread")
        ('threadIdx.x', 'threadIdx.y', 'threadIdx.z')
    """
    return tuple(a.tag for a in _AXES.values() if level is None or a.level == level)


def launch_index(level: str, dim: int) -> str | None:
    """The tag of the launched axis at ``level`` and ``dim`` (the first registered),
    or None.

    Example::

        >>> launch_index("grid", 1)
        'blockIdx.y'
    """
    for a in _AXES.values():
        if a.level == level and a.dim == dim:
            return a.tag
    return None


__all__ = ["GPU_AXES", "LEVELS", "ThreadAxis", "is_thread_axis", "launch_index",
           "register_thread_axis", "tags", "thread_axis"]
