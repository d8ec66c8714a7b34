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
from .memory import HOST_MEMORIES, Memory, check_memories
from .build import build, lower_for
from .keys import build_key, describe_target
from . import cache
from . import llvm  # noqa: F401 - registers the "llvm" kind
from . import c  # noqa: F401 - registers the "c" kind
from . import cuda  # noqa: F401 - registers the "cuda" kind

__all__ = ["ArgumentError", "BenchmarkResult", "CodegenError", "HOST_MEMORIES", "Memory",
           "Module", "Target", "check_memories",
           "TargetError", "as_target", "build", "build_key", "cache", "describe_target",
           "get_target_kind", "list_targets",
           "lower_for", "register_target", "unregister_target"]


def _diff_builder(func, target):
    return build(func, target)


import cuvil_tir.debug as _debug  # noqa: E402 - after build is defined

_debug.register_builder(_diff_builder)
