"""The te-style DSL: placeholders, compute stages, reductions, create_prim_func.

Example::

    >>> from cuvil_tir import te
    >>> A = te.placeholder((4,), name="A")
    >>> te.compute((4,), lambda i: A[i] + 1.0, name="B").dtype
    'float32'
"""

from .create_prim_func import access_regions, create_prim_func
from .reduction import Reduce, max, min, prod, sum
from .tensor import ComputeOp, PlaceholderOp, Tensor, compute, placeholder, reduce_axis

__all__ = ["Tensor", "ComputeOp", "PlaceholderOp", "Reduce", "placeholder", "compute",
           "reduce_axis", "sum", "max", "min", "prod", "create_prim_func",
           "access_regions"]
