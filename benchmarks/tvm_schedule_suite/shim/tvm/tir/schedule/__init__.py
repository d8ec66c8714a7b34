"""``tvm.tir.schedule``: the schedule class, its handles and errors."""

from schedules import DepKind, Instruction, Trace
from schedules.handles import BlockRV, LoopRV

from ..._gap import module_getattr
from .schedule import MissingPrimitive, Schedule, ScheduleError, TensorIntrin
from .state import ScheduleState

__getattr__ = module_getattr("tvm.tir.schedule")
