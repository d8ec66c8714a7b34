"""Copies between host memory and an accelerator memory become DMA transfers, and
intrinsic calls get their operands checked and their row strides appended.

A staged copy (what ``cache_read``/``cache_write`` leave after lowering) is a loop nest
``for r: for c: dst[..., r', c'] = src[..., r'', c'']`` with one side in host memory
and the other in an accelerator memory.  Its two innermost loops become one 2-D strided
transfer, ``<hal>_dma_load(dst, src, rows, row_bytes, dst_stride, src_stride)`` (or
``_dma_store``; strides in bytes); outer loops stay loops.  On the accelerator side a
row must be a whole number of the memory's access width and start on it, otherwise
the copy does not fit the memory and the error says which.

A copy whose edge tiles run past the end of the host array (a non-dividing tile) is
guarded: ``if (i < n) dst[...] = src[...]`` becomes a transfer of the valid rows and
bytes only (computed at run time), and the zero-filling copy ``pad_einsum`` leaves
(``dst[...] = if_then_else(i < n, src[...], 0)``) becomes
``<hal>_dma_load_pad(dst, src, rows, row_bytes, valid_rows, valid_row_bytes,
dst_stride, src_stride)``, which fills the rest of the tile with zeros, so the
intrinsics always see whole tiles.  Only a DMA described with ``padding=True`` pads.

Example::

    >>> import cuvil_tir as T
    >>> from targets.accel.examples.toy_npu import toy_npu
    >>> S = T.decl_buffer((4, 16), "int8", "S", scope="npu.inp")
    >>> G = T.decl_buffer((64, 64), "int8", "G")
    >>> r, c = T.var("r"), T.var("c")
    >>> nest = T.For(r, T.const(0), T.const(4), "serial", T.For(c, T.const(0), T.const(16),
    ...        "serial", T.BufferStore(S, G[r, c], (r, c))))
    >>> f = dma_transfers(T.PrimFunc([G], T.Allocate(S, nest)), toy_npu)
    >>> print(T.to_text(f.body.body).strip())
    T.evaluate(T.call_extern("int32", "toy_npu_dma_load", S[0:1, 0:16], G[0:1, 0:16], 4, 16, 16, 64, effect="writes:0"))
"""

from __future__ import annotations

from cuvil_tir import dtype as D
from cuvil_tir import ops
from cuvil_tir.expr import LE, LT, BufferLoad, FloatImm, IntImm, const
from cuvil_tir.op import (call_extern, conjuncts, if_then_else, maximum as max_,
                          minimum as min_)
from cuvil_tir.stmt import BufferRegion, BufferStore, Evaluate, For, IfThenElse, Range
from cuvil_tir.visitor import Mutator, substitute, used_vars

from .errors import AccelLoweringError


def row_strides(buf) -> list:
    """Element stride of each dimension (row-major, or the buffer's own strides)."""
    if buf.strides:
        return [int(s.value) for s in buf.strides]
    out, acc = [], 1
    for d in reversed(buf.shape):
        out.append(acc)
        acc *= int(d.value)
    return out[::-1]


def _dim_of(indices, var):
    """The one dimension whose index uses ``var`` with coefficient 1, else None."""
    from cuvil_tir.arith.affine import linear_form as linear
    hit = None
    for d, e in enumerate(indices):
        if id(var) in {id(v) for v in used_vars(e)}:
            lin = linear(e)
            if hit is not None or lin is None or lin[0][id(var)][1] != 1:
                return None
            hit = d
    return hit


def _copy_nest(s):
    """``(loops, store, guard, padded)`` of a copy nest, else None: ``guard`` is the
    condition of an ``if`` around the store or of the ``if_then_else`` a padded load
    (``padded``) takes its value from."""
    loops, body = [], s
    while isinstance(body, For):
        loops.append(body)
        body = body.body
    guard, padded = None, False
    if isinstance(body, IfThenElse) and body.else_case is None:
        guard, body = body.condition, body.then_case
    if not isinstance(body, BufferStore):
        return None
    v = body.value
    if guard is None and ops.branches(v) is not None and \
            isinstance(v.args[1], BufferLoad) and _is_zero(v.args[2]):
        guard, padded = v.args[0], True
        body = BufferStore(body.buffer, v.args[1], body.indices)
    if not isinstance(body.value, BufferLoad):
        return None
    return loops, body, guard, padded


def _is_zero(e) -> bool:
    return isinstance(e, (IntImm, FloatImm)) and e.value == 0


def _valid(guard, row, col, rows, cols, where):
    """``(valid rows, valid columns)`` of a tile under ``guard`` (conjunction of
    upper bounds ``affine < n`` on the row or column loop, or of outer conditions)."""
    from cuvil_tir.arith.affine import from_linear_form as from_linear, linear_form as linear
    vr, vc = const(rows, "int32"), const(cols, "int32")
    for c in conjuncts(guard):
        lin = None
        if isinstance(c, (LT, LE)):
            a, b = linear(c.a), linear(c.b)
            if a is not None and b is not None:
                terms = dict(a[0])
                for k, (v, x) in b[0].items():
                    terms[k] = (v, terms.get(k, (v, 0))[1] - x)
                lin = ({k: t for k, t in terms.items() if t[1]},
                       a[1] - b[1] - (1 if isinstance(c, LE) else 0))
        inner = [] if lin is None else [(v, x) for v, x in lin[0].values()
                                        if row is not None and v is row.loop_var
                                        or v is col.loop_var]
        if lin is None or len(inner) > 1 or (inner and inner[0][1] != 1):
            raise AccelLoweringError(
                f"DMA: {where} is guarded by {c}, which is not an upper bound "
                "'row/column + offset < n' on one of the copy's two inner loops; the DMA "
                "moves whole rectangles (pad the computation with pad_einsum)")
        rest = {k: t for k, t in lin[0].items() if not inner or t[0] is not inner[0][0]}
        bound = -from_linear(rest, lin[1], "int32") if rest or lin[1] else const(0, "int32")
        if not inner:       # an outer condition: the whole tile or nothing
            vr = if_then_else(c, vr, const(0, "int32"))
        elif row is not None and inner[0][0] is row.loop_var:
            vr = min_(vr, max_(bound - row.min, const(0, "int32")))
        else:
            vc = min_(vc, max_(bound - col.min, const(0, "int32")))
    return vr, vc


class _ToDMA(Mutator):
    def __init__(self, acc):
        self.acc = acc
        self.scopes = {m.scope: m for m in acc.memories_only}

    def visit_For(self, s):
        nest = _copy_nest(s)
        if nest is None:
            return Mutator.generic_visit(self, s)
        loops, st, guard, padded = nest
        dst, src = st.buffer, st.value.buffer
        dst_acc, src_acc = dst.scope in self.scopes, src.scope in self.scopes
        if dst_acc == src_acc:
            return Mutator.generic_visit(self, s)
        return self.transfer(loops, st, dst_acc, guard, padded)

    def transfer(self, loops, st, load: bool, guard=None, padded=False):
        dst, src = st.buffer, st.value.buffer
        side = dst if load else src
        mem = self.scopes[side.scope]
        inner = loops[-2:] if len(loops) >= 2 else loops[-1:]
        where = f"the copy {src.name} -> {dst.name}"
        if src.dtype != dst.dtype:
            raise AccelLoweringError(f"DMA: {where} converts {src.dtype} to {dst.dtype}; "
                                     "a DMA copies bytes: stage the same dtype")
        for f in inner:
            if not (isinstance(f.extent, IntImm) and isinstance(f.min, IntImm)):
                raise AccelLoweringError(f"DMA: {where} has loop {f.loop_var.name} of "
                                         f"non-constant extent {f.extent}; tile it so the "
                                         "staged copy has a fixed size")
        col, row = inner[-1], (inner[0] if len(inner) == 2 else None)
        dims = {}
        for buf, idx in ((dst, st.indices), (src, st.value.indices)):
            cd = _dim_of(idx, col.loop_var)
            rd = _dim_of(idx, row.loop_var) if row is not None else None
            if cd != len(buf.shape) - 1 or (row is not None and rd is None):
                raise AccelLoweringError(
                    f"DMA: {where} is not a 2-D strided transfer (the innermost copy loop "
                    f"must run along the last dimension of both buffers, {buf.name} is "
                    f"indexed [{', '.join(map(str, idx))}]); reorder or transform the "
                    "staged layout")
            dims[id(buf)] = rd
        item = D.itemsize(dst.dtype)
        rows = row.extent.value if row is not None else 1
        row_bytes = col.extent.value * item
        strides = {}
        for buf in (dst, src):
            rd = dims[id(buf)]
            strides[id(buf)] = (row_strides(buf)[rd] if rd is not None else 0) * item
        w = mem.width_bytes
        side_stride = strides[id(side)]
        if row_bytes % w or (rows > 1 and side_stride % w):
            raise AccelLoweringError(
                f"DMA: {where}: a row of {row_bytes} bytes (stride {side_stride} bytes) "
                f"in memory '{mem.scope}' does not fit its access width of {w} bytes; make "
                f"the staged tile's rows a multiple of {w // item} {dst.dtype} elements")
        zero = {f.loop_var: f.min for f in inner}

        def region(buf, idx):
            first = [substitute(e, zero) for e in idx]
            ext = [IntImm(1, "int32")] * len(idx)
            ext[-1] = col.extent
            return BufferRegion(buf, tuple(Range(m, e) for m, e in zip(first, ext)))

        first = region(side, st.indices if load else st.value.indices)
        lead = first.region[-1].min
        if isinstance(lead, IntImm) and (lead.value * item) % w:
            raise AccelLoweringError(
                f"DMA: {where} starts {lead.value * item} bytes into a row of memory "
                f"'{mem.scope}', not aligned to its access width of {w} bytes")
        name = f"{self.acc.hal}_dma_{'load' if load else 'store'}"
        moved = [rows, row_bytes]
        if guard is not None:
            vr, vc = _valid(guard, row, col, rows, col.extent.value, where)
            moved = [vr, vc * item]
        if padded:
            if not load:
                raise AccelLoweringError(f"DMA: {where} stores zeros past the edge of host "
                                         "memory; only a load pads")
            if not self.acc.dma.padding:
                raise AccelLoweringError(
                    f"DMA: {where} zero-fills the part of the tile past the edge of "
                    f"'{src.name}' (a padded computation, pad_einsum), but the DMA of "
                    f"accelerator '{self.acc.name}' cannot pad; describe it with "
                    "DMA(..., padding=True) if the hardware zero-fills, or use sizes that "
                    "are multiples of the tile")
            name += "_pad"
            moved = [rows, row_bytes] + moved
        # a DMA writes its destination and only reads its source (a read-only
        # input array is fine)
        call = call_extern("int32", name, region(dst, st.indices),
                           region(src, st.value.indices), *moved,
                           strides[id(dst)], strides[id(src)], effect="writes:0")
        body = Evaluate(call)
        for f in loops[:len(loops) - len(inner)][::-1]:
            body = For(f.loop_var, f.min, f.extent, f.kind, body, f.thread_tag, f.annotations)
        return body


def dma_transfers(func, acc):
    """Turn every staged copy between host and ``acc``'s memories into a DMA call."""
    body = _ToDMA(acc).visit(func.body)
    return func if body is func.body else func.with_body(body)


class _Intrinsics(Mutator):
    def __init__(self, acc):
        self.acc = acc
        self.by_call = {acc.call_name(it): it for it in acc.intrinsics}

    def visit_Call(self, e):
        if ops.callee(e) not in self.by_call:
            return Mutator.generic_visit(self, e)
        it = self.by_call[ops.callee(e)]
        regions = [a for a in e.args[2:] if isinstance(a, BufferRegion)]
        if len(regions) != len(e.args) - 2:
            return e   # already carries its strides
        extra = []
        for p, r in zip(it.desc.params, regions):
            want = it.operands[p.name]
            if r.buffer.scope != want:
                raise AccelLoweringError(
                    f"intrinsic '{it.name}': operand '{p.name}' must be in memory "
                    f"'{want}', found buffer '{r.buffer.name}' in '{r.buffer.scope}'; "
                    f"stage it with cache_read/cache_write(..., \"{want}\")")
            align = it.align_bytes.get(p.name)
            first = r.region[-1].min
            item = D.itemsize(r.buffer.dtype)
            if align and isinstance(first, IntImm) and (first.value * item) % align:
                raise AccelLoweringError(
                    f"intrinsic '{it.name}': operand '{p.name}' starts at byte "
                    f"{first.value * item} of a row of '{r.buffer.name}', not aligned to "
                    f"{align} bytes")
            rs = row_strides(r.buffer)
            extra.append(IntImm(rs[-2] if len(rs) > 1 else 0, "int32"))
        return type(e)(e.dtype, e.op, tuple(e.args) + tuple(extra))


def intrinsic_calls(func, acc):
    """Check each intrinsic call's operand memories and alignment; append strides."""
    body = _Intrinsics(acc).visit(func.body)
    return func if body is func.body else func.with_body(body)


def check_no_host_access(func, scopes, names) -> None:
    """Raise when plain loads/stores still touch an accelerator memory: only DMA and
    intrinsics can; ``names`` lists the intrinsics for the message.

    Example::

        >>> import cuvil_tir as T
        >>> check_no_host_access(T.PrimFunc([], T.Evaluate(T.const(0))), {"npu.inp"}, [])
    """
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


__all__ = ["check_no_host_access", "dma_transfers", "intrinsic_calls", "row_strides"]
