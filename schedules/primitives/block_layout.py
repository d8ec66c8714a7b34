"""``transform_block_layout``: re-index a block's iteration space through an index map.

``index_map`` is a Python lambda over the block's iteration variables returning the new
ones, e.g. ``lambda i, j: (i * 16 + j,)``.  The block gets one iteration variable per
result, with the extent of the map's image; its body, regions and init read the old
variables through the inverse map, and its loops are rebuilt, one per new variable
(TensorIR's ``transform_block_layout``).  The map must be a bijection of the iteration
domain (no padding), and the block must have a trivial binding: each of its loops
binds one iteration variable directly.

Example::

    >>> import cuvil_tir as T
    >>> from schedules.handles import BlockRV
    >>> A = T.placeholder((4, 8), name="A")
    >>> f = T.create_prim_func([A, T.compute((4, 8), lambda i, j: A[i, j] * 2.0, name="B")])
    >>> g, _ = transform_block_layout(f, BlockRV("B"), lambda i, j: (i * 8 + j,))
    >>> print(g.body.block.body)
    for ax0 in T.serial(32):
        with T.block("B"):
            v0 = T.axis.remap("S", [ax0])
            T.reads(A[v0 // 8, v0 % 8])
            T.writes(B[v0 // 8, v0 % 8])
            B[v0 // 8, v0 % 8] = A[v0 // 8, v0 % 8] * T.float32(2)
"""

from __future__ import annotations

import dataclasses

from cuvil_tir.analysis import map_inverse as imap
from cuvil_tir.analysis import tree
from cuvil_tir.analysis.regions import simplify, tree_same
from cuvil_tir.buffer import const_elements
from cuvil_tir.arith import Analyzer
from cuvil_tir.expr import IntImm, Var, const
from cuvil_tir.stmt import BlockRealize, For, IterVar, Range, BufferRegion
from cuvil_tir.visitor import substitute, used_vars

from ..analysis import block_path
from ..errors import ScheduleArgumentError, schedule_error
from ..primitive import BLOCK, INDEX_MAP, INT_LIST, primitive
from .layout import (LayoutError, apply_index_map, index_dtype, map_image,
                     shape_vars_nonnegative)
from .index_maps import bind_free_vars
from .inline import SimplifyIndices


def _nest(func, bpath):
    """The loops holding only the block (outermost first) and the path of the top."""
    top = bpath
    while top and top[-1] == "body" and isinstance(tree.get(func, top[:-1]), For):
        top = top[:-1]
    loops, node = [], tree.get(func, top)
    while isinstance(node, For):
        loops.append(node)
        node = node.body
    return top, loops


def _check_trivial(func, realize, loops, prim):
    """Each iter var bound to its own loop of the nest, over the whole domain; every
    other loop of the nest a unit loop; no predicate; serial, unannotated loops."""
    blk = realize.block
    by_var = {id(lp.loop_var): lp for lp in loops}
    seen = set()
    for iv, val in zip(blk.iter_vars, realize.iter_values):
        lp = by_var.get(id(val)) if isinstance(val, Var) else None
        if lp is None or id(val) in seen:
            raise schedule_error(LayoutError, prim, f"block {blk.name!r} binds "
                                 f"{iv.var.name} = {val}; transform_block_layout needs a "
                                 "trivial binding (each iteration variable bound to its own "
                                 "loop, holding only this block). Apply it before split, "
                                 "fuse or compute_at", func, blk)
        seen.add(id(val))
        if not (isinstance(iv.dom.min, IntImm) and iv.dom.min.value == 0
                and isinstance(lp.min, IntImm) and lp.min.value == 0
                and tree_equal(lp.extent, iv.dom.extent)):
            raise schedule_error(LayoutError, prim, f"loop {lp.loop_var.name} "
                                 f"[{lp.min}, +{lp.extent}) does not run over the domain "
                                 f"[{iv.dom.min}, +{iv.dom.extent}) of {iv.var.name} in "
                                 f"block {blk.name!r}", func, blk)
    for lp in loops:
        unit = isinstance(lp.extent, IntImm) and lp.extent.value == 1
        if id(lp.loop_var) not in seen and not unit:
            raise schedule_error(LayoutError, prim, f"loop {lp.loop_var.name} holds block "
                                 f"{blk.name!r} but binds none of its iteration variables; "
                                 "the block would run once per iteration of it", func, blk)
        if lp.kind != "serial" or lp.thread_tag is not None or lp.annotations:
            raise schedule_error(LayoutError, prim, f"loop {lp.loop_var.name} is "
                                 f"{lp.kind}{' (annotated)' if lp.annotations else ''}; the "
                                 "loops are rebuilt, so transform the block's layout before "
                                 "binding or annotating them", func, blk)
    if not (isinstance(realize.predicate, IntImm) and realize.predicate.value != 0):
        raise schedule_error(LayoutError, prim, f"block {blk.name!r} has the predicate "
                             f"T.where({realize.predicate}); transform_block_layout needs a "
                             "block without one", func, blk)


def tree_equal(a, b) -> bool:
    return tree_same(simplify(a), simplify(b))


@primitive("transform_block_layout", block=BLOCK, index_map=INDEX_MAP)
def transform_block_layout(func, block, index_map):
    """Re-index ``block``'s iteration space through ``index_map`` (a lambda over its
    iteration variables returning the new ones) and rebuild its loops, one per new
    variable.  The map must be a bijection of the domain; the block needs a trivial
    binding (each iteration variable bound to its own loop) and no predicate.  A new
    variable depending on both spatial and reduction variables is refused.

    Before/after ``transform_block_layout(B, lambda i, j: (i * 8 + j,))``::

        for i, j in T.grid(4, 8):             for ax0 in T.serial(32):
            with T.block("B"):                    with T.block("B"):
                vi, vj = T.axis.remap(...)            v0 = T.axis.remap("S", [ax0])
                B[vi, vj] = A[vi, vj] * 2.0           B[v0 // 8, v0 % 8] = ...

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((4, 8), name="A")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute((4, 8), lambda i, j:
        ...                                                   A[i, j] + 1.0, name="B")]))
        >>> sch.transform_block_layout("B", lambda i, j: (j, i))
        >>> print(sch.func.body.block.body.body.body.block.body)
        B[v1, v0] = A[v1, v0] + T.float32(1)
    """
    prim = "transform_block_layout"
    bpath = block_path(func, block, prim)
    realize = tree.get(func, bpath)
    blk = realize.block
    top, loops = _nest(func, bpath)
    _check_trivial(func, realize, loops, prim)
    ivs = blk.iter_vars
    dt = index_dtype([iv.dom.extent for iv in ivs])
    params, exprs = apply_index_map(index_map, len(ivs), blk.name, prim,
                                    f"block {blk.name!r} has", dtype=dt)
    exprs = bind_free_vars(exprs, params, func, prim)
    shape = map_image([iv.dom.extent for iv in ivs], params, exprs,
                      f"the iteration domain of block {blk.name!r}", prim,
                      shape_vars_nonnegative(func))
    old_n, new_n = const_elements([iv.dom.extent for iv in ivs]), const_elements(shape)
    if old_n is not None and new_n is not None and old_n != new_n:
        raise schedule_error(LayoutError, prim, f"index_map maps the {old_n} iterations of "
                             f"block {blk.name!r} into a box of {new_n} "
                             f"{[int(s) for s in shape]}; transform_block_layout needs a "
                             "bijection (no padding)", func, blk)
    over_ivs = [simplify(substitute(x, dict(zip(params, [iv.var for iv in ivs]))))
                for x in exprs]
    new_vars = [Var(f"v{k}", dt) for k in range(len(exprs))]
    try:
        inv = imap.inverse(ivs, over_ivs, new_vars)
    except imap.NotInvertible as why:
        raise schedule_error(LayoutError, prim, f"index_map {over_ivs} of block "
                             f"{blk.name!r} cannot be inverted: {why}", func,
                             blk) from None
    # over the new variables' ranges: an iterator of extent 1 reads as 0, not v0 // 12544
    ana = Analyzer(index_no_overflow=True)
    for v, ext in zip(new_vars, shape):
        ana.bind(v, Range(const(0, ext.dtype), ext))
    inv = {k: ana.simplify(x) for k, x in inv.items()}
    kinds = {id(iv.var): iv.kind for iv in ivs}
    new_ivs = []
    for v, x, ext in zip(new_vars, over_ivs, shape):
        used = {kinds[id(u)] for u in used_vars(x) if id(u) in kinds}
        if len(used) > 1:
            raise schedule_error(LayoutError, prim, f"the new iteration variable {x} mixes "
                                 "spatial and reduction variables of block "
                                 f"{blk.name!r}; keep them in separate results", func, blk)
        new_ivs.append(IterVar(v, Range(const(0, ext.dtype), ext),
                               used.pop() if used else "spatial"))

    def sub(x):
        return substitute(x, inv)

    body = SimplifyIndices(ana.simplify).visit(sub(blk.body))
    init = SimplifyIndices(ana.simplify).visit(sub(blk.init)) if blk.init is not None else None

    new_blk = dataclasses.replace(
        blk, iter_vars=tuple(new_ivs), body=body,
        reads=tuple(_simplified(sub(r), ana) for r in blk.reads),
        writes=tuple(_simplified(sub(w), ana) for w in blk.writes),
        init=init)
    axes = [Var(f"ax{k}", dt) for k in range(len(new_vars))]
    stmt = BlockRealize(tuple(axes), const(True), new_blk)
    for ax, ext in reversed(list(zip(axes, shape))):
        stmt = For(ax, const(0, ax.dtype), ext, "serial", stmt)
    return tree.replace(func, top, stmt), None


def _simplified(region, ana):
    return BufferRegion(region.buffer, tuple(Range(ana.simplify(r.min), ana.simplify(r.extent))
                                             for r in region.region))


__all__ = ["transform_block_layout"]


@primitive("reorder_block_iter_var", block=BLOCK, new_order=INT_LIST)
def reorder_block_iter_var(func, block, new_order):
    """Permute a block's iteration variables (with their bindings): the variable at
    position ``k`` becomes the old variable ``new_order[k]``.  Nothing else changes;
    the order matters to primitives that read it (``blockize``, tensor intrinsics).

    Before/after ``reorder_block_iter_var(C, [2, 1, 0])``::

        vi, vj, vk = T.axis.remap("SSR", [i, j, k])   vk, vj, vi = T.axis.remap("RSS", [k, j, i])

    Example::

        >>> import cuvil_tir as T
        >>> from schedules.handles import BlockRV
        >>> A = T.placeholder((2, 3), name="A")
        >>> f = T.create_prim_func([A, T.compute((2, 3), lambda i, j: A[i, j], name="B")])
        >>> g, _ = reorder_block_iter_var(f, BlockRV("B"), [1, 0])
        >>> [iv.var.name for iv in tree.get(g, tree.find_block(g, "B")).block.iter_vars]
        ['v_j', 'v_i']
    """
    prim = "reorder_block_iter_var"
    bpath = block_path(func, block, prim)
    realize = tree.get(func, bpath)
    blk = realize.block
    n, names = len(blk.iter_vars), [iv.var.name for iv in blk.iter_vars]
    order = list(new_order)
    why = None
    if len(order) != n:
        why = f"lists {len(order)} positions, but block {blk.name!r} has {n}"
    elif any(not 0 <= k < n for k in order):
        why = f"has positions outside [0, {n})"
    elif len(set(order)) != n:
        why = "repeats a position"
    if why is not None:
        raise schedule_error(ScheduleArgumentError, prim, f"new_order {order} {why}: it must "
                             f"be a permutation of 0..{n - 1}, one position per iteration "
                             f"variable {names}", func, blk)
    new = dataclasses.replace(blk, iter_vars=tuple(blk.iter_vars[k] for k in order))
    return tree.replace(func, bpath, dataclasses.replace(
        realize, iter_values=tuple(realize.iter_values[k] for k in order), block=new)), None
