"""Where ``compute_at`` and ``reverse_compute_at`` put a block among the statements of
the target loop's body.

The legal places lie after the last statement holding a producer of the block and up to
the first statement holding a consumer: ``[lo, hi]`` as positions in the body's
statement list (``lo`` is 0 without a producer there, ``hi`` its length without a
consumer).  ``index`` picks one, as TensorIR's ``index`` argument: ``-1`` the last
(``hi``), ``-2`` the first (``lo``), or a position within ``[lo, hi]``.

Example::

    >>> from cuvil_tir.stmt import Evaluate
    >>> from cuvil_tir.expr import IntImm
    >>> items = [Evaluate(IntImm(0)), Evaluate(IntImm(1))]
    >>> insertion_point(items, set(), set(), -1, "compute_at", "i", None)
    2
"""

from __future__ import annotations
from cuvil_tir.analysis import tree
from cuvil_tir.stmt import SeqStmt

from ..errors import BlockLocationError, fail


def _names(stmt) -> set:
    return {b.block.name for b in tree.blocks_under(stmt)}


def insertion_point(items, producers: set, consumers: set, index: int, prim: str,
                    lname: str, func) -> int:
    """The position in ``items`` (the loop body's statements) where the block goes.

    Example::

        >>> insertion_point([], set(), set(), -2, "compute_at", "i", None)
        0
    """
    names = [_names(s) for s in items]
    lo = 1 + max((k for k, n in enumerate(names) if n & producers), default=-1)
    hi = min((k for k, n in enumerate(names) if n & consumers), default=len(items))
    if index == -1:
        return hi
    if index == -2:
        return lo
    if not lo <= index <= hi:
        raise fail(BlockLocationError, prim, f"index {index}: the block can go only "
                   f"between the statements of loop {lname!r}'s body holding its "
                   f"producers and its consumers, at a position in [{lo}, {hi}]; pass one "
                   "of them, -1 (the last) or -2 (the first)", func)
    return index

def insert_before(func, path: tuple, stmt):
    """A new function with ``stmt`` placed just before the statement at ``path``.

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> from cuvil_tir.expr import const
        >>> from cuvil_tir.stmt import Evaluate
        >>> f = matmul(4, 4, 4)
        >>> g = insert_before(f, ("block", "body"), Evaluate(const(0)))
        >>> type(g.body.block.body).__name__
        'SeqStmt'
    """
    return _insert(func, path, stmt, before=True)


def insert_after(func, path: tuple, stmt):
    """A new function with ``stmt`` placed just after the statement at ``path``.

    Example::

        >>> from cuvil_tir.te.examples import matmul
        >>> from cuvil_tir.expr import const
        >>> from cuvil_tir.stmt import Evaluate
        >>> g = insert_after(matmul(4, 4, 4), ("block", "body"), Evaluate(const(0)))
        >>> type(g.body.block.body.seq[1]).__name__
        'Evaluate'
    """
    return _insert(func, path, stmt, before=False)


def _insert(func, path, stmt, before):
    old = tree.get(func, path)
    pair = [stmt, old] if before else [old, stmt]
    if path and isinstance(path[-1], tuple) and path[-1][0] == "seq":
        return tree.replace(func, path, pair)   # spliced into the parent sequence
    return tree.replace(func, path, SeqStmt(tuple(pair)))
