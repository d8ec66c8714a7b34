"""The tuner's own error: what it was asked cannot be tuned, and why.

Example::

    >>> TuneError("no candidate built").code
    'CVL-E198'
"""

from __future__ import annotations

from cuvil_tir.errors import CuvilError


class TuneError(CuvilError):
    """``S.tune`` cannot give a result: the function has symbolic sizes, the target
    declares nothing a space can be generated from, or no candidate succeeded (the
    message lists every failure kind with one example message).

    Example::

        >>> TuneError("the space raised").code
        'CVL-E198'
    """

    code = "CVL-E198"


__all__ = ["TuneError"]
