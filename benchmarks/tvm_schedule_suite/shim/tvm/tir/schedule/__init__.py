"""``tvm.tir.schedule``: the schedule class, its handles, errors and traces."""

from schedules import DepKind
from schedules.handles import BlockRV, LoopRV

from ..._gap import module_getattr
from .schedule import MissingPrimitive, Schedule, ScheduleError, TensorIntrin
from .state import ScheduleState
from .trace import Instruction, InstructionKind, Trace

# TVM's identity test on handles (only in the shim's process)
BlockRV.same_as = LoopRV.same_as = lambda self, other: self is other

__getattr__ = module_getattr("tvm.tir.schedule")
