"""Measuring one candidate in a child process whose deadline the parent enforces.

The child (a ``spawn`` process in its own process group, with ``CUVIL_TUNE_CHILD=1``)
rebuilds the candidate from text: ``T.parse`` of the function and either the user's
space replayed with the candidate's decisions (when the space is a module-level
function) or ``Trace.from_json(...).apply``.  It builds the candidate and the untuned
function, runs both on the same random inputs, compares, and times the candidate
(median of a few runs).  Nothing the candidate does can take the tuner down: a child
that dies is a ``"crash"``, one past ``timeout_s`` is killed (its whole process group)
and recorded as ``"timeout"``.

Example::

    >>> FAILURE_KINDS
    ('replay', 'build', 'run', 'timeout', 'crash', 'wrong')
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import statistics
import time

FAILURE_KINDS = ("replay", "build", "run", "timeout", "crash", "wrong")
"""Kinds of failed candidates, as counted in ``TuneResult.failures``."""

#: seconds a child may take to start (imports) before its measurement deadline begins
STARTUP_S = 120.0


def _forced_schedule(func, decisions):
    """A Schedule whose sampling calls take ``decisions`` in order (replaying a space)."""
    from ..schedule import Schedule

    queue = list(decisions)

    class _Forced(Schedule):
        def sample_perfect_tile(self, loop, n, max_innermost_factor=16, decision=None):
            return super().sample_perfect_tile(loop, n, max_innermost_factor,
                                               decision=queue.pop(0))

        def sample_categorical(self, candidates, probs, decision=None):
            return super().sample_categorical(candidates, probs, decision=queue.pop(0))

    return _Forced(func)


def _rebuild(func, payload):
    from ..trace import Trace
    space = payload.get("space")
    if space is not None:
        sch = _forced_schedule(func, [d for _, d in payload["decisions"]])
        space(sch)
        return sch
    return Trace.from_json(payload["trace"]).apply(func)


def _random_args(func, seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    out = []
    for p in func.params:
        shape = tuple(int(s) for s in p.shape)
        dt = np.dtype(str(p.dtype))
        if dt.kind == "f":
            out.append(rng.standard_normal(shape).astype(dt))
        elif dt.kind == "b":
            out.append(rng.integers(0, 2, shape).astype(dt))
        else:
            out.append(rng.integers(-4, 5, shape).astype(dt))
    return out


def _child(conn, payload):
    os.environ["CUVIL_TUNE_CHILD"] = "1"
    try:
        os.setpgrp()  # so that the parent's kill reaches anything this child starts
    except OSError:
        pass
    import numpy as np
    import cuvil_tir as T
    import targets
    conn.send(("started", None))
    func = T.parse(payload["func"])
    target = payload["target"]
    stage = "replay"
    try:
        sch = _rebuild(func, payload)
        stage = "build"
        ref = targets.build(func, target)
        mod = targets.build(sch, target)
        stage = "run"
        base = _random_args(func, 0)
        want = [a.copy() for a in base]
        ref(*want)
        got = [a.copy() for a in base]
        mod(*got)
        for w, g in zip(want, got):
            if not np.allclose(w, g, rtol=1e-4, atol=1e-4, equal_nan=True):
                conn.send(("wrong", "output differs from the untuned function's"))
                return
        times = []
        for _ in range(payload.get("repeats", 5)):
            t0 = time.perf_counter()
            mod(*got)
            times.append(time.perf_counter() - t0)
        conn.send(("ok", statistics.median(times)))
    except Exception as e:  # noqa: BLE001 - any candidate error is a recorded failure
        conn.send((stage, f"{type(e).__name__}: {e}"))


def _picklable(space):
    try:
        pickle.dumps(space)
        return space
    except Exception:  # noqa: BLE001 - lambdas/closures: the child replays the trace
        return None


def measure(func_text, trace_json, decisions, target, space=None, timeout_s=10.0,
            repeats=5):
    """Measure one candidate in a child process: ``("ok", seconds)`` or
    ``(failure kind, message)``.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] + 1.0, name="B")])
        >>> from schedules import Schedule
        >>> kind, _ = measure(str(f), Schedule(f).trace.as_json(), [], "llvm")
        >>> kind
        'ok'
    """
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    payload = {"func": func_text, "trace": trace_json, "decisions": decisions,
               "target": str(target), "space": _picklable(space), "repeats": repeats}
    proc = ctx.Process(target=_child, args=(child, payload), daemon=True)
    proc.start()
    child.close()
    try:
        if not parent.poll(max(STARTUP_S, timeout_s)):
            return _end(proc, "timeout", "the child did not start")
        try:
            parent.recv()
            if not parent.poll(timeout_s):
                return _end(proc, "timeout", f"no result within {timeout_s} s")
            return parent.recv()
        except (EOFError, OSError):
            proc.join(5)
            return ("crash", f"the child died (exit code {proc.exitcode})")
    finally:
        parent.close()
        _end(proc, None, None)


def _end(proc, kind, message):
    if proc.is_alive():
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (OSError, AttributeError):
            proc.kill()
    proc.join(5)
    return (kind, message)
