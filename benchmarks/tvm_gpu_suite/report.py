"""The text report of a GPU-suite run: a table per file, the pass rate, the WRONG
cases by name, and every case's bucket.

Example::

    >>> from .runner import tally
    >>> s = tally([{"file": "t.py", "case": "f", "role": "input", "bucket": "wrong",
    ...             "reason": "B: 2 of 4 elements differ", "seconds": 1.0}])
    >>> "- t.py::f: B: 2 of 4 elements differ" in render(s)
    True
"""

from __future__ import annotations

from .runner import BUCKETS, PASSING

_SHORT = {"passed": "pass", "refused_as_tvm": "refused-as-TVM", "too_big": "too-big",
          "invalid": "invalid", "wrong": "WRONG",
          "race": "race", "parse": "parse", "build": "build", "compile": "nvcc",
          "interp": "interp", "reference": "ref", "crash": "crash", "timeout": "timeout",
          "not_reached": "not-reached"}


def _rate(good: int, total: int) -> float:
    return round(100.0 * good / total, 1) if total else 0.0


def render(summary: dict, per_case: bool = True) -> str:
    """Markdown: per-file table, totals, the pass rate, WRONG cases, every case."""
    cols = list(BUCKETS)
    lines = ["| file | cases | " + " | ".join(_SHORT[c] for c in cols) + " | % pass |",
             "|" + " --- |" * (len(cols) + 3)]
    rows = sorted(summary["files"].items()) + [("**total**", summary["total"])]
    for name, c in rows:
        lines.append(f"| {name} | {c['cases']} | " + " | ".join(str(c.get(b, 0))
                                                            for b in cols)
                     + f" | {c['pass_rate']} |")
    t = summary["total"]
    lines += ["", f"Pass rate: {t['passed_all']} of {t['cases']} scheduled GPU functions "
              f"({t['pass_rate']}%): {t['passed']} compute right, {t['refused_as_tvm']} "
              f"refused as TVM refuses them, {t['invalid']} refused for accessing "
              "outside their buffers as written (" + ", ".join(PASSING) + ").",
              f"Computing right: {t['passed']} of {t['cases'] - t['refused_as_tvm']} "
              "functions TVM accepts.",
              f"Refused for needing more shared memory than sm_90 has (not counted as "
              f"passing): {t['too_big']}; the pass rate without them: "
              f"{_rate(t['passed_all'], t['cases'] - t['too_big'])}%.",
              f"Not counted: {t['outputs']} functions that are TVM passes' expected "
              "outputs (lowered TIR, not schedules)."]
    if summary.get("seconds") is not None:
        lines.append(f"Wall time {summary['seconds']} s.")
    cases = summary.get("cases", [])
    wrong = [c for c in cases if c["bucket"] == "wrong"]
    lines += ["", f"## WRONG cases ({len(wrong)})", ""]
    lines += [f"- {c['file']}::{c['case']}: {c.get('reason', '')[:200]}" for c in wrong] \
        or ["none"]
    if per_case:
        lines += ["", "## Every case", ""]
        for c in sorted(cases, key=lambda c: (c["file"], c["case"])):
            why = f": {c['reason'][:160]}" if c.get("reason") and \
                c["bucket"] != "passed" else ""
            how = f", {c['checked']}" if c.get("checked") else ""
            lines.append(f"- {c['file']}::{c['case']} [{c['role']}] "
                         f"**{c['bucket']}** ({c.get('seconds', 0)} s{how}){why}")
    return "\n".join(lines) + "\n"


__all__ = ["render"]
