"""The accumulator-init flag of a matrix instruction (Ascend's ``mmad`` init bit): a
zero fill of an accumulator tile followed by the reduction that accumulates into it
becomes the reduction alone, its first instruction on each part of the tile
overwriting instead of adding.

An :class:`~targets.accel.description.Intrinsic` described with ``init=True`` is
called through ``<hal>_<c_name>_init(operands..., strides..., init)``: with ``init``
non-zero it computes ``C = A @ B`` (the accumulator's old contents ignored), else
``C += A @ B``, at the same cost.  The pass (:func:`init_flags`) looks, in each
sequence of statements, for a DMA zero fill of a tile followed by the statement that
next touches the tile; when that statement is a loop nest whose only instruction on
the tile is one call of such an intrinsic, its parts of the tile (one per iteration
of the loops its address depends on, the others being the reduction) never overlap
and together cover exactly what was filled, the fill is dropped and the call passes
``init = (every reduction loop at its first iteration)``.  Otherwise the fill stays
and the call passes 0, so results never change; only the load engine's fill and the
token from it to the matrix unit go.

Example::

    >>> from targets.accel.examples.ascend_like import ascend
    >>> [it.c_name for it in ascend.intrinsics if it.init]
    ['mmad_16x16x16']
"""

from __future__ import annotations

import itertools

from cuvil_tir import dtype as D
from cuvil_tir.arith import Analyzer
from cuvil_tir.expr import IntImm
from cuvil_tir.op import all as all_of
from cuvil_tir.op import call_extern, if_then_else
from cuvil_tir.stmt import BufferRegion, Evaluate, For, IfThenElse, SeqStmt
from cuvil_tir.visitor import Mutator, substitute, used_vars

#: at most this many iterations of a nest are enumerated to prove the tile covered
MAX_POINTS = 1 << 14


def init_name(acc, it) -> str:
    """The HAL function of intrinsic ``it`` with its init flag."""
    return f"{acc.call_name(it)}_init"


def _callee(s):
    if isinstance(s, Evaluate) and getattr(s.value, "op", None) == "call_extern":
        return s.value.args[0].value
    return None


def _sites(s, loops=(), plain=True, out=None) -> list:
    """``[(Evaluate, loops, plain)]`` of the extern calls under ``s`` (``plain``: not
    under a condition or any statement other than loops and sequences)."""
    out = [] if out is None else out
    if isinstance(s, SeqStmt):
        for x in s.seq:
            _sites(x, loops, plain, out)
    elif isinstance(s, For):
        _sites(s.body, loops + (s,), plain, out)
    elif _callee(s):
        out.append((s, loops, plain))
    elif isinstance(s, IfThenElse):
        _sites(s.then_case, loops, False, out)
        if s.else_case is not None:
            _sites(s.else_case, loops, False, out)
    elif hasattr(s, "body"):
        _sites(s.body, loops, False, out)
    return out


def _touches(s, buf) -> bool:
    return any(isinstance(a, BufferRegion) and a.buffer is buf
               for e, _, _ in _sites(s) for a in e.value.args[2:])


def _offset(region):
    """The flat element offset of a region's first element."""
    off = None
    for r, st in zip(region.region, region.buffer.default_strides()):
        off = r.min * st if off is None else off + r.min * st
    return off


class _Fuse(Mutator):
    def __init__(self, acc):
        self.acc = acc
        self.its = {acc.call_name(it): it for it in acc.intrinsics if it.init}
        self.fills = {n for n, (_, op) in acc.dma_calls.items() if op == "fill"}
        self.fused = {}          # id(Evaluate of a call) -> its init expression
        self.ana = Analyzer()

    def visit_SeqStmt(self, s):
        seq = list(Mutator.generic_visit(self, s).seq)
        keep = []
        for k, st in enumerate(seq):
            if _callee(st) in self.fills:
                region = st.value.args[2]
                nxt = next((x for x in seq[k + 1:] if _touches(x, region.buffer)), None)
                if nxt is not None and self._fuse(st.value, nxt):
                    continue
            keep.append(st)
        return SeqStmt(tuple(keep)) if len(keep) > 1 else keep[0]

    def _fuse(self, fill, nest) -> bool:
        region, rows, row_bytes, stride = fill.args[2:6]
        buf = region.buffer
        if not all(isinstance(x, IntImm) for x in (rows, row_bytes, stride)):
            return False
        item = D.itemsize(buf.dtype)
        base = _offset(region)
        if stride.value % item or row_bytes.value % item:
            return False
        want = {r * (stride.value // item) + c for r in range(rows.value)
                for c in range(row_bytes.value // item)}
        sites = [x for x in _sites(nest) if _touches(x[0], buf)]
        if len(sites) != 1 or not sites[0][2] or _callee(sites[0][0]) not in self.its:
            return False
        ev, loops, _ = sites[0]
        it = self.its[_callee(ev)]
        names = [p.name for p in it.desc.params]
        k = names.index(it.accumulator())
        tile = ev.value.args[2 + k]
        if tile.buffer is not buf or any(
                isinstance(a, BufferRegion) and a.buffer is buf
                for j, a in enumerate(ev.value.args[2:]) if j != k):
            return False
        shape = it.shapes()[it.accumulator()]
        crows, ccols = shape if len(shape) == 2 else (1, shape[0])
        cstride = ev.value.args[2 + len(names) + k]
        if not isinstance(cstride, IntImm) or not all(
                isinstance(f.min, IntImm) and isinstance(f.extent, IntImm) for f in loops):
            return False
        off = _offset(tile)
        spatial = [f for f in loops if any(v is f.loop_var for v in used_vars(off))]
        points = 1
        for f in spatial:
            points *= f.extent.value
        if points > MAX_POINTS:
            return False
        got = set()
        for vals in itertools.product(*[range(f.min.value, f.min.value + f.extent.value)
                                        for f in spatial]):
            rel = self.ana.simplify(substitute(off, {f.loop_var: IntImm(v, "int32")
                                                     for f, v in zip(spatial, vals)}) - base)
            if not isinstance(rel, IntImm):
                return False
            part = {rel.value + r * cstride.value + c for r in range(crows)
                    for c in range(ccols)}
            if got & part:
                return False
            got |= part
        if got != want:
            return False
        sp = {id(f) for f in spatial}
        first = [f.loop_var == f.min for f in loops if id(f) not in sp]
        self.fused[id(ev)] = (if_then_else(all_of(*first), IntImm(1, "int32"),
                                           IntImm(0, "int32")) if first
                              else IntImm(1, "int32"))
        return True


class _Rename(Mutator):
    """Every call of an init-capable intrinsic through its init variant."""

    def __init__(self, acc, fused):
        self.acc, self.fused = acc, fused
        self.its = {acc.call_name(it): it for it in acc.intrinsics if it.init}

    def visit_Evaluate(self, s):
        name = _callee(s)
        if name not in self.its:
            return Mutator.generic_visit(self, s)
        flag = self.fused.get(id(s), IntImm(0, "int32"))
        return Evaluate(call_extern("int32", init_name(self.acc, self.its[name]),
                                    *s.value.args[2:], flag))


def init_flags(func, acc):
    """Drop the zero fills the init flag of ``acc``'s intrinsics makes redundant
    (module doc)."""
    if not any(it.init for it in acc.intrinsics):
        return func
    fuse = _Fuse(acc)
    body = fuse.visit(func.body)
    body = _Rename(acc, fuse.fused).visit(body)
    return func.with_body(body)


__all__ = ["MAX_POINTS", "init_flags", "init_name"]
