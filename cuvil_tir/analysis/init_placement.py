"""Where a reduction's ``T.init`` may run when it leaves its block, and the nest that
runs it there.

A reduction block runs its init when its reduce iter vars sit at their minimum, once
per block instance.  ``decompose_reduction`` (and ``blockize``, for the outer block)
hoist that init into a nest of its own in front of some loops; the result computes the
same only if, within one iteration of the loops left outside, those loops reach each
block instance once.  Two things break that:

- a loop that feeds no iter value (``compute_at`` under a consumer loop that does not
  index the block): the block, init included, reruns in each of its iterations;
- iterations that meet on one instance (``compute_at`` of a sliding window,
  ``v = i + ax0``, or ``v = i // 2``): the init would run once where it ran per pass.

:func:`reach_blocker` says which of them holds, proving the rest by a mixed-radix
argument on each iter value (``k_0 * 4 + k_1`` with ``k_1`` in ``[0, 4)``) and on the
``e // c``, ``e % c`` pairs of a fused loop.  :func:`init_guard` decides which parts of
the block's ``T.where`` the init keeps.  TensorIR drops a part that names a loop the
init does not regenerate; here such a part is dropped only where it provably holds at
the iteration the reduction starts (:func:`start_point`), and kept there otherwise: a
split guard ``k_0 * 4 + k_1 < K`` holds at ``k = 0`` once ``K >= 1`` (and an empty
reduction still writes its identity), while ``u_0 * 3 + u_1 < 1`` in a
``loop_partition`` part where ``u_1`` starts at 2 never holds, so that part's init must
not run.  A part coupling such a loop with what the init's spatial iter values depend
on cannot be dropped without writing out of bounds, and is refused.

Example::

    >>> from cuvil_tir.analysis import tree
    >>> from cuvil_tir.te.examples import matmul
    >>> f = matmul(4, 4, 4)
    >>> path = tree.find_block(f, "C")
    >>> loops = [l for _, l in tree.loops_above(f, path)]
    >>> init_blocker(tree.get(f, path), loops) is None
    True
    >>> init_nest(tree.get(f, path), loops, "C_init").loop_var.name
    'i_init'
"""

from __future__ import annotations

from typing import NamedTuple

from ..arith import Analyzer
from ..arith.affine import Affine, Key
from ..expr import EQ, GE, LE, FloorDiv, FloorMod, IntImm, Var, const
from ..op import all as all_of, any as any_of, conjuncts
from ..stmt import Block, BlockRealize, BufferRegion, For, IterVar, Range
from ..structural import structural_equal
from ..visitor import Visitor, substitute, used_vars
from .predicate_doms import tighten
from .regions import bound_region, relax


def _extent(loop):
    return loop.extent.value if isinstance(loop.extent, IntImm) else None


def _radix_blocker(coeffs: dict, ext: dict) -> str | None:
    """Why ``sum(c * v)`` over the loop vars in ``coeffs`` ({id: (var, c)}) may take one
    value twice, or None (a mixed radix: each coefficient exceeds the span of the smaller
    ones; a symbolic extent only on the largest)."""
    span = 0
    order = sorted(coeffs.values(), key=lambda t: abs(t[1]))
    for n, (v, c) in enumerate(order):
        if abs(c) <= span:
            return f"the loops {sorted(u.name for u, _ in order)} overlap in it"
        e = ext[id(v)]
        if e is None:
            if n != len(order) - 1:
                return f"loop {v.name!r} has a symbolic extent inside it"
            return None
        span += abs(c) * (e - 1)
    return None


def reach_blocker(realize, loops) -> str | None:
    """Why the iterations of ``loops`` (For nodes) may run one instance of the block of
    ``realize`` more than once (a sentence), or None when each instance is reached once.

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.stmt import Block, BlockRealize, For, IterVar, Range, SeqStmt
        >>> i, k = T.var("i"), T.var("k")
        >>> vi = IterVar(T.var("vi"), Range.from_extent(8), "spatial")
        >>> br = BlockRealize((i // 2,), T.const(True), Block("A", (vi,), (), (), SeqStmt(())))
        >>> reach_blocker(br, [For(i, T.const(0), T.const(8), "serial", br)])
        'it binds vi through i // 2 without its % 2 partner, which meets one instance from several iterations'
        >>> reach_blocker(br, [For(i, T.const(0), T.const(1), "serial", br)]) is None
        True
    """
    ext = {id(l.loop_var): _extent(l) for l in loops}
    free = {id(l.loop_var): l.loop_var for l in loops if ext[id(l.loop_var)] != 1}
    owner: dict = {}
    pairs: dict = {}

    def own(v, name):
        if id(v) in owner and owner[id(v)] != name:
            return (f"loop {v.name!r} feeds both {owner[id(v)]} and {name}: the "
                    "iterations cannot be proven to reach distinct instances")
        owner[id(v)] = name
        return None

    for iv, val in zip(realize.block.iter_vars, realize.iter_values):
        name = iv.var.name
        aff = Affine.of(val)
        direct = {}
        looped = [(atom, c) for atom, c in aff.terms
                  if any(id(v) in free for v in used_vars(atom))]
        for atom, c in looped:
            hit = [v for v in used_vars(atom) if id(v) in free]
            if isinstance(atom, Var):
                direct[id(atom)] = (atom, c)
            elif isinstance(atom, (FloorDiv, FloorMod)) and isinstance(atom.b, IntImm) \
                    and len(looped) == 1 and abs(c) == 1:
                pairs.setdefault((Key(atom.a), atom.b.value), []).append(
                    (type(atom), name, atom))
            else:
                return (f"it binds {name} to {val}, which meets one instance from several "
                        f"iterations of loop {hit[0].name!r}")
        why = _radix_blocker(direct, ext)
        if why is not None:
            return f"it binds {name} to {val}: {why}"
        for v, _ in direct.values():
            why = own(v, name)
            if why is not None:
                return why
    for (key, c), uses in pairs.items():
        kinds = sorted(t.__name__ for t, _, _ in uses)
        if kinds != ["FloorDiv", "FloorMod"]:
            _, name, atom = uses[0]
            return (f"it binds {name} through {atom} without its "
                    f"{'%' if kinds[0] == 'FloorDiv' else '//'} {c} partner, which "
                    "meets one instance from several iterations")
        lin = Affine.of(key.expr)
        coeffs = {}
        for atom, k in lin.terms:
            if not any(id(v) in free for v in used_vars(atom)):
                continue
            if not isinstance(atom, Var):
                return f"it binds {uses[0][1]} through {uses[0][2]}, not affine in its loops"
            coeffs[id(atom)] = (atom, k)
        why = _radix_blocker(coeffs, ext)
        if why is not None:
            return f"it binds {uses[0][1]} through {uses[0][2]}: {why}"
        for v, _ in coeffs.values():
            why = own(v, " and ".join(n for _, n, _ in uses))
            if why is not None:
                return why
    for vid, v in free.items():
        if vid not in owner:
            return (f"loop {v.name!r} feeds none of its iter values: the block, init "
                    "included, reruns in each of its iterations")
    return None


class _Span(NamedTuple):
    loop_var: Var
    min: object
    extent: object


def _pure_loops(realize, loops, needed) -> dict:
    """``{id: span}`` of the loops of ``loops`` the init does not regenerate, each cut to
    where the block's ``T.where`` lets it run: under ``T.where(1 <= k)`` the reduction
    starts at ``k = 1``, not at the loop's first value (a reduce axis from 1 moved
    under a loop from 0 by ``reverse_compute_at``, fuzz case 1887014092)."""
    doms = {l.loop_var: Range(l.min, l.extent) for l in loops
            if id(l.loop_var) not in needed}
    cut = tighten(doms, realize.predicate)
    return {id(v): _Span(v, r.min, r.extent) for v, r in cut.items()}


def _binding_start(val, pure: dict):
    """Where the loops of ``pure`` ({id: loop span}) put the binding ``val`` at its least:
    ``{var: value}`` for each loop it names through a plain term (``c * k``: the
    loop's first value for ``c > 0``, its last for ``c < 0``), or None when it names
    one through another atom (``f // 4``: the loops' first values are taken)."""
    at_min = {}
    for atom, c in Affine.of(val).terms:
        if not any(id(v) in pure for v in used_vars(atom)):
            continue
        if not isinstance(atom, Var):
            return None
        loop = pure[id(atom)]
        at_min[atom] = loop.min if c > 0 else loop.min + loop.extent - 1
    return at_min


def start_point(realize, loops, needed) -> dict:
    """``{var: value}``: the iteration of the loops of ``loops`` the init does not
    regenerate (not in ``needed``) at which the reduction of one output instance
    starts, the one where ``T.init`` fires: each such loop at the end that puts the
    reduce iter var it feeds at its least, a loop feeding none (extent 1) at its
    first value.

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.stmt import Block, BlockRealize, For, IterVar, Range, SeqStmt
        >>> k = T.var("k")
        >>> vk = IterVar(T.var("vk"), Range.from_extent(4), "reduce")
        >>> br = BlockRealize((3 - k,), T.const(True), Block("S", (vk,), (), (), SeqStmt(())))
        >>> point = start_point(br, [For(k, T.const(0), T.const(4), "serial", br)], set())
        >>> {v.name: str(at) for v, at in point.items()}     # vk = 3 - k is least at k = 3
        {'k': '3'}
    """
    pure = _pure_loops(realize, loops, needed)
    point = {l.loop_var: l.min for l in pure.values()}
    for iv, val in zip(realize.block.iter_vars, realize.iter_values):
        if iv.kind == "reduce":
            point.update(_binding_start(val, pure) or {})
    return point


def _reduce_extents(realize) -> list:
    return [iv.dom.extent for iv in realize.block.iter_vars if iv.kind == "reduce"]


def init_guard(realize, loops):
    """``(guard, needed)``: the conjuncts that keep the hoisted init to where the
    block's ``T.init`` fires, and the ids of ``loops`` it must regenerate (those its
    spatial iter values or kept conjuncts name); or a string saying why no guard can be
    written.

    A part of the block's ``T.where`` that names only loops the init regenerates (or
    none of ``loops``) is kept as it is.  One that names a loop it does not regenerate
    (TensorIR drops it) is taken at the iteration where the reduction starts
    (:func:`start_point`): dropped where it provably holds there once the reduction
    has an iteration, kept there otherwise (with ``or`` an empty reduction, whose
    identity is still written).  Dropping it where it may fail ran the init where
    ``T.init`` never fires: a ``loop_partition`` part of a split unit loop that runs
    no iteration wiped the sum the first part made (fuzz case 1818399772).  A part
    that couples such a loop with the loops of the spatial iter values is refused:
    the init would write where the block never does.  :func:`start_guard` adds where
    the reduce iter vars start.

    Example::

        >>> from cuvil_tir.analysis import tree
        >>> from cuvil_tir.te.examples import matmul
        >>> f = matmul(4, 4, 4)
        >>> path = tree.find_block(f, "C")
        >>> kept, needed = init_guard(tree.get(f, path), [l for _, l in tree.loops_above(f, path)])
        >>> kept, len(needed)
        ([], 2)
    """
    ids = {id(l.loop_var) for l in loops}
    spatial_deps = set()
    for iv, val in zip(realize.block.iter_vars, realize.iter_values):
        if iv.kind != "reduce":
            spatial_deps |= {id(v) for v in used_vars(val)}
    needed = spatial_deps & ids
    kept, at_start = [], []
    for c in conjuncts(realize.predicate):
        used = {id(v) for v in used_vars(c)}
        if not (used & ids) - needed:
            kept.append(c)
        elif used & spatial_deps:
            return (f"its guard {c} couples loops the init does not iterate with the "
                    "loops of its spatial iter values: the init would write where the "
                    "block never does (out of bounds)")
        else:
            at_start.append(c)
    starts = start_guard(realize, loops, needed)
    if isinstance(starts, str):
        return starts
    kept += starts
    if at_start:
        kept += _start_conjuncts(realize, loops, needed, at_start, kept)
    return kept, needed


def _start_conjuncts(realize, loops, needed, parts, known) -> list:
    """``parts`` taken where the reduction starts: those not proven to hold there,
    given ``known`` and a non-empty reduction, ``or`` the reduction being empty."""
    ana = Analyzer(index_no_overflow=True)
    for l in loops:
        if id(l.loop_var) in needed:
            ana.bind(l.loop_var, Range(l.min, l.extent))
    extents = _reduce_extents(realize)
    nonempty = all_of([GE(e, const(1, e.dtype)) for e in extents])
    empty = any_of([LE(e, const(0, e.dtype)) for e in extents])
    point = start_point(realize, loops, needed)
    out = []
    with ana.constraint(all_of(list(known) + [nonempty])):
        for c in parts:
            at = ana.simplify(substitute(c, point))
            if not ana.can_prove(at):
                out.append(Analyzer(index_no_overflow=True).simplify(any_of([at, empty])))
    return out


def start_guard(realize, loops, needed):
    """The conjuncts that keep the hoisted init to where ``T.init`` fires: where each
    reduce iter var, at its minimum over the loops the init does not regenerate, is at
    its domain's start.  That holds by itself in a plain nest; not where a reduce iter
    var is bound through a loop the init regenerates (``needed``: a loop fused from a
    spatial and a reduce loop, whose ``loop_partition`` part 3..30 reaches ``v_j = 0``
    at ``v_k = 3, 4, 5`` only), nor through a loop outside the block around the nest
    (a part of a split reduce loop, ``v_k = k_0 * 3 + k_1`` with ``k_1`` in 1..3).  A
    conjunct is left out where it provably holds.  A string says why the minimum of a
    binding mixing both kinds of loops cannot be written.

    Example::

        >>> import cuvil_tir as T
        >>> from cuvil_tir.stmt import Block, BlockRealize, For, IterVar, Range, SeqStmt
        >>> f = T.var("f")
        >>> vj = IterVar(T.var("vj"), Range.from_extent(5), "spatial")
        >>> vk = IterVar(T.var("vk"), Range.from_extent(6), "reduce")
        >>> br = BlockRealize((f // 6, f % 6), T.const(True),
        ...                   Block("Y", (vj, vk), (), (), SeqStmt(())))
        >>> [str(c) for c in start_guard(br, [For(f, T.const(3), T.const(27), "serial", br)],
        ...                              {id(f)})]
        ['f % 6 == 0']
    """
    pure = _pure_loops(realize, loops, needed)
    out = []
    for iv, val in zip(realize.block.iter_vars, realize.iter_values):
        if iv.kind != "reduce":
            continue
        mixed = any(id(v) in needed for v in used_vars(val))
        at_min = _binding_start(val, pure)
        if at_min is None:
            if mixed:
                return (f"it binds the reduce iter var {iv.var.name} to {val}, which "
                        "mixes the loops the init iterates with a reduction loop: where "
                        "the init runs cannot be written")
            # a binding through non-affine atoms (fused reduce loops: f // 4, f % 4)
            # starts its domain where the loops start only if it provably does there;
            # a loop_partition part (f from 3) or a loop outside the block may not
            first = {l.loop_var: l.min for l in pure.values()}
            cond = Analyzer(index_no_overflow=True).simplify(
                EQ(substitute(val, first), iv.dom.min))
            if isinstance(cond, IntImm) and cond.value:
                continue
            return (f"it binds the reduce iter var {iv.var.name} to {val}, which is not "
                    f"provably at its start {iv.dom.min} where the loops start "
                    f"({cond} may not hold): where the init runs cannot be written")
        cond = Analyzer(index_no_overflow=True).simplify(
            EQ(substitute(val, at_min), iv.dom.min))
        if not (isinstance(cond, IntImm) and cond.value):
            out.append(cond)
    return out


def init_blocker(realize, loops) -> str | None:
    """Why the init of ``realize``'s block cannot run once ahead of ``loops`` (a
    sentence: :func:`reach_blocker`, or a ``T.where`` part :func:`init_guard` can
    neither keep nor drop), or None.

    Example::

        >>> from cuvil_tir.analysis import tree
        >>> from cuvil_tir.te.examples import matmul
        >>> f = matmul(4, 4, 4)
        >>> init_blocker(tree.get(f, tree.find_block(f, "C")), []) is None
        True
    """
    why = reach_blocker(realize, loops)
    if why is not None:
        return why
    guard = init_guard(realize, loops)
    return guard if isinstance(guard, str) else None


def _init_reads(body) -> tuple:
    """The points an init reads (a reduction may start from another buffer's value,
    ``fuse_reduction_epilogue``'s bias): a block's reads must cover what it loads.  A
    block nested in the init (a blockized init's tile, a cache's copy) counts by its
    declared reads, relaxed over the init's loops around it: its loads name its own
    iterators and buffers it allocates, undefined at the init's level (fuzz case
    947147808)."""
    found = []

    def add(region):
        if not any(structural_equal(region, r) for r in found):
            found.append(region)

    class _Loads(Visitor):
        def __init__(self):
            self.doms = {}

        def visit_BufferLoad(self, ld):
            add(BufferRegion(ld.buffer, tuple(Range(i, const(1, i.dtype))
                                              for i in ld.indices)))
            self.visit(ld.indices)

        def visit_For(self, s):
            self.visit(s.min)
            self.visit(s.extent)
            self.doms[s.loop_var] = Range(s.min, s.extent)
            self.visit(s.body)
            del self.doms[s.loop_var]

        def visit_BlockRealize(self, br):
            for r in br.block.reads:
                add(relax(bound_region(br, r), dict(self.doms)))

    _Loads().visit(body)
    return tuple(found)


def init_nest(realize, loops, name: str, suffix: str = "_init"):
    """The init of ``realize``'s block as a block ``name`` under regenerated loops
    (check :func:`init_blocker` first).

    The init block iterates the spatial iter vars only; of ``loops`` (outer to inner)
    it regenerates those its bindings (or kept predicate parts) use, with fresh loop
    variables ``<loop><suffix>``.

    Example::

        >>> from cuvil_tir.analysis import tree
        >>> from cuvil_tir.te.examples import matmul
        >>> f = matmul(4, 4, 4)
        >>> path = tree.find_block(f, "C")
        >>> nest = init_nest(tree.get(f, path), [l for _, l in tree.loops_above(f, path)],
        ...                  "C_init")
        >>> nest.loop_var.name, nest.body.loop_var.name, nest.body.body.block.name
        ('i_init', 'j_init', 'C_init')
    """
    blk = realize.block
    kept, needed = init_guard(realize, loops)
    spatial = [(iv, val) for iv, val in zip(blk.iter_vars, realize.iter_values)
               if iv.kind != "reduce"]
    lmap = {l.loop_var: Var(l.loop_var.name + suffix, l.loop_var.dtype)
            for l in loops if id(l.loop_var) in needed}
    bmap = {}
    ivs = []
    for iv, _ in spatial:
        nv = Var(iv.var.name, iv.var.dtype)
        bmap[iv.var] = nv
        ivs.append(IterVar(nv, iv.dom, iv.kind))
    writes = tuple(substitute(w, bmap) for w in blk.writes)
    body = substitute(blk.init, bmap)
    # the init is part of the block: its annotations (pragmas, tuning hints) stay
    init_blk = Block(name, tuple(ivs), _init_reads(body), writes, body, None, (),
                     blk.annotations)
    values = tuple(substitute(v, lmap) for _, v in spatial)
    stmt = BlockRealize(values, all_of([substitute(c, lmap) for c in kept]), init_blk)
    for l in reversed(loops):
        if l.loop_var in lmap:
            stmt = For(lmap[l.loop_var], l.min, l.extent, l.kind, stmt, l.thread_tag,
                       l.annotations)
    return stmt


__all__ = ["reach_blocker", "start_point", "init_guard", "start_guard", "init_blocker",
           "init_nest"]
