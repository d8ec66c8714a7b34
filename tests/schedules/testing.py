"""Helpers shared by the schedule tests.

``verify_trace_roundtrip(sch, func)`` serialises ``sch.trace`` to JSON, replays it on
the unscheduled ``func`` and asserts the result is structurally equal to ``sch.func``
(and that the replayed trace serialises to the same JSON), then that the scheduled
function prints and parses back to itself.  Every schedule test calls it.  ``assert_refused`` checks an error message *and* that the schedule is unchanged.
``run`` executes a function (or schedule) on numpy arrays with the reference
interpreter; ``check_workload`` compares against the workload's numpy reference.
"""

from __future__ import annotations

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S


def verify_trace_roundtrip(sch, func, debug: bool = False):
    """Replay ``sch.trace`` (through JSON) on ``func``; returns the replayed schedule."""
    text = sch.trace.as_json()
    replayed = S.Trace.from_json(text).apply(func, debug=debug)
    if not T.structural_equal(replayed.func, sch.func):
        raise AssertionError("trace replay differs:\n--- scheduled\n"
                             f"{sch.func}\n--- replayed\n{replayed.func}\n--- trace\n"
                             f"{sch.trace}")
    assert replayed.trace.as_json() == text
    verify_text_roundtrip(sch.func)
    return replayed


def verify_text_roundtrip(func):
    """``T.parse(str(func))`` is structurally equal to ``func``: every scheduled
    function the tests produce also round-trips through the text form."""
    back = T.parse(str(func))
    if not T.structural_equal(back, func):
        raise AssertionError(f"print -> parse differs:\n--- printed\n{func}\n"
                             f"--- parsed\n{back}")


def assert_refused(sch, call, match: str, cls=S.ScheduleError):
    """``call()`` raises ``cls`` matching ``match``; ``sch`` is left unchanged."""
    func, trace = sch.func, sch.trace.as_json()
    with pytest.raises(cls, match=match) as info:
        call()
    assert sch.func is func
    assert sch.trace.as_json() == trace
    return info.value


def run(func_or_sch, arrays):
    """Run with the reference interpreter on copies of ``arrays``; returns them."""
    func = func_or_sch.func if isinstance(func_or_sch, S.Schedule) else func_or_sch
    out = [np.array(a, copy=True) for a in arrays]
    interpreter()(func, *out)
    return out


def run_llvm(func_or_sch, arrays, target="llvm"):
    """Build for ``target`` (the host CPU through LLVM by default, or ``"c"``) and run
    on copies of ``arrays``; returns them."""
    import targets
    out = [np.array(a, copy=True) for a in arrays]
    targets.build(func_or_sch, target)(*out)
    return out


_INTERPRET = T.interpret  # captured before any test monkeypatches cuvil_tir.interpret


def interpreter():
    """``T.interpret`` as imported before any test monkeypatched it."""
    return _INTERPRET


def check_workload(func_or_sch, workload, seed: int = 0, targets=("llvm", "c")) -> None:
    """The scheduled function's outputs equal the workload's numpy reference,
    interpreted and compiled for each of ``targets``."""
    arrays = workload.make_inputs(np.random.default_rng(seed))
    workload.check(run(func_or_sch, arrays))
    for target in targets:
        workload.check(run_llvm(func_or_sch, arrays, target))
