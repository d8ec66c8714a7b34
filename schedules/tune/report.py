"""Seeing a tuning run: the live progress line and the best-so-far curve.

``S.tune(..., progress=True)`` shows :func:`format_progress` of every
``TuneProgress`` on stderr (:func:`progress_printer`: rewritten in place on a terminal,
one plain line per update otherwise, so a log file stays readable).  After the run,
:func:`curve_text` draws the best time so far against the trial number in the
terminal, and :func:`plot_curve` writes the same curve as a PNG with matplotlib (the
optional extra ``plot``: ``pip install cuvil[plot]``).

Both curves take a ``TuneResult`` (its ``history``) or the history itself: a list of
``(trial number, seconds or None)`` in measurement order, None for a failed trial.

Example::

    >>> history = [(1, 4e-3), (2, None), (3, 2e-3), (4, 2.5e-3), (5, 1e-3)]
    >>> best_so_far(history)
    [(1, 0.004), (2, 0.004), (3, 0.002), (4, 0.002), (5, 0.001)]
    >>> trials_to_fraction(history, 0.9)
    5
"""

from __future__ import annotations

import math
import sys

from cuvil_tir.errors import CuvilError


class PlotUnavailableError(CuvilError):
    """:func:`plot_curve` needs matplotlib (the optional extra ``plot``), which is not
    installed.

    Example::

        >>> PlotUnavailableError("no matplotlib").code
        'CVL-E195'
    """

    code = "CVL-E195"


class HistoryError(CuvilError, TypeError):
    """A curve was asked of something that is neither a ``TuneResult`` with a
    ``history`` nor a list of ``(trial, seconds or None)``.

    Example::

        >>> HistoryError("expected a history").code
        'CVL-E197'
    """

    code = "CVL-E197"


def format_seconds(s) -> str:
    """A duration in the unit that reads best (``-`` for None).

    Example::

        >>> format_seconds(1.5e-6), format_seconds(0.0123), format_seconds(None)
        ('1.50 us', '12.30 ms', '-')
    """
    if s is None or not math.isfinite(s):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.2f} {unit}"
    return f"{s / 1e-9:.1f} ns"


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def format_progress(p) -> str:
    """One line for a ``TuneProgress`` ``p``: trials done / asked for, best so far,
    failures by kind, candidates pruned, elapsed time and the estimated time left.

    Example::

        >>> from types import SimpleNamespace as P
        >>> format_progress(P(trials_done=4, trials_total=16, best_seconds=2.5e-3,
        ...     failures={"timeout": 1, "crash": 2}, elapsed_s=20.0, pruned=3))
        'tune: 4/16 trials | best 2.50 ms | failures crash=2 timeout=1 | pruned 3 | 0:20 elapsed, ETA 1:00'
        >>> format_progress(P(trials_done=0, trials_total=8, best_seconds=None,
        ...     failures={}, elapsed_s=1.0, pruned=0))
        'tune: 0/8 trials | best - | failures none | pruned 0 | 0:01 elapsed, ETA ?'
    """
    done, total = p.trials_done, p.trials_total
    fails = " ".join(f"{k}={v}" for k, v in sorted(p.failures.items()) if v) or "none"
    if done >= total:
        eta = "done"
    elif done > 0:
        eta = _clock(p.elapsed_s / done * (total - done))
    else:
        eta = "?"
    tail = f"{_clock(p.elapsed_s)} elapsed, " + ("done" if eta == "done" else f"ETA {eta}")
    return (f"tune: {done}/{total} trials | best {format_seconds(p.best_seconds)} | "
            f"failures {fails} | pruned {p.pruned} | {tail}")


def progress_printer(stream=None):
    """A callable for ``S.tune(progress=...)`` that writes :func:`format_progress` lines
    to ``stream`` (default stderr): on a terminal one line rewritten in place (a newline
    once the run is done), otherwise one plain line per update.

    Example::

        >>> import io
        >>> from types import SimpleNamespace as P
        >>> out = io.StringIO(); show = progress_printer(out)
        >>> show(P(trials_done=1, trials_total=2, best_seconds=1e-3, failures={},
        ...        elapsed_s=1.0, pruned=0))
        >>> out.getvalue()
        'tune: 1/2 trials | best 1.00 ms | failures none | pruned 0 | 0:01 elapsed, ETA 0:01\\n'
    """
    state = {"width": 0}

    def show(p) -> None:
        out = sys.stderr if stream is None else stream
        line = format_progress(p)
        tty = getattr(out, "isatty", lambda: False)()
        if tty:
            pad = " " * max(0, state["width"] - len(line))
            state["width"] = len(line)
            end = "\n" if p.trials_done >= p.trials_total else ""
            out.write("\r" + line + pad + end)
        else:
            out.write(line + "\n")
        out.flush()

    return show


def _history(result_or_history) -> list:
    history = getattr(result_or_history, "history", result_or_history)
    if history is None:
        return []
    if not isinstance(history, (list, tuple)):
        raise HistoryError(
            f"expected a TuneResult with a .history or a list of (trial, seconds or None), "
            f"found {type(history).__name__}; for a database, pass "
            "schedules.tune.command.history_of(db.records(workload))")
    out = []
    for n, item in enumerate(history, 1):
        if isinstance(item, (tuple, list)) and len(item) == 2:
            out.append((int(item[0]), None if item[1] is None else float(item[1])))
        else:
            out.append((n, None if item is None else float(item)))
    return out


def best_so_far(result_or_history) -> list:
    """``(trial, best seconds up to and including it)`` for every trial (None until
    the first success).

    Example::

        >>> best_so_far([(1, None), (2, 3.0), (3, 5.0)])
        [(1, None), (2, 3.0), (3, 3.0)]
    """
    best, out = None, []
    for n, s in _history(result_or_history):
        if s is not None and (best is None or s < best):
            best = s
        out.append((n, best))
    return out


def trials_to_fraction(result_or_history, fraction: float = 0.9):
    """The first trial whose best-so-far speed reaches ``fraction`` of the final best's
    (``best / best_so_far >= fraction``), or None when nothing succeeded.

    Example::

        >>> trials_to_fraction([(1, 2.0), (2, 1.05), (3, 1.0)], 0.9)
        2
    """
    curve = best_so_far(result_or_history)
    final = curve[-1][1] if curve else None
    if final is None:
        return None
    for n, s in curve:
        if s is not None and final / s >= fraction:
            return n
    return None


def curve_text(result_or_history, width: int = 60, height: int = 12) -> str:
    """The best time so far against the trial number, drawn in text: one column per
    group of trials, ``*`` on the best-so-far curve, ``.`` for the other measurements
    that fall in the plot, ``x`` on the bottom axis under a trial group with a failure.

    Example::

        >>> print(curve_text([(1, 4e-3), (2, 2e-3), (3, None), (4, 1e-3)], width=4,
        ...                  height=3))
        best-so-far vs trials (4 trials, best 1.00 ms at trial 4)
          4.00 ms |*
                  | **
          1.00 ms |   *
                  +--x-
                   1  4
    """
    hist = _history(result_or_history)
    curve = best_so_far(hist)
    good = [s for _, s in hist if s is not None]
    if not good:
        return f"best-so-far vs trials ({len(hist)} trials, none succeeded)"
    width = max(1, min(width, len(hist)))
    height = max(2, height)
    top, bottom = curve[next(i for i, (_, s) in enumerate(curve) if s is not None)][1], \
        min(good)
    logscale = top / bottom > 10

    def row(s):
        if top == bottom:
            return height - 1
        if logscale:
            f = (math.log(top) - math.log(s)) / (math.log(top) - math.log(bottom))
        else:
            f = (top - s) / (top - bottom)
        return min(height - 1, max(0, round(f * (height - 1))))

    grid = [[" "] * width for _ in range(height)]
    fails = [" "] * width
    for k, ((_, s), (_, b)) in enumerate(zip(hist, curve)):
        col = k * width // len(hist)
        if s is None:
            fails[col] = "x"
        elif s <= top:
            r = row(s)
            if grid[r][col] == " ":
                grid[r][col] = "."
        if b is not None:
            grid[row(b)][col] = "*"
    best_at = next(n for n, b in curve if b == bottom)
    label_w = max(len(format_seconds(top)), len(format_seconds(bottom)))
    lines = [f"best-so-far vs trials ({len(hist)} trials, best {format_seconds(bottom)} "
             f"at trial {best_at})" + (", log scale" if logscale else "")]
    for r in range(height):
        label = format_seconds(top) if r == 0 else format_seconds(bottom) \
            if r == height - 1 else ""
        lines.append((f"{label:>{label_w + 2}} |" + "".join(grid[r])).rstrip())
    lines.append(" " * (label_w + 3) + "+" + "".join("x" if f == "x" else "-" for f in fails))
    first, last = str(hist[0][0]), str(hist[-1][0])
    axis = first + " " * max(1, width - len(first) - len(last)) + last
    lines.append(" " * (label_w + 4) + axis)
    return "\n".join(lines)


def require_plotting(path="the plot"):
    """matplotlib's ``pyplot`` (non-interactive backend), or
    :class:`PlotUnavailableError` saying how to install it.

    Example::

        >>> try:
        ...     plt = require_plotting("curve.png")
        ... except PlotUnavailableError:
        ...     plt = None
        >>> plt is None or hasattr(plt, "subplots")
        True
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailableError(
            f"writing {path} needs matplotlib, which is not installed; install the "
            "optional extra with `pip install cuvil[plot]` (or `pip install matplotlib`), "
            "or print curve_text(result) for the same curve in text") from None
    return plt


def plot_curve(result_or_history, path, title: str = "tuning: best time so far"):
    """Write the best-so-far curve (and every measurement) as a PNG at ``path``;
    returns ``path``.  Needs matplotlib (``pip install cuvil[plot]``): without it,
    :class:`PlotUnavailableError` says so (:func:`curve_text` needs nothing).

    Example::

        >>> import os, tempfile
        >>> p = os.path.join(tempfile.mkdtemp(), "curve.png")
        >>> try:
        ...     ok = plot_curve([(1, 2e-3), (2, 1e-3)], p) == p and os.path.getsize(p) > 0
        ... except PlotUnavailableError:
        ...     ok = True
        >>> ok
        True
    """
    plt = require_plotting(path)
    hist = _history(result_or_history)
    curve = best_so_far(hist)
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    try:
        ok = [(n, s * 1e3) for n, s in hist if s is not None]
        if ok:
            ax.scatter([n for n, _ in ok], [s for _, s in ok], s=10, color="0.6",
                       label="measured")
        steps = [(n, b * 1e3) for n, b in curve if b is not None]
        if steps:
            ax.step([n for n, _ in steps], [b for _, b in steps], where="post",
                    color="C0", label="best so far")
        bad = [n for n, s in hist if s is None]
        if bad:
            ax.scatter(bad, [min(b for _, b in steps) if steps else 0] * len(bad),
                       marker="x", color="C3", label="failed")
        if ok and max(s for _, s in ok) / min(s for _, s in ok) > 10:
            ax.set_yscale("log")
        ax.set_xlabel("trial")
        ax.set_ylabel("time (ms)")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        if ok or bad:
            ax.legend()
        fig.tight_layout()
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
    return path
