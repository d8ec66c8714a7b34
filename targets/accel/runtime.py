"""The built-in simulator: the generated kernel compiled with the system C compiler
against the generated simulator HAL, loaded with ctypes; ``stats`` after each call,
and the call's timeline (``trace()``: Chrome trace JSON, one row per engine, one slice
per instruction; open it in Perfetto or chrome://tracing).

Stalls by cause: ``bank_conflict_stalls`` (cycles an instruction waited for a bank
another engine held), ``dependency_stalls`` (per engine, cycles it sat idle waiting
to pop a token another engine had not yet pushed: its data was not ready, or its
buffer not yet free), ``queue_full_stalls`` (per engine, cycles it waited to push
a token into a full queue), ``bandwidth_stalls`` (cycles transfers waited for a
shared link, host memory or a shared L2, that other transfers held) and
``shared_bank_stalls`` (cycles instructions waited for a bank of a shared memory that
another core's instruction held: :mod:`~targets.accel.shared_banks`).

On a device with several cores (:mod:`~targets.accel.cores`) ``engine_busy`` sums
the cores, ``core_busy`` has each core's, ``cores_used`` counts the cores that ran
anything and ``utilisation`` is over those cores (busy cycles over ``cycles`` times
``cores_used``); the trace has one process per core, one thread per engine.

Example::

    >>> sorted(STAT_KEYS)  # doctest: +NORMALIZE_WHITESPACE
    ['bandwidth_stalls', 'bank_conflict_stalls', 'core_busy', 'cores_used', 'cycles',
     'dependency_stalls', 'dma_bytes_in', 'dma_bytes_out', 'engine_busy', 'peak_bytes',
     'queue_full_stalls', 'shared_bank_stalls', 'utilisation']
"""

from __future__ import annotations

import ctypes
import json

import numpy as np

from cuvil_tir.errors import TargetError

from ..cstyle.compiler import compile_shared, library_bytes
from ..cstyle.runtime import CRuntimeModule, wrapper_c
from ..cstyle import CPrinter
from ..runtime import DATA_OFFSET, Module
from cuvil_tir.transform.bank_plan import Unit, peak
from .cores import core_section
from .hal import TRACE_MAX, event_names, header, simulator_c

STAT_KEYS = ("cycles", "engine_busy", "utilisation", "dma_bytes_in", "dma_bytes_out",
             "bank_conflict_stalls", "dependency_stalls", "queue_full_stalls", "peak_bytes",
             "bandwidth_stalls", "shared_bank_stalls", "core_busy", "cores_used")


def _peak_bytes(acc, plan: dict) -> dict:
    out = {}
    for m in acc.memories_only:
        units = [Unit.from_data(d) for d in plan.get(m.scope, [])]
        out[m.scope] = peak(units)[0]
    return out


def _drop_repeated_helpers(kernel: str, sim: str) -> str:
    """The kernel without the ``static inline`` helpers the simulator already defines
    (both print ``cvl_min_int32`` and the like from the same table)."""
    out, lines, k = [], kernel.split("\n"), 0
    while k < len(lines):
        if lines[k].startswith("static inline "):
            end = lines.index("}", k)
            block = "\n".join(lines[k:end + 1])
            if block in sim:
                k = end + 1
                continue
        out.append(lines[k])
        k += 1
    return "\n".join(out)


def compile_simulator(acc, func, kernel: str, target) -> tuple:
    """``(HAL header, simulator C, shared library bytes)``: the ``kernel`` source of
    the lowered ``func`` compiled with
    the generated simulator HAL (and the Python-calling wrapper of
    :mod:`targets.runtime.native`) by the target's C compiler."""
    head, sim = header(acc), simulator_c(acc)
    body = _drop_repeated_helpers(kernel.replace(f'#include "{acc.hal}_hal.h"', ""), sim)
    full = head + sim + body
    if DATA_OFFSET is not None:
        full += wrapper_c(func, DATA_OFFSET, CPrinter().abi_type)
    lib = compile_shared(full, target.options["cc"], target.options["cflags"], False)
    return head, sim, library_bytes(lib)


class SimulatorModule(CRuntimeModule):
    """A kernel running on the simulator; ``stats`` holds the last call's counters and
    ``memory_map()`` the placement.

    Example::

        >>> SimulatorModule.source_formats
        ('c', 'h', 'sim')
    """

    source_formats = ("c", "h", "sim")

    def __init__(self, acc, program):
        super().__init__(program, program.sources["c"], "c")
        self.acc = acc
        self.header, self.sim = program.sources["h"], program.sources["sim"]
        self.stats = {}
        self._peak = _peak_bytes(acc, program.memory)
        self._map = program.meta["memory_map"]
        self._reset = self.library.cvl_sim_reset
        ne = len(acc.engines)

        class Stats(ctypes.Structure):
            _fields_ = [(k, ctypes.c_int64) for k in
                        ("cycles", "stalls", "bytes_in", "bytes_out", "error")] + \
                       [(k, ctypes.c_int64 * ne) for k in ("busy", "calls", "waits", "qfull")]

        self._stats = Stats.in_dll(self.library, "cvl_sim_stats")
        self._events = (ctypes.c_int64 * 4 * TRACE_MAX).in_dll(self.library, "cvl_trace")
        self._nevents = ctypes.c_int64.in_dll(self.library, "cvl_trace_n")
        self._ncores = acc.cores.count if acc.cores is not None else 1
        self._core_busy = (ctypes.c_int64 * (self._ncores * ne)).in_dll(self.library,
                                                                       "cvl_busy_core")
        self._link_stalls = ctypes.c_int64.in_dll(self.library, "cvl_link_stalls")
        self._sbank_stalls = ctypes.c_int64.in_dll(self.library, "cvl_sbank_stalls")
        raw = self.raw

        def run(*args):
            self._reset()
            out = raw(*args)
            self._collect()
            return out
        self.raw = run

    def _collect(self):
        s = self._stats
        if s.error:
            raise TargetError(f"simulator of {self.acc.name!r}: " + {
                1: "an access ran past the end of a scratchpad memory",
                3: "a queue was used out of order (a pop before its push, a push into "
                   "a full queue, or a channel that does not exist)",
                4: "a core index is out of range",
                5: "a vendor call ran on a core its configuration call (or first part) "
                   "was not issued on"}.get(int(s.error), f"error {int(s.error)}"))
        busy = {e: int(s.busy[k]) for k, e in enumerate(self.acc.engines)}
        ne = len(self.acc.engines)
        per_core = {c: {e: int(self._core_busy[c * ne + k])
                        for k, e in enumerate(self.acc.engines)}
                    for c in range(self._ncores)}
        per_core = {c: b for c, b in per_core.items() if any(b.values())} or {0: per_core[0]}
        total = max(int(s.cycles), 1) * len(per_core)
        self.stats = {
            "cycles": int(s.cycles), "engine_busy": busy,
            "utilisation": {e: busy[e] / total for e in self.acc.engines
                            if e not in self.acc.dma_direction},
            "dma_bytes_in": int(s.bytes_in), "dma_bytes_out": int(s.bytes_out),
            "bank_conflict_stalls": int(s.stalls),
            "dependency_stalls": {e: int(s.waits[k]) for k, e in enumerate(self.acc.engines)},
            "queue_full_stalls": {e: int(s.qfull[k]) for k, e in enumerate(self.acc.engines)},
            "peak_bytes": dict(self._peak), "bandwidth_stalls": int(self._link_stalls.value),
            "shared_bank_stalls": int(self._sbank_stalls.value),
            "core_busy": per_core, "cores_used": len(per_core)}

    def trace(self) -> dict:
        """The last call's timeline as a Chrome trace (``{"traceEvents": [...]}``):
        per engine a thread, per instruction a complete event; times in microseconds
        at the accelerator's clock, cycles in each event's ``args``.  Only the first
        ``TRACE_MAX`` instructions are kept (``otherData.dropped`` counts the rest)."""
        n = int(self._nevents.value)
        ev = np.ctypeslib.as_array(self._events)[:min(n, TRACE_MAX)]
        names, us = event_names(self.acc), 1.0 / self.acc.clock_mhz
        ne = len(self.acc.engines)
        cores = sorted({int(e) // ne for e, _, _, _ in ev} | {0})
        out = [{"ph": "M", "name": "process_name", "pid": c, "args": {"name": f"core {c}"}}
               for c in cores if self.acc.cores is not None]
        out += [{"ph": "M", "name": "thread_name", "pid": c, "tid": k, "args": {"name": e}}
                for c in cores for k, e in enumerate(self.acc.engines)]
        out += [{"ph": "X", "name": names[int(w)], "pid": int(e) // ne, "tid": int(e) % ne,
                 "ts": int(t) * us, "dur": int(c) * us, "args": {"cycles": int(c)}}
                for e, w, t, c in ev]
        return {"traceEvents": out, "displayTimeUnit": "ns",
                "otherData": {"accelerator": self.acc.name, "clock_mhz": self.acc.clock_mhz,
                              "cycles": self.stats.get("cycles"),
                              "dropped": max(0, n - TRACE_MAX)}}

    def memory_map(self, core=None) -> str:
        """Per memory and bank: each buffer, its offset, size, lifetime and engines (on
        a multi-core device: the shared memories, then each core's; ``core``: that
        core's section only)."""
        return self._map if core is None else core_section(self._map, core)

    def get_source(self, fmt: str | None = None) -> str:
        """``"c"`` the kernel, ``"h"`` the HAL header, ``"sim"`` the simulator HAL."""
        return {"h": self.header, "sim": self.sim}.get(fmt, self.source)


class AccelModule(Module):
    """A module on an accelerator's simulator: ``stats`` (the last call's counters)
    and ``memory_map()`` besides what every module has.

    Example::

        >>> AccelModule.memory_map.__doc__.split(":")[0]
        'Per memory and bank'
    """

    @property
    def stats(self) -> dict:
        """The last call's counters (``STAT_KEYS``)."""
        return self.runtime.stats

    def memory_map(self, core=None) -> str:
        """Per memory and bank: each buffer, its offset, size, lifetime and engines
        (``core``: one core's section on a multi-core device)."""
        return self.runtime.memory_map(core)

    def trace(self) -> dict:
        """The last call's timeline as Chrome trace JSON data (see the module doc)."""
        return self.runtime.trace()

    def save_trace(self, path) -> str:
        """Write :meth:`trace` to ``path`` (open it in https://ui.perfetto.dev); returns
        the path.

        Example::

            >>> AccelModule.save_trace.__name__
            'save_trace'
        """
        with open(path, "w") as f:
            json.dump(self.trace(), f)
        return str(path)


__all__ = ["AccelModule", "STAT_KEYS", "SimulatorModule", "compile_simulator"]
