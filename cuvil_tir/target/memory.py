"""Memories are part of a target: each target kind lists the memories it can place a
buffer in (its *memory table*), and a build refuses a buffer in any other scope.

A :class:`Memory` names the ``scope`` buffers use (``"global"``, ``"local"``,
``"shared"``, ``"npu.wgt"``), its ``capacity_bytes`` (``None``: bounded only by the
machine), how many ``banks`` it has and how wide one access is (``width_bits``), and
the ``align_bytes`` a buffer placed in it starts on, and who shares one allocation
(``instance``, what the memory planner places and sizes buffers by: see
:mod:`cuvil_tir.transform.memory_table`).  A kind that declares no memories
has the host's (:data:`HOST_MEMORIES`, the default of
:attr:`cuvil_tir.target.TargetKind.memories`).

The build driver checks every buffer against the table
(:func:`cuvil_tir.target.build.check_memories`).

Example::

    >>> [m.scope for m in HOST_MEMORIES]
    ['global', 'local']
    >>> Memory("npu.inp", 4 * 16384, banks=4, width_bits=128).bank_bytes
    16384
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import TargetError

#: what one allocation of a memory serves (:attr:`Memory.instance`)
INSTANCES = ("program", "block", "warp", "thread", "static")


@dataclass(frozen=True)
class Memory:
    """One memory of a target: the ``scope`` buffers name, its ``capacity_bytes``
    (``None`` when only the machine bounds it), a one-line ``doc``, its ``banks``
    (the capacity splits evenly between them), the bits of one access
    (``width_bits``, ``None``: any), the alignment of a buffer's start
    (``align_bytes``, ``None``: the element size) and what one allocation serves
    (``instance``: ``"program"``, ``"block"`` (a GPU thread block), ``"warp"``,
    ``"thread"`` or ``"static"`` (one for the whole program at an address planned at
    compile time: an accelerator's scratchpad); ``None``: by the scope's name, as
    TVM's ``global``/``shared``/``warp``/``local``, and ``"program"`` for any other).

    Example::

        >>> Memory("local", doc="registers and stack").capacity_bytes is None
        True
        >>> Memory("npu.acc", 2 * 32768, banks=2, width_bits=512).width_bytes
        64
        >>> Memory("npu.acc", instance="per core")
        Traceback (most recent call last):
          ...
        cuvil_tir.errors.TargetError: [CVL-E106] Memory 'npu.acc': instance must be one of ('program', 'block', 'warp', 'thread', 'static') or None, found 'per core'
    """

    scope: str
    capacity_bytes: int | None = None
    doc: str = ""
    banks: int = 1
    width_bits: int | None = None
    align_bytes: int | None = None
    instance: str | None = None

    def __post_init__(self):
        if self.instance is not None and self.instance not in INSTANCES:
            raise TargetError(f"Memory {self.scope!r}: instance must be one of "
                              f"{INSTANCES} or None, found {self.instance!r}")

    @property
    def bank_bytes(self) -> int | None:
        """Bytes of one bank (``None`` when the capacity is unbounded)."""
        return None if self.capacity_bytes is None else self.capacity_bytes // self.banks

    @property
    def width_bytes(self) -> int | None:
        """Bytes of one access (``None`` when any width goes)."""
        return None if self.width_bits is None else self.width_bits // 8


#: the memories of a CPU: ordinary memory, and ``local`` (registers or the stack of
#: the function: small fixed-size buffers become registers after unrolling)
HOST_MEMORIES = (Memory("global", None, "main memory (parameters, large buffers)"),
                 Memory("local", None, "per-invocation buffers: registers or stack"))


__all__ = ["HOST_MEMORIES", "INSTANCES", "Memory"]
