"""The tensor intrinsics Cuvil ships; importing this package registers them.

Example::

    >>> from cuvil_tir.tensor_intrin import TensorIntrin
    >>> "cpu.gemm_4x8x4_f32" in TensorIntrin.names()
    True
"""

from . import cpu, x86, x86_offset  # noqa: F401 - registering is the point
