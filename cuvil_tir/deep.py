"""Deeply nested IR: the public entry points retry on a big stack.

Every pass walks expressions recursively, one Python frame (or a few) per level, so
``A[0] + A[1] + ... + A[999]`` (a chain 1,000 deep) exceeds Python's default limit of
1,000 frames.  Raising the limit in the caller's thread is not safe: its C stack (8 MB
for the main thread) may overflow first, and that is a segfault, not an exception.
So a public entry point decorated with :func:`deep_ok` runs normally and, only when it
hits ``RecursionError``, runs once more in a thread with a :data:`STACK_BYTES` stack and
a recursion limit of :data:`DEEP_LIMIT` (the work is pure: IR is immutable, a failed
schedule primitive leaves the schedule as it was).  An entry point with effects (the
interpreter writes its arrays as it goes) is decorated with :func:`deep_if_nested`
instead: it measures the nesting first (without recursion) and goes straight to the big
stack when it is deep.  Deeper than :data:`DEEP_LIMIT` frames is a
:class:`~cuvil_tir.errors.NestingError` naming the limit, never a raw
``RecursionError``.

Example::

    >>> @deep_ok
    ... def depth(n):
    ...     return 0 if n == 0 else 1 + depth(n - 1)
    >>> depth(5000)
    5000
"""

from __future__ import annotations

import functools
import sys
import threading

from .errors import NestingError
from .node import Node

#: the recursion limit while a deep retry runs (about 20 frames per level of nesting
#: in the deepest passes: a few thousand levels)
DEEP_LIMIT = 120_000
#: the retry thread's stack: reserved address space, only the pages used are touched
STACK_BYTES = 1 << 30

_inside = threading.local()
_one_at_a_time = threading.Lock()


def deep_ok(fn):
    """Decorate a public entry point: on ``RecursionError`` it runs again on a big
    stack (module doc).  Calls nested inside a retry run directly.

    Example::

        >>> deep_ok(len)([1, 2])
        2
    """
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if getattr(_inside, "deep", False):
            return fn(*args, **kwargs)
        try:
            return fn(*args, **kwargs)
        except RecursionError:
            pass
        return run_deep(fn, *args, **kwargs)
    return wrapper


#: nesting (levels of one tree) above which :func:`deep_if_nested` uses the big stack
NESTED = 120


def nesting_depth(root, stop: int | None = None) -> int:
    """Levels of the deepest path of IR nodes below ``root`` (a node, or a tuple of
    them), walked without recursion; stops counting at ``stop``.

    Example::

        >>> import cuvil_tir as T
        >>> e = T.var("i")
        >>> for k in range(500):
        ...     e = e + k
        >>> nesting_depth(e) > 500, nesting_depth(e, stop=10)
        (True, 10)
    """
    best, seen, todo = 0, set(), [(root, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (tuple, list)):
            todo.extend((x, depth) for x in item)
            continue
        if not isinstance(item, Node) or id(item) in seen:
            continue
        seen.add(id(item))
        best = max(best, depth)
        if stop is not None and best >= stop:
            return stop
        todo.extend((c, depth + 1) for c in item.children())
    return best


def deep_if_nested(fn):
    """Decorate an entry point with effects whose first argument is the IR: deeply
    nested IR runs on the big stack from the start (module doc).

    Example::

        >>> deep_if_nested(len)((1, 2))
        2
    """
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if getattr(_inside, "deep", False) or not args or \
                nesting_depth(args[0], stop=NESTED) < NESTED:
            return fn(*args, **kwargs)
        return run_deep(fn, *args, **kwargs)
    return wrapper


def run_deep(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` in a thread with a big stack and a high recursion limit;
    its result, or its exception re-raised here (``RecursionError`` becomes a
    :class:`NestingError`).

    Example::

        >>> run_deep(sum, [1, 2, 3])
        6
    """
    out = {}

    def body():
        _inside.deep = True
        try:
            out["value"] = fn(*args, **kwargs)
        except BaseException as err:  # noqa: BLE001 - handed to the caller's thread
            out["error"] = err

    # the limit is the interpreter's, not the thread's: while it is raised, the
    # calling thread waits in join() and other retries wait for the lock
    with _one_at_a_time:
        old_limit, old_stack = sys.getrecursionlimit(), threading.stack_size()
        try:
            threading.stack_size(STACK_BYTES)
            worker = threading.Thread(target=body, name="cuvil-deep", daemon=True)
            sys.setrecursionlimit(DEEP_LIMIT)
            worker.start()
            worker.join()
        finally:
            sys.setrecursionlimit(old_limit)
            threading.stack_size(old_stack)
    err = out.get("error")
    if isinstance(err, RecursionError):
        name = getattr(fn, "__qualname__", str(fn))
        raise NestingError(f"{name}: the IR is nested deeper than Cuvil can walk (more "
                           f"than {DEEP_LIMIT} Python frames, about a few thousand levels "
                           "of nested expressions); split the expression into stages "
                           "(T.compute per part, then combine) or sum terms with a "
                           "reduction axis (T.sum) instead of chaining them") from None
    if err is not None:
        raise err
    return out["value"]


__all__ = ["DEEP_LIMIT", "deep_if_nested", "deep_ok", "nesting_depth", "run_deep"]
