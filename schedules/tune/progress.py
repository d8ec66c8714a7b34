"""What the tuner reports after every measured batch: :class:`TuneProgress`.

``S.tune(..., progress=...)`` takes True (the default renderer, one line on stderr),
False, or a callable that receives a :class:`TuneProgress` after every batch.

Example::

    >>> p = TuneProgress(4, 16, 2.5e-6, {"crash": 1}, 3.0, 2)
    >>> p.trials_done, p.failures["crash"]
    (4, 1)
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TuneProgress:
    """The state of a tuning run: trials measured / asked for, best seconds so far (None
    before the first correct candidate), failures by kind, seconds since the start, and
    candidates pruned before building.

    Example::

        >>> TuneProgress(0, 8, None, {}, 0.0, 0).best_seconds is None
        True
    """

    trials_done: int
    trials_total: int
    best_seconds: float | None
    failures: dict = field(default_factory=dict)
    elapsed_s: float = 0.0
    pruned: int = 0


def plain_line(p: TuneProgress) -> str:
    """A one-line summary of ``p`` (used when the report module offers no renderer).

    Example::

        >>> plain_line(TuneProgress(2, 8, 1.5e-6, {"timeout": 1}, 1.0, 0))
        'tune: 2/8 trials, best 1.5 us, failures: timeout=1'
    """
    best = "-" if p.best_seconds is None else f"{p.best_seconds * 1e6:.1f} us"
    fails = " ".join(f"{k}={v}" for k, v in sorted(p.failures.items())) or "none"
    return f"tune: {p.trials_done}/{p.trials_total} trials, best {best}, failures: {fails}"


def renderer(progress):
    """The callable that shows progress: ``progress`` itself when callable, None for
    False, else a line on stderr (``report.format_progress`` when available).

    Example::

        >>> renderer(False) is None, renderer(print) is print
        (True, True)
    """
    if callable(progress):
        return progress
    if not progress:
        return None
    try:
        from .report import format_progress
    except ImportError:  # the report module is optional for the tuner
        format_progress = plain_line

    def show(p: TuneProgress) -> None:
        done = p.trials_done >= p.trials_total
        print("\r" + format_progress(p), end="\n" if done else "", file=sys.stderr,
              flush=True)

    return show
