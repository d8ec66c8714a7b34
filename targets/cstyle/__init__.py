"""The C family of backends, shared by them and below them: one printer base
(:class:`CPrinter`) that the ``c``, CUDA C and accelerator C backends subclass, the C
helper functions it emits, the system C compiler (:mod:`.compiler`) and the loading of
a compiled C program (:mod:`.runtime`).

Example::

    >>> from targets.cstyle import CPrinter
    >>> CPrinter.restrict
    'restrict'
"""

from .printer import CPrinter, STATUS_ALLOC_FAILED, size_vars_of

__all__ = ["CPrinter", "STATUS_ALLOC_FAILED", "size_vars_of"]
