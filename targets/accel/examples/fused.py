"""A GEMM fused with its requantization for the example NPUs, where the previous release kept it:
the schedules moved to :mod:`targets.toolkit.npu.fused` (the top layer, beside the other
recipes); this module keeps ``targets.accel.examples.fused`` working for scripts written
against it.

Example::

    >>> from targets.accel.examples.fused import fused_gemm
    >>> import targets.toolkit.npu.fused as moved
    >>> fused_gemm is moved.fused_gemm
    True
"""

from targets.toolkit.npu.fused import fused_gemm, fused_gemm_bias_init, schedule_fused_readout, schedule_fused

__all__ = ["fused_gemm", "fused_gemm_bias_init", "schedule_fused_readout", "schedule_fused"]
