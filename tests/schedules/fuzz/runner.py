"""Running fuzz cases for a number of cases or a time budget, and what they found.

:func:`run` draws case seeds from one seed, runs :func:`.check.run_case` on each and
returns :class:`Stats`: cases run, steps accepted, steps refused by error class and
code, and the failures (each with its reproducer).  The test suite runs a few cases;
``CUVIL_FUZZ_MINUTES`` (CI) and ``python -m benchmarks.fuzz --minutes N`` run longer.

Example::

    >>> st = run(seed=1, cases=2, build=False)
    >>> st.cases, st.failures
    (2, [])
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field

from .check import reproducer, run_case


@dataclass
class Stats:
    """What a run did (see the module docstring)."""

    seed: int
    cases: int = 0
    accepted: int = 0
    refused: Counter = field(default_factory=Counter)
    steps: Counter = field(default_factory=Counter)
    failures: list = field(default_factory=list)
    seconds: float = 0.0

    def add(self, res) -> None:
        self.cases += 1
        for name, outcome, err in res.steps:
            self.steps[(name, outcome)] += 1
            if outcome == "ok":
                self.accepted += 1
            else:
                self.refused[f"{type(err).__name__} {getattr(err, 'code', '?')}"] += 1
        if res.failure is not None:
            self.failures.append(res)

    def report(self) -> str:
        """A plain-text summary: counts, refusals by code, failures with reproducers."""
        lines = [f"seed {self.seed}: {self.cases} cases in {self.seconds:.0f} s, "
                 f"{self.accepted} steps accepted, {sum(self.refused.values())} refused, "
                 f"{len(self.failures)} failure(s)", "refused by error:"]
        lines += [f"  {n:6d}  {code}" for code, n in self.refused.most_common()]
        kinds = Counter(r.failure[0] for r in self.failures)
        if kinds:
            lines.append("failures by kind:")
            lines += [f"  {n:6d}  {kind}" for kind, n in kinds.most_common()]
        for res in self.failures:
            lines += ["", reproducer(res)]
        return "\n".join(lines)


def run(seed: int, cases: int | None = None, seconds: float | None = None,
        build: bool = True, on_case=None, before_case=None) -> Stats:
    """Run cases drawn from ``seed`` until ``cases`` ran or ``seconds`` passed;
    ``before_case(case)`` is called with each case's number before it runs (a case that
    kills the process can then still be named) and ``on_case(result, stats)`` after."""
    rng = random.Random(seed)
    st = Stats(seed)
    start = time.monotonic()
    while (cases is None or st.cases < cases) and \
            (seconds is None or time.monotonic() - start < seconds):
        case = rng.getrandbits(32)
        if before_case is not None:
            before_case(case)
        res = run_case(case, build=build)
        st.add(res)
        st.seconds = time.monotonic() - start
        if on_case is not None:
            on_case(res, st)
    return st


__all__ = ["Stats", "run"]
