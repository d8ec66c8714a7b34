"""Errors of accelerator targets, each with its own code from the accel range.

* :class:`DescriptionError` (CVL-E170): an :class:`~targets.accel.Accelerator`
  description is inconsistent (raised when it is constructed);
* :class:`AllocationError` (CVL-E171): the scratchpad placement at build time failed
  (capacity, banks, a pinned bank); raised by the memory planner's address step, so
  it lives in :mod:`cuvil_tir.errors` and is the same class here;
* :class:`AccelLoweringError` (CVL-E172): the scheduled function does not map onto the
  accelerator (an operand in the wrong memory, a DMA that does not fit, a copy the DMA
  cannot do);
* :class:`QueueDepthError` (CVL-E175): a queue between two engines is too shallow (or
  has too few channels) for the synchronisation the program needs: the engines could
  deadlock.

Example::

    >>> DescriptionError("bad").code, AllocationError("x").code
    ('CVL-E170', 'CVL-E171')
"""

from __future__ import annotations

from cuvil_tir.errors import AllocationError, LoweringError, TargetError


class DescriptionError(TargetError):
    """An accelerator description is inconsistent.

    Example::

        >>> isinstance(DescriptionError("x"), TargetError)
        True
    """

    code = "CVL-E170"


class AccelLoweringError(LoweringError):
    """The scheduled function does not map onto the accelerator.

    Example::

        >>> AccelLoweringError("x").code
        'CVL-E172'
    """

    code = "CVL-E172"


class QueueDepthError(AccelLoweringError):
    """A queue between two engines is too shallow for the program: the message names
    the two engines and the depth needed.

    Example::

        >>> QueueDepthError("x").code
        'CVL-E175'
    """

    code = "CVL-E175"


__all__ = ["AccelLoweringError", "AllocationError", "DescriptionError", "QueueDepthError"]
