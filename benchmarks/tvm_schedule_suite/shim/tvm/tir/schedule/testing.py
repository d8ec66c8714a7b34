"""``tvm.tir.schedule.testing``: trace round trip and name-blind comparison."""

from __future__ import annotations

import schedules as S

from ..._compare import assert_equal
from .schedule import Schedule, main_func


class TraceMismatch(AssertionError):
    """Replaying a schedule's trace did not give the same function."""


def assert_structural_equal_ignore_global_symbol(func1, func2, *args, **kwargs) -> None:
    assert_equal(func1, func2)


def verify_trace_roundtrip(sch, mod, *, debug_mask="all", text_format=("python", "json")):
    """Replay ``sch``'s trace (through JSON) on ``mod``; the result must be equal."""
    text = sch._sch.trace.as_json()
    try:
        replayed = S.Trace.from_json(text).apply(main_func(mod))
    except S.ScheduleError as err:
        raise TraceMismatch(f"the trace does not replay: {err}") from None
    import cuvil_tir as T
    if not T.structural_equal(replayed.func, sch.func):
        raise TraceMismatch(f"replayed function differs:\n{replayed.func}\n---\n{sch.func}")
    if replayed.trace.as_python() != sch._sch.trace.as_python():
        raise TraceMismatch("replayed trace prints differently")
    return Schedule._wrap(replayed, main_func(mod))
