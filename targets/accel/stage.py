"""Scratchpad staging: shrink each accelerator buffer to the tile it holds, and
double-buffer the tiles of loops annotated ``accel.double_buffer``.

``cache_read(blk, 0, "npu.inp")`` allocates a whole-size copy of the input; after
``compute_at`` only a tile of it is live per iteration.  :func:`compact_scratchpad`
finds, for each buffer in an accelerator memory, the innermost loop enclosing all its
accesses (loads, stores and extern-call regions), checks that the part of every index
that depends on the loops outside it is the same for all accesses, and rebases the
buffer on the box the inner loops touch.  When that loop carries the annotation
``accel.double_buffer`` (``sch.annotate(ko, "accel.double_buffer", 1)``), the buffer
gets a leading dimension of 2 indexed by the loop's parity, so the DMA of tile k+1
writes the other copy while tile k is computed.  Allocations are hoisted to the top of
the function: their addresses are fixed at compile time (:mod:`targets.accel.alloc`).

Example::

    >>> import cuvil_tir as T
    >>> L = T.decl_buffer((64,), "int8", "L", scope="npu.inp")
    >>> O = T.decl_buffer((64,), "int8", "O")
    >>> i, j = T.var("i"), T.var("j")
    >>> body = T.Allocate(L, T.For(i, T.const(0), T.const(4), "serial", T.seq(
    ...     T.For(j, T.const(0), T.const(16), "serial", T.BufferStore(L, O[i * 16 + j], (i * 16 + j,))),
    ...     T.For(j, T.const(0), T.const(16), "serial", T.BufferStore(O, L[i * 16 + j], (i * 16 + j,))))))
    >>> f = compact_scratchpad(T.PrimFunc([O], body), {"npu.inp"})
    >>> f.body.buffer.shape[0].value
    16
"""

from __future__ import annotations

from cuvil_tir.buffer import Buffer
from cuvil_tir.expr import BufferLoad, IntImm
from cuvil_tir.node import Node, field_names
from cuvil_tir.op import floormod
from cuvil_tir.stmt import Allocate, BufferRegion, BufferStore, For, Range
from cuvil_tir.visitor import Mutator, substitute

from cuvil_tir.arith.affine import from_linear_form as from_linear, linear_form as linear

from .errors import AccelLoweringError

DOUBLE_BUFFER = "accel.double_buffer"


def _walk(stmt, loops, out, target, fixed=None):
    """Record (loop stack, [(lo, hi) per dim]) for every access of ``target``.

    A loop of one iteration is its start in the recorded indices (``fixed``): one
    access may name the loop (``b``) where another names its value (``0``, as
    ``compute_at`` binds a unit loop), and both are the same place.
    """
    fixed = {} if fixed is None else fixed
    if isinstance(stmt, For):
        if isinstance(stmt.extent, IntImm) and stmt.extent.value == 1:
            fixed = {**fixed, stmt.loop_var: stmt.min}
        _walk(stmt.body, loops + [stmt], out, target, fixed)
        return
    if isinstance(stmt, Allocate):
        _walk(stmt.body, loops, out, target, fixed)
        return
    if isinstance(stmt, BufferRegion):
        if stmt.buffer is target:
            out.append((loops, [(substitute(r.min, fixed),
                                 substitute(r.min + r.extent - 1, fixed))
                                for r in stmt.region]))
        return
    if isinstance(stmt, (BufferLoad, BufferStore)) and stmt.buffer is target:
        out.append((loops, [(substitute(x, fixed),) * 2 for x in stmt.indices]))
    if isinstance(stmt, Node):
        for name in field_names(type(stmt)):
            _walk(getattr(stmt, name), loops, out, target, fixed)
    elif isinstance(stmt, (tuple, list)):
        for f in stmt:
            _walk(f, loops, out, target, fixed)


def _bound(terms: dict, c: int, inner: dict, upper: bool) -> int:
    total = c
    for key, (_, k) in terms.items():
        lo, ext = inner[key]
        total += k * (lo + ext - 1) if (k > 0) == upper else k * lo
    return total


def _plan(buf, accesses):
    """``(lca loops, outer index parts, box mins, box sizes)`` or an error string."""
    stacks = [a[0] for a in accesses]
    lca = []
    for level in zip(*stacks):
        if all(x is level[0] for x in level):
            lca.append(level[0])
        else:
            break
    outer_ids = {id(f.loop_var) for f in lca}
    inner = {}
    for st in stacks:
        for f in st[len(lca):]:
            if not (isinstance(f.min, IntImm) and isinstance(f.extent, IntImm)):
                return lca, f"loop {f.loop_var.name} has a non-constant extent"
            inner[id(f.loop_var)] = (f.min.value, f.extent.value)
    outers, mins, sizes = [], [], []
    for d in range(len(buf.shape)):
        outer_key, lo_all, hi_all, outer_expr = None, None, None, None
        for _, dims in accesses:
            lo_hi = []
            for e in dims[d]:
                lin = linear(e)
                if lin is None:
                    return lca, f"index {e} is not affine"
                lo_hi.append(lin)
            (t_lo, c_lo), (t_hi, c_hi) = lo_hi
            o_terms = {k: v for k, v in t_lo.items() if k in outer_ids}
            key = tuple(sorted((k, v[1]) for k, v in o_terms.items()))
            if outer_key is None:
                outer_key, outer_expr = key, o_terms
            elif key != outer_key:
                return lca, f"dimension {d} is indexed differently outside the tile"
            i_lo = {k: v for k, v in t_lo.items() if k not in outer_ids}
            i_hi = {k: v for k, v in t_hi.items() if k not in outer_ids}
            if any(k not in inner for k in list(i_lo) + list(i_hi)):
                return lca, f"dimension {d} uses a variable that is not a loop"
            lo, hi = _bound(i_lo, c_lo, inner, False), _bound(i_hi, c_hi, inner, True)
            lo_all = lo if lo_all is None else min(lo_all, lo)
            hi_all = hi if hi_all is None else max(hi_all, hi)
        outers.append(outer_expr)
        mins.append(lo_all)
        sizes.append(hi_all - lo_all + 1)
    return lca, (outers, mins, sizes)


class _Rebase(Mutator):
    def __init__(self, old, new, outers, mins, slot):
        self.old, self.new, self.outers, self.mins, self.slot = old, new, outers, mins, slot

    def _idx(self, indices):
        out = [] if self.slot is None else [self.slot]
        for e, o, m in zip(indices, self.outers, self.mins):
            shift = from_linear(o, m, e.dtype) if (o or m) else None
            out.append(e if shift is None else e - shift)
        return tuple(out)

    def visit_BufferLoad(self, e):
        idx = self.visit(e.indices)
        if e.buffer is not self.old:
            return e if idx is e.indices else BufferLoad(e.buffer, idx)
        return BufferLoad(self.new, self._idx(idx))

    def visit_BufferStore(self, s):
        idx, val = self.visit(s.indices), self.visit(s.value)
        if s.buffer is not self.old:
            return s if (idx is s.indices and val is s.value) else BufferStore(s.buffer, val, idx)
        return BufferStore(self.new, val, self._idx(idx))

    def visit_BufferRegion(self, r):
        region = self.visit(r.region)
        if r.buffer is not self.old:
            return r if region is r.region else BufferRegion(r.buffer, region)
        mins = self._idx(tuple(x.min for x in region))
        head = [] if self.slot is None else [Range(mins[0], IntImm(1, mins[0].dtype))]
        body = mins[len(head):]
        return BufferRegion(self.new, tuple(head) + tuple(
            Range(m, x.extent) for m, x in zip(body, region)))


def _double(loop) -> bool:
    return any(k == DOUBLE_BUFFER and v for k, v in loop.annotations)


def compact_scratchpad(func, scopes):
    """Shrink and hoist every allocation in one of ``scopes`` (module doc).

    A buffer whose accesses cannot be boxed (a non-affine index, indices that differ
    outside the tile) keeps its whole size; allocation then reports whether it fits.
    """
    hoisted = []

    class _Strip(Mutator):
        def visit_Allocate(self, a):
            body = self.visit(a.body)
            if a.buffer.scope not in scopes:
                return a if body is a.body else Allocate(a.buffer, body)
            hoisted.append(a.buffer)
            return body

    body = _Strip().visit(func.body)
    allocs, doubled = [], []
    for buf in hoisted:
        accesses = []
        _walk(body, [], accesses, buf)
        if not accesses:
            continue
        lca, plan = _plan(buf, accesses)
        if isinstance(plan, str):
            allocs.append(buf)
            continue
        outers, mins, sizes = plan
        double = bool(lca) and _double(lca[-1])
        slot = None
        shape = tuple(IntImm(n, "int32") for n in sizes)
        if double:
            loop = lca[-1]
            slot = floormod(loop.loop_var - loop.min, IntImm(2, loop.loop_var.dtype)) \
                if not (isinstance(loop.min, IntImm) and loop.min.value == 0) \
                else floormod(loop.loop_var, IntImm(2, loop.loop_var.dtype))
            shape = (IntImm(2, "int32"),) + shape
            doubled.append(buf.name)
        new = Buffer(shape, buf.dtype, buf.name, scope=buf.scope, align=buf.align)
        body = _Rebase(buf, new, outers, mins, slot).visit(body)
        allocs.append(new)
    for buf in reversed(allocs):
        body = Allocate(buf, body)
    out = func if body is func.body else func.with_body(body)
    return out.with_attr("accel.double_buffered", tuple(doubled))


def check_no_host_access(func, scopes, names) -> None:
    """Raise when plain loads/stores still touch an accelerator memory: only DMA and
    intrinsics can; ``names`` lists the intrinsics for the message."""
    from cuvil_tir.visitor import post_order_visit

    bad = []

    def look(n):
        if isinstance(n, (BufferLoad, BufferStore)) and n.buffer.scope in scopes and not bad:
            bad.append(n)

    post_order_visit(func.body, look)
    if bad:
        n = bad[0]
        what = "written" if isinstance(n, BufferStore) else "read"
        raise AccelLoweringError(
            f"accelerator lowering: buffer '{n.buffer.name}' in memory "
            f"'{n.buffer.scope}' is {what} element by element by the host; only the DMA "
            "and the intrinsics can touch an accelerator memory. Tensorize that block "
            f"with one of the intrinsics ({', '.join(names) or 'none'}) or stage it with "
            "cache_read/cache_write so the copy becomes a DMA")


__all__ = ["DOUBLE_BUFFER", "check_no_host_access", "compact_scratchpad"]
