"""The elements of a buffer the blocks around a place declare, as a condition on one.

A block's declared regions bound what every block inside it accesses (the region
contract: :mod:`cuvil_tir.region_check`).  A copy a primitive adds inside nested blocks
is sized from a box (a blockized block's tile, a writer's region) that may overshoot
what the blocks around it declare: a blockized block of a non-dividing split declares
its whole tile, while the ``T.where`` inside it cuts the tile, and a ``loop_partition``
part declares only its own part.  Copying the overshoot reads (or writes back) elements
outside those declarations, and the printed function no longer parses back.

By the contract, the blocks inside access nothing outside each enclosing block's
region: a copy may leave those elements out, so it is cut to them.  The condition
names only variables the copy can see (the loops down to it, the iterators of the
nearest block with iterators, sizes); a dimension whose region names others is not
cut (the schedule's region check after each step then reports what still overshoots).

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((8,), name="A")
    >>> f = T.create_prim_func([A, T.compute((8,), lambda i: A[i] + 1.0, name="B")])
    >>> within_enclosing(f, (), f.params[0], write=False) is None       # the root: no region
    True
"""

from __future__ import annotations

from cuvil_tir.analysis import tree
from cuvil_tir.analysis.regions import simplify
from cuvil_tir.stmt import Block, BlockRealize, For
from cuvil_tir.visitor import used_vars


def _blocks_and_visible(func, path):
    """The blocks at and above ``path`` (a loop or a block realize), nearest first, and
    the ids of the loop and iterator variables visible at ``path``."""
    nodes = [s for _, s in tree.ancestors(func, path)] + [tree.get(func, path)]
    blocks, visible, bound, open_ = [], set(), set(), True
    for s in reversed(nodes):
        if isinstance(s, BlockRealize):
            s = s.block
        if isinstance(s, For):
            bound.add(id(s.loop_var))
            if open_:
                visible.add(id(s.loop_var))
        elif isinstance(s, Block) and not any(b is s for b in blocks):
            blocks.append(s)
            ids = {id(iv.var) for iv in s.iter_vars}
            bound |= ids
            if open_:
                visible |= ids
            # a block with iterators hides the loops around it from the blocks inside
            open_ = open_ and not s.iter_vars
    return blocks, visible, bound


def _declared(block, buf, write):
    # a load may lie in the write region (a reduction reads its own output)
    pools = (block.writes,) if write else (block.reads, block.writes)
    return next((r for pool in pools for r in pool if r.buffer is buf), None)


def within_enclosing(func, path, buf, write: bool):
    """``keep(index) -> [condition]``: ``index`` of ``buf`` lies in the region every
    block at or above ``path`` declares for it (its writes with ``write``, else its
    reads, or its writes where it does not read it), in the dimensions the copy at
    ``path`` can name; None when no block constrains it.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.parse('''
        ... def f(X: T.Buffer((8,), "float32"), Y: T.Buffer((1,), "float32")):
        ...     with T.block("part"):
        ...         T.reads(X[0:2])
        ...         T.writes(Y[0])
        ...         for k in range(2):
        ...             with T.block("Y"):
        ...                 vk = T.axis.reduce(8, k)
        ...                 Y[0] = Y[0] + X[vk]
        ... ''')
        >>> keep = within_enclosing(f, tree.find_block(f, "part"), f.params[0], False)
        >>> [str(c) for c in keep([T.var("e")])]
        ['e >= 0', 'e < 2']
    """
    blocks, visible, bound = _blocks_and_visible(func, path)
    hidden = bound - visible
    cuts = []
    for blk in blocks:
        region = _declared(blk, buf, write)
        if region is None:
            continue
        for d, r in enumerate(region.region):
            if not any(id(v) in hidden for v in (*used_vars(r.min), *used_vars(r.extent))):
                cuts.append((d, r))
    if not cuts:
        return None

    def keep(index):
        out = []
        for d, r in cuts:
            out += [index[d] >= r.min, index[d] < simplify(r.min + r.extent)]
        return out
    return keep


__all__ = ["within_enclosing"]
