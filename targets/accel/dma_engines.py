"""The engines of a DMA: how many, which direction each moves, which memories each
serves, and the HAL calls each one runs.

A :class:`~targets.accel.description.DMA` has by default one ``load`` engine (host
memory -> the device's memories, zero fills included) and one ``store`` engine (the
device's memories -> host memory).  A device with more (Ascend's MTE2 and MTE3, a DMA
with a channel for weights beside one for activations) lists them as
:class:`DMAEngine` objects: each has its own timeline and its own queues in the
simulator, so two load engines overlap their transfers.  A staged copy runs on an
engine of its direction that reaches its on-chip memory; where several do, each
staged buffer is dealt to the one with the fewest buffers so far (in program order),
so two operands load in parallel and every copy of one buffer stays in order on one
engine.

The calls of the engine named like its direction keep Cuvil's names
(``<hal>_dma_load``); another engine ``E``'s are ``<hal>_E_<op>``
(``<hal>_wdma_load``, ``<hal>_wdma_load_pad``), with the same arguments.

Example::

    >>> e = DMAEngine("wdma", "load", reach=("npu.wgt",))
    >>> e.name, e.direction, e.reach
    ('wdma', 'load', ('npu.wgt',))
    >>> DMAEngine("wdma", "both")
    Traceback (most recent call last):
      ...
    targets.accel.errors.DescriptionError: [CVL-E170] DMAEngine 'wdma': direction must be 'load' (host memory -> the device) or 'store' (the device -> host memory), found 'both'
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import AccelLoweringError, DescriptionError

#: the calls a load engine runs, and (besides one per store op) a store engine
LOAD_OPS = ("load", "load_pad", "fill", "load_t", "load_im2col", "load_3d", "load_pad_3d")
_CPY = "void *dst, const void *src, int32_t rows, int32_t row_bytes, "
_TAIL3 = "int32_t blocks, int32_t dst_block_stride, int32_t src_block_stride"
#: each call's C parameters (``store_<op>`` as ``store_op``)
PARAMS = {
    "load": _CPY + "int32_t dst_stride, int32_t src_stride",
    "store": _CPY + "int32_t dst_stride, int32_t src_stride",
    "load_pad": _CPY + "int32_t valid_rows, int32_t valid_row_bytes, int32_t dst_stride, "
                       "int32_t src_stride",
    "fill": "void *dst, int32_t rows, int32_t row_bytes, int32_t dst_stride",
    "load_t": "void *dst, const void *src, int32_t rows, int32_t cols, int32_t item, "
              "int32_t dst_stride, int32_t src_stride",
    "load_im2col": _CPY + "int32_t valid_rows, int32_t valid_bytes, int32_t seg_bytes, "
                          "int32_t dst_stride, int32_t src_row_stride, int32_t src_px_stride",
    "load_3d": _CPY + f"int32_t dst_stride, int32_t src_stride, {_TAIL3}",
    "load_pad_3d": _CPY + "int32_t valid_rows, int32_t valid_row_bytes, int32_t dst_stride, "
                          f"int32_t src_stride, {_TAIL3}",
    "store_op": "void *dst, const void *src, int32_t rows, int32_t cols, int32_t dst_stride, "
                "int32_t src_stride",
}


@dataclass(frozen=True)
class DMAEngine:
    """One DMA engine: ``name`` (a C identifier: its timeline, its queues), its
    ``direction`` (``"load"`` or ``"store"``), the memories it ``reach``-es (empty: the
    DMA's), and its own ``width_bits`` and ``latency_cycles`` (``None``: the DMA's).
    The DMA's modes (padding, transpose, im2col, 3-D commands, store ops) are those of
    each of its engines.

    Example::

        >>> DMAEngine("mte2", "load", width_bits=100)
        Traceback (most recent call last):
          ...
        targets.accel.errors.DescriptionError: [CVL-E170] DMAEngine 'mte2': width_bits must be a positive multiple of 8 (bits per cycle) or None (the DMA's), found 100
    """

    name: str
    direction: str
    reach: tuple = ()
    width_bits: int | None = None
    latency_cycles: int | None = None

    def __post_init__(self):
        owner = f"DMAEngine {self.name!r}"
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise DescriptionError(f"DMAEngine: name must be a C identifier (an engine "
                                   f"name such as 'mte2'), found {self.name!r}")
        if self.direction not in ("load", "store"):
            raise DescriptionError(f"{owner}: direction must be 'load' (host memory -> the "
                                   "device) or 'store' (the device -> host memory), found "
                                   f"{self.direction!r}")
        reach = (self.reach,) if isinstance(self.reach, str) else tuple(self.reach)
        if not all(isinstance(r, str) for r in reach):
            raise DescriptionError(f"{owner}: reach names memory scopes ('asc.l1'), found "
                                   f"{self.reach!r}")
        object.__setattr__(self, "reach", reach)
        w = self.width_bits
        if w is not None and (not isinstance(w, int) or isinstance(w, bool) or w <= 0
                              or w % 8):
            raise DescriptionError(f"{owner}: width_bits must be a positive multiple of 8 "
                                   f"(bits per cycle) or None (the DMA's), found {w!r}")
        lat = self.latency_cycles
        if lat is not None and (not isinstance(lat, int) or isinstance(lat, bool) or lat < 0):
            raise DescriptionError(f"{owner}: latency_cycles must be an int >= 0 or None "
                                   f"(the DMA's), found {lat!r}")

    def describe(self) -> dict:
        """The engine as data for a build's key."""
        return {"name": self.name, "direction": self.direction, "reach": list(self.reach),
                "width_bits": self.width_bits, "latency_cycles": self.latency_cycles}


def check_engines(engines) -> tuple:
    """The DMA's engines, checked: ``DMAEngine`` objects, distinct names, at least
    one of each direction; empty gives the default ``load`` and ``store``.

    Example::

        >>> check_engines([DMAEngine("a", "load")])
        Traceback (most recent call last):
          ...
        targets.accel.errors.DescriptionError: [CVL-E170] DMA: engines has no store engine (its engines: a (load)); add DMAEngine(..., direction='store')
    """
    engines = tuple(engines)
    if not engines:
        return (DMAEngine("load", "load"), DMAEngine("store", "store"))
    for e in engines:
        if not isinstance(e, DMAEngine):
            raise DescriptionError(f"DMA: engines must be DMAEngine objects, found {e!r}")
    names = [e.name for e in engines]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise DescriptionError(f"DMA: engine(s) {dup} declared twice")
    have = ", ".join(f"{e.name} ({e.direction})" for e in engines)
    for d in ("load", "store"):
        if not any(e.direction == d for e in engines):
            raise DescriptionError(f"DMA: engines has no {d} engine (its engines: {have}); "
                                   f"add DMAEngine(..., direction={d!r})")
    return engines


def call_name(hal: str, engine, op: str) -> str:
    """The HAL function of ``op`` on ``engine`` (module doc).

    Example::

        >>> call_name("toy", DMAEngine("load", "load"), "load_pad")
        'toy_dma_load_pad'
        >>> call_name("toy", DMAEngine("wdma", "load"), "load_pad")
        'toy_wdma_load_pad'
    """
    return f"{hal}_{'dma' if engine.name == engine.direction else engine.name}_{op}"


def has_op(dma, op: str) -> bool:
    """Whether ``dma`` has the mode ``op`` needs."""
    need = {"load_pad": dma.padding, "fill": dma.padding, "load_t": dma.transpose,
            "load_im2col": dma.im2col, "load_3d": dma.dims >= 3,
            "load_pad_3d": dma.dims >= 3}
    return need.get(op, True)


def engine_ops(dma, engine) -> list:
    """The ops ``engine`` of ``dma`` runs (those its modes allow)."""
    if engine.direction == "load":
        return [op for op in LOAD_OPS if has_op(dma, op)]
    return ["store"] + [f"store_{op.name}" for op in dma.store_ops]


def calls_of(hal: str, dma) -> dict:
    """``{HAL function: (engine, op)}`` of every DMA engine; two engines whose calls
    would meet (an engine named ``dma`` beside the default ``load``) are refused."""
    out = {}
    for e in dma.engines:
        for op in engine_ops(dma, e):
            name = call_name(hal, e, op)
            if name in out:
                raise DescriptionError(
                    f"DMA: HAL function {name!r} would run {op} on engines "
                    f"{out[name][0].name!r} and {e.name!r}; rename one of them")
            out[name] = (e, op)
    return out


def reach_of(dma, engine) -> tuple:
    """The memories ``engine`` reaches (empty: all)."""
    return engine.reach or dma.reach


class EngineChooser:
    """Picks the engine of each staged copy (module doc)."""

    def __init__(self, acc):
        self.acc, self.dealt = acc, {}

    def pick(self, direction: str, buf, where: str):
        """The engine of ``direction`` moving ``buf`` (an on-chip buffer)."""
        dma = self.acc.dma
        key = (direction, buf.name)
        if key in self.dealt:
            return self.dealt[key]
        ok = [e for e in dma.engines if e.direction == direction
              and (not reach_of(dma, e) or buf.scope in reach_of(dma, e))]
        if not ok:
            have = "; ".join(f"{e.name} reaches {list(reach_of(dma, e)) or 'every memory'}"
                             for e in dma.engines if e.direction == direction)
            raise AccelLoweringError(
                f"DMA: {where}: no {direction} engine of accelerator '{self.acc.name}' "
                f"reaches '{buf.scope}' ({have}); stage it through a memory one of them "
                "reaches (a cache_read/cache_write there first, then an on-chip move)")
        count = {e.name: 0 for e in ok}
        for e in self.dealt.values():
            if e.name in count:
                count[e.name] += 1
        self.dealt[key] = min(ok, key=lambda e: count[e.name])
        return self.dealt[key]


def dma_decls(acc, op: str) -> list:
    """The declarations of ``op`` (``"store_<name>"`` for a store op) on every engine
    that runs it."""
    params = PARAMS["store_op" if op.startswith("store_") else op]
    return [f"int32_t {name}({params});" for name, (_, o) in acc.dma_calls.items() if o == op]


def _arg_names(params: str) -> str:
    return ", ".join(p.split()[-1].lstrip("*") for p in params.split(","))


def dma_wrappers(acc) -> str:
    """The simulator's HAL function of each op on each engine: the op's routine
    (``cvl_x_<op>``, taking the engine first) on that engine."""
    up, out = acc.hal.upper(), []
    for name, (e, op) in acc.dma_calls.items():
        kind = "store_op" if op.startswith("store_") else op
        params = PARAMS[kind]
        out.append(f"int32_t {name}({params}) {{\n    return cvl_x_{op}({up}_{e.name.upper()}, "
                   f"{_arg_names(params)});\n}}")
    return "\n".join(out)


def dma_tables(acc) -> str:
    """Per engine (0 for the others): its latency, bytes per cycle, and 1 for a load
    engine, 2 for a store engine."""
    by = {e.name: e for e in acc.dma.engines}
    lat = [by[e].latency_cycles if e in by and by[e].latency_cycles is not None
           else acc.dma.latency_cycles for e in acc.engines]
    wid = [(by[e].width_bits or acc.dma.width_bits) // 8 if e in by
           else acc.dma.width_bytes for e in acc.engines]
    dirs = [(1 if by[e].direction == "load" else 2) if e in by else 0 for e in acc.engines]
    n = len(acc.engines)
    return (f"static const int64_t cvl_dlat[{n}] = {{{', '.join(map(str, lat))}}};\n"
            f"static const int64_t cvl_dw[{n}] = {{{', '.join(map(str, wid))}}};\n"
            f"static const int cvl_ddir[{n}] = {{{', '.join(map(str, dirs))}}};")


__all__ = ["DMAEngine", "EngineChooser", "LOAD_OPS", "PARAMS", "call_name", "calls_of",
           "check_engines", "dma_decls", "dma_tables", "dma_wrappers", "engine_ops", "has_op",
           "reach_of"]
