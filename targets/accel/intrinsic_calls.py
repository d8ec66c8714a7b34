"""Intrinsic calls after tensorize: each operand checked against the memory and the
alignment its description names, and the operands' row strides appended (the HAL
functions take strided tiles); and the check that nothing else touches an accelerator
memory element by element.

Example::

    >>> import cuvil_tir as T
    >>> check_no_host_access(T.PrimFunc([], T.Evaluate(T.const(0))), {"npu.inp"}, [])
"""

from __future__ import annotations

from cuvil_tir import dtype as D
from cuvil_tir import ops
from cuvil_tir.expr import BufferLoad, IntImm
from cuvil_tir.stmt import BufferRegion, BufferStore
from cuvil_tir.visitor import Mutator, post_order_visit

from .errors import AccelLoweringError
from .copy_nest import row_strides


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


__all__ = ["check_no_host_access", "intrinsic_calls"]
