"""Code generation and runtime: the backends (``llvm``, ``c``, ``cuda``, accelerators)
and the public names ``targets.build``, ``targets.Target``, ``targets.Module``, ...

The contract every backend implements lives in the core (:mod:`cuvil_tir.target`:
``Target``, ``TargetKind``, the registry, ``Program``, the build driver and the compile
cache); this package re-exports it under its public names and holds the backends,
one sub-package each, plus what their ``load`` shares (:mod:`targets.runtime`).
Importing it registers the built-in kinds; without it, the registry finds them
through their ``cuvil.targets`` entry points.

Example::

    >>> import numpy as np, cuvil_tir as T, targets
    >>> A = T.placeholder((4,), name="A")
    >>> B = T.compute((4,), lambda i: T.sqrt(A[i]), name="B")
    >>> mod = targets.build(T.create_prim_func([A, B]), "llvm")
    >>> b = np.zeros(4, "float32"); mod(np.full(4, 9.0, "float32"), b); b.tolist()
    [3.0, 3.0, 3.0, 3.0]
"""

from cuvil_tir.errors import ArgumentError, CodegenError, TargetError
from cuvil_tir.target import (HOST_MEMORIES, BenchmarkResult, Memory, Program, Target,
                              TargetKind, as_target, build, build_key, check_memories,
                              describe_target, get_target_kind, list_targets, lower_for,
                              register_target, unregister_target)

from .runtime import Module
from . import cache
from . import llvm  # noqa: F401 - registers the "llvm" kind
from . import c  # noqa: F401 - registers the "c" kind
from . import cuda  # noqa: F401 - registers the "cuda" kind

__all__ = ["ArgumentError", "BenchmarkResult", "CodegenError", "HOST_MEMORIES", "Memory",
           "Module", "Program", "Target", "TargetError", "TargetKind", "as_target", "build",
           "build_key", "cache", "check_memories", "describe_target", "get_target_kind",
           "list_targets", "lower_for", "register_target", "unregister_target"]
