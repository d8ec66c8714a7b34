"""Lowering: passes (pure ``PrimFunc -> PrimFunc`` functions), the pass manager with
instruments, and the default pipeline (``T.lower`` runs a target kind's pipeline, see
:mod:`cuvil_tir.target`).

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((8,), name="A")
    >>> f = T.create_prim_func([A, T.compute((8,), lambda i: A[i] + 1.0, name="B")])
    >>> timing = T.transform.PassTiming()
    >>> with T.transform.PassContext(instruments=[timing]):
    ...     lowered = T.lower(f)
    >>> [name for name in timing.stats]
    ['lower_blocks', 'flatten_buffers', 'simplify', 'verify']
"""

from .flatten_buffers import flatten_buffers
from .instruments import DumpIR, DumpOnFail, PassInstrument, PassTiming
from .lower_blocks import lower_blocks
from .pass_manager import PassContext, PassManager, pass_name, report_failure
from .plan_allocation import plan_buffer_allocation
from .pipeline import default_pipeline
from .simplify import simplify
from .verify import VerifyEach, verify, verify_well_formed

__all__ = ["DumpIR", "DumpOnFail", "PassContext", "PassInstrument", "PassManager", "PassTiming",
           "VerifyEach", "default_pipeline", "flatten_buffers", "lower_blocks", "pass_name",
           "plan_buffer_allocation", "report_failure", "simplify", "verify",
           "verify_well_formed"]
