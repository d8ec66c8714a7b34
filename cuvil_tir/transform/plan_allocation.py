"""``plan_buffer_allocation``: allocate each intermediate buffer where it is used, and
only as large as what is used there (block level, per storage scope).

After ``compute_at`` a producer's buffer is still allocated by the root block with its
whole shape, although each iteration of the consumer's loop writes and reads only a
tile of it.  This pass (TensorIR's *PlanAndUpdateBufferAllocationLocation* followed by
*CompactBufferAllocation*) moves each buffer a block allocates down to the innermost
statement that holds all its accesses, and shrinks it to the box those accesses cover
there, re-indexing every access by the box's corner.

This is the one memory planner of every target (llvm, c, cuda, accelerators): what
differs between memories comes from the target's memory table
(:mod:`.memory_table`), never from the target's name.

A buffer moves inside a loop only when each iteration of that loop uses it privately
(:mod:`.buffer_privacy`: what each iteration reads it wrote itself, or the iterations
touch disjoint parts), and when its memory allows one allocation per iteration: a
``global`` or static (accelerator) buffer never moves into a thread-bound, parallel,
vectorized or unrolled loop; a ``shared`` buffer is one per thread block: it passes
through the ``threadIdx``/``vthread`` loops that share it down to the statement holding
its accesses (TVM's placement: a tile copied at each k step inside the thread loops is
one k step's tile, for all the block's threads), and is one allocation there; a
``local`` buffer is one per thread, so it moves into thread-bound and parallel loops.

The box is relaxed over the loops inside the allocation, and over the thread loops
around it whose threads share the memory (a block under ``threadIdx`` loops that
allocates a ``shared`` buffer), except the thread loops of the tags that do not share
the memory: a ``local`` buffer's box is what one thread
touches, even when it is allocated above the thread loops of several nests (each
access then uses its own nest's thread variable); a ``shared`` box covers every
thread of the block.  A call handed a region of the buffer keeps the whole buffer,
unless the memory's calls receive the layout with the region (an accelerator's
intrinsics).  An on-chip buffer (``shared``, ``local`` inside GPU kernels, static
memories) must end with a constant shape.

Only scopes the target has a memory for are planned (the target is read from the
``PassContext``; without one every scope is planned by its name); other scopes belong
to the target's own checks.  Runs before ``lower_blocks``.

Example::

    >>> import cuvil_tir as T
    >>> f = T.parse('''
    ... @T.prim_func
    ... def main(A: T.Buffer((8, 4), "float32"), C: T.Buffer((8, 4), "float32")):
    ...     B = T.alloc_buffer((8, 4), "float32")
    ...     for i in T.serial(8):
    ...         for j in T.serial(4):
    ...             with T.block("B"):
    ...                 vi, vj = T.axis.remap("SS", [i, j])
    ...                 B[vi, vj] = A[vi, vj] * T.float32(2)
    ...         for j in T.serial(4):
    ...             with T.block("C"):
    ...                 vi, vj = T.axis.remap("SS", [i, j])
    ...                 C[vi, vj] = B[vi, vj] + T.float32(1)
    ... ''')
    >>> g = plan_buffer_allocation(f)
    >>> alloc = g.body.block.body.body
    >>> alloc.buffer.name, [int(s) for s in alloc.buffer.shape]
    ('B', [1, 4])
"""

from __future__ import annotations
import dataclasses

from ..analysis.regions import provably_le, simplify, union
from ..errors import LoweringError
from ..expr import IntImm, Var
from ..function import PrimFunc
from ..printer import to_text
from ..stmt import Allocate, BufferRegion, For, Range, SeqStmt
from ..visitor import Mutator, post_order_visit, substitute, used_vars
from .buffer_privacy import accesses, count, disjoint, doms_of, private, relax_guarded
from .memory_table import memory_table, spec_of
from .retarget import Retarget, handed_to_call
from ..arith import Analyzer, bound_of

__all__ = ["Retarget", "plan_buffer_allocation"]


class _Replace(Mutator):
    def __init__(self, target, new):
        self.target, self.new = target, new

    def generic_visit(self, n):
        return self.new if n is self.target else Mutator.generic_visit(self, n)


def _descend(body, buf, spec, doms):
    """``(path of For nodes entered, node where buf is allocated)``; ``doms``: the
    ranges of the variables above ``body``."""
    entered, memo = [], {}
    node = body
    while True:
        outer = {**doms, **doms_of(entered)}
        if isinstance(node, For) and spec.shares(node):
            entered.append(node)      # one allocation for all its threads: passed through
            node = node.body
        elif isinstance(node, For) and spec.may_enter(node) and (
                spec.own_copy(node) or private(node, buf, memo, outer) or
                disjoint(node, buf)):
            entered.append(node)
            node = node.body
        elif isinstance(node, SeqStmt):
            users = [s for s in node.seq if count(s, buf)]
            if len(users) != 1:
                return entered, node
            node = users[0]
        elif isinstance(node, Allocate):     # another buffer placed here already
            node = node.body
        else:
            return entered, node


class _Box:
    """The box of ``buf`` that ``node`` touches (module doc): ``shape`` and ``offset``
    over the variables above ``node`` and the stand-ins ``sites`` ({tag: Var}) of
    the thread loops that keep one copy per thread; ``shape`` None when it cannot be
    sized."""

    def __init__(self, node, buf, spec, shared_above=()):
        self.sites, self.ranges, self.shape, self.offset, self.unit = {}, {}, None, None, {}
        found = accesses(node, buf)
        if not found:
            return
        kept = _private_parallel(node, buf) if spec.instance == "thread" else set()
        box, tags_everywhere = None, None
        for region, path, conds in found:
            subst, tags = {}, set()
            for lp in path:
                if spec.own_copy(lp):
                    subst[lp.loop_var] = self._site(lp)
                    tags.add(lp.thread_tag)
            doms = {v: r for v, r in doms_of(list(shared_above) + list(path)).items()
                    if v not in subst and v not in kept}
            if subst:
                region = BufferRegion(buf, tuple(Range(substitute(d.min, subst), d.extent)
                                                 for d in region.region))
            box = union(box, relax_guarded(region, doms, conds))
            tags_everywhere = tags if tags_everywhere is None else tags_everywhere & tags
        # every access must lie under a loop of each tag its offset names
        named = {id(v) for d in box.region for v in used_vars(d.min)}
        if any(id(v) in named for t, v in self.sites.items() if t not in tags_everywhere):
            return
        self.shape, self.offset = [d.extent for d in box.region], [d.min for d in box.region]

    def _site(self, loop):
        tag = loop.thread_tag
        if tag not in self.sites:
            self.sites[tag] = Var(tag.replace(".", "_"), loop.loop_var.dtype)
            self.ranges[self.sites[tag]] = Range(loop.min, loop.extent)
        elif provably_le(self.ranges[self.sites[tag]].extent, loop.extent):
            self.ranges[self.sites[tag]] = Range(loop.min, loop.extent)
        return self.sites[tag]

    def sized(self, doms_above: dict):
        """``(shape, offset)`` with a shape free of the variables above the node and
        of the thread stand-ins, or None."""
        if self.shape is None:
            return None
        doms = {**doms_above, **self.ranges}
        ana = Analyzer(index_no_overflow=True)
        for v, r in doms.items():
            ana.bind(v, r)
        # a loop of one iteration is its start, and the union of two accesses' corners
        # (a min of both) folds over the known ranges
        self.unit = {v: r.min for v, r in doms.items()
                     if isinstance(r.extent, IntImm) and r.extent.value == 1}
        offset = tuple(ana.simplify(substitute(o, self.unit)) for o in self.offset)
        shape = []
        for ext in self.shape:
            ext = simplify(ext)
            if any(v in doms for v in used_vars(ext)):
                _, ext = bound_of(ext, doms)
                ext = simplify(ext)
                if any(v in doms for v in used_vars(ext)):
                    return None
            shape.append(ext)
        return tuple(shape), offset


def _private_parallel(node, buf) -> set:
    """The variables of the parallel loops inside ``node`` that hold every access of
    ``buf`` there, each iteration using it privately: one copy per task, so their
    iterations are not relaxed.  A loop whose tasks share ``buf`` (it is read after
    the loop, or accumulated across it) is relaxed like any other."""
    loops = []
    post_order_visit(node, lambda n: loops.append(n) if isinstance(n, For)
                     and n.kind == "parallel" else None)
    if not loops:
        return set()
    memo, everywhere = {}, count(node, buf)
    return {lp.loop_var for lp in loops
            if count(lp, buf) == everywhere and private(lp, buf, memo)}


def _within(sized, full, doms):
    """The box, each dimension no larger than the buffer's: a dimension whose box is
    not provably at most the buffer's extent keeps the whole dimension.  Bounds of
    indices through a symbolic ``//`` or ``%`` are loose (down to the index type's
    minimum), and a box taken from them would be a buffer of 2**31 elements, or, once
    the extent's arithmetic wraps, of a negative size.  (A box
    may reach past the buffer's end, at a boundary tile whose accesses are guarded: its
    accesses are relative to its corner, so only its size matters.)"""
    ana = Analyzer(index_no_overflow=True)
    for v, r in doms.items():
        ana.bind(v, r)
    shape, offset = [], []
    for ext, off, whole in zip(*sized, full):
        # one element is never more than a dimension some access lies in, even one of
        # a symbolic extent that may be 0 for all the analyzer knows
        if (isinstance(ext, IntImm) and ext.value == 1) or (
                ana.can_prove(ext <= whole) and ana.can_prove(1 <= ext)):
            shape.append(ext)
            offset.append(off)
        else:
            shape.append(whole)
            offset.append(IntImm(0, "int32"))
    return tuple(shape), tuple(offset)


def _on_chip(spec, entered) -> bool:
    """Whether the buffer's memory needs a constant size: static memories, ``shared``,
    and a ``local`` buffer inside a GPU kernel (under a loop bound to a thread)."""
    return spec.static or spec.instance in ("block", "warp") or (
        spec.instance == "thread" and any(lp.kind == "thread_binding" for lp in entered))


class _Planner(Mutator):
    def __init__(self, func, table):
        self.func, self.table = func, table
        self.doms: dict = {}
        self.loops: list = []

    def visit_For(self, loop):
        saved = self.doms
        self.doms = {**saved, loop.loop_var: Range(loop.min, loop.extent)}
        self.loops.append(loop)
        try:
            return self.generic_visit(loop)
        finally:
            self.doms = saved
            self.loops.pop()

    def visit_BlockRealize(self, br):
        saved = self.doms
        self.doms = {**saved, **{iv.var: iv.dom for iv in br.block.iter_vars}}
        try:
            return self.generic_visit(br)
        finally:
            self.doms = saved

    def visit_Block(self, blk):
        new = self.generic_visit(blk)
        keep, body = [], new.body
        for buf in new.alloc_buffers:
            placed = self._plan(buf, body)
            if placed is None:
                keep.append(buf)
            else:
                body = placed
        if body is new.body:
            return new
        return dataclasses.replace(new, body=body, alloc_buffers=tuple(keep))

    def _plan(self, buf, body):
        spec = spec_of(self.table, buf.scope)
        if spec is None or buf.strides:
            return None
        entered, node = _descend(body, buf, spec, self.doms)
        doms = dict(self.doms)
        doms.update(doms_of(entered))
        # allocated inside thread loops whose threads share the memory (a block under
        # threadIdx allocating a shared buffer): the box covers all their threads
        shared_above = [lp for lp in self.loops
                        if lp.kind == "thread_binding" and not spec.own_copy(lp)] + \
            [lp for lp in entered if spec.shares(lp)]
        box = _Box(node, buf, spec, shared_above)
        sized = box.sized(doms)
        if sized is not None and not spec.rebase_regions and handed_to_call(node, buf):
            sized = None    # a call computes addresses from the whole buffer's layout
        if sized is None:
            self._check_constant(buf, buf.shape, spec, self.loops + entered)
            if not entered:
                return None
            new, offset = buf, tuple(IntImm(0, "int32") for _ in buf.shape)
        else:
            shape, offset = _within(sized, buf.shape, {**doms, **box.ranges})
            self._check_constant(buf, shape, spec, self.loops + entered)
            new = buf.with_changes(shape=shape, strides=())
            if not entered and all(provably_le(a, b) and provably_le(b, a)
                                   for a, b in zip(shape, buf.shape)):
                return None         # already as small as it can be, and where it is
        moved = Allocate(new, Retarget(buf, new, offset, rebase_regions=spec.rebase_regions,
                                       sites=box.sites, fixed=box.unit).visit(node)
                         if new is not buf else node)
        return _Replace(node, moved).visit(body)

    def _check_constant(self, buf, shape, spec, loops):
        if not _on_chip(spec, loops) or all(isinstance(simplify(s), IntImm) for s in shape):
            return
        raise LoweringError(
            f"{buf.scope} buffer {buf.name} needs the shape "
            f"{tuple(str(simplify(s)) for s in shape)}, but memory {buf.scope!r} holds "
            "buffers of a constant size only; compute_at its producer under a loop so "
            "that each iteration uses a constant-size tile:\n" + to_text(self.func))


def plan_buffer_allocation(func: PrimFunc) -> PrimFunc:
    """Place and compact the buffers blocks allocate (see the module docstring).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> plan_buffer_allocation(f) is f
        True
    """
    body = _Planner(func, memory_table()).visit(func.body)
    return func if body is func.body else func.with_body(body)
