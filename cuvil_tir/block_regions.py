"""The regions a block's body accesses (what :mod:`cuvil_tir.region_check` checks a
block's declared regions against, and what an inferred region is made of).

Accesses are expressed over the block's own iterators: loops *inside* the block are
relaxed over their ranges, and a nested block contributes its declared regions, bound
to its iter values and relaxed over the loops between the two blocks.  Buffers the
block (or a block inside it) allocates are not part of its regions.

An access under a condition (``if``, ``T.if_then_else``) is marked guarded: the guard
may keep it inside any region.  Each access also carries how to take its exact bounds
over the points of a small nest (:mod:`cuvil_tir.region_points`) and, for a nested
block's region, the accesses of that block's body.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((8,), name="A")
    >>> f = T.create_prim_func([A, T.compute((7,), lambda i: A[i] + A[i + 1], name="B")])
    >>> blk = f.body.block.body.body.block          # root > loop > block B
    >>> [str(r) for r in infer_block_regions(blk)[0]]
    ['A[v_i:v_i + 2]']
"""

from __future__ import annotations

from dataclasses import dataclass

from . import dtype as D
from . import ops
from .arith import Analyzer, bound_of
from .arith.affine import Affine, Key, is_index_dtype
from .buffer import Buffer
from .expr import GE, GT, LE, LT, Expr, IntImm, Max, Min, Ramp, Var
from .printer import to_text
from .region_points import point_bounds
from .stmt import Block, BufferRegion, Range
from .node import same
from .visitor import Mutator, Visitor, substitute, used_vars
from .analysis.predicate_doms import below_zero, bound_conjuncts, tighten


@dataclass
class Access:
    """One access of a block's body: inclusive bounds per dimension over the block's
    iterators (``None`` where unknown); ``guarded`` when under a condition."""

    buffer: Buffer
    bounds: tuple          # ((lo, hi) | None, ...) per dimension
    write: bool
    guarded: bool
    text: str              # how the access reads in the source, for messages
    # a nested block's declared region: the accesses of that block's body, which the
    # region bounds (a callable giving them, relaxed as this one), else None
    inner: object = None
    # a callable giving its exact bounds over the points of its loops (region_points)
    exact: object = None


class _Collect(Visitor):
    def __init__(self, ana: Analyzer, outer: dict | None = None):
        self.ana = ana
        self.loops: dict = {}
        self.guards = 0
        self.local: set[int] = set()
        self.out: list[Access] = []
        # for exact bounds by points: the loops around the block, and (in a nested
        # block's body) its iterators' bindings and the T.where of the blocks between
        self.outer = dict(outer or {})
        self.bind: dict = {}
        self.preds: tuple = ()

    def relax(self, buf, ranges, write, text, clip=False, also=None, cond=None,
              inner=None, points=None):
        """Record the access of ``ranges`` of ``buf`` relaxed over the loops; ``also``:
        other ranges, relaxed over other loops, that bound it too, and ``cond``: other
        ranges and a ``T.where`` that bounds them (the tighter is kept per side);
        ``points``: the ranges and predicate to enumerate for exact bounds (default: the
        ranges over the loops)."""
        plain = dims = self._dims(buf, ranges, clip, self.loops)
        if also is not None:
            dims = self._tighter(dims, self._dims(buf, also[0], clip, also[1]))
        if cond is not None:
            dims = self._tighter(dims, self._by_predicate(*cond))
        never = any(d is not None and None not in d and self.ana.fixed_prove(LT(d[1], d[0]))
                    for d in dims)
        if never:
            # a T.where that never holds (a part of loop_partition its predicate cuts
            # away): every bound is vacuous, and another nest of the same block (a
            # split of the part) would not reach the same ones.  Its plain box is
            # declared; as a guarded access, it is never reported outside
            dims = plain
        rs, pred = points if points is not None else (ranges, None)
        if self.bind:
            rs = [Range(substitute(r.min, self.bind), substitute(r.extent, self.bind))
                  for r in rs]
            pred = substitute(pred, self.bind) if pred is not None else None
        conds = self.preds + ((pred,) if pred is not None else ())
        loops = {**self.outer, **self.loops}
        self.out.append(Access(buf, tuple(dims), write, self.guards > 0 or never, text,
                               inner, lambda: point_bounds(rs, conds, loops)))

    def _tighter(self, dims, other):
        out = []
        for a, b in zip(dims, other):
            if a is None or b is None:
                out.append(b if a is None and b is not None and None not in b else a)
                continue
            out.append(tuple(x if y is None else y if x is None else
                             self._pick(x, y, lower) for x, y, lower in
                             ((a[0], b[0], True), (a[1], b[1], False))))
        return out

    def _by_predicate(self, ranges, cond):
        """Bounds of ``ranges`` (over the loops) from the conjuncts ``e < 0`` of a
        ``T.where``: an index ``x`` with ``x - e`` bounded by ``u`` is at most ``u - 1``
        (``T.where(vo * 2 + i < 3)`` keeps ``v * 3 + vo * 2 + i`` below ``v * 3 + 3``,
        which bounding ``vo`` and ``i`` apart overshoots); ``x + e`` bounds it below."""
        conds = [e for e in map(below_zero, bound_conjuncts(cond)) if e is not None]
        dims = []
        for r in ranges:
            lo = hi = None
            for e in conds:
                if e.dtype != r.min.dtype:
                    continue
                for m in _multiples(r.min, e):
                    k = IntImm(m, e.dtype)
                    try:
                        up = bound_of(self.ana.fixed_simplify(r.min + r.extent - 1 - e * k),
                                      self.loops, self.ana)[1] - k
                        down = bound_of(self.ana.fixed_simplify(r.min + e * k), self.loops,
                                        self.ana)[0] + k
                    except Exception:    # noqa: BLE001 - a bound we cannot take: none
                        continue
                    up, down = self.ana.fixed_simplify(up), self.ana.fixed_simplify(down)
                    hi = up if hi is None else self._pick(hi, up, False)
                    lo = down if lo is None else self._pick(lo, down, True)
            capped = self._capped(cond)
            for pairs in [[c] for c in capped] + ([capped] if len(capped) > 1 else []):
                got = self._through(r, pairs)
                if got is not None:
                    hi = got[1] if hi is None else self._pick(hi, got[1], False)
                    lo = got[0] if lo is None else self._pick(lo, got[0], True)
            dims.append(None if lo is None and hi is None else (lo, hi))
        return dims

    def _capped(self, cond):
        """``(x, top)`` for each conjunct ``x <= top`` of ``cond`` whose ``x`` is a
        compound of the loops and ``top`` names none of them."""
        out = []
        for c in bound_conjuncts(cond):
            if isinstance(c, (LT, LE)):
                x, top = c.a, (c.b - 1 if isinstance(c, LT) else c.b)
            elif isinstance(c, (GT, GE)):
                x, top = c.b, (c.a - 1 if isinstance(c, GT) else c.a)
            else:
                continue
            loops = set(self.loops)
            if isinstance(x, Var) or not any(v in loops for v in used_vars(x)) or \
                    any(v in loops for v in used_vars(top)):
                continue
            out.append((self.ana.fixed_simplify(x), self.ana.fixed_simplify(top)))
        return out

    def _through(self, r, pairs):
        """Bounds of the range ``r`` where it names each ``x`` of the ``(x, top)``
        ``pairs`` (``T.where(f0 * 5 + f1 < 9)`` keeps ``(f0 * 5 + f1) // 3`` at most 2,
        which bounding ``f0`` and ``f1`` apart overshoots): ``x`` is a stand-in ranging
        up to ``top``.  Several pairs at once bound an index of several capped terms
        (``(a * 3 + b) * 2 + (f0 * 5 + f1) // 4`` under ``T.where(a * 3 + b < 1 and
        f0 * 5 + f1 < 8)``: each cap alone leaves the other term unbounded)."""
        first = self.ana.fixed_simplify(r.min)
        last = self.ana.fixed_simplify(r.min + r.extent - 1)
        loops = dict(self.loops)
        try:
            # the smallest compounds first: a cap on the whole index would hide them
            stood = 0
            for n, (x, top) in enumerate(sorted(pairs, key=lambda p: len(str(p[0])))):
                t = Var(f"t_cap{n}", x.dtype)
                first, last = self._stand_in(first, x, t), self._stand_in(last, x, t)
                if not any(v is t for v in used_vars(first) + used_vars(last)):
                    continue
                stood += 1
                start = bound_of(x, self.loops, self.ana)[0]
                if self.ana.fixed_prove(LT(top, start)):
                    return None  # the conjunct never holds: an empty range proves anything
                loops[t] = Range(start, self.ana.fixed_simplify(top - start + 1))
            if not stood:
                return None
            return (self.ana.fixed_simplify(bound_of(first, loops, self.ana)[0]),
                    self.ana.fixed_simplify(bound_of(last, loops, self.ana)[1]))
        except Exception:    # noqa: BLE001 - a bound we cannot take: none
            return None

    def _stand_in(self, e, x, t):
        """``e`` with the compound ``x`` replaced by ``t``: where it occurs as written,
        else where the simplifier spread a multiple of it over ``e``'s terms
        (``(a * 3 + b) * 2`` is ``a * 6 + b * 2``): ``e - m * x + m * t`` when that
        leaves none of ``x``'s variables."""
        got = _Replace(x, t).visit(e)
        if any(v is t for v in used_vars(got)):
            return got
        mine = {id(v) for v in used_vars(x)}
        for m in _multiples(e, x):
            rest = self.ana.fixed_simplify(e - x * IntImm(m, x.dtype))
            if not any(id(v) in mine for v in used_vars(rest)):
                return rest + t * IntImm(m, x.dtype)
        return e

    def _pick(self, a, b, lower: bool):
        """The tighter of two bounds where provably so, else ``a``."""
        return b if self.ana.fixed_prove(b >= a if lower else b <= a) else a

    def _dims(self, buf, ranges, clip, loops):
        dims = []
        for d, r in enumerate(ranges):
            try:
                last = r.min + r.extent - 1
                if loops:
                    lo, _ = bound_of(r.min, loops, self.ana)
                    _, hi = bound_of(last, loops, self.ana)
                else:
                    lo, hi = r.min, last
                if clip and lo.dtype == buf.shape[d].dtype:
                    # a declared region may overhang the buffer (a tile of a
                    # non-dividing split, TensorIR's regions): only its part inside the
                    # buffer can be accessed
                    lo, hi = Max(lo, IntImm(0, lo.dtype)), Min(hi, buf.shape[d] - 1)
                dims.append((self.ana.fixed_simplify(lo), self.ana.fixed_simplify(hi)))
            except Exception:        # noqa: BLE001 - an index we cannot bound: unknown
                dims.append(None)
        return dims

    def ranges(self, indices):
        out = []
        for ix in indices:
            if isinstance(ix, Ramp):
                if isinstance(ix.stride, IntImm) and ix.stride.value >= 0:
                    out.append(Range(ix.base, IntImm(ix.stride.value * (ix.lanes - 1) + 1,
                                                     ix.base.dtype)))
                    continue
                out.append(Range(ix.base, IntImm(1, ix.base.dtype)))   # bounded below only
                continue
            out.append(Range(ix, IntImm(1, ix.dtype)))
        return out

    def visit_BufferLoad(self, ld):
        self.visit(ld.indices)
        if id(ld.buffer) not in self.local:
            self.relax(ld.buffer, self.ranges(ld.indices), False, to_text(ld))

    def visit_BufferStore(self, st):
        self.visit(st.value)
        self.visit(st.indices)
        if id(st.buffer) not in self.local:
            text = to_text(st).splitlines()[0].split(" = ")[0]
            self.relax(st.buffer, self.ranges(st.indices), True, text)

    def visit_For(self, s):
        self.visit(s.min)
        self.visit(s.extent)
        self.loops[s.loop_var] = Range(s.min, s.extent)
        try:
            self.visit(s.body)
        finally:
            del self.loops[s.loop_var]

    def visit_IfThenElse(self, s):
        self.visit(s.condition)
        self.guards += 1
        try:
            self.visit(s.then_case)
            self.visit(s.else_case)
        finally:
            self.guards -= 1

    def visit_Call(self, c):
        if ops.branches(c) is None:
            return self.generic_visit(c)
        self.visit(c.args[0])
        self.guards += 1
        try:
            self.visit(c.args[1:])
        finally:
            self.guards -= 1

    def visit_Allocate(self, s):
        self.local.add(id(s.buffer))
        self.visit(s.body)

    def visit_BlockRealize(self, br):
        self.visit(br.iter_values)
        self.visit(br.predicate)
        blk = br.block
        self.local.update(id(b) for b in blk.alloc_buffers)
        vmap = {iv.var: v for iv, v in zip(blk.iter_vars, br.iter_values)}
        # under a T.where the bindings overshoot (a non-dividing split): the iter vars'
        # domains, which the predicate keeps them in, bound the regions instead
        predicated = not (isinstance(br.predicate, IntImm) and br.predicate.value)
        capped = self._capped(br.predicate) if predicated else []
        doms = {iv.var: self._dom(iv, v, capped)
                for iv, v in zip(blk.iter_vars, br.iter_values)} if predicated else {}
        # ... and the loops the predicate cuts bound the bound regions too (T.where(i_1
        # < 3) under a loop of 4: three instances run)
        cut = tighten(dict(self.loops), br.predicate) if predicated else None
        cut = cut if cut is not None and any(
            cut[v] is not r for v, r in self.loops.items()) else None
        self.loops.update(doms)
        inner = self._inner(br)
        try:
            for regions, write in ((blk.reads, False), (blk.writes, True)):
                for r in regions:
                    if id(r.buffer) in self.local:
                        continue
                    bound = [Range(substitute(x.min, vmap), substitute(x.extent, vmap))
                             for x in r.region]
                    rs = list(r.region) if predicated else bound
                    self.relax(r.buffer, rs, write, f"{to_text(r)} (block '{blk.name}')",
                               clip=True, also=(bound, cut) if cut is not None else None,
                               cond=(bound, br.predicate) if predicated else None,
                               inner=inner, points=(bound, br.predicate))
        finally:
            for v in doms:
                del self.loops[v]

    def _dom(self, iv, value, capped):
        """The range of the iterator ``iv`` bound to ``value`` under a ``T.where``: its
        domain, each side cut by the binding's bound over the loops where provably
        tighter (a loop_partition part binds ``v1 = 1 + ax1``, a column its domain
        ``[0, 4)`` would let start at 0, outside the part's declared ``1:4``), and by
        its bound through the compounds the ``T.where`` caps (``capped``, see
        :meth:`_capped`: ``f0 * 3 + f1 < n`` keeps ``(f0 * 3 + f1) // n`` at 0, a
        split of a fused loop of extent n)."""
        got = [self._plain_bound(value)]
        if capped:
            got.append(self._through(Range(value, IntImm(1, value.dtype)), capped))
        got = [b for b in got if b is not None]
        first, last = iv.dom.min, self.ana.fixed_simplify(iv.dom.min + iv.dom.extent - 1)
        for lo, hi in got:
            if lo.dtype != first.dtype:
                continue
            first = self._pick(first, self.ana.fixed_simplify(lo), True)
            last = self._pick(last, self.ana.fixed_simplify(hi), False)
        if not got or self.ana.fixed_prove(LT(last, first)):
            # the binding never meets the domain: the block never runs (its T.where
            # fails), and an empty range would let the analyzer prove anything
            return iv.dom
        return Range(first, self.ana.fixed_simplify(last - first + 1))

    def _plain_bound(self, value):
        """``(lo, hi)`` of ``value`` over the loops, or None where it cannot be taken."""
        try:
            return bound_of(value, self.loops, self.ana)
        except Exception:    # noqa: BLE001 - a binding we cannot bound: no cut from it
            return None

    def _inner(self, br):
        """A callable giving the accesses of the body of ``br``'s block relaxed over
        the loops here and its iterators over their domains (its check keeps them
        within its declared regions); their points see the iterators' bindings."""
        blk = br.block
        loops = dict(self.loops)
        loops.update((iv.var, iv.dom) for iv in blk.iter_vars)
        guards, local = self.guards, set(self.local)
        bind = {**self.bind, **{iv.var: substitute(v, self.bind) if self.bind else v
                                for iv, v in zip(blk.iter_vars, br.iter_values)}}
        pred = substitute(br.predicate, self.bind) if self.bind else br.predicate
        preds = self.preds + (pred,)

        def accesses():
            c = _Collect(self.ana, self.outer)
            c.bind, c.preds = bind, preds
            c.loops, c.guards, c.local = dict(loops), guards, set(local)
            if blk.init is not None:
                c.visit(blk.init)
            c.visit(blk.body)
            return c.out
        return accesses


def _multiples(x, e) -> list:
    """The factors ``m`` for which ``x - m * e`` (or ``x + m * e``) may cancel terms of
    ``x``: 1, and each ratio of a term's coefficient in ``x`` to its coefficient in
    ``e`` (``x = f0 * 4 + f1 * 2 + i`` under ``e = f0 * 2 + f1 - 3``: 2)."""
    if not (is_index_dtype(x.dtype) and is_index_dtype(e.dtype)):
        return [1]
    mine = {Key(t): c for t, c in Affine.of(x).terms}
    out = [1]
    for t, c in Affine.of(e).terms:
        c_x = mine.get(Key(t))
        if c_x is not None and c and c_x % c == 0 and abs(c_x // c) not in out:
            out.append(abs(c_x // c))
    return out


class _Replace(Mutator):
    """Each occurrence of the expression ``target`` replaced by ``by``."""

    def __init__(self, target, by):
        self.target, self.by = target, by

    def generic_visit(self, n):
        return self.by if same(n, self.target) else Mutator.generic_visit(self, n)


def block_accesses(block: Block, outer: dict | None = None) -> list[Access]:
    """Every access of ``block``'s body and init, over the block's iterators
    (``outer``: ``{Var: Range}`` of the loops and iterators around the block, which
    bound the bindings of the blocks inside it).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] * 2.0, name="B")])
        >>> [(a.buffer.name, a.write) for a in block_accesses(f.body.block.body.body.block)]
        [('A', False), ('B', True)]
    """
    return _accesses(block, _analyzer(block, outer), outer)


def _accesses(block: Block, ana: Analyzer, outer: dict | None) -> list[Access]:
    c = _Collect(ana, outer)
    c.local.update(id(b) for b in block.alloc_buffers)
    if block.init is not None:
        c.visit(block.init)
    c.visit(block.body)
    return c.out


class BlockAnalyzer(Analyzer):
    """The analyzer of one block's regions: what it knows (the block's iterators and
    the loops around it) is bound once, then :meth:`fixed_simplify` and
    :meth:`fixed_prove` answer at that knowledge, each distinct expression once (a
    block's accesses and declared regions repeat the same indices: a GEMM candidate's
    checks simplified each about five times).  ``bound_of`` binds more while it runs
    and calls the plain ``simplify``, which stays unremembered.

    Example::

        >>> import cuvil_tir as T
        >>> ana, i = BlockAnalyzer(), T.var("i")
        >>> ana.bind(i, T.Range.from_extent(4))
        >>> ana.fixed_prove(i < 4), str(ana.fixed_simplify(T.min(i, 8)))
        (True, 'i')
    """

    def __init__(self, index_no_overflow: bool = False):
        super().__init__(index_no_overflow)
        self._fixed: dict = {}

    def bind(self, var, value) -> None:
        self._fixed.clear()   # what was remembered was at the old knowledge
        super().bind(var, value)

    def fixed_simplify(self, e) -> Expr:
        """``simplify(e)``, remembered by structure (see the class doc)."""
        key = Key(e)
        got = self._fixed.get(key)
        if got is None:
            got = self._fixed[key] = self.simplify(e)
        return got

    def fixed_prove(self, cond) -> bool:
        """``can_prove(cond)``, through :meth:`fixed_simplify`."""
        c = self.fixed_simplify(cond)
        return isinstance(c, IntImm) and D.is_bool(c.dtype) and c.value == 1


def _analyzer(block: Block, outer: dict | None = None) -> BlockAnalyzer:
    ana = BlockAnalyzer(index_no_overflow=True)
    for v, r in (outer or {}).items():
        ana.bind(v, r)
    for iv in block.iter_vars:
        ana.bind(iv.var, iv.dom)
    return ana


def infer_block_regions(block: Block, outer: dict | None = None) -> tuple[tuple, tuple]:
    """``(reads, writes)`` of ``block`` inferred from its body (bounding boxes);
    ``outer``: ``{Var: Range}`` of the loops and iterators around it, where known (a
    block inside a loop then declares the row of that loop's iteration, not every row).

    A buffer the block writes is left out of its reads only when the block has an
    ``init`` (a reduction's update reads what it writes by construction).  A dimension
    whose accesses cannot be bounded, or differ by non-constant amounts, is the
    buffer's whole extent.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((8,), name="A")
        >>> f = T.create_prim_func([A, T.compute((8,), lambda i: A[i], name="B")])
        >>> reads, writes = infer_block_regions(f.body.block.body.body.block)
        >>> [str(r) for r in reads], [str(w) for w in writes]
        (['A[v_i]'], ['B[v_i]'])
    """
    acc = block_accesses(block, outer)
    ana = _analyzer(block, outer)
    writes = _merge([a for a in acc if a.write], ana)
    written = {id(w.buffer) for w in writes}
    loads = [a for a in acc if not a.write and
             not (block.init is not None and id(a.buffer) in written)]
    return _merge(loads, ana), writes


def _merge(accesses, ana) -> tuple:
    order: list = []
    boxes: dict[int, list] = {}
    for a in accesses:
        key = id(a.buffer)
        if key not in boxes:
            order.append(a.buffer)
            boxes[key] = list(a.bounds)
            continue
        box = boxes[key]
        for d, (old, new) in enumerate(zip(box, a.bounds)):
            if old is None or new is None:
                box[d] = None
                continue
            lo = _pick(old[0], new[0], ana, lower=True)
            hi = _pick(old[1], new[1], ana, lower=False)
            box[d] = None if lo is None or hi is None else (lo, hi)
    out = []
    for buf in order:
        dims = []
        for d, b in enumerate(boxes[id(buf)]):
            if b is None:
                dims.append(Range(IntImm(0, buf.shape[d].dtype), buf.shape[d]))
            else:
                dims.append(Range(b[0], ana.simplify(b[1] - b[0] + 1)))
        out.append(BufferRegion(buf, tuple(dims)))
    return tuple(out)


def _pick(x: Expr, y: Expr, ana: Analyzer, lower: bool):
    if x.dtype != y.dtype:
        return None
    d = ana.simplify(x - y)
    if not isinstance(d, IntImm):
        return None
    return (y if d.value > 0 else x) if lower else (x if d.value > 0 else y)


def widen_block_regions(block: Block) -> Block:
    """``block`` with its declared ``reads``/``writes`` grown to cover what its body
    accesses (each buffer's box is the hull of the declared region and the accesses;
    a dimension with no provable hull is the buffer's whole extent).

    How a function written for TVM is read (TVM does not check the declarations):
    the widened regions keep the contract the schedule primitives rely on.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((8,), "float32", "A")
        >>> B = T.decl_buffer((8,), "float32", "B")
        >>> v = T.var("vi")
        >>> blk = T.Block("B", (T.IterVar(v, T.Range.from_extent(7), "spatial"),),
        ...               (T.BufferRegion(A, (T.Range(v, T.const(1)),)),),
        ...               (T.BufferRegion(B, (T.Range(v, T.const(1)),)),),
        ...               T.BufferStore(B, A[v + 1], (v,)))
        >>> [str(r) for r in widen_block_regions(blk).reads]
        ['A[vi:vi + 2]']
    """
    ana = _analyzer(block)
    acc = block_accesses(block)

    def declared(regions, write):
        return [Access(r.buffer, tuple((x.min, ana.simplify(x.min + x.extent - 1))
                                       for x in r.region), write, False, to_text(r))
                for r in regions]

    writes = _merge(declared(block.writes, True) + [a for a in acc if a.write], ana)
    written = {id(w.buffer) for w in writes}
    loads = [a for a in acc if not a.write and
             not (block.init is not None and id(a.buffer) in written)]
    reads = _merge(declared(block.reads, False) + loads, ana)
    return Block(block.name, block.iter_vars, reads, writes, block.body, block.init,
                 block.alloc_buffers, block.annotations)


__all__ = ["Access", "block_accesses", "infer_block_regions", "widen_block_regions"]
