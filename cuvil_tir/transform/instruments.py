"""Pass instruments: observe every pass a ``PassManager`` runs.

* :class:`PassTiming` — per-pass calls and total milliseconds, as a table;
* :class:`DumpIR` — the text form before and after each pass, as numbered files;
* :class:`~cuvil_tir.transform.verify.VerifyEach` — the well-formedness verifier after
  each pass (with the verifier, which the pass manager's passes use);
* :class:`DumpOnFail` — when a pass (or a code generator) fails, the IR it was given
  is written out and the error names the file (``CUVIL_DUMP_ON_FAIL=dir``); code
  generators report to it through
  :func:`~cuvil_tir.transform.pass_manager.report_failure`.

Example::

    >>> import cuvil_tir as T
    >>> A = T.placeholder((4,), name="A")
    >>> f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] + 1.0, name="B")])
    >>> timing = PassTiming()
    >>> with T.transform.PassContext(instruments=[timing]):
    ...     _ = T.lower(f)
    >>> timing.calls("lower_blocks")
    1
"""

from __future__ import annotations

import os
import re
import sys
import time


class PassInstrument:
    """Base class; every hook does nothing by default.

    Example::

        >>> class Count(PassInstrument):
        ...     def __init__(self): self.n = 0
        ...     def run_after_pass(self, func, name): self.n += 1
        >>> Count().n
        0
    """

    def enter_pass_ctx(self) -> None:
        """Called when the owning context is entered."""

    def exit_pass_ctx(self) -> None:
        """Called when the owning context is left."""

    def run_begin(self, func) -> None:
        """Called before the first pass of a pipeline run."""

    def run_end(self, func) -> None:
        """Called after the last pass of a pipeline run."""

    def run_before_pass(self, func, name: str) -> None:
        """Called before pass ``name`` runs on ``func``."""

    def run_after_pass(self, func, name: str) -> None:
        """Called with the result of pass ``name``."""

    def run_pass_failed(self, func, name: str, error: BaseException) -> None:
        """Called when pass ``name`` raised ``error`` on ``func`` (then it propagates)."""


class PassTiming(PassInstrument):
    """Per-pass call counts and total wall time; ``table()`` / ``str()`` render them.

    Example::

        >>> t = PassTiming()
        >>> t.run_before_pass(None, "p"); t.run_after_pass(None, "p")
        >>> t.calls("p"), "p" in t.table()
        (1, True)
    """

    def __init__(self):
        self.stats: dict[str, list] = {}
        self._start: list = []

    def run_before_pass(self, func, name):
        self._start.append(time.perf_counter())

    def run_after_pass(self, func, name):
        dt = (time.perf_counter() - self._start.pop()) * 1e3
        s = self.stats.setdefault(name, [0, 0.0])
        s[0] += 1
        s[1] += dt

    def calls(self, name: str) -> int:
        """How many times pass ``name`` ran."""
        return self.stats.get(name, [0, 0.0])[0]

    def total_ms(self, name: str | None = None) -> float:
        """Milliseconds spent in pass ``name`` (all passes when None)."""
        if name is None:
            return sum(v[1] for v in self.stats.values())
        return self.stats.get(name, [0, 0.0])[1]

    def reset(self) -> None:
        """Forget what was measured."""
        self.stats.clear()

    def table(self) -> str:
        """The measurements as an aligned text table, in order of first run."""
        total = self.total_ms()
        width = max([len("pass"), len("total")] + [len(k) for k in self.stats])
        lines = [f"{'pass':<{width}}  {'calls':>5}  {'total ms':>10}  {'share':>6}"]
        for name, (n, ms) in self.stats.items():
            share = 100.0 * ms / total if total > 0 else 0.0
            lines.append(f"{name:<{width}}  {n:>5}  {ms:>10.3f}  {share:>5.1f}%")
        ncalls = sum(v[0] for v in self.stats.values())
        lines.append(f"{'total':<{width}}  {ncalls:>5}  {total:>10.3f}  {100.0:>5.1f}%")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


class PrintTimingAfterLowering(PassTiming):
    """``CUVIL_PASS_TIMING=1``: print the table to stderr after each pipeline run.

    Example::

        >>> isinstance(PrintTimingAfterLowering(), PassTiming)
        True
    """

    def run_begin(self, func):
        self.reset()

    def run_end(self, func):
        print(f"pass timing for '{func.name}':\n{self.table()}", file=sys.stderr)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


class DumpIR(PassInstrument):
    """Write the text form before and after each pass to ``directory``:
    ``000_before_<pass>.tir``, ``001_after_<pass>.tir``, … (one counter per instrument).

    Example::

        >>> import tempfile, os
        >>> d = tempfile.mkdtemp()
        >>> dump = DumpIR(d)
        >>> dump.run_before_pass("x", "p"); dump.run_after_pass("y", "p")
        >>> sorted(os.listdir(d))
        ['000_before_p.tir', '001_after_p.tir']
    """

    def __init__(self, directory):
        self.directory = os.fspath(directory)
        self.counter = 0
        self.written: list[str] = []

    def _write(self, func, stage: str, name: str) -> None:
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, f"{self.counter:03d}_{stage}_{_safe(name)}.tir")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(str(func))
            fh.write("\n")
        self.counter += 1
        self.written.append(path)

    def run_before_pass(self, func, name):
        self._write(func, "before", name)

    def run_after_pass(self, func, name):
        self._write(func, "after", name)


class DumpOnFail(PassInstrument):
    """When a pass or a code generator fails, write the IR it was given to
    ``directory`` (``<function>_before_<pass>.tir``) and add the path to the error.

    Example::

        >>> import tempfile, cuvil_tir as T
        >>> d = tempfile.mkdtemp()
        >>> err = T.LoweringError("bad loop")
        >>> DumpOnFail(d).run_pass_failed("IR text", "flatten_buffers", err)
        >>> "the IR before 'flatten_buffers' was written to" in str(err)
        True
    """

    def __init__(self, directory):
        self.directory = os.fspath(directory)
        self.written: list[str] = []

    def run_pass_failed(self, func, name, error):
        if getattr(error, "_cuvil_dumped", False):
            return                 # an inner pipeline already wrote the IR it failed on
        os.makedirs(self.directory, exist_ok=True)
        fname = getattr(func, "name", "func")
        path = os.path.join(self.directory, f"{_safe(str(fname))}_before_{_safe(name)}.tir")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(str(func))
            fh.write("\n")
        self.written.append(path)
        note = f"(the IR before '{name}' was written to {path})"
        message = getattr(error, "message", None)
        if isinstance(message, str):
            error.message = f"{message}\n{note}"
            error.args = (error.message,)
        elif hasattr(error, "add_note"):
            error.add_note(note)
        try:
            error._cuvil_dumped = True
        except AttributeError:
            pass
