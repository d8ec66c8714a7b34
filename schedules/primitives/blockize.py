"""``blockize(loop)``: wrap the subtree under a loop into an outer block (TVM blockize).

Each iter var ``v`` of the block under ``loop`` is divided into an outer part bound by
the loops above ``loop`` and an inner part bound by the loops at/under it:
``v = v_o * E + v_i`` with ``v_i`` in ``[0, E)``.  The outer block ``<name>_o`` gets
the ``v_o`` iter vars, the inner block keeps its loops with iter vars ``v_i``, and the
outer block's reads/writes are the inner ones relaxed over the inner iterations.  A
reduction's init moves to the outer block (as a nest of ``<name>_init``).

Example::

    >>> from schedules.handles import LoopRV
    >>> from cuvil_tir.te.examples import matmul
    >>> f = matmul(4, 4, 4)
    >>> j = f.body.block.body.body.loop_var
    >>> g, rv = blockize(f, LoopRV(j))
    >>> rv.name
    'C_o'
"""

from __future__ import annotations

from cuvil_tir.expr import IntImm, Var, const, CmpOp, LE, LT
from cuvil_tir.stmt import Block, BlockRealize, BufferRegion, Range
from cuvil_tir.visitor import substitute, used_vars
from cuvil_tir.arith.affine import from_linear_form as from_linear, linear_form as linear

from cuvil_tir.analysis import tree
from ..errors import LoopNestError, ScheduleError, schedule_error
from ..handles import BlockRV
from ..primitive import BLOCK, BOOL, LOOP, Kind, Mismatch, primitive
from cuvil_tir.analysis.regions import relax, simplify
from cuvil_tir.analysis.predicate_doms import tighten
from cuvil_tir.op import all as all_of, conjuncts
from .reduction import fresh_block_name, make_init_nest, resolve_loop, with_write_reads
from .blockize_blocks import blockize_blocks


def _loop_or_blocks(v):
    if isinstance(v, (list, tuple)):
        if not v:
            raise Mismatch("an empty list")
        return [BLOCK.convert(b) for b in v]
    return LOOP.convert(v)


LOOP_OR_BLOCKS = Kind("loop_or_blocks", "a loop handle (from sch.get_loops) or a list of "
                      "block handles or names", _loop_or_blocks)


class SubspaceError(ScheduleError):
    """A block binding cannot be divided into outer and inner parts at the loop.

    Example::

        >>> SubspaceError("blockize: cannot divide v_i").code
        'CVL-E103'
    """


# -- affine forms ------------------------------------------------------------------------

def _const_int(e):
    return e.value if isinstance(e, IntImm) else None


def relax_region(region: BufferRegion, dom: dict) -> BufferRegion:
    """The region covered as the vars in ``dom`` (``{id(var): (var, extent)}``, each
    ranging over ``[0, extent)``) vary; a dim that is not affine in them widens to the
    whole buffer dimension.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((16,), "float32", "A")
        >>> vo, vi = Var("vo"), Var("vi")
        >>> r = relax_region(BufferRegion(A, (Range(vo * 4 + vi, const(1)),)), {id(vi): (vi, 4)})
        >>> r.region[0].extent.value
        4
    """
    out = []
    for d, rg in enumerate(region.region):
        touched = [v for v in used_vars(rg.min) if id(v) in dom]
        if not touched:
            out.append(rg)
            continue
        lin = linear(rg.min)
        ext = _const_int(rg.extent)
        if lin is None or ext is None:
            # not affine (a layout's // and %): bounded over the inner ranges instead
            one = BufferRegion(region.buffer, (rg,))
            doms = {v: Range(const(0, v.dtype), const(n, v.dtype)) if isinstance(n, int)
                    else Range(const(0, v.dtype), n) for v, n in dom.values()}
            out.append(relax(one, doms).region[0])
            continue
        terms, c = lin
        rest = {k: t for k, t in terms.items() if k not in dom}
        lo = 0
        for k, (v, coeff) in terms.items():
            if k in dom:
                span = coeff * (dom[k][1] - 1)
                lo += min(0, span)
                ext += abs(span)
        out.append(Range(from_linear(rest, c + lo, rg.min.dtype), const(ext, rg.extent.dtype)))
    return BufferRegion(region.buffer, tuple(out))


# -- blockize --------------------------------------------------------------------------

class _Part:
    """One iter var divided at the loop: ``v = outer * scale + inner + base``, the outer
    part bound to ``outer`` over ``odom``, the inner one to ``inner`` over ``idom`` (None:
    no such part)."""

    __slots__ = ("outer", "odom", "inner", "idom", "scale", "base")

    def __init__(self, outer, odom, inner, idom, scale, base):
        self.outer, self.odom, self.inner, self.idom = outer, odom, inner, idom
        self.scale, self.base = scale, base


def _divide(iv, val, inner_ids, prim, blk_name):
    """The :class:`_Part` of one iter var.  A part's domain starts where its binding
    does: with ``k`` in ``[1, 3)`` split by 1, the outer part is ``k_0`` over ``[0, 2)``
    and ``base`` is 1 (a reduction's init runs when its iter vars sit at their minimum,
    so a binding that never reaches its domain's start would skip it)."""
    uses_inner = any(id(u) in inner_ids for u in used_vars(val))
    uses_outer = any(id(u) not in inner_ids for u in used_vars(val))
    ext = _const_int(iv.dom.extent)
    if not uses_inner:
        return _Part(val, iv.dom, None, None, 1, 0)
    if not uses_outer:
        return _Part(None, None, val, iv.dom, ext if ext is not None else iv.dom.extent, 0)
    # terms over outer loops only that are not affine (ty % 2 * 32: a warp's tile
    # picked by a fused thread index) are an offset of the outer part, as it is
    opaque, rest = _outer_terms(val, inner_ids)
    lin = linear(rest) if rest is not None else ({}, 0)
    lo = _const_int(iv.dom.min)
    why = None
    if lin is None:
        why = "it is not affine in the loop variables"
    elif ext is None:
        why = "its extent is not constant"
    elif lo is None:
        why = "its domain's minimum is not constant"
    else:
        terms, c = lin
        inner = {k: t for k, t in terms.items() if k in inner_ids}
        outer = {k: t for k, t in terms.items() if k not in inner_ids}
        if any(k <= 0 for _, k in inner.values()):
            why = "an inner loop has a non-positive coefficient"
        else:
            span = sum(k * (inner_ids[i] - 1) for i, (_, k) in inner.items())
            e_in = span + 1
            extra = [_divided(t, e_in) for t in opaque]
            if any(k % e_in for _, k in outer.values()) or (c - lo) % e_in or (
                    None in extra):
                why = (f"the outer part is not a multiple of the inner extent {e_in} "
                       "(split so the inner loops cover whole tiles)")
            else:
                outer_b = from_linear({i: (v, k // e_in) for i, (v, k) in outer.items()},
                                      (c - lo) // e_in, val.dtype)
                if extra:
                    outer_b = simplify(_sum(outer_b, *extra))
                dt = iv.dom.extent.dtype
                return _Part(outer_b, Range(const(0, dt), const(-(-ext // e_in), dt)),
                             from_linear(inner, 0, val.dtype),
                             Range(const(0, dt), const(e_in, dt)), e_in, lo)
    raise schedule_error(SubspaceError, prim,
                         f"cannot divide the binding {iv.var.name} = {val} of block "
                         f"{blk_name!r} into outer and inner parts: {why}")


def _outer_terms(val, inner_ids) -> tuple:
    """``(opaque, rest)``: ``val``'s additive terms that use no inner loop and are not
    affine (a list), and the sum of the others (None if none)."""
    terms, stack = [], [val]
    while stack:
        e = stack.pop()
        if type(e).__name__ == "Add":
            stack += [e.b, e.a]
        else:
            terms.append(e)
    opaque = [t for t in terms if linear(t) is None
              and not any(id(u) in inner_ids for u in used_vars(t))]
    rest = [t for t in terms if not any(t is o for o in opaque)]
    return opaque, _sum(*rest) if rest else None


def _divided(term, n: int):
    """``term // n`` when ``term`` is provably a multiple of ``n`` (``x * 32`` by 16:
    ``x * 2``), else None."""
    if type(term).__name__ == "Mul":
        for x, k in ((term.a, term.b), (term.b, term.a)):
            c = _const_int(k)
            if c is not None and c % n == 0:
                return x * (c // n) if c != n else x
    if _const_int(simplify(term % n)) == 0:
        return simplify(term // n)
    return None


def _is_int(e, value: int) -> bool:
    """Whether ``e`` (an int or an expression) is the constant ``value``."""
    return e == value if isinstance(e, int) else _const_int(e) == value


def _sum(*terms):
    """``a + b + ...`` without its zero terms (ints or constants); None when all are."""
    out = None
    for t in terms:
        if not _is_int(t, 0):
            out = t if out is None else out + t
    return out


def blockize_path(func, lpath: tuple, prim: str = "blockize",
                  preserve_unit_iters: bool = True):
    """Blockize the loop at ``lpath``; ``(new_func, outer block name)``.  With
    ``preserve_unit_iters`` the outer block has one iter var per inner one (a unit one,
    ``T.axis.spatial(1, 0)``, where the loop covers the inner var's whole range).

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> blockize_path(matmul(4, 4, 4), ("block", "body"))[1]
        'C_o'
    """
    loop = tree.get(func, lpath)
    under = tree.blocks_under(loop)
    if len(under) != 1:
        raise schedule_error(LoopNestError, prim,
                             f"loop {loop.loop_var.name!r} holds {len(under)} blocks "
                             f"{[b.block.name for b in under]}; blockize needs a loop over "
                             "exactly one block", func, loop)
    bpath = tree.find_block(func, under[0].block.name)
    realize = tree.get(func, bpath)
    blk = realize.block
    inner_loops = [l for p, l in tree.loops_above(func, bpath) if p[:len(lpath)] == lpath]
    if not inner_loops or inner_loops[0] is not loop:
        raise schedule_error(LoopNestError, prim,
                             f"block {blk.name!r} under loop {loop.loop_var.name!r} is "
                             "inside a nested block; blockize the loop that directly "
                             "holds it", func, loop)
    inner_ids = {}
    for l in inner_loops:
        e = _const_int(l.extent)
        if e is None or _const_int(l.min) != 0:
            raise schedule_error(SubspaceError, prim,
                                 f"inner loop {l.loop_var.name!r} needs min 0 and a "
                                 f"constant extent, found [{l.min}, +{l.extent})", func, l)
        inner_ids[id(l.loop_var)] = e
    unit_loops = {id(l.loop_var) for _, l in tree.loops_above(func, lpath)
                  if _const_int(l.min) == 0 and _const_int(l.extent) == 1}
    outer_ivs, outer_vals, inner_ivs, inner_vals, vmap, idom = [], [], [], [], {}, {}
    shift, outer_of = {}, []
    for iv, val in zip(blk.iter_vars, realize.iter_values):
        part = _divide(iv, val, inner_ids, prim, blk.name)
        ob, odom = part.outer, part.odom
        vo = vi = None
        unit = ob is None or (_const_int(odom.extent) == 1 and
                              _const_int(ob) == _const_int(odom.min) is not None)
        # an outer part at its start: bound by loops of extent 1 starting at 0
        zero = unit or (_const_int(odom.extent) == 1 and all(
            id(u) in unit_loops for u in used_vars(ob)))
        if not unit or preserve_unit_iters:
            # TensorIR keeps one outer iter var per inner one, a unit one (extent 1,
            # bound to 0) where the whole range is inside the loop; without
            # preserve_unit_iters a unit loop's variable is bound as the start it is
            vo = Var(iv.var.name + "_o", iv.var.dtype)
            dom = Range(const(0, iv.dom.extent.dtype), const(1, iv.dom.extent.dtype)) \
                if unit else odom
            outer_ivs.append(type(iv)(vo, dom, iv.kind))
            outer_vals.append(dom.min if unit or (zero and not preserve_unit_iters)
                              else ob)
        if part.inner is not None and _const_int(part.idom.extent) != 1:
            vi = Var(iv.var.name + "_i", iv.var.dtype)
            inner_ivs.append(type(iv)(vi, part.idom, iv.kind))
            inner_vals.append(part.inner)
            e = _const_int(part.idom.extent)
            if e is not None:
                idom[id(vi)] = (vi, e)
                if _const_int(part.idom.min) != 0:
                    # relax_region runs the inner vars from 0
                    shift[vi] = vi + part.idom.min
        at_start = vo is None or unit or (zero and vi is not None)
        if not at_start:
            outer_of.append((val, part, vo))
        outer_at = (odom.min if odom is not None else 0) if at_start else vo
        if not _is_int(part.scale, 1) and not _is_int(outer_at, 0):
            outer_at = outer_at * part.scale
        inner_at = vi if vi is not None else (part.idom.min if part.idom is not None else 0)
        at = _sum(outer_at, inner_at, part.base)
        vmap[iv.var] = const(0, iv.var.dtype) if at is None else at
    body = substitute(blk.body, vmap)
    reads = tuple(substitute(r, vmap) for r in blk.reads)
    writes = tuple(substitute(w, vmap) for w in blk.writes)
    init = substitute(blk.init, vmap) if blk.init is not None else None
    inner_blk = Block(blk.name, tuple(inner_ivs), reads, writes, body, None,
                      blk.alloc_buffers, blk.annotations)
    if init is not None:
        # the inner block loses its init: it now reads what it accumulates into
        inner_blk = Block(blk.name, inner_blk.iter_vars, with_write_reads(inner_blk),
                          writes, body, None, blk.alloc_buffers, blk.annotations)
    outer_loops = {id(l.loop_var): l.loop_var for _, l in tree.loops_above(func, lpath)}
    pred = _inner_predicate(realize.predicate, inner_ids, outer_loops, unit_loops, outer_of,
                            prim, blk.name)
    inner = BlockRealize(tuple(inner_vals), pred, inner_blk)
    idom = _cut_by_predicate(idom, shift, inner_ivs, inner_vals, pred)
    g = tree.replace(func, bpath, inner)
    outer_name = fresh_block_name(func, blk.name + "_o")
    outer_init = None
    if init is not None:
        # the outer block runs its init with its reduce iter vars at their start: the
        # inner T.where is taken there (v_k_o * 4 + k_1 < 6 at v_k_o = 0)
        at_start = {iv.var: iv.dom.min for iv in outer_ivs if iv.kind == "reduce"}
        with_init = BlockRealize(inner.iter_values, substitute(inner.predicate, at_start),
                                 Block(blk.name, inner_blk.iter_vars, (), writes, body, init))
        outer_init = make_init_nest(with_init, inner_loops,
                                    fresh_block_name(func, blk.name + "_init"), prim=prim,
                                    func=func)
    outer_blk = Block(outer_name, tuple(outer_ivs),
                      # with an init, the outer block is the reduction: as the block it
                      # came from, it does not list what it accumulates into as read
                      tuple(relax_region(substitute(r, shift), idom) for r in (
                          reads if init is not None else inner_blk.reads)),
                      tuple(relax_region(substitute(w, shift), idom) for w in writes),
                      tree.get(g, lpath), outer_init)
    binding = {iv.var: v for iv, v in zip(outer_ivs, outer_vals)}
    outer = BlockRealize(tuple(outer_vals),
                         _outer_predicate(realize.predicate, inner_loops, inner.predicate,
                                          binding, prim, blk.name), outer_blk)
    return tree.replace(g, lpath, outer), outer_name


def _cut_by_predicate(idom, shift, inner_ivs, inner_vals, pred) -> dict:
    """``idom`` with each inner variable bound to a loop of its own cut to the values
    the inner block's ``T.where`` lets run (``T.where(i_1 < 3)`` under ``for i_1 in
    range(4)``: 3): the outer block's regions cover only the instances that run, as its
    parent's do."""
    by_loop = {id(val): iv.var for iv, val in zip(inner_ivs, inner_vals)
               if isinstance(val, Var) and id(iv.var) in idom and iv.var not in shift}
    if not by_loop or (isinstance(pred, IntImm) and pred.value):
        return idom
    loops = {v: val for val in (inner_vals) if isinstance(val, Var) and id(val) in by_loop
             for v in (by_loop[id(val)],)}
    doms = {val: Range(const(0, val.dtype), const(idom[id(v)][1], val.dtype))
            for v, val in loops.items() if isinstance(idom[id(v)][1], int)}
    cut = tighten(doms, pred)
    out = dict(idom)
    for v, val in loops.items():
        r = cut.get(val)
        if r is not None and _const_int(r.min) == 0 and \
                _const_int(r.extent) < idom[id(v)][1]:
            out[id(v)] = (v, max(_const_int(r.extent), 1))
    return out


def _inner_predicate(pred, inner_ids, outer_loops, unit_loops, outer_of, prim, name):
    """The inner block's ``T.where``: the parts that name inner loops, in which a loop
    outside the new outer block is replaced by that block's iter vars (a block names
    no loop outside it: ``decompose_reduction`` would move the inner init away from
    them).  ``i_0 * 4 + i_1 < 10``, with ``v = i_0 * 4 + i_1`` divided into ``v_o =
    i_0`` and ``v_i = i_1``, becomes ``v_o * 4 + i_1 < 10``.  Parts on outer loops
    only are the outer block's (:func:`_outer_predicate`)."""
    # a loop of extent 1 is 0 (TensorIR's bindings read without it)
    zero = {v: const(0, v.dtype) for k, v in outer_loops.items() if k in unit_loops}
    outer_of = [(simplify(substitute(val, zero)), part, vo) for val, part, vo in outer_of]
    kept = []
    for c in conjuncts(pred):
        used = {id(v) for v in used_vars(c)}
        if not used & set(inner_ids):
            continue
        if not used & set(outer_loops):
            kept.append(c)
            continue
        c = simplify(substitute(c, zero)) if zero else c
        new = _over_outer_vars(c, inner_ids, outer_loops, outer_of)
        if new is None:
            raise schedule_error(SubspaceError, prim,
                                 f"the guard {c} of block {name!r} couples loops inside "
                                 "and outside the loop in a way the new outer block's "
                                 "iter vars cannot express; blockize a loop whose guard "
                                 "is a bound on one split loop (or on inner loops only)")
        kept.append(new)
    return all_of(kept)


def _over_outer_vars(cond, inner_ids, outer_loops, outer_of):
    """``cond`` with its outer-loop part rewritten over an outer iter var, or None."""
    if not isinstance(cond, CmpOp) or any(id(v) in outer_loops for v in used_vars(cond.b)):
        return None if any(id(v) in outer_loops for v in used_vars(cond)) else cond
    lin = linear(cond.a)
    if lin is None:
        return None
    terms, c = lin
    outer = {k: t for k, t in terms.items() if k in outer_loops}
    if not outer:
        return cond
    rest = {k: t for k, t in terms.items() if k not in outer_loops}
    for val, part, vo in outer_of:
        vlin = linear(val)
        if vlin is None:
            continue
        vouter = {k: t for k, t in vlin[0].items() if k in outer_loops}
        if set(vouter) != set(outer):
            continue
        k0 = next(iter(outer))
        q, r = divmod(outer[k0][1], vouter[k0][1])
        if r or any(outer[k][1] != q * vouter[k][1] for k in outer):
            continue
        # the outer terms of val are vo * scale + base - (val's constant)
        scale = part.scale if isinstance(part.scale, int) else _const_int(part.scale)
        base = part.base if isinstance(part.base, int) else _const_int(part.base)
        if scale is None or base is None:
            continue
        a = from_linear(rest, c + q * (base - vlin[1]), cond.a.dtype)
        a = simplify(vo * (q * scale) + a) if not (q * scale == 1) else simplify(vo + a)
        return type(cond)(a, cond.b)
    return None


def _at_inner_start(c, ids, zero):
    """``c`` with the inner loops at 0 where that is the weakest it gets (a linear bound
    ``e < n`` whose inner loops have non-negative coefficients), else None."""
    lin = linear(c.a) if isinstance(c, (LT, LE)) else None
    if lin is None or {id(v) for v in used_vars(c.b)} & ids:
        return None
    if all(k >= 0 for i, (_, k) in lin[0].items() if i in ids):
        return simplify(substitute(c, zero))
    return None


def _outer_predicate(pred, inner_loops, inner_pred, outer_binding, prim, name):
    """The guard the outer block needs under a non-dividing split: an outer instance
    runs only if some inner iteration does.  A bound ``e < n`` whose inner loops have
    non-negative coefficients holds for some inner iteration iff it holds with them at
    0, so that is the outer guard (without it the outer iter var leaves its domain).
    A bound the loops write non-linearly (``fused // 2 * 2 + fused % 2`` after a fuse)
    is taken from the inner block's ``T.where`` instead, which names the outer iter
    vars (``outer_binding`` maps them back to the loops); one found in neither form is
    refused."""
    ids = {id(l.loop_var) for l in inner_loops}
    zero = {l.loop_var: const(0, l.loop_var.dtype) for l in inner_loops}
    kept, lost = [], []
    for c in conjuncts(pred):
        used = {id(v) for v in used_vars(c)}
        if not used & ids:
            kept.append(c)
            continue
        g = _at_inner_start(c, ids, zero)
        if g is not None:
            kept.append(g)
        elif isinstance(c, (LT, LE)) and used - ids:
            # an upper bound naming outer loops is what keeps the outer iter vars in
            # their domains (one on inner loops only cuts no outer instance away)
            lost.append(c)
    if lost:
        outer_ids = {id(v) for v in outer_binding}
        found = [_at_inner_start(c, ids, zero) for c in conjuncts(inner_pred)
                 if {id(v) for v in used_vars(c)} & ids
                 and {id(v) for v in used_vars(c)} & outer_ids]
        if not found or any(g is None for g in found):
            raise schedule_error(SubspaceError, prim,
                                 f"the guard {lost[0]} of block {name!r} is not a bound "
                                 "the new outer block can be guarded by (expected a linear "
                                 "bound on the loops, with the inner loops counting up); "
                                 "blockize before the fuse or split that made it")
        kept += [simplify(substitute(g, outer_binding)) for g in found]
    return all_of(kept)


@primitive("blockize", loop=LOOP_OR_BLOCKS, returns=BLOCK, preserve_unit_iters=BOOL)
def blockize(func, loop, preserve_unit_iters: bool = True):
    """Wrap the subtree at ``loop`` into a new outer block; returns it.  Given a list
    of sibling blocks instead, wrap them with their loops into one outer block (see
    :mod:`schedules.primitives.blockize_blocks`).

    The outer block has one iter var per iter var of the inner block, bound to the
    loops above ``loop``; where ``loop`` covers an inner var's whole range the outer
    one is a unit iter var (``T.axis.spatial(1, 0)``, as TensorIR), unless
    ``preserve_unit_iters=False``.

    Before/after ``blockize(i_1)``::

        for i_0, i_1 in T.grid(2, 4):     for i_0 in T.serial(2):
            with T.block("B"): ...            with T.block("B_o"):
                                                  for i_1 in T.serial(4):
                                                      with T.block("B"): ...

    Example::

        >>> from schedules.handles import LoopRV
        >>> from cuvil_tir.te.examples import matmul
        >>> f = matmul(4, 4, 4)
        >>> g, rv = blockize(f, LoopRV(f.body.block.body.loop_var))
        >>> [(iv.var.name, int(iv.dom.extent)) for iv in g.body.block.body.block.iter_vars]
        [('v_i_o', 1), ('v_j_o', 1), ('v_k_o', 1)]
        >>> g, rv = blockize(f, LoopRV(f.body.block.body.loop_var), preserve_unit_iters=False)
        >>> g.body.block.body.block.iter_vars
        ()
    """
    if isinstance(loop, list):
        return blockize_blocks(func, loop, preserve_unit_iters)
    g, name = blockize_path(func, resolve_loop(func, loop, "blockize"), "blockize",
                            preserve_unit_iters)
    return g, BlockRV(name)


__all__ = ["blockize", "blockize_path", "linear", "from_linear", "relax_region",
           "SubspaceError"]
