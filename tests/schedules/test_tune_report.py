"""The progress line, the best-so-far curve (text and PNG) and ``cuvil tune``."""

import io
import json
import sys
from types import SimpleNamespace

import pytest

from targets.toolkit.cli import main
from schedules.tune.report import (HistoryError, PlotUnavailableError, best_so_far, curve_text,
                                   format_progress, plot_curve, progress_printer,
                                   trials_to_fraction)

HISTORY = [(1, 8e-3), (2, None), (3, 4e-3), (4, 5e-3), (5, None), (6, 1e-3), (7, 2e-3)]


def _progress(done, total, best=1e-3, failures=None, elapsed=10.0, pruned=0):
    return SimpleNamespace(trials_done=done, trials_total=total, best_seconds=best,
                           failures=failures or {}, elapsed_s=elapsed, pruned=pruned)


def test_progress_line_trials_best_failures_eta():
    line = format_progress(_progress(5, 20, 2.5e-4, {"timeout": 2, "wrong": 1, "crash": 0},
                                     elapsed=50.0, pruned=7))
    assert line == ("tune: 5/20 trials | best 250.00 us | failures timeout=2 wrong=1 | "
                    "pruned 7 | 0:50 elapsed, ETA 2:30")
    assert format_progress(_progress(20, 20, elapsed=3725)).endswith("1:02:05 elapsed, done")


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_rewritten_in_place_on_a_tty_plain_lines_otherwise():
    tty, log = _Tty(), io.StringIO()
    for show, out in ((progress_printer(tty), tty), (progress_printer(log), log)):
        for done in (1, 2, 3):
            show(_progress(done, 3, failures={"crash": 1} if done == 1 else {}))
    assert tty.getvalue().count("\r") == 3 and tty.getvalue().count("\n") == 1
    first, second = tty.getvalue().split("\r")[1:3]
    assert len(second) >= len(first)            # the longer first line is blanked out
    assert log.getvalue().count("\n") == 3 and "\r" not in log.getvalue()


def test_best_so_far_and_trials_to_ninety_percent():
    assert [b for _, b in best_so_far(HISTORY)] == [8e-3, 8e-3, 4e-3, 4e-3, 4e-3, 1e-3, 1e-3]
    assert trials_to_fraction(HISTORY, 0.9) == 6
    assert trials_to_fraction(HISTORY, 0.2) == 3
    assert trials_to_fraction([(1, None)], 0.9) is None


def test_curve_text_from_a_result_or_a_history():
    text = curve_text(SimpleNamespace(history=HISTORY), width=7, height=4)
    assert text == curve_text(HISTORY, width=7, height=4)
    lines = text.splitlines()
    assert lines[0] == "best-so-far vs trials (7 trials, best 1.00 ms at trial 6)"
    assert lines[1].endswith("|**") and lines[4].endswith("|     **")
    assert lines[5].endswith("+-x--x--")                     # failed trials 2 and 5
    assert curve_text([(1, None)]) == "best-so-far vs trials (1 trials, none succeeded)"
    with pytest.raises(HistoryError, match=r"expected a TuneResult with a .history or a "
                       r"list of \(trial, seconds or None\), found object"):
        curve_text(object())


def test_plot_curve_png_or_a_clear_message(tmp_path, monkeypatch):
    path = tmp_path / "curve.png"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        matplotlib = None
    if matplotlib is not None:
        assert plot_curve(SimpleNamespace(history=HISTORY), path) == path
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(PlotUnavailableError, match=r"needs matplotlib.*pip install "
                       r"cuvil\[plot\].*curve_text"):
        plot_curve(HISTORY, tmp_path / "other.png")


KERNEL = '''
import cuvil_tir as T
A = T.placeholder((64,), name="A")
add_one = T.create_prim_func([A, T.compute((64,), lambda i: A[i] + 1.0, name="B")])
'''


def test_cuvil_tune_then_resume(tmp_path, capsys, monkeypatch):
    kernel, db = tmp_path / "kernel.py", tmp_path / "tune.jsonl"
    kernel.write_text(KERNEL)
    argv = ["tune", str(kernel), "--target", "llvm -mcpu=haswell", "--trials", "2",
            "--db", str(db), "--timeout", "60"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "0 of 2 trials already in the database, 2 to measure" in out
    assert "best-so-far vs trials (2 trials" in out and "the best schedule:" in out
    lines = db.read_text().splitlines()
    trials = [line for line in lines if not json.loads(line).get("remeasured")]
    assert len(trials) == 2 and all(json.loads(line)["workload"] for line in lines)
    assert main(argv) == 1                                   # no silent mixing of runs
    assert "CVL-E196" in capsys.readouterr().err
    assert main(argv + ["--resume"]) == 0                    # nothing left: nothing measured
    assert "2 of 2 trials already in the database, 0 to measure" in capsys.readouterr().out
    assert db.read_text().splitlines() == lines
    monkeypatch.setitem(sys.modules, "matplotlib", None)     # refused before tuning
    assert main(argv + ["--resume", "--trials", "3", "--plot", str(tmp_path / "c.png")]) == 1
    assert "CVL-E195" in capsys.readouterr().err and db.read_text().splitlines() == lines
