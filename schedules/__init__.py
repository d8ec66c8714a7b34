"""Schedules: TensorIR schedule primitives as checked, traced IR -> IR transforms.

``Schedule(func)`` holds the current PrimFunc; each primitive checks legality first
(raising ``ScheduleError`` and leaving the schedule unchanged) and is recorded in
``sch.trace``, which serialises to JSON and replays on the unscheduled function.

Example::

    >>> import cuvil_tir as T
    >>> import schedules as S
    >>> A = T.placeholder((8, 8), name="A")
    >>> f = T.create_prim_func([A, T.compute((8, 8), lambda i, j: A[i, j] + 1.0, name="B")])
    >>> sch = S.Schedule(f)
    >>> i, j = sch.get_loops(sch.get_block("B"))
    >>> sch.fuse(i, j)
    LoopRV(i_j_fused)
    >>> replayed = S.Trace.from_json(sch.trace.as_json()).apply(f)
    >>> T.structural_equal(replayed.func, sch.func)
    True
"""

from cuvil_tir.errors import ScheduleError

from .handles import BlockRV, LoopRV
from .schedule import Schedule
from .trace import Instruction, Trace
from .sampling import SampledInt
from . import errors

from cuvil_tir.tensor_intrin import TensorIntrin
from . import intrinsics  # noqa: F401 - registers the shipped CPU tensor intrinsics
from .block_scope import BlockScope, Dependence, DepKind, block_scope
from .block_flags import BlockFlags, block_flags, is_output_block
from .index_map import IndexMap, suggest_index_map
from .primitives.index_maps import AXIS_SEPARATOR
from .tune import Database, TuneProgress, TuneResult, apply_best, tune

__all__ = ["Schedule", "ScheduleError", "BlockRV", "LoopRV", "Trace", "Instruction",
           "SampledInt", "TensorIntrin", "errors", "Database", "TuneProgress", "TuneResult",
           "apply_best", "tune", "BlockScope", "Dependence", "DepKind", "block_scope",
           "BlockFlags", "block_flags", "is_output_block", "IndexMap", "suggest_index_map",
           "AXIS_SEPARATOR"]
