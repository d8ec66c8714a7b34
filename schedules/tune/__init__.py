"""Autotuning: search a space of schedules, measure candidates safely, keep records.

Example::

    >>> from schedules.tune import tune, apply_best, Database
    >>> callable(tune) and callable(apply_best)
    True
"""

from .database import Database, workload_key
from .measure import FAILURE_KINDS
from .progress import TuneProgress
from .tuner import TuneResult, apply_best, tune

__all__ = ["Database", "workload_key", "FAILURE_KINDS", "TuneProgress", "TuneResult",
           "apply_best", "tune"]
