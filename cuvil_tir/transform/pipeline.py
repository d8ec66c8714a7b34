"""The default pipeline: the passes every target kind starts from.

A target kind's ``pipeline(target)`` (``cuvil_tir.target.TargetKind``) gives the
passes ``T.lower`` and the build driver run for it; the base class's is this one.
There is one registry of kinds, in :mod:`cuvil_tir.target.registry`.

Example::

    >>> from cuvil_tir.transform import pass_name
    >>> [pass_name(p) for p in default_pipeline()]
    ['lower_blocks', 'flatten_buffers', 'simplify', 'verify']
"""

from __future__ import annotations

from .flatten_buffers import flatten_buffers
from .lower_blocks import lower_blocks
from .simplify import simplify
from .verify import verify


def default_pipeline() -> list:
    """``[lower_blocks, flatten_buffers, simplify, verify]`` (a fresh list).

    Example::

        >>> len(default_pipeline())
        4
    """
    return [lower_blocks, flatten_buffers, simplify, verify]


__all__ = ["default_pipeline"]
