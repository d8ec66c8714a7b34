"""Measuring one candidate: what runs inside the isolated child process.

The child (forked by the warm server of :mod:`.executor`, in its own session and
process group, with ``CUVIL_TUNE_CHILD=1``) rebuilds the candidate: the scheduled
function when the tuner sent it (``scheduled``: pickled IR, or text to ``T.parse``;
the function itself likewise, ``func_ir`` beside its text ``func``), else the function
with either the user's space replayed with the candidate's decisions
(when the space pickles by reference, so user code in the space runs here too) or
``Trace.from_json(...).apply``.  It builds the candidate and the untuned function,
reports ``"built"`` (the parent then starts the run deadline), runs both on the same
seeded random inputs, compares (:func:`agree`: a tolerance per dtype), and times the
candidate: the fastest of several short timings (:func:`_time`), each the target
kind's ``measure`` step (the base class times the host clock; an accelerator returns
its simulated cycles).  Backends are reached through the contract of
:mod:`cuvil_tir.target` only.  Timing holds a per-host lock so two slots of one machine never time at once.

Nothing here enforces a deadline: the parent does (:func:`.executor.measure_task`).

Example::

    >>> FAILURE_KINDS
    ('replay', 'build', 'run', 'timeout', 'crash', 'wrong')
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib
import os
import pickle
import socket
import sys
import tempfile
import time

import numpy as np

import cuvil_tir as T
from cuvil_tir import dtype as D
from cuvil_tir.errors import CuvilError, LoweringError
from cuvil_tir.target import (as_target, build, cache, compile_program, get_target_kind,
                              list_targets)
from cuvil_tir.target import register_target
from cuvil_tir.target.kind import MEASURE_REPEAT, TargetKind
from cuvil_tir.target.timing import time_calls
from ..schedule import Schedule
from ..trace import Trace
from .decisions import run_with_decisions
from .reference_schedule import reference_schedule

FAILURE_KINDS = ("replay", "build", "run", "timeout", "crash", "wrong")
"""Kinds of failed candidates, as counted in ``TuneResult.failures``."""

#: the rounds of one timing together last at least this long (milliseconds)
MIN_REPEAT_MS = 50.0
#: timing rounds whose median is kept (the target kind's ``measure`` default)
REPEAT = 5


def _function(data):
    """A function sent as pickled IR (bytes: what the tuner sends; about 0.5 ms to
    load where parsing the text takes 5-20 ms) or as text; None when the IR does not
    load (another Cuvil's)."""
    if isinstance(data, bytes):
        try:
            out = pickle.loads(data)
            return out if isinstance(out, T.PrimFunc) else None
        except Exception:  # noqa: BLE001 - another Cuvil's IR: the caller falls back
            return None
    return T.parse(data)


def _rebuild(func, payload):
    if payload.get("scheduled"):  # the tuner's own scheduled function
        try:
            got = _function(payload["scheduled"])
            if got is not None:
                return got
        except Exception:  # noqa: BLE001 - text that does not parse: replay instead
            pass
    space = None
    if payload.get("space") is not None:
        try:
            space = pickle.loads(payload["space"])
        except Exception:  # noqa: BLE001 - not importable here: replay the trace instead
            space = None
    if space is not None:
        return run_with_decisions(space, func, [d for _, d in payload["decisions"]])
    return Trace.from_json(payload["trace"]).apply(func)


def random_args(func, seed):
    """Seeded random arrays for the parameters of ``func`` (small integers for ints;
    bfloat16 as its uint16 bits, :func:`cuvil_tir.dtype.to_numpy`).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((3,), name="A", dtype="int8"),
        ...                         T.placeholder((2,), name="B", dtype="bfloat16")])
        >>> [(a.shape, str(a.dtype)) for a in random_args(f, 0)]
        [((3,), 'int8'), ((2,), 'uint16')]
    """
    rng = np.random.default_rng(seed)
    out = []
    for p in func.params:
        shape = tuple(int(s) for s in p.shape)
        name = D.element(str(p.dtype))
        dt = D.to_numpy(name)
        if name == "bfloat16":
            bits = rng.standard_normal(shape).astype("float32").view("uint32")
            out.append((bits >> 16).astype("uint16"))
        elif dt.kind == "f":
            out.append(rng.standard_normal(shape).astype(dt))
        elif dt.kind == "b":
            out.append(rng.integers(0, 2, shape).astype(dt))
        else:
            out.append(rng.integers(-4, 5, shape).astype(dt))
    return out


#: relative tolerance of a candidate's floating-point outputs, per dtype: a schedule
#: reorders sums, which moves results by a few units in the last place of the dtype,
#: times the magnitude that the outputs reach (the absolute part is scaled by it)
TOLERANCE = {"float64": 1e-9, "float32": 1e-4, "float16": 1e-2, "bfloat16": 3e-2}


def agree(want, got, dtype: str) -> bool:
    """Whether a candidate's output ``got`` matches the reference ``want`` of element
    ``dtype``: exactly for integers and booleans; for floats within ``tol * (|want| +
    max |want|)``, ``tol`` from :data:`TOLERANCE`, NaN matching NaN.

    Example::

        >>> import numpy as np
        >>> w = np.array([1000.0, 1.0], "float32")
        >>> agree(w, w + np.float32(0.05), "float32"), agree(w, w + 1, "float32")
        (True, False)
        >>> agree(np.array([3], "int32"), np.array([4], "int32"), "int32")
        False
    """
    name = D.element(str(dtype))
    if not D.is_float(name):
        return bool(np.array_equal(want, got))
    if name == "bfloat16":   # stored as bits: compare the values they stand for
        want, got = (np.asarray(x, "uint16").astype("uint32") << 16 for x in (want, got))
        want, got = want.view("float32"), got.view("float32")
    tol = TOLERANCE.get(name, 1e-4)
    w = np.asarray(want, "float64")
    scale = float(np.nanmax(np.abs(w))) if w.size and np.isfinite(w).any() else 1.0
    return bool(np.allclose(np.asarray(got, "float64"), w, rtol=tol, atol=tol * max(
        scale, 1e-30), equal_nan=True))


def host_info(target) -> dict:
    """Where a measurement ran: host name, CPU name and features (the target kind's
    ``machine``; ``None`` for a kind that names no CPU).

    Example::

        >>> sorted(host_info("llvm"))
        ['cpu', 'features', 'host']
    """
    info = {"host": socket.gethostname(), "cpu": None, "features": None}
    try:
        t = as_target(target)
        machine = t.kind_obj.machine(t)
        if machine.features:
            info["cpu"], info["features"] = machine.name, ",".join(machine.features)
    except Exception:  # noqa: BLE001 - host details are a record's annotation only
        pass
    return info


def kind_reference(target):
    """``(module, attribute)`` naming the registered kind of ``target`` as a module-level
    object, so a fresh process can import and register it (an accelerator kind the
    registry cannot find through an entry point), or None.

    Example::

        >>> kind_reference("llvm")[0].startswith("targets")
        True
    """
    kind = get_target_kind(_kind_name(target))
    for name, mod in list(sys.modules.items()):
        if name in ("__main__", "__mp_main__"):
            continue  # another process's main module is a different one
        for attr, value in list(getattr(mod, "__dict__", {}).items()):
            if value is kind and not attr.startswith("_"):
                return name, attr
    return None


def _kind_name(target) -> str:
    return target.split()[0] if isinstance(target, str) else target.kind


def _ensure_kind(payload) -> None:
    """Register the target's kind in this process when only the tuner had it: with the
    tuner's import path (a vendor's file beside the user's script), and only when
    importing its module did not register it already (the pattern the accelerator
    docs describe: the module registers its device; registering it twice failed every
    candidate)."""
    for entry in payload.get("sys_path", ()):
        if entry not in sys.path:
            sys.path.append(entry)
    ref = payload.get("kind")
    if ref and _kind_name(payload["target"]) not in list_targets():
        kind = getattr(importlib.import_module(ref[0]), ref[1])
        if _kind_name(payload["target"]) not in list_targets():
            register_target(kind)


def timing_lock():
    """An exclusive lock on this host's timing lock file (an open file; close to free).

    Example::

        >>> fh = timing_lock(); fh.close()
    """
    path = os.path.join(tempfile.gettempdir(), f"cuvil-tune-timing-{os.getuid()}.lock")
    fh = open(path, "a")
    fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
    return fh


#: independent short timings of a candidate, the fastest kept
SAMPLES = 5


def _time(mod, args, kind, min_repeat_ms, spent=None):
    """The candidate's time: the fastest of :data:`SAMPLES` calls of the kind's
    ``measure`` (each the median of short rounds), sharing ``min_repeat_ms``;
    ``spent`` (a list), when given, receives ``(wall, cpu)`` seconds of the kernel's
    timed rounds on the host clock (what a measurement cannot avoid: the rest of a
    candidate's cost is overhead; nothing for a kind that measures otherwise).  On a
    machine shared with other work, a round the scheduler interrupted (or that waited
    for a descheduled thread of the pool) is slower, never faster: the same GEMM timed
    0.05 to 0.45 ms by one median of 4 ms rounds under a load of 11 on 2 cores, and
    0.049 to 0.050 ms by this.  A deterministic measure (simulated cycles) is asked
    until it repeats itself."""
    per = min_repeat_ms / 1e3 / REPEAT / SAMPLES
    seen: list = []
    if type(kind).measure is TargetKind.measure:
        # the host clock: the calls per round are found once (doubling from one call
        # until a round lasts ``per``), not again for every sample, which spent
        # about a third of the timing on finding the same count five times
        first = time_calls(lambda: mod(*args), repeat=MEASURE_REPEAT, warmup=1,
                           min_repeat_seconds=per)
        seen.append((first.median, f"median of {MEASURE_REPEAT} rounds of {first.number}"))
        rounds = [first]
        c0 = time.process_time()
        for _ in range(SAMPLES - 1):
            res = time_calls(lambda: mod(*args), repeat=MEASURE_REPEAT,
                             number=first.number, warmup=0)
            seen.append((res.median, seen[0][1]))
            rounds.append(res)
        if spent is not None:
            # the later samples are timed rounds alone (no warm-up, no calibration),
            # as many calls as the first's: their CPU stands for its rounds' too
            spent.append((sum(sum(r.all) * r.number for r in rounds),
                          (time.process_time() - c0) * SAMPLES / max(1, SAMPLES - 1)))
        seconds, how = min(seen, key=lambda r: r[0])
        return float(seconds), f"fastest of {len(seen)}: {how}"
    for _ in range(SAMPLES):
        seen.append(kind.measure(mod, args, min_repeat_seconds=per))
        if len(seen) > 1 and seen[-1][0] == seen[-2][0]:
            break   # the same figure twice: a model, not a clock
    seconds, how = min(seen, key=lambda r: r[0])
    return float(seconds), f"fastest of {len(seen)}: {how}"


def warm_up(target) -> None:
    """Do once, in the warm server before it forks, what every child would otherwise
    do first: build the text parser (about 0.2 s) and the backend's code generator for
    ``target``, compiling and running a tiny function outside the compile cache (a
    hit would skip the code generator); then compile and load, without running it, a
    tiny function with a parallel and a vectorized loop, so that what a kind loads
    for those once per process is loaded here (the ``llvm`` kind's thread pool: each
    child linked it again, about 0.01 s of CPU per candidate from the compile cache
    and 0.07 s with the cache off, when it optimises and compiles it).  Running it
    would start the pool's threads in the server, which forks; loading starts none.  Nothing here can fail a candidate: a target that
    cannot build is the candidate's failure to report.

    Example::

        >>> warm_up("llvm")
    """
    try:
        A = T.placeholder((4,), name="A")
        f = T.parse(str(T.create_prim_func([A, T.compute((4,), lambda i: A[i] + 1.0,
                                                         name="B")])))
        t = as_target(target)
        t.kind_obj.load(compile_program(f, t, "cuvil_tune_warm_up"), t)(
            *random_args(f, 0))
        t.kind_obj.load(compile_program(_parallel_vectorized(), t,
                                        "cuvil_tune_warm_up_parallel"), t)
    except Exception:  # noqa: BLE001 - the candidates meet the same failure, recorded
        pass


def _parallel_vectorized():
    """``B[i] = A[i] * 2`` over 64 elements, its loop split into a parallel and a
    vectorized loop."""
    A = T.placeholder((64,), name="A")
    sch = Schedule(T.create_prim_func([A, T.compute((64,), lambda i: A[i] * 2.0,
                                                    name="B")]))
    (i,) = sch.get_loops("B")
    outer, inner = sch.split(i, [4, 16])
    sch.parallel(outer)
    sch.vectorize(inner)
    return sch.func.with_attr("global_symbol", "cuvil_tune_warm_up_parallel")


def reference_outputs(func, target, seed):
    """The untuned function's outputs on :func:`random_args` (all its arrays after the
    call; built for the host where ``target`` refuses it unscheduled), kept in a
    per-user cache keyed by the build cache's key (function, target, tools and Cuvil's
    own code), so an untuned GEMM that takes seconds runs once per machine, not once per
    candidate.

    It runs in the reference schedule of :mod:`.reference_schedule` on a CPU: the key
    changes with every change to Cuvil, and the untuned nest (the reduction innermost,
    ``B`` read down a column) took 475 s for a 4096^3 fp32 GEMM on one core of this
    2-core Xeon, the wait before every tuning of it; reordered, each element's sum in
    the same order, it gives the same values (the same bits in strict IEEE) in a
    fraction of that.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] + 1.0, name="B")])
        >>> out = reference_outputs(f, "llvm", 0)
        >>> bool((out[1] == out[0] + 1).all())
        True
    """
    key = hashlib.sha256(f"{cache.cache_key(func, as_target(target))} {seed}".encode()
                         ).hexdigest()[:40]
    folder = os.path.join(tempfile.gettempdir(), f"cuvil-tune-ref-{os.getuid()}")
    path = os.path.join(folder, key + ".npz")
    try:
        with np.load(path) as data:
            return [data[f"a{i}"] for i in range(len(data.files))]
    except (OSError, ValueError, KeyError):
        pass
    want = random_args(func, seed)
    try:
        mod = _build_reference(func, target)
    except LoweringError:
        # a kind that runs computation only where the schedule bound it (a GPU's
        # kernels) refuses the unscheduled function: the host computes it
        mod = _build_reference(func, "llvm")
    mod.target.kind_obj.call_host(mod, want)
    os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp.npz"
    np.savez(tmp, **{f"a{i}": a for i, a in enumerate(want)})
    os.replace(tmp, path)  # whole or absent: a reader never sees half a file
    return want


def _build_reference(func, target):
    """``func`` built for ``target`` in its reference schedule (:mod:`.reference_schedule`:
    the same arithmetic per element, loops in a cache-friendly order), or unscheduled
    where the target is not a CPU or the reordered function does not build."""
    ordered = reference_schedule(func, target)
    if ordered is not func:
        try:
            return build(ordered, target)
        except CuvilError:  # only a speed-up: the unscheduled function is as exact
            pass
    return build(func, target)


def run_candidate(payload, emit) -> None:
    """Check and time one candidate; ``emit`` receives ``("reference", None)`` once the
    untuned outputs are known, ``("built", None)`` once the candidate is built, then the
    outcome: ``("ok", seconds, info)`` or ``(failure kind, message, info)``.

    Example::

        >>> import cuvil_tir as T, schedules as S
        >>> A = T.placeholder((4,), name="A")
        >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] + 1.0, name="B")])
        >>> out = []
        >>> run_candidate({"func": str(f), "trace": S.Schedule(f).trace.as_json(),
        ...                "decisions": [], "target": "llvm", "min_repeat_ms": 1}, out.append)
        >>> [m[0] for m in out]
        ['reference', 'built', 'ok']
    """
    target = payload["target"]
    info: dict = {}  # the server adds the host's details
    stage = "replay"
    try:
        _ensure_kind(payload)
        func = _function(payload.get("func_ir")) if payload.get("func_ir") else None
        func = func if func is not None else T.parse(payload["func"])
        stage = "build"  # a reference that does not build or run fails every candidate
        seed = payload.get("seed", 0)
        want = reference_outputs(func, target, seed)
        emit(("reference", None))
        stage = "replay"
        sch = _rebuild(func, payload)
        stage = "build"
        t0, c0 = time.perf_counter(), time.process_time()
        mod = build(sch, target)
        info["build_s"] = round(time.perf_counter() - t0, 4)
        info["build_cpu_s"] = round(time.process_time() - c0, 4)
        emit(("built", None))
        stage = "run"
        kind = get_target_kind(_kind_name(target))
        got = random_args(func, seed)
        with timing_lock():
            t0, c0 = time.perf_counter(), time.process_time()
            kind.call_host(mod, got)
            for p, w, g in zip(func.params, want, got):
                if not agree(w, g, str(p.dtype)):
                    emit(("wrong", f"output {p.name!r} differs from the untuned "
                          f"function's on the same random inputs beyond the {p.dtype} "
                          f"tolerance ({TOLERANCE.get(str(p.dtype), 0)} of its "
                          "magnitude)", info))
                    return
            spent: list = []
            seconds, how = _time(mod, got, kind,
                                 payload.get("min_repeat_ms", MIN_REPEAT_MS), spent)
        info["timing"] = how
        if spent:   # the kernel's own timed runs (host clock)
            info["timed_s"], info["timed_cpu_s"] = (round(x, 5) for x in spent[0])
        info["check_time_s"] = round(time.perf_counter() - t0, 4)
        info["check_time_cpu_s"] = round(time.process_time() - c0, 4)
        # CPU the child used (a forked child's clock starts at zero): what the
        # throughput benchmark adds up, since wall time on a shared machine says
        # more about the other processes than about the tuner
        info["cpu_s"] = round(time.process_time(), 4)
        emit(("ok", seconds, info))
    except Exception as e:  # noqa: BLE001 - any candidate error is a recorded failure
        # a host that cannot run the target's code (HostFeatureError) fails at run
        # time, also when the untuned reference is what it refused
        if getattr(e, "code", None) == "CVL-E240":
            stage = "run"
        emit((stage, f"{type(e).__name__}: {e}", info))
