"""What the tuner reports after every measured batch: :class:`TuneProgress`.

``S.tune(..., progress=...)`` takes True (:func:`.report.progress_printer`, one line on
stderr), False, or a callable that receives a :class:`TuneProgress` after every batch.

Example::

    >>> p = TuneProgress(4, 16, 2.5e-6, {"crash": 1}, 3.0, 2)
    >>> p.trials_done, p.failures["crash"]
    (4, 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from .report import progress_printer


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


def renderer(progress):
    """The callable that shows progress: ``progress`` itself when callable, None for
    False, else :func:`.report.progress_printer` (one line on stderr, rewritten in place
    on a terminal).

    Example::

        >>> renderer(False) is None, renderer(print) is print, callable(renderer(True))
        (True, True, True)
    """
    if callable(progress):
        return progress
    if not progress:
        return None
    return progress_printer()
