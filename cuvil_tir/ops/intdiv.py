"""The integer division and modulo semantics under the op registry's name: the
definition is :mod:`cuvil_tir.intdiv`, below the expressions (whose builders fold with
it, before the registry is loaded).

Example::

    >>> from cuvil_tir.ops.intdiv import floordiv
    >>> floordiv(-7, 2)
    -4
"""

from ..intdiv import INT_DIVISIONS, floordiv, floormod, truncdiv, truncmod

__all__ = ["INT_DIVISIONS", "floordiv", "floormod", "truncdiv", "truncmod"]
