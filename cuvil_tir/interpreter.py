"""``T.interpret``: the reference interpreter (implemented in :mod:`cuvil_tir.interp`).

Example::

    >>> import numpy as np, cuvil_tir as T
    >>> A = T.placeholder((3,), name="A")
    >>> f = T.create_prim_func([A, T.compute((3,), lambda i: A[i] + 1.0, name="B")])
    >>> b = np.zeros(3, "float32")
    >>> interpret(f, np.arange(3, dtype="float32"), b)
    >>> b.tolist()
    [1.0, 2.0, 3.0]
"""

from .interp import interpret

__all__ = ["interpret"]
