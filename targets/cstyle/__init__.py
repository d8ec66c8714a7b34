"""The C family of backends: one printer base (:class:`CPrinter`) that the ``c``,
CUDA C and accelerator C backends subclass, and the C helper functions it emits.

Example::

    >>> from targets.cstyle import CPrinter
    >>> CPrinter.restrict
    'restrict'
"""

from .printer import CPrinter, STATUS_ALLOC_FAILED, size_vars_of

__all__ = ["CPrinter", "STATUS_ALLOC_FAILED", "size_vars_of"]
