"""The built-in simulator: the generated kernel compiled with the system C compiler
against the generated simulator HAL, loaded with ctypes; ``stats`` after each call.

Example::

    >>> sorted(STAT_KEYS)  # doctest: +NORMALIZE_WHITESPACE
    ['bank_conflict_stalls', 'cycles', 'dma_bytes_in', 'dma_bytes_out', 'engine_busy',
     'peak_bytes', 'utilisation']
"""

from __future__ import annotations

import ctypes
import json

from ..c.runtime import CRuntimeModule
from ..cstyle import CPrinter
from cuvil_tir.transform.bank_plan import Unit, peak
from .hal import header, simulator_c

STAT_KEYS = ("cycles", "engine_busy", "utilisation", "dma_bytes_in", "dma_bytes_out",
             "bank_conflict_stalls", "peak_bytes")


def _peak_bytes(acc, source) -> dict:
    start = source.find("/* cuvil-accel-plan ")
    plan = json.loads(source[start + 20:source.find(" */", start)]) if start >= 0 else {}
    out = {}
    for m in acc.memories_only:
        units = [Unit(n, size, len(addrs), tuple(life), set(eng))
                 for n, addrs, size, life, eng, _ in plan.get(m.scope, [])]
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


class SimulatorModule(CRuntimeModule):
    """A kernel running on the simulator; ``stats`` holds the last call's counters and
    ``memory_map()`` the placement.

    Example::

        >>> SimulatorModule.source_formats
        ('c', 'h', 'sim')
    """

    source_formats = ("c", "h", "sim")

    def __init__(self, acc, source, target, signature):
        self.acc = acc
        self.header = header(acc)
        self.sim = simulator_c(acc)
        kernel = _drop_repeated_helpers(source.replace(f'#include "{acc.hal}_hal.h"', ""),
                                        self.sim)
        full = self.header + self.sim + kernel
        super().__init__(full, target, signature, CPrinter().abi_type, False)
        self.source = source
        self.stats = {}
        self._peak = _peak_bytes(acc, source)
        self._map = source[len("/* memory map\n"):source.find("\n*/\n")]
        self._reset = self.library.cvl_sim_reset
        ne = len(acc.engines)

        class Stats(ctypes.Structure):
            _fields_ = [(k, ctypes.c_int64) for k in
                        ("cycles", "stalls", "bytes_in", "bytes_out", "error")] + \
                       [("busy", ctypes.c_int64 * ne), ("calls", ctypes.c_int64 * ne)]

        self._stats = Stats.in_dll(self.library, "cvl_sim_stats")
        raw = self.raw

        def run(*args):
            self._reset()
            out = raw(*args)
            self._collect()
            return out
        self.raw = run

    def _collect(self):
        from cuvil_tir.errors import TargetError
        s = self._stats
        if s.error:
            raise TargetError(f"simulator of {self.acc.name!r}: "
                              + ("an access ran past the end of a scratchpad memory"
                                 if s.error == 1 else "a token id is out of range"))
        busy = {e: int(s.busy[k]) for k, e in enumerate(self.acc.engines)}
        total = max(int(s.cycles), 1)
        self.stats = {
            "cycles": int(s.cycles), "engine_busy": busy,
            "utilisation": {e: busy[e] / total for e in self.acc.engines[2:]},
            "dma_bytes_in": int(s.bytes_in), "dma_bytes_out": int(s.bytes_out),
            "bank_conflict_stalls": int(s.stalls), "peak_bytes": dict(self._peak)}

    def memory_map(self) -> str:
        """Per memory and bank: each buffer, its offset, size, lifetime and engines."""
        return self._map

    def get_source(self, fmt: str | None = None) -> str:
        """``"c"`` the kernel, ``"h"`` the HAL header, ``"sim"`` the simulator HAL."""
        return {"h": self.header, "sim": self.sim}.get(fmt, self.source)


__all__ = ["STAT_KEYS", "SimulatorModule"]
