"""Which scratchpad buffers an accelerator instruction touches, and on which engine it
runs: what the queues between engines (:mod:`~targets.accel.queues`) and the bank
planner order and place.

The accelerator runs one instruction stream per engine (``load``, ``store``, each
compute unit, each move engine); the host issues instructions in program order and
the engines run ahead of each other unless a token holds them.  A buffer touched by
two engines, at least one writing, needs a token between them; a multi-buffered tile
(``software_pipeline_stage``) is one buffer per copy (its ``slot``).

Example::

    >>> engine_of_call("toy_npu_dma_load", {"toy_npu_dma_load": "load"})
    'load'
"""

from __future__ import annotations

from cuvil_tir.stmt import BufferRegion


def engine_of_call(name: str, engines: dict):
    """The engine running extern ``name`` (``None``: not an accelerator instruction)."""
    return engines.get(name)


def accesses(call, acc, versions=()) -> list:
    """``[(buffer, writes, slot expr or None)]`` of the scratchpad buffers an
    instruction touches (``slot``: which version of a multi-buffered tile; ``versions``
    names those tiles)."""
    name = call.args[0].value
    regions = [a for a in call.args[2:] if isinstance(a, BufferRegion)]
    out = []
    engine = acc.engine_of.get(name)
    if name in acc.move_of:         # an on-chip move (dst, src, ...): both sides
        pairs = [(regions[0], True), (regions[1], False)]
    elif acc.dma_direction.get(engine) == "load":   # a DMA call: (dst, src, ...), (dst, ...)
        pairs = [(regions[0], True)]
    elif acc.dma_direction.get(engine) == "store":
        pairs = [(regions[1], False)]
    else:
        it = acc.intrinsic_of_call(name)
        written = it.written()
        pairs = [(r, p.name in written) for p, r in zip(it.desc.params, regions)]
    for r, w in pairs:
        if r.buffer.scope not in acc.scopes:
            continue
        slot = r.region[0].min if r.buffer.name in versions else None
        out.append((r.buffer, w, slot))
    return out


__all__ = ["accesses", "engine_of_call"]
