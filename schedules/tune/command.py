"""What ``cuvil tune FILE`` does with the function of the file: tune it with a database
that resumes, and report the curve.

The ``cuvil`` command (:mod:`targets.toolkit.cli`) finds the function in FILE the way
``cuvil build`` / ``cuvil run`` do and calls :func:`tune_function`.  The function is
tuned from the space generated for the target (:mod:`.space`).

``--trials N`` is the number of measured candidates the database should hold for this
function on this target: with ``--resume`` the records already there count, so the same
command run again after an interruption measures only what is left and never measures
a candidate twice.  Without ``--resume`` a database that already holds records for this
function and target is refused rather than silently mixed into.

Example::

    >>> history_of([{"seconds": 1e-3}, {"seconds": 5e-4}])
    [(1, 0.001), (2, 0.0005)]
"""

from __future__ import annotations

import sys

from cuvil_tir.errors import CuvilError
from cuvil_tir.target import as_target

from .database import Database, workload_key
from .executor import local_executor
from .networks import BUILTIN
from .scheduler import TaskScheduler
from .report import curve_text, format_seconds, plot_curve, progress_printer, \
    require_plotting, trials_to_fraction
from .tuner import tune


class TuneCommandError(CuvilError):
    """``cuvil tune`` was asked for something it will not do (e.g. to append a new run
    to a database that already holds one, without ``--resume``).

    Example::

        >>> TuneCommandError("pass --resume").code
        'CVL-E196'
    """

    code = "CVL-E196"


def history_of(records) -> list:
    """``(trial, seconds or None)`` for database records in file order (a winner's
    re-measurement, ``"remeasured": true``, is not a trial).

    Example::

        >>> history_of([{"seconds": 2e-3}, {"seconds": None, "failure": "crash"},
        ...             {"seconds": 3e-3, "remeasured": True}])
        [(1, 0.002), (2, None)]
    """
    return [(n, r.get("seconds")) for n, r in enumerate(_trials(records), 1)]


def _trials(records) -> list:
    return [r for r in records if not r.get("remeasured")]


def tune_function(func, target="llvm", trials=16, db="tune.jsonl", resume=False,
                  plot=None, timeout_s=10.0, seed=0, out=None) -> int:
    """Tune ``func`` (see the module doc) until database ``db`` holds ``trials``
    measured candidates of it on ``target``; prints the outcome to ``out`` (default
    stdout) and returns the exit status.

    Example::

        >>> import os, tempfile, io
        >>> import cuvil_tir as T
        >>> A = T.placeholder((8,), name="A")
        >>> f = T.create_prim_func([A, T.compute((8,), lambda i: A[i] + 1.0, name="B")])
        >>> buf = io.StringIO()
        >>> tune_function(f, trials=0, db=os.path.join(tempfile.mkdtemp(), "t.jsonl"),
        ...               out=buf)
        0
        >>> buf.getvalue().splitlines()[0]
        'cuvil tune: main on llvm, 0 of 0 trials already in the database, 0 to measure'
    """

    out = sys.stdout if out is None else out
    if plot is not None:
        require_plotting(plot)  # before spending the budget, not after
    target = as_target(target)
    database = Database(db)
    workload = workload_key(func, target)
    done = len(_trials(database.records(workload)))
    if done and not resume:
        raise TuneCommandError(
            f"{db} already holds {done} records of {func.name!r} on {target}; pass "
            "--resume to continue that run (measured candidates are never measured "
            "again), or choose another --db")
    left = max(0, trials - done)
    print(f"cuvil tune: {func.name} on {target}, {done} of {trials} trials already in "
          f"the database, {left} to measure", file=out)
    res = tune(func, None, target=target, trials=left, database=database,
               timeout_s=timeout_s, seed=seed + done, progress=progress_printer())
    records = _trials(database.records(workload))
    history = history_of(records)
    best = min((s for _, s in history if s is not None), default=None)
    fails: dict = {}
    for r in records:
        if r.get("failure"):
            fails[r["failure"]] = fails.get(r["failure"], 0) + 1
    print(f"best {format_seconds(best)} over {len(records)} trials "
          f"(90% of it reached at trial {trials_to_fraction(history, 0.9)}); failures "
          f"{fails or 'none'}; {res.pruned} candidates pruned in this run", file=out)
    if history:
        print(curve_text(history), file=out)
    if plot is not None and history:
        print(f"curve written to {plot_curve(history, plot)}", file=out)
    if res.best_schedule is not None:
        print("the best schedule:", file=out)
        print(res.best_schedule.trace.as_python(), file=out)
    return 0


def is_task_list(source) -> bool:
    """Whether ``cuvil tune SOURCE`` names a task list (a builtin name or a ``.json``
    file) rather than a kernel file.

    Example::

        >>> is_task_list("resnet18"), is_task_list("net.json"), is_task_list("k.py")
        (True, True, False)
    """
    return str(source) in BUILTIN or str(source).endswith(".json")


def tune_tasks(source, target="llvm", trials=200, db="tune.jsonl", resume=False,
               minutes=None, timeout_s=10.0, seed=0, round_trials=8, executor=None,
               out=None) -> int:
    """Tune a network's task list (:mod:`.networks`; ``source`` a builtin name or a JSON
    file) with the gradient task scheduler (:mod:`.scheduler`) until database ``db``
    holds ``trials`` measurements of its tasks or ``minutes`` pass; prints a line per
    round and the report.  A database that already holds records of these tasks is
    continued only with ``resume`` (run the same command again after an interruption).

    Example::

        >>> import io, os, tempfile
        >>> net = {"tasks": [{"name": "s", "op": "softmax", "weight": 1,
        ...                   "args": {"rows": 4, "cols": 16}}]}
        >>> buf = io.StringIO()
        >>> tune_tasks(net, trials=0, db=os.path.join(tempfile.mkdtemp(), "n.jsonl"),
        ...            out=buf)
        0
        >>> buf.getvalue().splitlines()[0]
        'cuvil tune: 1 tasks on llvm, 0 of 0 trials already in the database'
    """
    out = sys.stdout if out is None else out
    target = as_target(target)
    own = executor is None
    ex = local_executor() if own else executor
    try:
        ts = TaskScheduler(source, target, db, ex, round_trials=round_trials, seed=seed,
                           timeout_s=timeout_s)
        done = ts.trials()
        if done and not resume:
            raise TuneCommandError(
                f"{db} already holds {done} records of these tasks on {target}; pass "
                "--resume to continue that run (measured candidates are never measured "
                "again), or choose another --db")
        print(f"cuvil tune: {len(ts.tasks)} tasks on {target}, {done} of {trials} trials "
              "already in the database", file=out)
        ts.run(trials, None if minutes is None else minutes * 60.0, out=out)
    finally:
        if own:
            ex.shutdown(wait=True)
    print(ts.report(), file=out)
    return 0
