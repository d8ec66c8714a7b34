"""Loop partitioning: one loop becomes consecutive loops over sub-ranges of it.

``loop_partition(i, [2, 1, 64])`` on ``for i in T.serial(128)`` makes four loops, over
``[0, 2)``, ``[2, 3)``, ``[3, 67)`` and the rest ``[67, 128)``, each with its own copy
of the body (the way to peel a boundary tile, or give the first iterations their own
code).  The copies sit in blocks without iterators, one per partition, inside one block
that replaces the loop (TensorIR's layout):

    with T.block("B_i_common"):
        with T.block("B_i0_partition"):
            for i0 in T.serial(2):
                with T.block("B_i0"): ...
        with T.block("B_i1_partition"):
            for i1 in T.serial(2, 3): ...

Each copy has fresh loop and block iterator variables (so every loop handle names one
loop), and every block in it, including nested ones, gets the suffix ``_i0``, ``_i1``
... of its partition (``fresh_name`` keeps them unique).  A block iterator bound to the
partitioned loop itself gets its domain within the partition's range as its domain (under
a ``T.where``, the part may lie where the block never runs: its domain stays).  A block whose
reduction iterator is cut so keeps its init only in the partition holding the domain's
start: the init runs when the reduction iterators are at their domain's start, so with
the init kept every partition would start the reduction over (TensorIR keeps it; the
sum would be of the last partition only).  The later copies read what they accumulate.

The wrapper blocks declare the regions their bodies access (inferred), where TensorIR
leaves them empty: Cuvil's dependence analysis reads sibling blocks' regions, and an
empty region would hide the copies' accesses from it.  Each is cut to what the block
around the loop declares (a part whose ``T.where`` never holds infers its plain box,
which may overshoot it: a nested block's region must lie inside its parent's).

Example::

    >>> import cuvil_tir as T
    >>> import schedules as S
    >>> A = T.placeholder((10,), name="A")
    >>> sch = S.Schedule(T.create_prim_func([A, T.compute((10,), lambda i: A[i] * 2.0,
    ...                                                   name="B")]))
    >>> sch.loop_partition(sch.get_loops("B")[0], [3])
    [LoopRV(i0), LoopRV(i1)]
    >>> sch.get_loops("B_i1")
    [LoopRV(i1)]
"""

from __future__ import annotations

from cuvil_tir.arith import Analyzer
from cuvil_tir.block_regions import infer_block_regions
from cuvil_tir.expr import GE, LE, LT, IntImm, Var, const
from cuvil_tir.stmt import Block, BlockRealize, BufferRegion, For, IterVar, Range, SeqStmt
from cuvil_tir.visitor import Mutator, substitute

from cuvil_tir.analysis import tree
from ..analysis import const_int, fresh_name, loop_path
from ..errors import FactorError, schedule_error
from ..handles import LoopRV
from ..primitive import LOOP, LOOPS, Kind, Mismatch, primitive
from .nests import with_fields
from .loops import _check_plain
from .reduction import with_write_reads


def _lengths(v):
    if not isinstance(v, (list, tuple)) or not v:
        raise Mismatch()
    nones = 0
    out = []
    for k, f in enumerate(v):
        if f is None:
            nones += 1
            out.append(None)
            continue
        n = f.value if isinstance(f, IntImm) else f
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise Mismatch(f"element {k} is {f!r}; lengths are positive")
        out.append(n)
    if nones > 1:
        raise Mismatch("more than one None")
    return out


LENGTHS = Kind("lengths", "a non-empty list of positive ints, one of which may be None",
               _lengths, error=FactorError)


class _Copy(Mutator):
    """One partition's copy of a loop body (see the module docstring)."""

    def __init__(self, var, lo: int, hi: int, suffix: str, taken: set):
        self.var, self.lo, self.hi = var, lo, hi
        self.suffix, self.taken = suffix, taken
        self.vmap: dict = {}
        self.bmap: dict = {}

    def visit_Var(self, v):
        return self.vmap.get(v, v)

    def visit_buffer(self, b):
        return self.bmap.get(b, b)

    def visit_For(self, f):
        self.vmap[f.loop_var] = Var(f.loop_var.name, f.loop_var.dtype)
        return self.generic_visit(f)

    def _cut(self, dom):
        """The domain of an iterator bound to the partitioned loop: its domain within
        the partition's range.  Under a ``T.where`` the domain stays: the part may lie
        where the block never runs (a tail the predicate cuts away), and a domain cut
        there would put every access provably outside the regions it declares."""
        dt = dom.min.dtype
        lo, ext = const_int(dom.min), const_int(dom.extent)
        if lo is None or ext is None:
            return Range(const(self.lo, dt), const(self.hi - self.lo, dt))
        first, last = max(lo, self.lo), min(lo + ext, self.hi)
        return Range(const(first, dt), const(last - first, dt)) if first < last else dom

    def visit_BlockRealize(self, br):
        blk = br.block
        for b in blk.alloc_buffers:
            name = fresh_name(f"{b.name}_{self.suffix}", self.taken)
            self.taken.add(name)
            self.bmap[b] = with_fields(b, name=name)
        values = [self.visit(v) for v in br.iter_values]
        ivs, later = [], False
        for iv, val in zip(blk.iter_vars, values):
            new = Var(iv.var.name, iv.var.dtype)
            self.vmap[iv.var] = new
            dom = iv.dom
            if val is self.var and _is_true(br.predicate):
                dom = self._cut(iv.dom)
            if val is self.var:
                start = const_int(iv.dom.min)
                later |= iv.kind == "reduce" and (start is None or start < self.lo)
            ivs.append(IterVar(new, dom, iv.kind))
        new_blk = self.generic_visit(with_fields(blk, iter_vars=()))
        name = fresh_name(f"{blk.name}_{self.suffix}", self.taken)
        self.taken.add(name)
        new_blk = with_fields(new_blk, name=name, iter_vars=tuple(ivs))
        if later and new_blk.init is not None:
            # the reduction started in an earlier partition: no init here, and the
            # block now reads what it accumulates into
            new_blk = with_fields(new_blk, init=None, reads=with_write_reads(new_blk))
        return BlockRealize(values, self.visit(br.predicate), new_blk)


def _enclosing(func, path):
    """The nearest block above ``path`` that declares regions (None: the root, which
    declares none)."""
    for _, s in reversed(tree.ancestors(func, path)):
        if isinstance(s, Block):
            return s if s.iter_vars or s.reads or s.writes else None
    return None


def _inside(regions, enclosing, pools, outer: dict) -> tuple:
    """``regions`` cut, per side of each dimension, to the region ``enclosing``
    declares for the same buffer (the first of ``pools`` naming it): its body's
    accesses lie there by the region contract, and a part's bounding box that
    overshoots it (a part whose T.where never holds declares its plain box) would
    size a cache stage outside the enclosing block's declaration (case 3479583659)."""
    if enclosing is None:
        return regions
    ana = Analyzer(index_no_overflow=True)
    for v, r in outer.items():
        ana.bind(v, r)
    out = []
    for reg in regions:
        held = next((r for pool in pools for r in getattr(enclosing, pool)
                     if r.buffer is reg.buffer), None)
        if held is None:
            out.append(reg)
            continue
        dims = []
        for r, e in zip(reg.region, held.region):
            r_end, e_end = r.min + r.extent, e.min + e.extent
            lo = e.min if ana.can_prove(GE(e.min, r.min)) else r.min
            hi = e_end if ana.can_prove(LE(e_end, r_end)) else r_end
            if ana.can_prove(LE(hi, lo)):
                dims.append(e)      # the part touches nothing here: any part of e holds
            elif ana.can_prove(LT(lo, hi)):
                dims.append(Range(ana.simplify(lo), ana.simplify(hi - lo)))
            else:
                dims.append(r)
        out.append(BufferRegion(reg.buffer, tuple(dims)))
    return tuple(out)


def _outer_ranges(func, path) -> dict:
    """``{Var: Range}`` of the loops and block iterators above ``path``: a part's
    region is then the row of the iteration it runs in, where the iterators' domains
    alone would declare every row (a cache_read sized from it copied them all)."""
    out = {}
    for _, s in tree.ancestors(func, path):
        if isinstance(s, For):
            out[s.loop_var] = Range(s.min, s.extent)
        elif isinstance(s, Block):
            out.update((iv.var, iv.dom) for iv in s.iter_vars)
    return out


def _is_true(cond) -> bool:
    return isinstance(cond, IntImm) and bool(cond.value)


def _first_block_name(stmt) -> str:
    blocks = tree.blocks_under(stmt)
    return blocks[0].block.name if blocks else "loop"


def _opaque(name: str, body, outer: dict, enclosing) -> BlockRealize:
    blk = Block(name, (), (), (), body)
    reads, writes = infer_block_regions(blk, outer)
    reads = _inside(reads, enclosing, ("reads", "writes"), outer)
    writes = _inside(writes, enclosing, ("writes",), outer)
    return BlockRealize((), IntImm(1, "bool"), with_fields(blk, reads=reads, writes=writes))


@primitive("loop_partition", loop=LOOP, factors=LENGTHS, returns=LOOPS)
def loop_partition(func, loop, factors, preserve_unit_iters: bool = True):
    """Split ``loop`` into consecutive loops of the lengths ``factors`` (one may be
    ``None``: the rest of the loop); when the lengths leave iterations over and none is
    ``None``, a last loop runs the rest.  Returns the new loops, in order.

    The given lengths must add up to less than the loop's extent, which must be
    constant; the loop may carry no thread binding, kind or annotation (the copies are
    serial loops, which would drop them).  Each copy of the body sits in its own block;
    see :mod:`schedules.primitives.partition`.  Before/after ``[2, None]``::

        for i in T.serial(8):             with T.block("B_i_common"):
            with T.block("B"):                with T.block("B_i0_partition"):
                vi = T.axis.spatial(8, i)         for i0 in T.serial(2):
                ...                                   with T.block("B_i0"): ...
                                              with T.block("B_i1_partition"):
                                                  for i1 in T.serial(2, 8): ...

    ``preserve_unit_iters`` is TensorIR's flag; every iterator is kept either way.

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((8,), name="A")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute((8,), lambda i: A[i],
        ...                                                   name="B")]))
        >>> sch.loop_partition(sch.get_loops("B")[0], [2, None])
        [LoopRV(i0), LoopRV(i1)]
        >>> [b.name for b in sch.get_child_blocks(sch.get_block("B_i_common"))]
        ['B_i0_partition', 'B_i1_partition']
    """
    name = "loop_partition"
    path = loop_path(func, loop, name)
    node = tree.get(func, path)
    _check_plain(node, name, func)
    lo, extent = const_int(node.min), const_int(node.extent)
    if lo is None or extent is None:
        raise schedule_error(FactorError, name, f"loop {node.loop_var.name} starts at "
                             f"{node.min} and has extent {node.extent}, which are not both "
                             "constant: the partition points must be known; split the "
                             "loop instead (split guards a symbolic extent)", func, node)
    given = sum(f for f in factors if f is not None)
    if given >= extent:
        raise schedule_error(FactorError, name, f"lengths {factors} add up to {given}, "
                             f"but loop {node.loop_var.name} has only {extent} iterations "
                             "and the last partition needs at least one; give lengths "
                             f"adding up to less than {extent}", func, node)
    lengths = [f if f is not None else extent - given for f in factors]
    if None not in factors:
        lengths.append(extent - given)
    taken = {b.block.name for b in tree.blocks_under(func.body)}
    taken |= {b.name for br in tree.blocks_under(func.body) for b in br.block.alloc_buffers}
    base = node.loop_var.name
    title = f"{_first_block_name(node.body)}_{base}"
    dt = node.loop_var.dtype
    parts, loops = [], []
    outer = _outer_ranges(func, path)
    enclosing = _enclosing(func, path)
    start = lo
    for k, n in enumerate(lengths):
        var = Var(f"{base}{k}", dt)
        body = substitute(node.body, {node.loop_var: var})
        body = _Copy(var, start, start + n, var.name, taken).visit(body)
        parts.append(_opaque(fresh_name(f"{title}{k}_partition", taken),
                             For(var, const(start, dt), const(n, dt), "serial", body),
                             outer, enclosing))
        taken.add(parts[-1].block.name)
        loops.append(LoopRV(var))
        start += n
    common = _opaque(fresh_name(f"{title}_common", taken), SeqStmt(tuple(parts)), outer,
                     enclosing)
    return tree.replace(func, path, common), loops
