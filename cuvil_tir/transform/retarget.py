"""``Retarget``: the accesses of one buffer moved onto another at an offset.

What compaction does once it has chosen a buffer's box (the memory planner), and what
``cache_read``/``cache_write`` do when a block's accesses move to a cache: every load,
store and declared region of ``old`` becomes one of ``new`` at ``index - offset``.

A call handed the buffer's memory (a ``T.call_extern`` region, an ``access_ptr``)
computes addresses from the buffer's layout, so the buffer is replaced there only by
one of the same shape at offset 0, unless the memory's calls receive the layout with
the region (``rebase_regions``: an accelerator's intrinsics get each row's stride).

The offset may name a stand-in variable per thread tag (``sites``): a buffer of one
thread's own memory is sized by what one thread touches, and every access then uses
the variable of the loop bound to that tag around it.  Variables known to hold one
value (``fixed``: a loop of one iteration) are replaced in the new indices.

Example::

    >>> import cuvil_tir as T
    >>> A = T.decl_buffer((8,), "float32", "A")
    >>> L = T.decl_buffer((4,), "float32", "L")
    >>> s = T.BufferStore(A, A[T.const(5)], (T.const(5),))
    >>> str(Retarget(A, L, (T.const(4),), writes=True).visit(s)).strip()
    'L[1] = L[1]'
"""

from __future__ import annotations

import dataclasses

from .. import ops
from ..analysis.regions import simplify
from ..errors import LoweringError
from ..expr import BufferLoad, Call, IntImm
from ..printer import to_text
from ..stmt import BufferRegion, BufferStore, Range
from ..visitor import Mutator, post_order_visit, substitute


def _shift(index, offset):
    """``index - offset``; a zero offset leaves the index as it is (an int32 index of
    an int64-shaped buffer is not cast by subtracting an int64 zero)."""
    if isinstance(offset, IntImm) and offset.value == 0:
        return index
    return simplify(index - offset)


class Retarget(Mutator):
    """Accesses of ``old`` become accesses of ``new`` at ``index - offset``: loads and
    read regions always, stores and write regions too when ``writes`` (module doc).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((8,), "float32", "A")
        >>> L = T.decl_buffer((8,), "float32", "L")
        >>> ld = Retarget(A, L, (T.const(0),), writes=False).visit(A[T.const(3)])
        >>> ld.buffer.name
        'L'
    """

    def __init__(self, old, new, offset, writes: bool = True, rebase_regions: bool = False,
                 sites: dict | None = None, fixed: dict | None = None):
        self.old, self.new, self.offset, self.writes = old, new, tuple(offset), writes
        self.rebase_regions, self.sites, self.fixed = rebase_regions, sites or {}, fixed

    def _at(self, index, offset):
        # ``fixed``: variables known to hold one value (a loop of one iteration), so a
        # tile's index does not keep a term that is always zero
        out = _shift(index, offset)
        return simplify(substitute(out, self.fixed)) if self.fixed else out

    def _idx(self, indices):
        return tuple(self._at(i, o) for i, o in zip(indices, self.offset))

    def _region(self, r):
        if r.buffer is not self.old:
            return r
        return BufferRegion(self.new, tuple(Range(self._at(d.min, o), d.extent)
                                            for d, o in zip(r.region, self.offset)))

    def visit_For(self, loop):
        canon = self.sites.get(loop.thread_tag) if loop.kind == "thread_binding" else None
        if canon is None:
            return self.generic_visit(loop)
        saved = self.offset
        self.offset = tuple(substitute(o, {canon: loop.loop_var}) for o in saved)
        try:
            return self.generic_visit(loop)
        finally:
            self.offset = saved

    def visit_BufferLoad(self, ld):
        ld = self.generic_visit(ld)
        return ld if ld.buffer is not self.old else BufferLoad(self.new, self._idx(ld.indices))

    def visit_BufferStore(self, st):
        st = self.generic_visit(st)
        if st.buffer is not self.old or not self.writes:
            return st
        return BufferStore(self.new, st.value, self._idx(st.indices))

    def visit_Call(self, c):
        c = self.generic_visit(c)
        if not any(isinstance(a, BufferRegion) and a.buffer is self.old for a in c.args):
            return c
        if self.rebase_regions and (self.writes or reads_only(c)):
            return Call(c.dtype, c.op, tuple(self._region(a) if isinstance(a, BufferRegion)
                                             else a for a in c.args))
        same = [str(x) for x in self.old.shape] == [str(x) for x in self.new.shape] and \
            all(isinstance(o, IntImm) and o.value == 0 for o in self.offset)
        if not same or not (self.writes or reads_only(c)):
            why = "has another shape or offset" if not same else "would not see the writes"
            raise LoweringError(
                f"{to_text(c)} receives {self.old.name}'s memory, and {self.new.name}, "
                f"which would replace it, {why}: the call's addresses would change. A "
                "buffer handed to a call can only be replaced by a same-shaped one")
        return Call(c.dtype, c.op, tuple(BufferRegion(self.new, a.region)
                                         if isinstance(a, BufferRegion) and
                                         a.buffer is self.old else a for a in c.args))

    def visit_Block(self, blk):
        new = self.generic_visit(blk)
        reads = tuple(self._region(r) for r in new.reads)
        writes = tuple(self._region(r) for r in new.writes) if self.writes else new.writes
        if all(a is b for a, b in zip(reads + writes, new.reads + new.writes)):
            return new
        return dataclasses.replace(new, reads=reads, writes=writes)


def handed_to_call(node, buf) -> bool:
    """True when a call under ``node`` receives ``buf``'s memory (a region argument).

    Example::

        >>> import cuvil_tir as T
        >>> handed_to_call(T.Evaluate(T.const(0)), None)
        False
    """
    found = []
    post_order_visit(node, lambda n: found.append(n) if isinstance(n, Call) and any(
        isinstance(a, BufferRegion) and a.buffer is buf for a in n.args) else None)
    return bool(found)


def reads_only(c) -> bool:
    """True for a call that only reads the memory it receives.

    Example::

        >>> import cuvil_tir as T
        >>> reads_only(T.call_extern("int32", "f")), reads_only(T.sqrt(T.var("x", "float32")))
        (False, True)
    """
    return not ops.may_write(c)


__all__ = ["Retarget", "handed_to_call", "reads_only"]
