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
from cuvil_tir.buffer import Buffer
from cuvil_tir.errors import CuvilError
from cuvil_tir.expr import BufferLoad, IntImm
from cuvil_tir.function import PrimFunc
from cuvil_tir.printer import to_text
from cuvil_tir.transform.verify import verify
from cuvil_tir.stmt import BufferStore
from cuvil_tir.target import Memory as TargetMemory
from cuvil_tir.visitor import post_order_visit

from .dma_engines import check_engines
from .errors import DescriptionError

_SCOPE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


def _distinct(owner: str, what: str, items, cls, key: str, noun: str) -> None:
    """Every item a ``cls``, no ``key`` twice."""
    for x in items:
        if not isinstance(x, cls):
            raise DescriptionError(f"{owner}: {what} must be {cls.__name__} objects, "
                                   f"found {x!r}")
    names = [getattr(x, key) for x in items]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise DescriptionError(f"{owner}: {noun} {dup} declared twice")


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
class DMAOp:
    """An element-wise operation a DMA store applies on the way out (a Gemmini-style
    activation on read-out: scale, ReLU, requantize): ``fn`` maps one ``in_dtype``
    element (a TIR expression) to one ``out_dtype`` element.  A staged copy-out whose
    value is ``fn(load)`` becomes ``<hal>_dma_store_<name>``.

    Example::

        >>> import cuvil_tir as T
        >>> DMAOp("relu", lambda x: T.max(x, T.const(0, "int32")), "int32", "int32").name
        'relu'
        >>> DMAOp("bad", lambda x: x, "int32", "int8")
        Traceback (most recent call last):
          ...
        targets.accel.errors.DescriptionError: [CVL-E170] DMAOp 'bad': fn turns an int32 element into int32, but out_dtype is int8; make fn return int8 (T.cast) or fix out_dtype
    """

    name: str
    fn: object
    in_dtype: str
    out_dtype: str

    def __post_init__(self):
        owner = f"DMAOp {self.name!r}"
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise DescriptionError(f"DMAOp: name must be a C identifier, found {self.name!r}")
        if not callable(self.fn):
            raise DescriptionError(f"{owner}: fn must be a function of one TIR expression, "
                                   f"found {self.fn!r}")
        for what in ("in_dtype", "out_dtype"):
            try:
                D.canonical(getattr(self, what))
            except Exception:
                raise DescriptionError(f"{owner}: {what} must be a dtype such as 'int32', "
                                       f"found {getattr(self, what)!r}") from None
        got = getattr(self.apply(_Probe(self.in_dtype).load), "dtype", None)
        if got != D.canonical(self.out_dtype):
            raise DescriptionError(
                f"{owner}: fn turns an {self.in_dtype} element into {got}, but out_dtype is "
                f"{self.out_dtype}; make fn return {self.out_dtype} (T.cast) or fix out_dtype")

    def apply(self, x):
        """``fn(x)``: the value the DMA writes for the element ``x``."""
        return self.fn(x)

    def describe(self) -> list:
        """``[name, in_dtype, out_dtype, what fn computes]`` for a build's key."""
        return [self.name, self.in_dtype, self.out_dtype,
                to_text(self.apply(_Probe(self.in_dtype).load))]


class _Probe:
    """A one-element buffer whose load stands for the element a DMAOp is given."""

    def __init__(self, dtype):
        self.load = Buffer((1,), dtype, "x")[IntImm(0, "int32")]


@dataclass(frozen=True)
class DMA:
    """The DMA engine: 2-D strided copies moving at most ``width_bits`` per cycle after
    a fixed ``latency_cycles``.  A load and a store queue run independently (engines
    ``load`` and ``store``).  Its modes:

    - ``padding``: it zero-fills the rest of a tile past the edge of host memory, and
      fills a whole tile with zeros (``<hal>_dma_fill``, Gemmini's move-in from the zero
      address: an accumulator initialised without a compute instruction);
    - ``broadcast``: a load may repeat one source row down the tile (source row stride
      0: a bias preloaded into every row of an accumulator tile);
    - ``transpose``: a load may transpose a tile (``dst[r, c] = src[c, r]``,
      ``<hal>_dma_load_t``: weights stored row-major for ``A @ B.T``);
    - ``store_ops``: :class:`DMAOp` element-wise operations a store applies on the way
      out, converting the dtype (activation and requantization on read-out);
    - ``im2col``: a load may gather a conv2d's patch matrix, each row the ``kh`` runs of
      ``kw*C`` contiguous NHWC bytes of one output pixel's window
      (``<hal>_dma_load_im2col``, :mod:`~targets.accel.im2col`);
    - ``dims``: dimensions one command moves, 2 or 3: with 3 a loop of 2-D loads is
      one command paying the latency once (``<hal>_dma_load[_pad]_3d``: a conv's filter
      taps, the blocks of a fractal ``zN`` or ``NC1HWC0`` layout;
      :mod:`~targets.accel.dma_blocks`);
    - ``outstanding``: commands the load and the store engine each keep in flight (an
      AXI-style DMA with several outstanding requests): with more than one, a command
      occupies its engine for its transfer only and the next one's latency overlaps it
      (a command issues once the one ``outstanding`` before it has completed, its data
      arrives ``latency_cycles`` after it issued); with one (the default) every command
      pays its latency in turn;
    - ``reach``: the memories it can load into and store from (Ascend's MTE2 reaches
      L1 and UB, not L0A/L0B: those fill from L1 on-chip); empty (the default): every
      memory.  A staged copy between host memory and another memory is refused with
      the memories it can reach;
    - ``engines``: its :class:`~targets.accel.dma_engines.DMAEngine` objects, how many
      load and store engines it has, each with its own timeline and queues, the
      memories it serves and optionally its own width and latency (default: one
      ``load`` and one ``store`` engine).

    Example::

        >>> DMA(width_bits=100, latency_cycles=10)
        Traceback (most recent call last):
          ...
        targets.accel.errors.DescriptionError: [CVL-E170] DMA: width_bits=100 is not a whole number of bytes; use a multiple of 8
    """

    width_bits: int
    latency_cycles: int
    padding: bool = True
    broadcast: bool = False
    store_ops: tuple = ()
    transpose: bool = False
    im2col: bool = False
    dims: int = 2
    outstanding: int = 1
    reach: tuple = ()
    engines: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "engines", check_engines(self.engines))
        _positive_int("DMA", "width_bits", self.width_bits)
        _positive_int("DMA", "outstanding", self.outstanding)
        reach = (self.reach,) if isinstance(self.reach, str) else tuple(self.reach)
        if not all(isinstance(r, str) for r in reach):
            raise DescriptionError(f"DMA: reach names memory scopes ('asc.l1'), found "
                                   f"{self.reach!r}")
        object.__setattr__(self, "reach", reach)
        if self.dims not in (2, 3) or isinstance(self.dims, bool):
            raise DescriptionError(f"DMA: dims must be 2 or 3 (the dimensions one command "
                                   f"moves), found {self.dims!r}")
        if not isinstance(self.latency_cycles, int) or self.latency_cycles < 0:
            raise DescriptionError(f"DMA: latency_cycles must be an int >= 0, found "
                                   f"{self.latency_cycles!r}")
        if self.width_bits % 8:
            raise DescriptionError(f"DMA: width_bits={self.width_bits} is not a whole "
                                   "number of bytes; use a multiple of 8")
        ops = tuple(self.store_ops)
        object.__setattr__(self, "store_ops", ops)
        _distinct("DMA", "store_ops", ops, DMAOp, "name", "store op(s)")

    @property
    def width_bytes(self) -> int:
        """Bytes per cycle."""
        return self.width_bits // 8

    def cycles(self, rows: int, row_bytes: int) -> int:
        """Cost of one copy: the latency, then each row in whole beats of the width."""
        return self.latency_cycles + rows * math.ceil(row_bytes / self.width_bytes)

    def describe(self) -> dict:
        """The DMA as data for a build's key (each store op by what it computes).

        Example::

            >>> DMA(64, 8).describe()["store_ops"]
            []
        """
        return {"width_bits": self.width_bits, "latency_cycles": self.latency_cycles,
                "padding": self.padding, "broadcast": self.broadcast,
                "transpose": self.transpose, "im2col": self.im2col, "dims": self.dims,
                "outstanding": self.outstanding, "reach": list(self.reach),
                "store_ops": [op.describe() for op in self.store_ops],
                "engines": [e.describe() for e in self.engines]}


@dataclass(frozen=True)
class Move:
    """An on-chip move from one accelerator memory to another (a level of the memory
    hierarchy to the next: Gemmini's move-out from the accumulator to the scratchpad,
    Ascend's L1 -> L0A), run by ``engine`` at ``width_bits`` per cycle after
    ``latency_cycles``, optionally applying one of its ``ops`` (:class:`DMAOp`) on the
    way.  A staged copy between ``src`` and ``dst`` becomes
    ``<hal>_move_<src>_<dst>[_<op>](dst, src, rows, n, dst_stride, src_stride)``
    (``n`` bytes per row, or elements with an op); a copy between two memories with
    no Move is refused.  ``engine`` is ``"load"``, ``"store"``, a compute unit, or an
    engine of its own (it then runs in parallel with the others).

    Example::

        >>> Move("npu.acc", "npu.acc", "store", 128)
        Traceback (most recent call last):
          ...
        targets.accel.errors.DescriptionError: [CVL-E170] Move npu.acc -> npu.acc: src and dst must be two different memories
    """

    src: str
    dst: str
    engine: str
    width_bits: int
    latency_cycles: int = 0
    ops: tuple = ()

    def __post_init__(self):
        owner = f"Move {self.src} -> {self.dst}"
        if self.src == self.dst:
            raise DescriptionError(f"{owner}: src and dst must be two different memories")
        if not isinstance(self.engine, str) or not self.engine.isidentifier():
            raise DescriptionError(f"{owner}: engine must be a C identifier, found "
                                   f"{self.engine!r}")
        _positive_int(owner, "width_bits", self.width_bits)
        if self.width_bits % 8:
            raise DescriptionError(f"{owner}: width_bits={self.width_bits} is not a whole "
                                   "number of bytes; use a multiple of 8")
        if not isinstance(self.latency_cycles, int) or self.latency_cycles < 0:
            raise DescriptionError(f"{owner}: latency_cycles must be an int >= 0, found "
                                   f"{self.latency_cycles!r}")
        object.__setattr__(self, "ops", tuple(self.ops))
        _distinct(owner, "ops", self.ops, DMAOp, "name", "op(s)")

    @property
    def c_name(self) -> str:
        """``move_<src>_<dst>`` (dots as underscores)."""
        return f"move_{self.src}_{self.dst}".replace(".", "_")

    def describe(self) -> dict:
        """The move as data for a build's key."""
        return {"src": self.src, "dst": self.dst, "engine": self.engine,
                "width_bits": self.width_bits, "latency_cycles": self.latency_cycles,
                "ops": [op.describe() for op in self.ops]}


MAX_QUEUE_DEPTH = 64
MAX_QUEUE_IDS = 16


@dataclass(frozen=True)
class Queue:
    """A hardware queue of synchronisation tokens from engine ``src`` to engine ``dst``
    (VTA's push/pop dependence queues, Ascend's ``set_flag``/``wait_flag``): ``src``
    pushes a token when it is done with something ``dst`` waits for, ``dst`` pops it
    before going on.  It has ``ids`` independent channels (event ids), each holding at
    most ``depth`` tokens; a push into a full channel stalls ``src`` until ``dst`` pops.
    The compiler proves at build time that no program needs more than ``depth`` tokens
    in a channel (a double-buffered tile needs 2), otherwise the engines could block
    each other and the build fails with CVL-E175.

    Example::

        >>> Queue("load", "gemm", depth=2).channels
        8
        >>> Queue("load", "load", depth=2)
        Traceback (most recent call last):
          ...
        targets.accel.errors.DescriptionError: [CVL-E170] Queue load -> load: src and dst must be two different engines
    """

    src: str
    dst: str
    depth: int
    ids: int = 8

    def __post_init__(self):
        owner = f"Queue {self.src} -> {self.dst}"
        for what in ("src", "dst"):
            v = getattr(self, what)
            if not isinstance(v, str) or not v.isidentifier():
                raise DescriptionError(f"{owner}: {what} must be an engine name (a C "
                                       f"identifier such as 'load' or 'gemm'), found {v!r}")
        if self.src == self.dst:
            raise DescriptionError(f"{owner}: src and dst must be two different engines")
        for what, top in (("depth", MAX_QUEUE_DEPTH), ("ids", MAX_QUEUE_IDS)):
            v = getattr(self, what)
            _positive_int(owner, what, v)
            if v > top:
                raise DescriptionError(f"{owner}: {what}={v} is more than the simulator "
                                       f"models ({top}); use at most {top}")

    @property
    def channels(self) -> int:
        """Independent channels (event ids) of the queue."""
        return self.ids

    def describe(self) -> dict:
        """The queue as data for a build's key."""
        return {"src": self.src, "dst": self.dst, "depth": self.depth, "ids": self.ids}


def queue_table(name: str, engines, queues, default_depth) -> dict:
    """``{(src, dst): Queue}`` for every ordered pair of ``engines``: the declared
    ``queues``, the others of depth ``default_depth``.

    Example::

        >>> qs = queue_table("n", ("load", "gemm"), [Queue("load", "gemm", 1)], 2)
        >>> qs["load", "gemm"].depth, qs["gemm", "load"].depth
        (1, 2)
        >>> queue_table("n", ("load", "gemm"), [Queue("load", "mac", 1)], 2)
        Traceback (most recent call last):
          ...
        targets.accel.errors.DescriptionError: [CVL-E170] Accelerator 'n': Queue load -> mac names engine 'mac', which it does not have (its engines: load, gemm); name one of them
    """
    owner = f"Accelerator {name!r}"
    queues = list(queues)
    for q in queues:
        if not isinstance(q, Queue):
            raise DescriptionError(f"{owner}: queues must be Queue objects, found {q!r}")
        for end in (q.src, q.dst):
            if end not in engines:
                raise DescriptionError(
                    f"{owner}: Queue {q.src} -> {q.dst} names engine {end!r}, which it "
                    f"does not have (its engines: {', '.join(engines)}); name one of them")
    pairs = [(q.src, q.dst) for q in queues]
    dup = sorted({p for p in pairs if pairs.count(p) > 1})
    if dup:
        raise DescriptionError(f"{owner}: queue(s) {dup} declared twice")
    _positive_int(owner, "queue_depth", default_depth)
    out = {(q.src, q.dst): q for q in queues}
    for s in engines:
        for d in engines:
            if s != d and (s, d) not in out:
                out[s, d] = Queue(s, d, min(default_depth, MAX_QUEUE_DEPTH))
    return out


@dataclass(frozen=True)
class Intrinsic:
    """One instruction of a compute unit.

    ``desc`` is a PrimFunc saying what it computes (as for ``S.TensorIntrin``; its
    parameters are the operands); ``operands`` maps each parameter name to the memory
    scope it must live in; ``align_bytes`` (optional, per name) the alignment of an
    operand's first element; ``c_name`` the HAL function; ``cycles`` an int or a
    function of the desc's shapes (``{name: shape}``) giving the cost; ``unit`` the
    compute engine that runs it (``"gemm"``, ``"vector"``); ``init``: the instruction
    has a flag that makes it overwrite its accumulator (the operand it reads and
    writes) instead of adding to it, at no cost (Ascend's ``mmad`` with its init bit),
    so the zero fill before a reduction is dropped (:mod:`~targets.accel.init_flag`).

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
    init: bool = False

    def __post_init__(self):
        owner = f"Intrinsic {self.name!r}"
        if not isinstance(self.init, bool):
            raise DescriptionError(f"{owner}: init must be True or False, found "
                                   f"{self.init!r}")
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
        try:        # the checks T.lower runs: what it computes must be valid IR
            verify(self.desc)
        except CuvilError as e:
            raise DescriptionError(f"{owner}: desc is not valid IR ({e}); make the "
                                   "operand shapes and the accesses agree") from None
        cost = self.cycles
        if not callable(cost) and (not isinstance(cost, int) or cost <= 0):
            raise DescriptionError(f"{owner}: cycles must be a positive int or a function "
                                   f"of the operand shapes, found {cost!r}")
        if callable(cost):
            got = cost(self.shapes())
            if not isinstance(got, int) or got <= 0:
                raise DescriptionError(f"{owner}: cycles({self.shapes()}) must return a "
                                       f"positive int, returned {got!r}")
        if self.init and self.accumulator() is None:
            raise DescriptionError(f"{owner}: init=True overwrites the accumulator, but the "
                                   "desc has no single operand it both reads and writes "
                                   "(C = C + ...); drop init or fix the desc")

    def shapes(self) -> dict:
        """``{operand name: shape tuple}`` of the desc."""
        return {p.name: tuple(int(d.value) for d in p.shape) for p in self.desc.params}

    def written(self) -> set:
        """Names of the operands the desc stores to."""
        out = set()
        post_order_visit(self.desc.body, lambda n: out.add(n.buffer.name)
                         if isinstance(n, BufferStore) else None)
        return out

    def accumulator(self):
        """The operand the desc reads and writes (what ``init`` overwrites), else None."""
        read = set()
        post_order_visit(self.desc.body, lambda n: read.add(n.buffer.name)
                         if isinstance(n, BufferLoad) else None)
        both = sorted(self.written() & read)
        return both[0] if len(both) == 1 else None

    def cost(self) -> int:
        """Cycles of one call."""
        return self.cycles(self.shapes()) if callable(self.cycles) else self.cycles


def check_description(name, memories, dma, intrinsics, moves=()) -> None:
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
    _distinct(owner, "memories", memories, Memory, "scope", "memory scope(s)")
    scopes = [m.scope for m in memories]
    _distinct(owner, "moves", moves, Move, "c_name", "move(s)")
    for what, reach in [("DMA", getattr(dma, "reach", ()))] + [
            (f"DMAEngine {e.name!r}", e.reach) for e in getattr(dma, "engines", ())]:
        far = [r for r in reach if r not in scopes]
        if far:
            raise DescriptionError(f"{owner}: {what} reach names {far}, which are not "
                                   f"among its memories ({', '.join(scopes)})")
    for mv in moves:
        for end in (mv.src, mv.dst):
            if end not in scopes:
                raise DescriptionError(
                    f"{owner}: Move {mv.src} -> {mv.dst} names memory {end!r}, which is "
                    f"not one of its memories ({', '.join(scopes)})")
    named = {}
    for op in list(dma.store_ops if isinstance(dma, DMA) else ()) + \
            [op for mv in moves for op in mv.ops]:
        if named.setdefault(op.name, op) is not op:
            raise DescriptionError(f"{owner}: two different ops are named {op.name!r}; "
                                   "give each its own name (or share one DMAOp object)")
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


__all__ = ["DMA", "DMAOp", "Intrinsic", "Memory", "Move", "Queue", "check_description",
           "queue_table"]
