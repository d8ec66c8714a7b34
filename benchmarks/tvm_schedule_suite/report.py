"""The text report of a suite run: a table per file, the totals, the WRONG cases and
the most common reasons per bucket.

Example::

    >>> from .runner import tally
    >>> s = tally([{"file": "test_a.py", "case": "t", "bucket": "passed", "reason": ""}],
    ...           {"test_a.py": 1})
    >>> "| test_a.py | 1 | 1 |" in render(s)
    True
"""

from __future__ import annotations

import re
from collections import Counter

from .outcome import BUCKETS
from .runner import percent

_SHORT = {"passed": "pass", "refused": "refused", "error_mismatch": "err-mismatch",
          "wrong": "WRONG", "numeq": "num-eq", "unchecked": "unchecked",
          "assertion": "assert", "trace": "trace", "unsupported_parse": "parse",
          "missing_primitive": "no-prim", "unsupported_shim": "shim",
          "other_error": "other-err", "crash": "crash", "out_of_scope": "out-of-scope",
          "tvm_skip": "tvm-skip"}


def render(summary: dict, reasons: int = 8) -> str:
    """Markdown: per-file table, totals, WRONG list, top reasons of each bucket."""
    cols = list(BUCKETS)
    head = "| file | cases | " + " | ".join(_SHORT[c] for c in cols) + " | % pass | % in scope |"
    lines = [head, "|" + " --- |" * (len(cols) + 4)]
    rows = sorted(summary["files"].items()) + [("**total**", summary["total"])]
    for name, c in rows:
        lines.append(f"| {name} | {c['cases']} | " + " | ".join(str(c[b]) for b in cols)
                     + f" | {percent(c)} | {percent(c, 'in_scope')} |")
    t = summary["total"]
    lines += ["", f"Passed {t['passed']} of {t['cases']} cases ({percent(t)}%); "
              f"{t['passed']} of {t['in_scope']} in scope ({percent(t, 'in_scope')}%).",
              f"Passed or equivalent (passed + numerically equal, reported apart from the "
              f"pass rate): {t['passed'] + t['numeq']} of {t['in_scope']} in scope "
              f"({percent(dict(t, passed=t['passed'] + t['numeq']), 'in_scope')}%)."]
    if summary.get("seconds") is not None:
        lines.append(f"Wall time {summary['seconds']} s.")
    for name, note in sorted(summary.get("notes", {}).items()):
        lines.append(f"- {name}: not collected: {note}")
    cases = summary.get("cases", [])
    wrong = [c for c in cases if c["bucket"] == "wrong"]
    lines += ["", f"## WRONG cases ({len(wrong)})", ""]
    lines += [f"- {c['file']}::{c['case']}: {c['reason'][:200]}" for c in wrong] or ["none"]
    for bucket in BUCKETS:
        if bucket in ("passed", "wrong"):
            continue
        got = [c for c in cases if c["bucket"] == bucket]
        if not got:
            continue
        lines += ["", f"## {BUCKETS[bucket]} ({len(got)})", ""]
        common = Counter(_pattern(c["reason"]) for c in got).most_common(reasons)
        lines += [f"- {n} x {r}" for r, n in common]
    return "\n".join(lines) + "\n"


def _pattern(reason: str) -> str:
    # the reason without the IR and numbers, so that like failures group together
    r = reason.split("\n", 1)[0]
    r = re.sub(r"line \d+", "line N", r)
    return r[:160]


def case_list(summary: dict, bucket: str) -> list:
    """``file::case: reason`` of every case in ``bucket``."""
    return [f"{c['file']}::{c['case']}: {c['reason']}" for c in summary.get("cases", [])
            if c["bucket"] == bucket]


__all__ = ["render", "case_list"]
