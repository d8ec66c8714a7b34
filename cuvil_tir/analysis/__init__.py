"""Analyses of PrimFuncs shared by the schedule primitives and the lowering passes.

* :mod:`.tree`: statements by *path* (find, get, replace, walk);
* :mod:`.regions`: which part of a buffer a block touches, over the loops above it,
  relaxed over the loops in between;
* :mod:`.index_map`: the block-variable values that cover a region (quasi-affine
  digits); :mod:`.map_inverse`: the one inverse of an index map (with
  :mod:`.linear_maps` for symbolic row-major numberings);
* :mod:`.reducer`: the combiners, their identities and the reducer of a block.

The affine decomposition of index expressions is :mod:`cuvil_tir.arith.affine`; the
tensor-intrinsic registry is :mod:`cuvil_tir.tensor_intrin`.

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
