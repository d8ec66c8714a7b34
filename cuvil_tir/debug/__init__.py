"""Debugging views: ``T.graph`` (dataflow as Graphviz) and ``T.diff`` (per-block
comparison of a compiled function with the reference interpreter).

Example::

    >>> import cuvil_tir as T
    >>> callable(T.graph)
    True
"""

from .diff import DiffReport, DiffRow, diff, promote_intermediates
from .graph import graph, render

__all__ = ["DiffReport", "DiffRow", "diff", "graph", "promote_intermediates",
           "render"]
