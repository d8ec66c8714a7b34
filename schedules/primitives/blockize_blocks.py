"""``blockize([b1, b2, ...])``: wrap several sibling blocks, with their loops, into one
outer block (TensorIR's blockize of a list of blocks).

The blocks must be in one scope, and the body of their innermost common loop (or of
their scope block) must consist of one statement per block, each holding that block
and no other (a block with its own loop nest).  That body becomes the body of the outer
block ``outer_<b1>_<b2>_..._``, in program order, so nothing runs in another order.

The outer block reads and writes the union of the blocks' regions over their loops.  As
TensorIR, it has one unit iterator ``<v>_o`` (extent 1, bound to 0) per iterator of the
first block, and the inner blocks' iterators are renamed ``<v>_i``; with
``preserve_unit_iters=False`` an inner iterator bound to a loop of extent 1 is replaced
by the loop's start.  Refused: blocks whose bindings or predicates use a loop outside the
common one (the outer block would need an iterator for it: blockize a loop instead), and
blocks with an init (a reduction's init belongs to one block).

Example::

    >>> import cuvil_tir as T
    >>> import schedules as S
    >>> A = T.placeholder((4,), name="A")
    >>> B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
    >>> C = T.compute((4,), lambda i: A[i] + 1.0, name="C")
    >>> sch = S.Schedule(T.create_prim_func([A, B, C]))
    >>> sch.blockize(["B", "C"])
    BlockRV('outer_B_C_')
    >>> sch.get_child_blocks("outer_B_C_")
    [BlockRV('B'), BlockRV('C')]
"""

from __future__ import annotations

from cuvil_tir.expr import IntImm, Var, const
from cuvil_tir.stmt import Block, BlockRealize, For, IterVar, Range, seq
from cuvil_tir.visitor import Mutator, substitute, used_vars

from cuvil_tir.analysis import tree
from cuvil_tir.analysis.regions import bound_region, loop_doms, relax, union
from ..analysis import block_path, fresh_block_name
from ..errors import LoopNestError, schedule_error
from ..handles import BlockRV
from .nests import subtrees, with_fields

PRIM = "blockize"


def _common(func, paths):
    """The path of the innermost loop enclosing every path, else of their scope."""
    scope = tree.enclosing_block(func, paths[0])
    for p in paths[1:]:
        if tree.enclosing_block(func, p) != scope:
            raise schedule_error(LoopNestError, PRIM, "the blocks are in different "
                                 "blocks' scopes; blockize blocks of one scope", func,
                                 tree.get(func, p))
    common = [lp for lp, _ in tree.loops_above(func, paths[0])
              if all(p[:len(lp)] == lp for p in paths)]
    return common[-1] if common else scope


def _inner(realize, outside: set, preserve_unit_iters: bool, units: dict, func):
    """The block renamed ``<v>_i`` (unit iterators dropped when asked)."""
    blk = realize.block
    for e in list(realize.iter_values) + [realize.predicate]:
        bad = [v.name for v in used_vars(e) if id(v) in outside]
        if bad:
            raise schedule_error(LoopNestError, PRIM, f"block {blk.name!r} uses loop "
                                 f"{bad[0]} outside the blocks' common loop in "
                                 f"{e}; the outer block would need an iterator for it: "
                                 "blockize that loop instead", func, realize)
    if blk.init is not None:
        raise schedule_error(LoopNestError, PRIM, f"block {blk.name!r} has an init (a "
                             "reduction): blockize of several blocks takes blocks "
                             "without one; blockize the reduction's loop", func, realize)
    ivs, vals, vmap = [], [], {}
    for iv, val in zip(blk.iter_vars, realize.iter_values):
        if not preserve_unit_iters and isinstance(val, Var) and id(val) in units:
            vmap[iv.var] = units[id(val)]
            continue
        new = Var(iv.var.name + "_i", iv.var.dtype)
        vmap[iv.var] = new
        ivs.append(IterVar(new, iv.dom, iv.kind))
        vals.append(val)
    new_blk = substitute(with_fields(blk, iter_vars=()), vmap)
    return BlockRealize(vals, realize.predicate, with_fields(new_blk, iter_vars=tuple(ivs)))


def blockize_blocks(func, blocks, preserve_unit_iters: bool = True):
    """``(new function, outer block handle)``; see the module docstring.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> B = T.compute((4,), lambda i: A[i], name="B")
        >>> f = T.create_prim_func([A, B, T.compute((4,), lambda i: A[i], name="C")])
        >>> blockize_blocks(f, [BlockRV("C"), BlockRV("B")])[1]
        BlockRV('outer_C_B_')
    """
    paths = [block_path(func, b, PRIM) for b in blocks]
    if len(set(paths)) != len(paths):
        raise schedule_error(LoopNestError, PRIM, "a block is given twice", func)
    cpath = _common(func, paths)
    container = tree.get(func, cpath)
    body = container.body if isinstance(container, For) else container.block.body
    items = subtrees(body)
    names = [tree.get(func, p).block.name for p in paths]
    held = [[b.block.name for b in tree.blocks_under(s)] for s in items]
    if sorted(sum(held, [])) != sorted(names) or any(len(h) != 1 for h in held):
        raise schedule_error(LoopNestError, PRIM, f"the body of the blocks' common "
                             f"{'loop' if isinstance(container, For) else 'block'} holds "
                             f"{held}: blockize of blocks {names} needs it to hold exactly "
                             "one statement per block, each with that block alone", func,
                             container)
    outside = {id(node.loop_var) for p in paths for lp, node in tree.loops_above(func, p)
               if not (len(lp) > len(cpath) and lp[:len(cpath)] == cpath)}
    new_items, reads, writes = [], {}, {}
    for item in items:
        ipath = next(p for p in paths if tree.get(func, p) in tree.blocks_under(item))
        inner_loops = [(lp, node) for lp, node in tree.loops_above(func, ipath)
                       if len(lp) > len(cpath) and lp[:len(cpath)] == cpath]
        units = {id(n.loop_var): n.min for _, n in inner_loops
                 if isinstance(n.extent, IntImm) and n.extent.value == 1}
        realize = tree.get(func, ipath)
        doms = loop_doms(inner_loops)
        for kind, acc in (("reads", reads), ("writes", writes)):
            for r in getattr(realize.block, kind):
                box = relax(bound_region(realize, r), doms)
                acc[id(r.buffer)] = union(acc.get(id(r.buffer)), box)
        new_inner = _inner(realize, outside, preserve_unit_iters, units, func)
        new_items.append(_Swap(new_inner).visit(item))
    first = tree.get(func, paths[0]).block
    outer_ivs = tuple(IterVar(Var(iv.var.name + "_o", iv.var.dtype),
                              Range(const(0, iv.dom.extent.dtype),
                                    const(1, iv.dom.extent.dtype)), iv.kind)
                      for iv in first.iter_vars)
    name = fresh_block_name(func, "outer_" + "".join(n + "_" for n in names))
    outer = Block(name, outer_ivs, tuple(reads.values()), tuple(writes.values()),
                  seq(*new_items))
    realize = BlockRealize(tuple(const(0, iv.var.dtype) for iv in outer_ivs),
                           IntImm(1, "bool"), outer)
    if isinstance(container, For):
        new = with_fields(container, body=realize)
    else:
        new = with_fields(container, block=with_fields(container.block, body=realize))
    return tree.replace(func, cpath, new), BlockRV(name)


class _Swap(Mutator):
    """Replace the one block realize of a statement."""

    def __init__(self, new):
        self.new = new

    def visit_BlockRealize(self, br):
        return self.new
