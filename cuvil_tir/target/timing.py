"""Timing statistics of a built module's native calls.

Example::

    >>> r = BenchmarkResult((1e-6, 2e-6, 3e-6), number=10)
    >>> r.median, round(r.mean, 9)
    (2e-06, 2e-06)
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from ..errors import ArgumentError


def _fmt(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


@dataclass(frozen=True)
class BenchmarkResult:
    """Per-call seconds of each repeat (``all``) and their statistics.

    Example::

        >>> print(BenchmarkResult((1e-3, 3e-3), number=1))
        BenchmarkResult(median=2 ms, mean=2 ms, min=1 ms, max=3 ms, std=1 ms, repeat=2, number=1)
    """

    all: tuple
    number: int = 1

    @property
    def median(self) -> float:
        """Median seconds per call."""
        return statistics.median(self.all)

    @property
    def mean(self) -> float:
        """Mean seconds per call."""
        return statistics.fmean(self.all)

    @property
    def min(self) -> float:  # noqa: A003 - the statistic's name
        """Fastest repeat, seconds per call."""
        return min(self.all)

    @property
    def max(self) -> float:  # noqa: A003 - the statistic's name
        """Slowest repeat, seconds per call."""
        return max(self.all)

    @property
    def std(self) -> float:
        """Population standard deviation of the repeats (seconds per call)."""
        return statistics.pstdev(self.all) if len(self.all) > 1 else 0.0

    def __repr__(self) -> str:
        return (f"BenchmarkResult(median={_fmt(self.median)}, mean={_fmt(self.mean)}, "
                f"min={_fmt(self.min)}, max={_fmt(self.max)}, std={_fmt(self.std)}, "
                f"repeat={len(self.all)}, number={self.number})")


def time_calls(fn, repeat: int = 5, number: int | None = None, warmup: int = 1,
               min_repeat_seconds: float = 2e-3) -> BenchmarkResult:
    """Time ``fn()``: ``warmup`` calls, then ``repeat`` rounds of ``number`` calls.

    ``number=None`` picks the smallest power of two whose round lasts at least
    ``min_repeat_seconds`` (at most 2**20 calls).

    Example::

        >>> r = time_calls(lambda: None, repeat=3, number=10)
        >>> len(r.all), r.number
        (3, 10)
    """
    if repeat < 1 or (number is not None and number < 1) or warmup < 0:
        raise ArgumentError(f"benchmark: expected repeat >= 1, number >= 1 and warmup >= 0, "
                            f"got repeat={repeat}, number={number}, warmup={warmup}")
    for _ in range(warmup):
        fn()
    clock = time.perf_counter
    if number is None:
        number = 1
        while number < (1 << 20):
            t0 = clock()
            for _ in range(number):
                fn()
            if clock() - t0 >= min_repeat_seconds:
                break
            number *= 2
    out = []
    for _ in range(repeat):
        t0 = clock()
        for _ in range(number):
            fn()
        out.append((clock() - t0) / number)
    return BenchmarkResult(tuple(out), number)
