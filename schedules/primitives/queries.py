"""Queries: handles to blocks and loops.  They return the function unchanged, and are
traced like every primitive so that later instructions can refer to their results.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((4, 4), name="A")
    >>> f = T.create_prim_func([A, T.compute((4, 4), lambda i, j: A[i, j], name="B")])
    >>> g, blk = get_block(f, "B")
    >>> g is f, [l.var.name for l in get_loops(f, blk)[1]]
    (True, ['i', 'j'])
"""

from __future__ import annotations

from cuvil_tir.analysis import tree
from ..analysis import (block_path, child_blocks, consumers, loop_nest, producers,
                        stmt_path)
from ..errors import ScheduleArgumentError, schedule_error
from ..handles import BlockRV, LoopRV
from ..primitive import primitive


@primitive("get_block")
def get_block(func, name):
    """The BlockRV of the block called ``name``.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
        >>> get_block(f, "root")[1]
        BlockRV('root')
    """
    if not isinstance(name, str):
        raise schedule_error(ScheduleArgumentError, "get_block",
                             f"expected a block name (str), got {name!r}")
    tree.find_block(func, name)
    return func, BlockRV(name)


@primitive("get_loops")
def get_loops(func, block):
    """LoopRVs of the loops between ``block`` and its parent block, outer to inner.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
        >>> get_loops(f, BlockRV("root"))[1]
        []
    """
    path = block_path(func, block, "get_loops")
    return func, [LoopRV(loop.loop_var) for loop in loop_nest(func, path)]


@primitive("get_child_blocks")
def get_child_blocks(func, block_or_loop):
    """BlockRVs of the blocks directly under a block or a loop, in IR order.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((2,), name="A")
        >>> f = T.create_prim_func([A, T.compute((2,), lambda i: A[i], name="B")])
        >>> get_child_blocks(f, BlockRV("root"))[1]
        [BlockRV('B')]
    """
    path = stmt_path(func, block_or_loop, "get_child_blocks")
    return func, [BlockRV(b.block.name) for b in child_blocks(tree.get(func, path))]


@primitive("get_producers")
def get_producers(func, block):
    """BlockRVs of the sibling blocks that write a buffer ``block`` reads.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((2,), name="A")
        >>> B = T.compute((2,), lambda i: A[i], name="B")
        >>> f = T.create_prim_func([A, T.compute((2,), lambda i: B[i], name="C")])
        >>> get_producers(f, BlockRV("C"))[1]
        [BlockRV('B')]
    """
    path = block_path(func, block, "get_producers")
    return func, [BlockRV(b.block.name) for b in producers(func, path)]


@primitive("get_consumers")
def get_consumers(func, block):
    """BlockRVs of the sibling blocks that read a buffer ``block`` writes.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((2,), name="A")
        >>> B = T.compute((2,), lambda i: A[i], name="B")
        >>> f = T.create_prim_func([A, T.compute((2,), lambda i: B[i], name="C")])
        >>> get_consumers(f, BlockRV("B"))[1]
        [BlockRV('C')]
    """
    path = block_path(func, block, "get_consumers")
    return func, [BlockRV(b.block.name) for b in consumers(func, path)]
