"""Small example functions for documentation and quick experiments.

They ship with the package, so a docstring example can build a realistic function in
one line without depending on the test suite.

Example::

    >>> from cuvil_tir.te.examples import matmul
    >>> f = matmul(4, 4, 4)
    >>> [p.name for p in f.params]
    ['A', 'B', 'C']
"""

from __future__ import annotations

from ..function import PrimFunc
from .create_prim_func import create_prim_func
from .reduction import sum as _sum
from .tensor import compute, placeholder, reduce_axis


def matmul(m: int = 16, n: int = 16, k: int = 16, dtype: str = "float32") -> PrimFunc:
    """``C[i, j] = sum_k A[i, k] * B[k, j]`` as a PrimFunc (one reduction block ``C``).

    Example::

        >>> str(matmul(2, 3, 4).params[2].shape)
        '(2, 3)'
    """
    A = placeholder((m, k), dtype, name="A")
    B = placeholder((k, n), dtype, name="B")
    r = reduce_axis((0, k), name="k")
    C = compute((m, n), lambda i, j: _sum(A[i, r] * B[r, j], axis=r), name="C")
    return create_prim_func([A, B, C])


__all__ = ["matmul"]
