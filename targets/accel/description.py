"""Accelerators described by data: memories with banks, a DMA engine, intrinsics.

A :class:`Memory` is a banked scratchpad (``banks`` x ``bank_bytes``, read and written
``width_bits`` at a time); a :class:`DMA` copies 2-D strided tiles between host memory
and the scratchpads (``width_bits`` per cycle after ``latency_cycles``); an
:class:`Intrinsic` says once what an instruction computes (a TIR ``desc`` as for
``S.TensorIntrin``), which memory each operand lives in, its C name and its cost.
Every check runs when the object is built, so a wrong description fails at the line
that wrote it, with a :class:`~targets.accel.errors.DescriptionError` (CVL-E170).

Example::

    >>> Memory("npu.inp", banks=4, bank_bytes=16 << 10, width_bits=128).capacity_bytes
    65536
    >>> DMA(width_bits=512, latency_cycles=64).cycles(rows=16, row_bytes=16)
    80
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from cuvil_tir import dtype as D
from cuvil_tir.function import PrimFunc
from cuvil_tir.stmt import BufferStore
from cuvil_tir.target import Memory as TargetMemory
from cuvil_tir.visitor import post_order_visit

from .errors import DescriptionError

_SCOPE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


def _positive_int(owner: str, what: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise DescriptionError(f"{owner}: {what} must be a positive int, found {value!r}")


@dataclass(frozen=True, init=False)
class Memory(TargetMemory):
    """A banked on-chip memory: ``scope`` (what buffers name, with a dot:
    ``"npu.inp"``), ``banks`` of ``bank_bytes`` each, accessed ``width_bits`` at a time:
    an entry of the target's memory table (:class:`cuvil_tir.target.Memory`) whose
    capacity is ``banks * bank_bytes``, whose buffers start on an access boundary and
    sit at addresses planned at compile time (``instance="static"``).

    Example::

        >>> Memory("npu.acc", banks=2, bank_bytes=100, width_bits=512)
        Traceback (most recent call last):
          ...
        targets.accel.errors.DescriptionError: [CVL-E170] Memory 'npu.acc': bank_bytes=100 is not a multiple of the access width (512 bits = 64 bytes); use a bank size that is a multiple of 64
    """

    def __init__(self, scope: str, banks: int, bank_bytes: int, width_bits: int,
                 doc: str = ""):
        if not isinstance(scope, str) or not _SCOPE.fullmatch(scope):
            raise DescriptionError(
                f"Memory: scope must be a dotted name such as 'npu.inp' (an accelerator "
                f"memory, distinct from 'global'/'local'), found {scope!r}")
        owner = f"Memory {scope!r}"
        for what, value in (("banks", banks), ("bank_bytes", bank_bytes),
                            ("width_bits", width_bits)):
            _positive_int(owner, what, value)
        if width_bits % 8:
            raise DescriptionError(f"{owner}: width_bits={width_bits} is not a whole "
                                   "number of bytes; use a multiple of 8")
        if bank_bytes % (width_bits // 8):
            raise DescriptionError(
                f"{owner}: bank_bytes={bank_bytes} is not a multiple of the access "
                f"width ({width_bits} bits = {width_bits // 8} bytes); use a bank "
                f"size that is a multiple of {width_bits // 8}")
        super().__init__(scope, banks * bank_bytes, doc, banks, width_bits, width_bits // 8,
                         "static")


@dataclass(frozen=True)
class DMA:
    """The DMA engine: 2-D strided copies moving at most ``width_bits`` per cycle after
    a fixed ``latency_cycles``; ``padding`` says whether it can fill the rest of a tile
    with zeros.  A load and a store queue run independently (engines ``load`` and
    ``store``).

    Example::

        >>> DMA(width_bits=100, latency_cycles=10)
        Traceback (most recent call last):
          ...
        targets.accel.errors.DescriptionError: [CVL-E170] DMA: width_bits=100 is not a whole number of bytes; use a multiple of 8
    """

    width_bits: int
    latency_cycles: int
    padding: bool = True

    def __post_init__(self):
        _positive_int("DMA", "width_bits", self.width_bits)
        if not isinstance(self.latency_cycles, int) or self.latency_cycles < 0:
            raise DescriptionError(f"DMA: latency_cycles must be an int >= 0, found "
                                   f"{self.latency_cycles!r}")
        if self.width_bits % 8:
            raise DescriptionError(f"DMA: width_bits={self.width_bits} is not a whole "
                                   "number of bytes; use a multiple of 8")

    @property
    def width_bytes(self) -> int:
        """Bytes per cycle."""
        return self.width_bits // 8

    def cycles(self, rows: int, row_bytes: int) -> int:
        """Cost of one copy: the latency, then each row in whole beats of the width."""
        return self.latency_cycles + rows * math.ceil(row_bytes / self.width_bytes)


@dataclass(frozen=True)
class Intrinsic:
    """One instruction of a compute unit.

    ``desc`` is a PrimFunc saying what it computes (as for ``S.TensorIntrin``; its
    parameters are the operands); ``operands`` maps each parameter name to the memory
    scope it must live in; ``align_bytes`` (optional, per name) the alignment of an
    operand's first element; ``c_name`` the HAL function; ``cycles`` an int or a
    function of the desc's shapes (``{name: shape}``) giving the cost; ``unit`` the
    compute engine that runs it (``"gemm"``, ``"vector"``).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((4,), "int32", "A")
        >>> d = T.PrimFunc([A], T.Evaluate(T.const(0)))
        >>> Intrinsic("x.nop", d, {"A": "npu.acc"}, "nop", cycles=0, unit="vector")
        Traceback (most recent call last):
          ...
        targets.accel.errors.DescriptionError: [CVL-E170] Intrinsic 'x.nop': cycles must be a positive int or a function of the operand shapes, found 0
    """

    name: str
    desc: PrimFunc
    operands: dict
    c_name: str
    cycles: object
    unit: str = "gemm"
    align_bytes: dict = field(default_factory=dict)

    def __post_init__(self):
        owner = f"Intrinsic {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise DescriptionError(f"Intrinsic: name must be a non-empty string, found "
                                   f"{self.name!r}")
        if not isinstance(self.desc, PrimFunc):
            raise DescriptionError(f"{owner}: desc must be a PrimFunc (what it computes), "
                                   f"found {type(self.desc).__name__}")
        for what in ("c_name", "unit"):
            v = getattr(self, what)
            if not isinstance(v, str) or not v.isidentifier():
                raise DescriptionError(f"{owner}: {what} must be a C identifier, found {v!r}")
        if self.unit in ("load", "store"):
            raise DescriptionError(f"{owner}: unit {self.unit!r} is the DMA's; name the "
                                   "compute unit (e.g. 'gemm', 'vector')")
        names = [p.name for p in self.desc.params]
        if sorted(self.operands) != sorted(names):
            raise DescriptionError(f"{owner}: operands must name each desc parameter once: "
                                   f"desc has {names}, operands has {sorted(self.operands)}")
        for n, a in self.align_bytes.items():
            if n not in names:
                raise DescriptionError(f"{owner}: align_bytes names {n!r}, which is not a "
                                       f"desc parameter ({names})")
            _positive_int(owner, f"align_bytes[{n!r}]", a)
        for p in self.desc.params:
            if len(p.shape) not in (1, 2) or not all(hasattr(d, "value") for d in p.shape):
                raise DescriptionError(f"{owner}: operand {p.name!r} must be a 1-D or 2-D "
                                       f"tile of constant shape, found {p.shape}")
        cost = self.cycles
        if not callable(cost) and (not isinstance(cost, int) or cost <= 0):
            raise DescriptionError(f"{owner}: cycles must be a positive int or a function "
                                   f"of the operand shapes, found {cost!r}")
        if callable(cost):
            got = cost(self.shapes())
            if not isinstance(got, int) or got <= 0:
                raise DescriptionError(f"{owner}: cycles({self.shapes()}) must return a "
                                       f"positive int, returned {got!r}")

    def shapes(self) -> dict:
        """``{operand name: shape tuple}`` of the desc."""
        return {p.name: tuple(int(d.value) for d in p.shape) for p in self.desc.params}

    def written(self) -> set:
        """Names of the operands the desc stores to."""
        out = set()
        post_order_visit(self.desc.body, lambda n: out.add(n.buffer.name)
                         if isinstance(n, BufferStore) else None)
        return out

    def cost(self) -> int:
        """Cycles of one call."""
        return self.cycles(self.shapes()) if callable(self.cycles) else self.cycles


def check_description(name, memories, dma, intrinsics) -> None:
    """The checks across parts of an accelerator (each part checks itself).

    Example::

        >>> check_description("n", [], DMA(64, 1), [])
        Traceback (most recent call last):
          ...
        targets.accel.errors.DescriptionError: [CVL-E170] Accelerator 'n': it needs at least one Memory
    """
    owner = f"Accelerator {name!r}"
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", name):
        raise DescriptionError(f"Accelerator: name must be letters, digits, '-' or '_' "
                               f"starting with a letter, found {name!r}")
    if not memories:
        raise DescriptionError(f"{owner}: it needs at least one Memory")
    for m in memories:
        if not isinstance(m, Memory):
            raise DescriptionError(f"{owner}: memories must be Memory objects, found {m!r}")
    scopes = [m.scope for m in memories]
    dup = sorted({s for s in scopes if scopes.count(s) > 1})
    if dup:
        raise DescriptionError(f"{owner}: memory scope(s) {dup} declared twice")
    if not isinstance(dma, DMA):
        raise DescriptionError(f"{owner}: dma must be a DMA(...), found {dma!r}")
    seen = set()
    for it in intrinsics:
        if not isinstance(it, Intrinsic):
            raise DescriptionError(f"{owner}: intrinsics must be Intrinsic objects, found "
                                   f"{it!r}")
        if it.name in seen:
            raise DescriptionError(f"{owner}: intrinsic {it.name!r} declared twice")
        seen.add(it.name)
        for op, scope in it.operands.items():
            if scope not in scopes:
                raise DescriptionError(
                    f"{owner}: intrinsic {it.name!r} operand {op!r} is in memory "
                    f"{scope!r}, which is not one of its memories ({', '.join(scopes)}); "
                    "declare that Memory or fix the scope")
            mem = memories[scopes.index(scope)]
            p = next(p for p in it.desc.params if p.name == op)
            size = math.prod(int(d.value) for d in p.shape) * D.itemsize(p.dtype)
            if size > mem.capacity_bytes:
                raise DescriptionError(
                    f"{owner}: intrinsic {it.name!r} operand {op!r} needs {size} bytes, "
                    f"more than memory {scope!r} holds ({mem.capacity_bytes} bytes)")


__all__ = ["DMA", "Intrinsic", "Memory", "check_description"]
