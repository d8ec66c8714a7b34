"""Measuring one candidate: what runs inside the isolated child process.

The child (forked by the warm server of :mod:`.executor`, in its own session and
process group, with ``CUVIL_TUNE_CHILD=1``) rebuilds the candidate from text: ``T.parse``
of the function and either the user's space replayed with the candidate's decisions
(when the space pickles by reference, so user code in the space runs here too) or
``Trace.from_json(...).apply``.  It builds the candidate and the untuned function,
reports ``"built"`` (the parent then starts the run deadline), runs both on the same
seeded random inputs, compares, and times the candidate: rounds sized so that all
rounds together last at least ``min_repeat_ms``, the median round kept: the target
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

import numpy as np

import cuvil_tir as T
from cuvil_tir.target import as_target, build, cache, get_target_kind, list_targets
from cuvil_tir.target import register_target

FAILURE_KINDS = ("replay", "build", "run", "timeout", "crash", "wrong")
"""Kinds of failed candidates, as counted in ``TuneResult.failures``."""

#: the rounds of one timing together last at least this long (milliseconds)
MIN_REPEAT_MS = 50.0
#: timing rounds whose median is kept (the target kind's ``measure`` default)
REPEAT = 5


def _rebuild(func, payload):
    from ..trace import Trace
    space = None
    if payload.get("space") is not None:
        try:
            space = pickle.loads(payload["space"])
        except Exception:  # noqa: BLE001 - not importable here: replay the trace instead
            space = None
    if space is not None:
        from .space import run_with_decisions
        return run_with_decisions(space, func, [d for _, d in payload["decisions"]])
    return Trace.from_json(payload["trace"]).apply(func)


def random_args(func, seed):
    """Seeded random arrays for the parameters of ``func`` (small integers for ints).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.create_prim_func([T.placeholder((3,), name="A", dtype="int8")])
        >>> [a.shape for a in random_args(f, 0)]
        [(3,)]
    """
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


def _time(mod, args, kind, min_repeat_ms):
    seconds, how = kind.measure(mod, args, min_repeat_seconds=min_repeat_ms / 1e3 / REPEAT)
    return float(seconds), how


def reference_outputs(func, target, seed):
    """The untuned function's outputs on :func:`random_args` (all its arrays after the
    call), kept in a per-user cache keyed by the build cache's key (function, target,
    tools and Cuvil's own code), so an untuned GEMM that takes seconds runs once per
    machine, not once per candidate.

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
    build(func, target)(*want)
    os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp.npz"
    np.savez(tmp, **{f"a{i}": a for i, a in enumerate(want)})
    os.replace(tmp, path)  # whole or absent: a reader never sees half a file
    return want


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
        func = T.parse(payload["func"])
        stage = "build"  # a reference that does not build or run fails every candidate
        seed = payload.get("seed", 0)
        want = reference_outputs(func, target, seed)
        emit(("reference", None))
        stage = "replay"
        sch = _rebuild(func, payload)
        stage = "build"
        mod = build(sch, target)
        emit(("built", None))
        stage = "run"
        kind = get_target_kind(_kind_name(target))
        got = random_args(func, seed)
        with timing_lock():
            mod(*got)
            for w, g in zip(want, got):
                if not np.allclose(w, g, rtol=1e-4, atol=1e-4, equal_nan=True):
                    emit(("wrong", "output differs from the untuned function's on the "
                          "same random inputs", info))
                    return
            seconds, how = _time(mod, got, kind,
                                 payload.get("min_repeat_ms", MIN_REPEAT_MS))
        info["timing"] = how
        emit(("ok", seconds, info))
    except Exception as e:  # noqa: BLE001 - any candidate error is a recorded failure
        # a host that cannot run the target's code (HostFeatureError) fails at run
        # time, also when the untuned reference is what it refused
        if getattr(e, "code", None) == "CVL-E240":
            stage = "run"
        emit((stage, f"{type(e).__name__}: {e}", info))
