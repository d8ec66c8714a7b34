"""Code generation and runtime: targets, ``build``, and built ``Module`` objects.

Example::

    >>> import numpy as np, cuvil_tir as T, targets
    >>> A = T.placeholder((4,), name="A")
    >>> B = T.compute((4,), lambda i: T.sqrt(A[i]), name="B")
    >>> mod = targets.build(T.create_prim_func([A, B]), "llvm")
    >>> b = np.zeros(4, "float32"); mod(np.full(4, 9.0, "float32"), b); b.tolist()
    [3.0, 3.0, 3.0, 3.0]
"""

from cuvil_tir.errors import ArgumentError, CodegenError, TargetError

from .registry import get_target_kind, list_targets, register_target, unregister_target
from .target import Target, as_target
from .benchmark import BenchmarkResult
from .module import Module
from .build import build, lower_for
from .keys import build_key, describe_target
from . import llvm  # noqa: F401 - registers the "llvm" kind

__all__ = ["ArgumentError", "BenchmarkResult", "CodegenError", "Module", "Target",
           "TargetError", "as_target", "build", "build_key", "describe_target",
           "get_target_kind", "list_targets", "lower_for", "register_target",
           "unregister_target"]
