"""Analyses of PrimFuncs shared by the schedule primitives and the lowering passes.

* :mod:`.tree`: statements by *path* (find, get, replace, walk);
* :mod:`.regions`: which part of a buffer a block touches, over the loops above it,
  relaxed over the loops in between.

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.analysis import regions, tree
    >>> A = T.placeholder((8,), name="A")
    >>> f = T.create_prim_func([A, T.compute((8,), lambda i: A[i] * 2.0, name="B")])
    >>> regions.readers(f, (), f.params[0])[0][1].block.name
    'B'
"""

from . import regions, tree

__all__ = ["regions", "tree"]
