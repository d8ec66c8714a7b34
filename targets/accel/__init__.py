"""Accelerators described by data (``targets.accel``): banked memories, a DMA engine and
intrinsics in one Python description, registered with ``targets.register_target``.

See ``docs/accelerators.md`` and ``targets/accel/examples/toy_npu.py``.

Example::

    >>> from targets.accel import Memory
    >>> Memory("npu.wgt", banks=4, bank_bytes=64 << 10, width_bits=128).banks
    4
"""

from .accelerator import Accelerator
from .cores import Cores
from .description import DMA, DMAOp, Intrinsic, Memory, Move, Queue
from .dma_engines import DMAEngine
from .hal_words import HalWord
from .errors import AccelLoweringError, AllocationError, DescriptionError, QueueDepthError
from .vendor_hal import HalArg, HalCall, HalSignatureError

__all__ = ["AccelLoweringError", "Accelerator", "AllocationError", "Cores", "DMA", "DMAEngine",
           "DMAOp", "DescriptionError", "HalArg", "HalCall", "HalSignatureError", "HalWord", "Intrinsic", "Memory", "Move", "Queue", "QueueDepthError"]
