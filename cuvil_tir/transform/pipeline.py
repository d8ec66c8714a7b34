"""The default pipeline, the one every target kind starts from, and the CPU pipeline
the ``llvm`` and ``c`` kinds share.

A target kind's ``pipeline(target)`` (``cuvil_tir.target.TargetKind``) gives the
passes ``T.lower`` and the build driver run for it; the base class's is
:func:`default_pipeline`.  There is one registry of kinds, in
:mod:`cuvil_tir.target.registry`.

Example::

    >>> from cuvil_tir.transform import pass_name
    >>> [pass_name(p) for p in default_pipeline()]
    ['lower_blocks', 'flatten_buffers', 'simplify', 'verify']
"""

from __future__ import annotations

from .flatten_buffers import flatten_buffers
from .loop_partition import loop_partition
from .lower_blocks import lower_blocks
from .outline import outline_parallel
from .plan_allocation import plan_buffer_allocation
from .simplify import simplify
from .software_pipeline import inject_software_pipeline
from .unroll import unroll_loops
from .verify import verify


def default_pipeline() -> list:
    """``[lower_blocks, flatten_buffers, simplify, verify]`` (a fresh list).

    Example::

        >>> len(default_pipeline())
        4
    """
    return [lower_blocks, flatten_buffers, simplify, verify]


def cpu_pipeline(vectorize=None, outline: bool = True) -> list:
    """The passes of a CPU backend: ``plan_buffer_allocation`` (the memory planner),
    then the default pipeline with ``inject_software_pipeline`` after ``lower_blocks``
    (multi-buffered stages, as on every target), ``loop_partition`` before its
    ``simplify`` (guard-free hot loops, tails for
    ``simplify``), ``vectorize`` (a pass, or ``None`` when the backend's own compiler
    vectorizes), ``unroll_loops`` and ``simplify`` after it, and, when ``outline``,
    ``outline_parallel`` (parallel loops become the module's ``parallel_task``
    functions) before the module is verified.

    Example::

        >>> from cuvil_tir.transform import pass_name
        >>> [pass_name(p) for p in cpu_pipeline(outline=False)]  # doctest: +NORMALIZE_WHITESPACE
        ['plan_buffer_allocation', 'lower_blocks', 'inject_software_pipeline',
         'flatten_buffers', 'loop_partition', 'simplify', 'unroll_loops', 'simplify',
         'verify']
    """
    out = [plan_buffer_allocation]
    for p in default_pipeline():
        if p is simplify:
            out.append(loop_partition)
        if p is verify and outline:
            out.append(outline_parallel)
        out.append(p)
        if p is lower_blocks:
            out.append(inject_software_pipeline)
        if p is simplify:
            out.extend(([vectorize] if vectorize is not None else []) +
                       [unroll_loops, simplify])
    return out


__all__ = ["cpu_pipeline", "default_pipeline"]
