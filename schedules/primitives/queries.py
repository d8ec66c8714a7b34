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
from ..analysis import block_path, child_blocks, loop_nest, stmt_path
from ..block_scope import consumers, producers
from ..errors import ScheduleArgumentError, WorkOnError, schedule_error
from ..handles import BlockRV, LoopRV
from ..primitive import BLOCK, BLOCKS, BLOCK_OR_LOOP, LOOPS, STR, primitive
from ..block_flags import writes_param


@primitive("get_block", name=STR, func_name=STR, returns=BLOCK, pure=True)
def get_block(func, name, func_name=None):
    """The handle of the block called ``name``; in a schedule of a module, of the
    function ``func_name`` (default: the function worked on, see ``work_on``).

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> S.Schedule(T.create_prim_func([T.placeholder((2,), name="A")])).get_block("root")
        BlockRV('root')
        >>> S.Schedule(T.create_prim_func([T.placeholder((2,), name="A")])).get_block(
        ...     name="root", func_name="main")
        BlockRV('root')
    """
    if not isinstance(name, str):
        raise schedule_error(ScheduleArgumentError, "get_block",
                             f"expected a block name (str), got {name!r}")
    if func_name is not None and func_name != func.name:
        # the Schedule hands each primitive the function its arguments name
        raise schedule_error(WorkOnError, "get_block", f"asked for a block of function "
                             f"{func_name!r} in function {func.name!r}")
    block = BlockRV(name)
    block_path(func, block, "get_block")
    return func, block


@primitive("get_loops", block=BLOCK, returns=LOOPS, pure=True)
def get_loops(func, block):
    """The loops between ``block`` and its parent block, outer to inner.

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((2, 3), name="A")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute((2, 3), lambda i, j: A[i, j],
        ...                                                 name="B")]))
        >>> sch.get_loops(sch.get_block("B"))
        [LoopRV(i), LoopRV(j)]
    """
    path = block_path(func, block, "get_loops")
    return func, [LoopRV(loop.loop_var) for loop in loop_nest(func, path)]


@primitive("get_child_blocks", block_or_loop=BLOCK_OR_LOOP, returns=BLOCKS, pure=True)
def get_child_blocks(func, block_or_loop):
    """The blocks directly under a block or a loop (not inside another block).

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((2,), name="A")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute((2,), lambda i: A[i],
        ...                                                 name="B")]))
        >>> sch.get_child_blocks(sch.get_block("root"))
        [BlockRV('B')]
    """
    path = stmt_path(func, block_or_loop, "get_child_blocks")
    return func, [BlockRV(b.block.name) for b in child_blocks(tree.get(func, path))]


@primitive("get_producers", block=BLOCK, returns=BLOCKS, pure=True)
def get_producers(func, block):
    """Sibling blocks writing a buffer that ``block`` reads.

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((2,), name="A")
        >>> B = T.compute((2,), lambda i: A[i] + 1.0, name="B")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute((2,), lambda i: B[i],
        ...                                                 name="C")]))
        >>> sch.get_producers(sch.get_block("C"))
        [BlockRV('B')]
    """
    path = block_path(func, block, "get_producers")
    return func, [BlockRV(b.block.name) for b in producers(func, path)]


@primitive("get_consumers", block=BLOCK, returns=BLOCKS, pure=True)
def get_consumers(func, block):
    """Sibling blocks reading a buffer that ``block`` writes.

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((2,), name="A")
        >>> B = T.compute((2,), lambda i: A[i] + 1.0, name="B")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute((2,), lambda i: B[i],
        ...                                                 name="C")]))
        >>> sch.get_consumers(sch.get_block("B"))
        [BlockRV('C')]
    """
    path = block_path(func, block, "get_consumers")
    return func, [BlockRV(b.block.name) for b in consumers(func, path)]


@primitive("get_output_blocks", scope_block=BLOCK, returns=BLOCKS)
def get_output_blocks(func, scope_block):
    """The blocks inside ``scope_block`` (at any depth, in program order) that write a
    buffer of the function's parameters, i.e. one the function does not allocate.

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> A = T.placeholder((2,), name="A")
        >>> B = T.compute((2,), lambda i: A[i] + 1.0, name="B")
        >>> sch = S.Schedule(T.create_prim_func([A, T.compute((2,), lambda i: B[i],
        ...                                                 name="C")]))
        >>> sch.get_output_blocks("root")
        [BlockRV('C')]
    """
    scope = tree.get(func, block_path(func, scope_block, "get_output_blocks"))
    return func, [BlockRV(br.block.name) for br in tree.blocks_under(scope.block.body)
                  if writes_param(func, br.block)]
