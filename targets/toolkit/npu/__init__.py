"""Example schedules for the toy NPU (:mod:`targets.accel.examples.toy_npu`): a tiled
int8 GEMM (:mod:`.gemm`), a conv2d as implicit GEMM (:mod:`.conv2d`) and a GEMM fused
with its requantization (:mod:`.fused`).

Example::

    >>> from targets.toolkit.npu.gemm import gemm
    >>> gemm(32).name
    'main'
"""
