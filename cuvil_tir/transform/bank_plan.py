"""Bank-aware address planning for static memories (the last step of the memory
planner): each buffer of a banked memory gets its bank(s) and offset at compile time.

The memory is read from the target's memory table (:mod:`.memory_table`: banks, bank
size, access width).  Each buffer to place is a :class:`Unit`: its size, how many
versions it has (a multi-buffered tile), its lifetime (the program steps that touch
it) and the engines that touch it; the target says what those are (an accelerator:
its DMA engines and compute units).  Two buffers live at the same time that are
touched by different engines, the operands of one instruction (``partners``), and the
versions of one tile must sit in different banks, so that the engines never wait on
each other for a bank.  Sizes are whole accesses of the memory's width, offsets
multiples of its alignment (and width).  Buffers are placed largest first; a pinned buffer
(``Target(..., pin_banks={"A_npu.inp": 2})``) keeps its bank.  When no conflict-free
placement exists the least-conflicting one is taken and reported (in the memory map
and as a warning), never silently; among conflict-free placements one whose addresses
no other buffer used before is preferred (a reused address orders the two buffers'
engines: a token the target's synchronisation must place); when nothing fits the
:class:`~cuvil_tir.errors.AllocationError` names the memory, its capacity, the
buffers live at the peak with their sizes and the overflow.

Example::

    >>> from cuvil_tir.transform.memory_table import MemorySpec
    >>> m = MemorySpec("npu.inp", "static", (), 2048, banks=2, bank_bytes=1024, width_bytes=16)
    >>> plan = place(m, [Unit("X", 512, 1, (0, 0), {"load"}), Unit("Y", 512, 1, (0, 0), {"gemm"})], {})
    >>> [(p.name, p.banks) for p in plan]
    [('X', (0,)), ('Y', (1,))]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import AllocationError


@dataclass
class Unit:
    """A buffer to place: ``slots`` versions of ``size`` bytes, live over ``life``
    (first, last step), touched by ``engines``; ``partners`` must avoid its banks.

    Example::

        >>> Unit("A", 64, 2, (0, 3), {"load", "gemm"}).slots
        2
    """

    name: str
    size: int
    slots: int
    life: tuple
    engines: set
    partners: set = field(default_factory=set)
    addrs: tuple = ()
    banks: tuple = ()
    conflicts: tuple = ()

    def as_data(self) -> dict:
        """The placed unit as plain data (a program's memory plan, which the compile
        cache stores): its buffer, the address of each version, its size in bytes, the
        steps it lives over, the engines touching it and the buffers it conflicts with.

        Example::

            >>> Unit("A", 64, 1, (0, 3), {"load"}, addrs=(128,)).as_data()["addresses"]
            [128]
        """
        return {"buffer": self.name, "addresses": list(self.addrs), "bytes": self.size,
                "steps": list(self.life), "engines": sorted(self.engines),
                "conflicts": list(self.conflicts)}

    @staticmethod
    def from_data(d: dict) -> "Unit":
        """The unit :meth:`as_data` wrote.

        Example::

            >>> u = Unit("A", 64, 2, (0, 3), {"load"}, addrs=(0, 1024))
            >>> Unit.from_data(u.as_data()) == u
            True
        """
        return Unit(d["buffer"], d["bytes"], len(d["addresses"]), tuple(d["steps"]),
                    set(d["engines"]), addrs=tuple(d["addresses"]),
                    conflicts=tuple(d["conflicts"]))


def _overlap(a, b) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def _must_split(u, v) -> bool:
    return _overlap(u.life, v.life) and (
        v.name in u.partners or u.name in v.partners or
        any(e != f for e in u.engines for f in v.engines))


def peak(units) -> tuple:
    """``(bytes, step, units live)`` at the step where the most bytes are live.

    Example::

        >>> peak([Unit("A", 64, 2, (0, 3), {"load"}), Unit("B", 32, 1, (3, 4), {"gemm"})])[0]
        160
    """
    steps = sorted({s for u in units for s in u.life})
    best = (0, -1, [])
    for s in steps:
        live = [u for u in units if u.life[0] <= s <= u.life[1]]
        total = sum(u.size * u.slots for u in live)
        if total > best[0]:
            best = (total, s, live)
    return best


def _candidates(mem, u, pins):
    k = max(1, math.ceil(u.size / mem.bank_bytes))
    starts = [pins[u.name]] if u.name in pins else range(mem.banks)
    steps = range(k, mem.banks) if u.slots > 1 else [0]
    for b in starts:
        for s in steps:
            banks = [b + j * s + q for j in range(u.slots) for q in range(k)]
            if max(banks) < mem.banks:
                yield k, s, banks


def _reuses(u, addrs, placed) -> int:
    """How many placed units (their lifetimes apart from ``u``'s) ``u`` at ``addrs``
    would share an address with: each reuse orders the two (a token between their
    engines), so a free address is preferred where one exists."""
    return sum(1 for v in placed for a in addrs for b in v.addrs
               if not _overlap(u.life, v.life) and a < b + v.size and b < a + u.size)


def _fit(mem, u, k, step, banks, placed):
    """Lowest offset where ``u`` fits in every slot bank, and the conflicting units."""
    w = max(mem.align_bytes, mem.width_bytes)
    busy = []
    conflicts = set()
    for v in placed:
        if not _overlap(u.life, v.life):
            continue
        for a in v.addrs:
            busy.append((a, a + v.size))
        if _must_split(u, v) and set(v.banks) & set(banks):
            conflicts.add(v.name)
    first = [b * mem.bank_bytes for b in banks[::k]]
    off = 0
    limit = mem.bank_bytes * k
    while off + u.size <= limit:
        clash = [e for a0 in first for a, e in busy if a < a0 + off + u.size and a0 + off < e]
        if not clash:
            return [a0 + off for a0 in first], conflicts
        nxt = max(e - a0 for a0 in first for a, e in busy
                  if a < a0 + off + u.size and a0 + off < e)
        off = -(-nxt // w) * w
    return None, conflicts


def place(mem, units, pins) -> list:
    """Place ``units`` in memory ``mem`` (module doc); returns them with addresses,
    each size rounded up to whole accesses of the memory's width.

    Example::

        >>> from cuvil_tir.transform.memory_table import MemorySpec
        >>> m = MemorySpec("npu.x", "static", (), 1024, banks=1, bank_bytes=1024, width_bytes=64)
        >>> [(u.name, u.size, u.addrs) for u in place(m, [Unit("A", 100, 1, (0, 0), {"load"})], {})]
        [('A', 128, (0,))]
    """
    for u in units:
        u.size = -(-u.size // mem.width_bytes) * mem.width_bytes
        k = max(1, math.ceil(u.size / mem.bank_bytes))
        if k * u.slots > mem.banks:
            raise AllocationError(
                f"allocation: buffer '{u.name}' needs {u.slots} cop"
                f"{'ies' if u.slots > 1 else 'y'} x {k} bank(s) of {mem.bank_bytes} bytes "
                f"= {k * u.slots} banks of memory '{mem.scope}', which has {mem.banks}; "
                "use a smaller tile or do not double-buffer it")
        if u.name in pins and not 0 <= pins[u.name] < mem.banks:
            raise AllocationError(f"allocation: buffer '{u.name}' is pinned to bank "
                                  f"{pins[u.name]}, but memory '{mem.scope}' has banks "
                                  f"0..{mem.banks - 1}")
    placed = []
    for u in sorted(units, key=lambda u: (u.name not in pins, -u.slots, -u.size, u.name)):
        best = None
        for k, step, banks in _candidates(mem, u, pins):
            addrs, conflicts = _fit(mem, u, k, step, banks, placed)
            if addrs is None:
                continue
            score = (len(conflicts), _reuses(u, addrs, placed))
            if best is None or score < best[0]:
                best = (score, addrs, banks, conflicts)
            if score == (0, 0):
                break
        if best is None:
            total, _, live = peak(units)
            over = total - mem.capacity_bytes
            listing = ", ".join(f"{v.name} ({v.size * v.slots} bytes)" for v in live)
            why = (f"overflows it by {over} bytes" if over > 0 else
                   "fits in total but not in its banks once conflicting buffers are kept "
                   "apart")
            raise AllocationError(
                f"allocation: memory '{mem.scope}' ({mem.capacity_bytes} bytes, "
                f"{mem.banks} banks x {mem.bank_bytes}) cannot hold '{u.name}' "
                f"({u.size * u.slots} bytes): at the peak {total} bytes are live "
                f"[{listing}], which {why}; use smaller tiles")
        _, u.addrs, u.banks, u.conflicts = best[0], tuple(best[1]), tuple(best[2]), \
            tuple(sorted(best[3]))
        placed.append(u)
    return sorted(placed, key=lambda u: u.addrs[0])


def memory_map_text(memories, plans, warnings) -> str:
    """Per memory and bank: each buffer with its offset, size and lifetime.

    Example::

        >>> from cuvil_tir.transform.memory_table import MemorySpec
        >>> m = MemorySpec("npu.x", "static", (), 1024, banks=1, bank_bytes=1024, width_bytes=64)
        >>> print(memory_map_text([m], {"npu.x": []}, []))
        npu.x: 1 banks x 1024 bytes, 512-bit wide; peak 0 bytes
          bank 0: (free)
    """
    lines = []
    for m in memories:
        units = plans.get(m.scope, [])
        used = peak(units)[0]
        lines.append(f"{m.scope}: {m.banks} banks x {m.bank_bytes} bytes, "
                     f"{m.width_bytes * 8}-bit wide; peak {used} bytes")
        for b in range(m.banks):
            here = []
            for u in units:
                for j, a in enumerate(u.addrs):
                    if a // m.bank_bytes <= b <= (a + u.size - 1) // m.bank_bytes:
                        tag = f"{u.name}[{j}]" if u.slots > 1 else u.name
                        if a // m.bank_bytes < b:     # spans banks: continued here
                            here.append(f"    {tag:<20} (continued from bank "
                                        f"{a // m.bank_bytes})")
                            continue
                        here.append(f"    {tag:<20} offset {a - b * m.bank_bytes:>6}  "
                                    f"size {u.size:>6}  steps {u.life[0]}-{u.life[1]}  "
                                    f"engines {','.join(sorted(u.engines))}")
            lines.append(f"  bank {b}:" + ("" if here else " (free)"))
            lines.extend(here)
    lines.extend(f"warning: {w}" for w in warnings)
    return "\n".join(lines)


__all__ = ["Unit", "memory_map_text", "peak", "place"]
