"""Finding and replacing statements inside a PrimFunc by path.

A *path* is a tuple of steps from ``func.body`` down to a statement; each step is a
field name, or ``(field name, index)`` for a tuple field such as ``SeqStmt.seq``.
``replace`` rebuilds only the ancestors on the path, sharing everything else, which is
how every schedule primitive produces its new function.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((8,), name="A")
    >>> B = T.compute((8,), lambda i: A[i] * 2.0, name="B")
    >>> f = T.create_prim_func([A, B])
    >>> path = find_block(f, "B")
    >>> get(f, path).block.name
    'B'
"""

from __future__ import annotations

from ..errors import ScheduleError
from ..function import PrimFunc
from ..node import field_names
from ..stmt import Block, BlockRealize, For, Stmt


def get(func: PrimFunc, path: tuple):
    """The statement at ``path``.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
        >>> get(f, ()).block.name
        'root'
    """
    node = func.body
    for step in path:
        if isinstance(step, tuple):
            node = getattr(node, step[0])[step[1]]
        else:
            node = getattr(node, step)
    return node


def _rebuild(node, step, child):
    values = []
    for f in field_names(type(node)):
        v = getattr(node, f)
        if isinstance(step, tuple) and f == step[0]:
            items = list(v)
            if child is None:
                del items[step[1]]
            elif isinstance(child, list):
                items[step[1]:step[1] + 1] = child
            else:
                items[step[1]] = child
            v = tuple(items)
        elif f == step:
            v = child
        values.append(v)
    return type(node)(*values)


def replace(func: PrimFunc, path: tuple, new) -> PrimFunc:
    """A new function with the statement at ``path`` replaced by ``new``.

    ``new`` may be a list of statements when the parent is a ``SeqStmt`` (spliced in),
    or ``None`` to delete the statement from its ``SeqStmt``.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
        >>> replace(f, (), f.body) is not f
        True
    """
    if not path:
        if not isinstance(new, Stmt):
            raise ScheduleError("tree.replace: the function body must stay one statement")
        return PrimFunc(func.params, new, func.attrs)
    chain = [func.body]
    for step in path[:-1]:
        node = chain[-1]
        chain.append(getattr(node, step[0])[step[1]] if isinstance(step, tuple)
                     else getattr(node, step))
    child = new
    for node, step in zip(reversed(chain), reversed(path)):
        child = _rebuild(node, step, child)
    return PrimFunc(func.params, child, func.attrs)


def walk(func_or_stmt, path: tuple = ()):
    """Yield ``(path, stmt)`` for every statement, pre-order.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> [type(s).__name__ for _, s in walk(f)][:3]
        ['BlockRealize', 'Block', 'For']
    """
    node = func_or_stmt.body if isinstance(func_or_stmt, PrimFunc) else func_or_stmt
    # a stack, not nested generators: each statement yielded through every generator
    # above it made a walk quadratic in the depth (the primitives walk on every step)
    stack = [(path, node)]
    while stack:
        path, node = stack.pop()
        yield path, node
        kids = []
        for f in field_names(type(node)):
            v = getattr(node, f)
            if isinstance(v, Stmt):
                kids.append((path + (f,), v))
            elif f == "seq" and isinstance(v, tuple):
                kids.extend((path + ((f, k),), s) for k, s in enumerate(v))
        stack.extend(reversed(kids))


def find_block(func: PrimFunc, name: str) -> tuple:
    """The path of the ``BlockRealize`` of block ``name``; ScheduleError if absent.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
        >>> find_block(f, "root")
        ()
    """
    for path, s in walk(func):
        if isinstance(s, BlockRealize) and s.block.name == name:
            return path
    names = [s.block.name for _, s in walk(func) if isinstance(s, BlockRealize)]
    raise ScheduleError(f"get_block: Cannot find a block with the name: {name}; the "
                        f"function has the blocks {names}")


def find_loop(func: PrimFunc, var, primitive: str = "schedule") -> tuple:
    """The path of the ``For`` whose loop variable is ``var`` (by identity).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> loop = get(f, find_loop(f, get(f, ("block", "body")).loop_var))
        >>> loop.extent.value
        4
    """
    for path, s in walk(func):
        if isinstance(s, For) and s.loop_var is var:
            return path
    raise ScheduleError(f"{primitive}: the loop {var.name!r} is not in the function any "
                        "more (a primitive such as split, fuse or tile replaced it); use "
                        "the loop handles that primitive returned")


def ancestors(func: PrimFunc, path: tuple) -> list:
    """``(path, stmt)`` of every statement strictly above ``path``, outermost first.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((2,), name="A")])
        >>> ancestors(f, ())
        []
    """
    out = []
    for k in range(len(path)):
        out.append((path[:k], get(func, path[:k])))
    return out


def loops_above(func: PrimFunc, path: tuple) -> list:
    """``(path, For)`` of the loops between ``path`` and its enclosing block.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4, 4), name="A")
        >>> f = T.create_prim_func([A, T.compute((4, 4), lambda i, j: A[i, j], name="B")])
        >>> [l.loop_var.name for _, l in loops_above(f, find_block(f, "B"))]
        ['i', 'j']
    """
    out = []
    for p, s in reversed(ancestors(func, path)):
        if isinstance(s, (Block, BlockRealize)):
            break
        if isinstance(s, For):
            out.append((p, s))
    return list(reversed(out))


def enclosing_block(func: PrimFunc, path: tuple) -> tuple:
    """The path of the nearest ``BlockRealize`` strictly above ``path`` (root: ``()``).

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> enclosing_block(f, find_block(f, "B"))
        ()
    """
    for p, s in reversed(ancestors(func, path)):
        if isinstance(s, BlockRealize):
            return p
    return ()


def blocks_under(stmt) -> list:
    """Every ``BlockRealize`` inside ``stmt`` (itself included), pre-order.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i], name="B")])
        >>> [b.block.name for b in blocks_under(f.body)]
        ['root', 'B']
    """
    return [s for _, s in walk(stmt) if isinstance(s, BlockRealize)]
