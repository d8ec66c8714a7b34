"""One fuzz case: a random program, random steps, and the checks of what was accepted.

The unscheduled function run by the interpreter is the reference.  The scheduled one
must then: run in the interpreter (which refuses out-of-bounds and uninitialised reads
and iterators outside their domains: an accepted schedule it refuses is a defect) with
the reference's results; build for llvm and give them too, without writing outside its
arrays (each array sits between sentinel cells); replay from its trace; and print as
text that parses back to itself.  Every argument is compared after the run, inputs too.
A step the schedule refuses because its result broke the region contract
(``RegionContractError``: what printed as text that did not parse back) is a failure
too, a defect of the primitive.

A case is determined by its seed (:func:`run_case`), so a failure is replayed with
``python -m benchmarks.fuzz --replay SEED``.

Example::

    >>> r = run_case(7, build=False)
    >>> r.failure is None, r.accepted + r.refused == len(r.steps)
    (True, True)
"""

from __future__ import annotations

import contextlib
import random
import signal
import threading
from dataclasses import dataclass, field

import numpy as np

import cuvil_tir as T
import schedules as S

from .programs import random_program
from .steps import ContractBroken, random_steps

#: the llvm targets a case is built for (both run on an AVX-512 host; CI may have AVX2)
TARGETS = (("llvm", {}), ("llvm", {"mcpu": "haswell"}))
SENTINEL = 77
PAD = 8
#: a case taking longer than this is a failure (cases take well under a second each)
CASE_SECONDS = 120.0


@dataclass
class Result:
    """What one case did: its seed, program, steps (``(name, outcome, error)``), and
    the failure found, if any (``(kind, message)``)."""

    seed: int
    what: str = ""
    steps: list = field(default_factory=list)
    failure: tuple | None = None
    func: object = None
    sch: object = None
    target: str = ""

    @property
    def accepted(self) -> int:
        return sum(1 for _, outcome, _ in self.steps if outcome == "ok")

    @property
    def refused(self) -> int:
        return sum(1 for _, outcome, _ in self.steps if outcome == "refused")


def _code(err) -> str:
    return f"{type(err).__name__} {getattr(err, 'code', '?')}"


def _differs(want, got) -> str | None:
    for k, (w, g) in enumerate(zip(want, got)):
        if w.shape != g.shape:
            return f"argument {k}: shape {g.shape}, expected {w.shape}"
        if w.dtype.kind == "f":
            ok = np.allclose(g.astype("float64"), w.astype("float64"), rtol=1e-3,
                             atol=1e-3, equal_nan=True)
        else:
            ok = np.array_equal(g, w)
        if not ok:
            bad = np.argwhere(~np.isclose(g.astype("float64"), w.astype("float64")))
            return (f"argument {k} differs at {len(bad)} of {w.size} elements, first "
                    f"{tuple(int(x) for x in bad[0]) if len(bad) else '?'}: "
                    f"want {w.ravel()[:6]}, got {g.ravel()[:6]}")
    return None


def _fenced(arrays):
    """Each array as the middle of a larger one filled with sentinels."""
    out, bigs = [], []
    for a in arrays:
        big = np.full(a.size + 2 * PAD, SENTINEL, a.dtype)
        big[PAD:PAD + a.size] = a.ravel()
        out.append(big[PAD:PAD + a.size].reshape(a.shape))
        bigs.append(big)
    return out, bigs


def _interpret(func, arrays):
    out = [a.copy() for a in arrays]
    T.interpret(func, *out)
    return out


def check(func, sch, arrays, target=None) -> tuple | None:
    """The first failure of the accepted schedule ``sch`` of ``func`` on ``arrays``
    (``(kind, message)``), or None; ``target``: ``(kind, options)`` to build for, or
    None to skip the build."""
    want = _interpret(func, arrays)
    try:
        got = _interpret(sch.func, arrays)
    except T.CuvilError as err:
        return "interpreter refuses", str(err).splitlines()[0]
    why = _differs(want, got)
    if why:
        return "interpreter differs", why
    try:
        replay = S.Trace.from_json(sch.trace.as_json()).apply(func)
    except T.CuvilError as err:
        return "trace replay fails", str(err).splitlines()[0]
    if not T.structural_equal(replay.func, sch.func):
        return "trace replay differs", "the replayed function is not the scheduled one"
    try:
        back = T.parse(str(sch.func))
    except T.CuvilError as err:
        return "text does not parse back", str(err).splitlines()[0]
    if not T.structural_equal(back, sch.func):
        return "text parses back differently", "print -> parse changed the function"
    if target is None:
        return None
    import targets
    try:
        mod = targets.build(sch, targets.Target(target[0], **target[1]))
    except T.CuvilError as err:
        return "build refuses", str(err).splitlines()[0]
    inside, bigs = _fenced(arrays)
    try:
        mod(*inside)
    except T.CuvilError as err:
        return "llvm run fails", str(err).splitlines()[0]
    for k, big in enumerate(bigs):
        if (big[:PAD] != SENTINEL).any() or (big[PAD + arrays[k].size:] != SENTINEL).any():
            return "llvm writes out of bounds", f"argument {k}: a sentinel cell changed"
    why = _differs(want, inside)
    if why:
        return "llvm differs", why
    return None


class _TooSlow(BaseException):      # not caught as a crash by the case itself
    pass


@contextlib.contextmanager
def _time_limit(seconds: float):
    """Raise ``_TooSlow`` in the case after ``seconds`` (in the main thread, where a
    signal can reach it; elsewhere no limit)."""
    if seconds is None or threading.current_thread() is not threading.main_thread() \
            or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum, frame):
        raise _TooSlow()
    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_case(seed: int, build: bool = True, steps: int | None = None,
             limit: float | None = CASE_SECONDS) -> Result:
    """Draw and check the case ``seed`` (see the module docstring).  An exception that
    is not a coded error, anywhere, is the failure ``crash``; a case running past
    ``limit`` seconds is the failure ``too slow`` (a schedule whose loops run far past
    its tiny buffers: the run would otherwise never end, and name no case)."""
    rng = random.Random(seed)
    res = Result(seed)
    try:
        with _time_limit(limit):
            _run(res, rng, seed, build, steps)
    except _TooSlow:
        res.failure = ("too slow", f"the case ran past {limit:g} s (its programs are "
                                   "tiny: a loop runs far past its buffers?)")
    return res


def _run(res, rng, seed, build, steps) -> None:
    try:
        prog = random_program(rng)
        res.what, res.func = prog.what, prog.func
        sch = S.Schedule(prog.func, seed=seed)
        res.sch = sch
        res.steps = random_steps(sch, rng, steps if steps is not None else
                                 rng.choice((1, 2, 3, 4, 5, 6)))
        target = rng.choice(TARGETS)
        target = target if build else None
        res.target = "" if target is None else f"{target[0]} {target[1]}"
        res.failure = check(prog.func, sch, prog.arrays(np.random.default_rng(seed)),
                            target)
    except AssertionError as err:
        res.failure = ("refusal changed the schedule", str(err).splitlines()[0])
    except ContractBroken as err:
        res.failure = ("region contract broken", str(err))
    except Exception as err:       # anything not coded is a crash
        import traceback
        tb = traceback.extract_tb(err.__traceback__)[-1]
        res.failure = ("crash", f"{type(err).__name__}: {err} (at {tb.filename}:"
                                f"{tb.lineno})")


def reproducer(res: Result) -> str:
    """The failure of ``res``, as text to paste into an issue."""
    kind, message = res.failure
    lines = [f"case {res.seed}: {kind}: {message}", f"  program: {res.what}",
             f"  target: {res.target or '(not built)'}",
             f"  replay: python -m benchmarks.fuzz --replay {res.seed}"]
    if res.sch is not None:
        lines.append("  trace:")
        lines += ["    " + ln for ln in str(res.sch.trace).splitlines()]
    if res.func is not None:
        lines.append("  function:")
        lines += ["    " + ln for ln in str(res.func).splitlines()]
    return "\n".join(lines)


__all__ = ["Result", "check", "run_case", "reproducer", "TARGETS"]
