"""Explicit dependency tokens between the DMA engines and the compute units.

The accelerator runs one instruction stream per engine (``load``, ``store``, and each
compute unit); the host issues instructions in program order and the engines run
ahead of each other unless a token holds them.  This pass makes every dependency
explicit: for each scratchpad buffer (each version of a multi-buffered one) and each
pair of engines that touch it where at least one writes, the instruction waits for
the token the other engine last signalled on that buffer copy, and signals its own
when done::

    toy_npu_wait(TOY_NPU_GEMM, 3 + k_0 % 2)   // the tile has arrived
    toy_npu_gemm_16x16x16(...)
    toy_npu_signal(TOY_NPU_GEMM, 5 + k_0 % 2) // the tile may be overwritten

A wait is satisfied by the latest signal issued before it in program order (read
after write and write after read alike), so the schedule, not luck, orders the
engines; with N versions of a tile (``software_pipeline_stage``) the DMA of tile k+1
waits only on the use of tile k+1-N.

Example::

    >>> engine_of_call("toy_npu_dma_load", {"toy_npu_dma_load": "load"})
    'load'
"""

from __future__ import annotations

from cuvil_tir.expr import IntImm
from cuvil_tir.op import call_extern
from cuvil_tir.stmt import BufferRegion, Evaluate, SeqStmt
from cuvil_tir.visitor import Mutator, post_order_visit
from cuvil_tir.transform.software_pipeline import VERSIONS


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
    elif engine == "load":            # every DMA call is (dst, src, ...) or (dst, ...)
        pairs = [(regions[0], True)]
    elif engine == "store":
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


def _instructions(body, acc):
    found = []

    def look(n):
        if (isinstance(n, Evaluate) and getattr(n.value, "op", None) == "call_extern"
                and n.value.args[0].value in acc.engine_of):
            found.append(n)

    post_order_visit(body, look)
    return found


def insert_tokens(func, acc):
    """Insert waits and signals around every accelerator instruction (module doc)."""
    insts = _instructions(func.body, acc)
    versions = dict(func.attr(VERSIONS, ()))
    touch: dict = {}                           # buffer name -> {engine: writes?}
    for ev in insts:
        e = acc.engine_of[ev.value.args[0].value]
        for buf, w, _ in accesses(ev.value, acc, versions):
            d = touch.setdefault(buf.name, {})
            d[e] = d.get(e, False) or w
    base, nxt = {}, 0
    for name, engines in touch.items():
        slots = versions.get(name, 1)
        for e in engines:
            base[(name, e)] = nxt
            nxt += slots
    syncs = {}                                 # (buffer, engine) -> engines it waits on
    for name, engines in touch.items():
        for e, we in engines.items():
            syncs[(name, e)] = [f for f, wf in engines.items() if f != e and (we or wf)]
    waited = {(n, f) for (n, _), fs in syncs.items() for f in fs}
    engine_id = {e: k for k, e in enumerate(acc.engines)}
    hal = acc.hal

    def token(name, e, slot):
        b = IntImm(base[(name, e)], "int32")
        return b if slot is None else b + slot

    class _Wrap(Mutator):
        def visit_Evaluate(self, s):
            if s not in ids:
                return s
            e = acc.engine_of[s.value.args[0].value]
            eid = IntImm(engine_id[e], "int32")
            before, after = [], []
            for buf, _, slot in accesses(s.value, acc, versions):
                for f in syncs[(buf.name, e)]:
                    before.append(Evaluate(call_extern("int32", f"{hal}_wait", eid,
                                                       token(buf.name, f, slot))))
                if (buf.name, e) in waited:
                    after.append(Evaluate(call_extern("int32", f"{hal}_signal", eid,
                                                      token(buf.name, e, slot))))
            if not before and not after:
                return s
            return SeqStmt(tuple(before) + (s,) + tuple(after))

    ids = _IdSet(insts)
    body = _Wrap().visit(func.body)
    out = func if body is func.body else func.with_body(body)
    return out.with_attr("accel.tokens", nxt)


class _IdSet:
    """Membership by identity (IR nodes compare structurally)."""

    def __init__(self, items):
        self.ids = {id(x) for x in items}

    def __contains__(self, x):
        return id(x) in self.ids


__all__ = ["accesses", "engine_of_call", "insert_tokens"]
