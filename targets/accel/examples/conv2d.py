"""A conv2d as implicit GEMM for the example NPUs, where the previous release kept it:
the schedules moved to :mod:`targets.toolkit.npu.conv2d` (the top layer, beside the other
recipes); this module keeps ``targets.accel.examples.conv2d`` working for scripts written
against it.

Example::

    >>> from targets.accel.examples.conv2d import conv2d
    >>> import targets.toolkit.npu.conv2d as moved
    >>> conv2d is moved.conv2d
    True
"""

from targets.toolkit.npu.conv2d import conv2d, schedule_conv2d

__all__ = ["conv2d", "schedule_conv2d"]
