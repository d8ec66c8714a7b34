"""A tiled int8 GEMM for the example NPUs, where the previous release kept it:
the schedules moved to :mod:`targets.toolkit.npu.gemm` (the top layer, beside the other
recipes); this module keeps ``targets.accel.examples.gemm`` working for scripts written
against it.

Example::

    >>> from targets.accel.examples.gemm import gemm
    >>> import targets.toolkit.npu.gemm as moved
    >>> gemm is moved.gemm
    True
"""

from targets.toolkit.npu.gemm import gemm, tile_gemm_loops, whole_tile, schedule_gemm

__all__ = ["gemm", "tile_gemm_loops", "whole_tile", "schedule_gemm"]
