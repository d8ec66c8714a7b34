"""``plan_buffer_allocation``: allocate each intermediate buffer where it is used, and
only as large as what is used there (block level, per storage scope).

After ``compute_at`` a producer's buffer is still allocated by the root block with its
whole shape, although each iteration of the consumer's loop writes and reads only a
tile of it.  This pass (TensorIR's *PlanAndUpdateBufferAllocationLocation* followed by
*CompactBufferAllocation*) moves each buffer a block allocates down to the innermost
statement that holds all its accesses, and shrinks it to the box those accesses cover
there, re-indexing every access by the box's corner.

A buffer moves inside a loop only when each iteration of that loop uses it privately:

* every block that reads it, reads only what an earlier block of the same iteration
  wrote (the producer computed at the loop covers its consumer's region), or what it
  wrote itself under its own ``init``;
* no reduction that accumulates into it runs across the loop's iterations;
* the scope allows it: a ``global`` buffer never moves into a thread-bound, parallel,
  vectorized or unrolled loop; a ``shared`` buffer is one per thread block, so it does
  not move into ``threadIdx``/``vthread`` loops (its box covers all threads of the
  block); a ``local`` buffer is one per thread, so it moves into thread-bound and
  parallel loops, and its box is what one thread touches (thread loops below its
  allocation are never relaxed).

Only scopes the target has a memory for are planned (the target is read from the
``PassContext``; without one every scope is planned); other scopes belong to the
target's own allocator.  Runs before ``lower_blocks``.

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

from .. import ops
from ..analysis.regions import bound_region, provably_le, relax, shared_by_threads, simplify
from ..analysis.regions import union
from ..errors import LoweringError
from ..expr import BufferLoad, Call, IntImm
from ..printer import to_text
from ..function import PrimFunc
from ..stmt import Allocate, BlockRealize, BufferRegion, BufferStore, For, Range, SeqStmt
from ..visitor import Mutator, post_order_visit, used_vars
from .compact import _Replace
from .pass_manager import PassContext


def _shift(index, offset):
    """``index - offset``; a zero offset leaves the index as it is (an int32 index of
    an int64-shaped buffer is not cast by subtracting an int64 zero)."""
    if isinstance(offset, IntImm) and offset.value == 0:
        return index
    return simplify(index - offset)


class Retarget(Mutator):
    """Accesses of ``old`` become accesses of ``new`` at ``index - offset``: loads and
    read regions always, stores and write regions too when ``writes``.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((8,), "float32", "A")
        >>> L = T.decl_buffer((4,), "float32", "L")
        >>> s = T.BufferStore(A, A[T.const(5)], (T.const(5),))
        >>> str(Retarget(A, L, (T.const(4),), writes=True).visit(s)).strip()
        'L[1] = L[1]'
    """

    def __init__(self, old, new, offset, writes: bool = True):
        self.old, self.new, self.offset, self.writes = old, new, offset, writes

    def _idx(self, indices):
        return tuple(_shift(i, o) for i, o in zip(indices, self.offset))

    def _region(self, r):
        if r.buffer is not self.old:
            return r
        return BufferRegion(self.new, tuple(Range(_shift(d.min, o), d.extent)
                                            for d, o in zip(r.region, self.offset)))

    def visit_BufferLoad(self, ld):
        ld = self.generic_visit(ld)
        return ld if ld.buffer is not self.old else BufferLoad(self.new, self._idx(ld.indices))

    def visit_BufferStore(self, st):
        st = self.generic_visit(st)
        if st.buffer is not self.old or not self.writes:
            return st
        return BufferStore(self.new, st.value, self._idx(st.indices))

    def visit_Call(self, c):
        # memory handed to a call (a T.call_extern region, an access_ptr): the callee
        # computes addresses from the buffer's layout, so only a buffer of the same shape
        # at offset 0 can stand in, and a read-only retarget only for a call that reads
        c = self.generic_visit(c)
        if not any(isinstance(a, BufferRegion) and a.buffer is self.old for a in c.args):
            return c
        same = [str(x) for x in self.old.shape] == [str(x) for x in self.new.shape] and \
            all(isinstance(o, IntImm) and o.value == 0 for o in self.offset)
        if not same or not (self.writes or _reads_only(c)):
            why = "has another shape or offset" if not same else "would not see the writes"
            raise LoweringError(
                f"{to_text(c)} receives {self.old.name}'s memory, and {self.new.name}, "
                f"which would replace it, {why}: the call's addresses would change. A "
                "buffer handed to a call can only be replaced by a same-shaped one")
        return Call(c.dtype, c.op, tuple(BufferRegion(self.new, a.region)
                                         if isinstance(a, BufferRegion) and
                                         a.buffer is self.old else a for a in c.args))

    def visit_Block(self, blk):
        import dataclasses
        new = self.generic_visit(blk)
        reads = tuple(self._region(r) for r in new.reads)
        writes = tuple(self._region(r) for r in new.writes) if self.writes else new.writes
        if all(a is b for a, b in zip(reads + writes, new.reads + new.writes)):
            return new
        return dataclasses.replace(new, reads=reads, writes=writes)


def _handed_to_call(node, buf) -> bool:
    """True when a call under ``node`` receives ``buf``'s memory (a region argument)."""
    found = []
    post_order_visit(node, lambda n: found.append(n) if isinstance(n, Call) and any(
        isinstance(a, BufferRegion) and a.buffer is buf for a in n.args) else None)
    return bool(found)


def _reads_only(c) -> bool:
    """True for a call that only reads the memory it receives."""
    return not ops.may_write(c)


# where a buffer may live -------------------------------------------------------------------

def _may_enter(loop: For, scope: str) -> bool:
    """Whether a buffer of ``scope`` may be allocated inside ``loop`` (per iteration)."""
    base = (scope or "global").split(".")[0]
    if loop.kind in ("vectorized", "unrolled"):
        return False
    if loop.kind == "thread_binding":
        if base == "local":
            return True
        return base == "shared" and not loop.thread_tag.startswith(shared_by_threads(scope))
    if loop.kind == "parallel":
        return base == "local"
    return True


def _touches(stmt, buf) -> bool:
    return _count(stmt, buf) > 0


def _count(stmt, buf) -> int:
    """How many loads, stores and declared regions of ``buf`` ``stmt`` holds."""
    hits = []
    post_order_visit(stmt, lambda n: hits.append(1) if isinstance(
        n, (BufferLoad, BufferStore, BufferRegion)) and n.buffer is buf else None)
    return len(hits)


def _blocks(stmt, doms, out):
    """``(realize, loop doms between stmt and it)`` of the outermost blocks in ``stmt``;
    False when ``stmt`` accesses buffers outside any block (opaque code)."""
    if isinstance(stmt, BlockRealize):
        out.append((stmt, doms))
        return out
    if isinstance(stmt, For):
        return _blocks(stmt.body, {**doms, stmt.loop_var: Range(stmt.min, stmt.extent)}, out)
    if isinstance(stmt, SeqStmt):
        for s in stmt.seq:
            _blocks(s, doms, out)
        return out
    body = getattr(stmt, "body", None)
    if body is not None and isinstance(stmt, Allocate):
        return _blocks(body, doms, out)
    out.append((stmt, None))            # opaque: the caller gives up on what it touches
    return out


def _region(realize, regions, buf, doms):
    out = None
    for r in regions:
        if r.buffer is buf:
            out = union(out, relax(bound_region(realize, r), doms))
    return out


def _covers(have: BufferRegion, want: BufferRegion, doms=()) -> bool:
    """Whether ``want`` lies in ``have`` for all values of the loops ``doms``."""
    from ..arith import Analyzer
    ana = Analyzer(index_no_overflow=True)
    for v, r in doms:
        ana.bind(v, r)
    return all(ana.can_prove(h.min <= w.min) and
               ana.can_prove(w.min + w.extent <= h.min + h.extent)
               for h, w in zip(have.region, want.region))


def _private(loop: For, buf, memo=None) -> bool:
    """Whether every iteration of ``loop`` uses ``buf`` on its own: each read is of
    what was written before it in the same iteration (or under the reader's own
    init), and no accumulation into ``buf`` spans iterations.  ``memo`` (a dict)
    shares the regions of blocks and their relaxation over inner loops between the
    calls for the loops of one nest (each call walks everything below its loop)."""
    memo = {} if memo is None else memo
    return _flow(loop.body, buf, [], [], loop.loop_var, memo) is not None


def _memo(memo, key, make):
    # ids of nodes of the tree being planned, alive during the pass; the values keep
    # the regions they were computed from alive too
    if key not in memo:
        memo[key] = make()
    return memo[key]


def _flow(stmt, buf, written, loops, var, memo):
    """The regions of ``buf`` that ``stmt`` writes (over the variables above it), or
    None when ``stmt`` reads an element not written before it within one iteration of
    the loop of ``var``.  ``written``: ``(region, depth)`` written earlier, recorded
    when ``depth`` of the ``loops`` (``(var, Range)`` entered below that loop) were
    open; a later read is relaxed over the loops entered since."""
    if not _touches(stmt, buf):
        return []
    if isinstance(stmt, SeqStmt):
        out = []
        for s in stmt.seq:
            w = _flow(s, buf, written + [(r, len(loops)) for r in out], loops, var, memo)
            if w is None:
                return None
            out += w
        return out
    if isinstance(stmt, For):
        dom = (stmt.loop_var, Range(stmt.min, stmt.extent))
        w = _flow(stmt.body, buf, written, loops + [dom], var, memo)
        return None if w is None else [
            _memo(memo, ("relax", id(stmt), id(r)), lambda r=r: (r, relax(r, dict([dom]))))[1]
            for r in w]
    if isinstance(stmt, Allocate):
        return _flow(stmt.body, buf, written, loops, var, memo)
    if not isinstance(stmt, BlockRealize):
        return None                         # opaque code: not analysed
    blk = stmt.block
    reads, writes = _memo(memo, ("block", id(stmt)), lambda: (
        _region(stmt, blk.reads, buf, {}), _region(stmt, blk.writes, buf, {})))
    # a reduction into buf (its update reads buf even when only the init is declared)
    if writes is not None and any(iv.kind == "reduce" and any(u is var for u in used_vars(v))
                                  for iv, v in zip(blk.iter_vars, stmt.iter_values)):
        return None                         # an accumulation across the loop's iterations
    if reads is not None:
        own = writes is not None and blk.init is not None and _covers(writes, reads)
        if not own and not any(_covers(w, relax(reads, dict(loops[depth:])), loops)
                               for w, depth in written):
            return None
    if writes is None or not _writes_all_it_declares(stmt):
        return []       # what a predicated block skips comes from elsewhere: no coverage
    return [writes]


def _writes_all_it_declares(realize) -> bool:
    """Whether the block writes its whole declared region: its predicate only keeps
    each iter value inside its domain (a boundary tile), like ``i_0 * 4 + i_1 < n``.
    Any other condition (a rolling buffer's ``i_0 < 1 or 5 <= ax0``) skips elements
    whose values an earlier iteration left in the buffer."""
    from ..arith import Analyzer
    from ..expr import GE, GT, LE, LT, SizeVar, Var
    from ..op import conjuncts
    from ..node import same

    def bounds_a_value(c):
        if not isinstance(c, (LT, LE, GT, GE)):
            return False
        for iv, val in zip(realize.block.iter_vars, realize.iter_values):
            for left in (True, False):
                side, other = (c.a, c.b) if left else (c.b, c.a)
                if not same(side, val) or any(not isinstance(v, SizeVar)
                                              for v in used_vars(other)):
                    continue
                w = Var("w", val.dtype)
                ana = Analyzer(index_no_overflow=True)
                ana.bind(w, iv.dom)
                if ana.can_prove(type(c)(w, other) if left else type(c)(other, w)):
                    return True
        return False

    pred = simplify(realize.predicate)
    if isinstance(pred, IntImm):
        return bool(pred.value)
    return all(bounds_a_value(c) for c in conjuncts(pred))


def _descend(body, buf):
    """``(path of For/BlockRealize nodes entered, node where buf is allocated)``."""
    entered, memo = [], {}
    node = body
    while True:
        if isinstance(node, For) and _may_enter(node, buf.scope) and _private(node, buf, memo):
            entered.append(node)
            node = node.body
        elif isinstance(node, SeqStmt):
            users = [s for s in node.seq if _touches(s, buf)]
            if len(users) != 1:
                return entered, node
            node = users[0]
        elif isinstance(node, Allocate):     # another buffer placed here already
            node = node.body
        else:
            return entered, node


def _box(node, buf, relaxed_threads: bool, doms_above: dict):
    """The box of ``buf`` that ``node`` touches (over the variables above ``node``):
    ``(shape, offset)`` with a constant or symbolic shape free of those variables, or
    None when it cannot be sized."""
    found = _blocks(node, {}, [])
    threads = None if relaxed_threads else _thread_vars(node, buf)
    box = None
    for realize, doms in found:
        if doms is None:
            if _touches(realize, buf):
                return None
            continue
        if not relaxed_threads:
            doms = {v: r for v, r in doms.items() if v not in threads}
        for regions in (realize.block.reads, realize.block.writes):
            r = _region(realize, regions, buf, doms)
            if r is not None:
                box = union(box, r)
    if box is None:
        return None
    shape, offset = [], []
    from ..arith import bound_of
    for d in box.region:
        ext = simplify(d.extent)
        if any(v in doms_above for v in used_vars(ext)):
            _, ext = bound_of(ext, doms_above)
            ext = simplify(ext)
            if any(v in doms_above for v in used_vars(ext)):
                return None
        shape.append(ext)
        offset.append(d.min)
    return tuple(shape), tuple(offset)


def _thread_vars(node, buf) -> set:
    """The variables of the thread-bound and parallel loops inside ``node`` that hold
    every access of ``buf`` there, each iteration using it privately: one copy per
    thread, so their iterations are not relaxed.  A loop whose threads share ``buf``
    (it is read after the loop, or accumulated across it) is relaxed like any other.
    (One walk for all loops: a walk per variable and block cost most of this pass.)"""
    loops = []
    post_order_visit(node, lambda n: loops.append(n) if isinstance(n, For)
                     and n.kind in ("thread_binding", "parallel") else None)
    if not loops:
        return set()
    memo, everywhere = {}, _count(node, buf)
    return {lp.loop_var for lp in loops
            if _count(lp, buf) == everywhere and _private(lp, buf, memo)}


def _within(sized, full, doms):
    """The box clipped to the buffer: a dimension whose box is not provably inside
    ``[0, extent)`` keeps the whole dimension.  Bounds of indices through a symbolic
    ``//`` or ``%`` are loose (down to the index type's minimum), and a box taken from
    them would be a buffer of 2**31 elements at an offset of -2**31."""
    from ..arith import Analyzer
    ana = Analyzer(index_no_overflow=True)
    for v, r in doms.items():
        ana.bind(v, r)
    shape, offset = [], []
    for ext, off, whole in zip(*sized, full):
        if ana.can_prove(off >= 0) and ana.can_prove(off + ext <= whole):
            shape.append(ext)
            offset.append(off)
        else:
            shape.append(whole)
            offset.append(IntImm(0, "int32"))
    return tuple(shape), tuple(offset)


class _Planner(Mutator):
    def __init__(self, scopes):
        self.scopes = scopes
        self.doms: dict = {}

    def visit_For(self, loop):
        saved = self.doms
        self.doms = {**saved, loop.loop_var: Range(loop.min, loop.extent)}
        try:
            return self.generic_visit(loop)
        finally:
            self.doms = saved

    def visit_BlockRealize(self, br):
        saved = self.doms
        self.doms = {**saved, **{iv.var: iv.dom for iv in br.block.iter_vars}}
        try:
            return self.generic_visit(br)
        finally:
            self.doms = saved

    def visit_Block(self, blk):
        import dataclasses
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
        if buf.strides or (self.scopes is not None and (buf.scope or "global")
                           not in self.scopes):
            return None
        entered, node = _descend(body, buf)
        doms = dict(self.doms)
        for s in entered:
            doms[s.loop_var] = Range(s.min, s.extent)
        local = (buf.scope or "global").split(".")[0] == "local"
        sized = _box(node, buf, not local, doms)
        if sized is not None and _handed_to_call(node, buf):
            sized = None    # a call computes addresses from the whole buffer's layout
        if sized is None:
            if not entered:
                return None
            new, offset = buf, tuple(IntImm(0, "int32") for _ in buf.shape)
        else:
            shape, offset = _within(sized, buf.shape, doms)
            new = buf.with_changes(shape=shape, strides=())
            if not entered and all(provably_le(a, b) and provably_le(b, a)
                                   for a, b in zip(shape, buf.shape)):
                return None         # already as small as it can be, and where it is
        moved = Allocate(new, Retarget(buf, new, offset).visit(node) if new is not buf
                         else node)
        return _Replace(node, moved).visit(body)


def plan_buffer_allocation(func: PrimFunc) -> PrimFunc:
    """Place and compact the buffers blocks allocate (see the module docstring).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> plan_buffer_allocation(f) is f
        True
    """
    scopes = _target_scopes()
    body = _Planner(scopes).visit(func.body)
    return func if body is func.body else func.with_body(body)


def _target_scopes():
    """The scopes of the memories of the ``PassContext``'s target (None: target-blind,
    all)."""
    target = PassContext.current().target
    if target is None:
        return None
    return {m.scope for m in target.kind_obj.memories}


__all__ = ["Retarget", "plan_buffer_allocation"]
