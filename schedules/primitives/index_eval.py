"""Index expressions evaluated on numpy arrays of every point: the evaluator lives in
:mod:`cuvil_tir.arith.index_eval` (the region check uses it too); re-exported here for
the primitives that enumerate maps and predicates.

Example::

    >>> import numpy as np
    >>> from cuvil_tir.expr import Var
    >>> i = Var("i")
    >>> eval_np(i * 3 % 4, {id(i): np.arange(4)}).tolist()
    [0, 3, 2, 1]
"""

from cuvil_tir.arith.index_eval import eval_np

__all__ = ["eval_np"]
