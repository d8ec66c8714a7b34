"""The backend contract, in the core: ``Target``, ``TargetKind``, the one registry,
``Program``, memories and options, the build driver and the compile cache.

A backend is a :class:`TargetKind` subclass that declares its data (options,
memories, parallel axes, op spellings, calling conventions) and writes its steps
(``pipeline``, ``codegen(module, target) -> Program``, ``load(program, target) ->
Module``); it registers with :func:`register_target` or through the ``cuvil.targets``
entry point.  ``T.lower`` and :func:`build` read nothing else, so ``cuvil_tir`` imports
no backend, and a new backend touches only its own folder (``docs/backends.md``).

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((4,), name="A")
    >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] + 1.0, name="B")])
    >>> T.lower(f, "llvm").entry.attr("calling_conv")
    'host'
    >>> Target("llvm -opt-level=2").options["opt_level"], get_target_kind("llvm").name
    (2, 'llvm')
"""

from . import cache
from .build import build, check_memories, compile_program, lower_for
from .keys import build_key, describe_target, tool_versions
from .kind import MEASURE_REPEAT, SCALAR_MACHINE, Axis, Machine, TargetKind
from .lowering import get_pipeline, lower
from .memory import HOST_MEMORIES, Memory
from .options import Option, check_options
from .program import Program
from .registry import (ENTRY_POINT_GROUP, declared_scopes, get_target_kind, list_targets,
                       loaded_kinds, register_target, unregister_target)
from .signature import ParamSpec, Signature
from .target import Target, as_target
from .timing import BenchmarkResult, time_calls

__all__ = ["Axis", "BenchmarkResult", "ENTRY_POINT_GROUP", "HOST_MEMORIES", "MEASURE_REPEAT",
           "Machine", "Memory", "Option", "ParamSpec", "Program", "SCALAR_MACHINE",
           "Signature", "Target", "TargetKind", "as_target", "build", "build_key", "cache",
           "check_memories", "check_options", "compile_program", "declared_scopes",
           "describe_target", "get_pipeline", "get_target_kind", "list_targets",
           "loaded_kinds", "lower", "lower_for", "register_target", "time_calls",
           "tool_versions", "unregister_target"]
