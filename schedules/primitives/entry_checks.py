"""Run-time checks a primitive adds at the top of the function: a fact about the
function's sizes or scalar parameters that its transform relies on and that Cuvil cannot
prove (``split(..., disable_predication=True)`` over ``n``: ``n % 4 == 0``;
``transform_layout`` with ``i -> (i // n, i % n)``: ``n > 0``).  The check runs once, on
entry, so a call that breaks the fact stops with ``T.RuntimeCheckError`` before anything
is computed.

Example::

    >>> import cuvil_tir as T
    >>> n = T.size_var("n")
    >>> A = T.placeholder((n,), name="A")
    >>> f = T.create_prim_func([A, T.compute((n,), lambda i: A[i], name="B")])
    >>> check = entry_check(f, n > 0, "n must be positive; found {}", (n,), "example")
    >>> print(with_entry_check(f, check).body.block.body.seq[0])
    T.assert_(n > 0, "n must be positive; found {}", n)
"""

from __future__ import annotations

import dataclasses

from cuvil_tir.stmt import AssertStmt, BlockRealize, seq
from cuvil_tir.visitor import used_vars

from ..errors import schedule_error, ScheduleArgumentError
from .index_maps import function_vars


def entry_check(func, cond, message: str, values, prim: str, error=None,
                node=None) -> AssertStmt:
    """The check of ``cond`` at ``func``'s entry; refused (``error``, a ScheduleError
    class) when ``cond`` names a variable defined inside the function (a loop's), which
    no check on entry can read.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((4,), name="A")])
        >>> try:
        ...     entry_check(f, T.var("i") > 0, "i", (), "example")
        ... except T.CuvilError as err:
        ...     print(err.message.splitlines()[0])
        example: the check i > 0 reads i, defined inside the function; a check on entry can only read the function's sizes and scalar parameters
    """
    declared = {id(v) for v in function_vars(func).values()}
    inner = sorted({v.name for v in used_vars(cond) if id(v) not in declared})
    if inner:
        raise schedule_error(error or ScheduleArgumentError, prim, f"the check {cond} reads "
                             f"{', '.join(inner)}, defined inside the function; a check on "
                             "entry can only read the function's sizes and scalar "
                             "parameters", func, node)
    return AssertStmt(cond, message, tuple(values))


def with_entry_check(func, check: AssertStmt):
    """``func`` with ``check`` first in its body (in the root block, when there is one).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> g = with_entry_check(f, AssertStmt(T.const(True, "bool"), "never"))
        >>> [type(s).__name__ for s in g.body.block.body.seq]
        ['AssertStmt', 'For']
    """
    root = func.body
    if isinstance(root, BlockRealize):
        return func.with_body(dataclasses.replace(root, block=dataclasses.replace(
            root.block, body=seq(check, root.block.body))))
    return func.with_body(seq(check, root))


__all__ = ["entry_check", "with_entry_check"]
