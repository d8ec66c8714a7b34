"""``enter_postproc``: the mark between a schedule's design and its post-processing.

A search space samples decisions and applies primitives; steps that follow from them
mechanically (e.g. unrolling or vectorising what the tiles leave innermost) can come
after ``sch.enter_postproc()``.  The function is unchanged; the trace keeps the mark,
and ``Trace.simplified(remove_postproc=True)`` / ``Trace.apply_to(sch,
remove_postproc=True)`` leave the post-processing out.

Example::

    >>> import cuvil_tir as T
    >>> import schedules as S
    >>> A = T.placeholder((8,), name="A")
    >>> sch = S.Schedule(T.create_prim_func([A, T.compute((8,), lambda i: A[i], name="B")]))
    >>> (i,) = sch.get_loops("B")
    >>> sch.enter_postproc()
    >>> sch.vectorize(i)
    >>> len(sch.trace), len(sch.trace.simplified(remove_postproc=True))
    (3, 0)
"""

from __future__ import annotations

from ..primitive import primitive


@primitive("enter_postproc")
def enter_postproc(func):
    """Mark the start of post-processing: the instructions after it are left out by
    ``Trace.simplified(remove_postproc=True)`` and ``Trace.apply_to(sch,
    remove_postproc=True)``.  The function is unchanged.

    Example::

        >>> import cuvil_tir as T
        >>> import schedules as S
        >>> sch = S.Schedule(T.create_prim_func([T.placeholder((2,), name="A")]))
        >>> sch.enter_postproc()
        >>> print(sch.trace)
        sch.enter_postproc()
    """
    return func, None
