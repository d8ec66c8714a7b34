"""The pytest plugin the runner loads: TVM's parameters, and one bucket per case.

Each case's result is appended as one JSON line to the file named by the environment
variable ``TVM_SUITE_RESULTS``: ``{"file", "case", "bucket", "reason"}``; a file that
fails to import is one line with ``"collect_error"``.
"""

from __future__ import annotations

import inspect
import json
import os

import pytest

from .outcome import classify

_RESULTS = os.environ.get("TVM_SUITE_RESULTS", "tvm_suite_results.jsonl")


def _write(record: dict) -> None:
    with open(_RESULTS, "a") as f:
        f.write(json.dumps(record) + "\n")


def pytest_configure(config):
    config.addinivalue_line("markers", "tvm_out_of_scope(reason): needs hardware "
                            "outside the measurement")


def pytest_generate_tests(metafunc):
    """``x = tvm.testing.parameter(1, 2)`` at module or class level parametrises ``x``."""
    from tvm.testing import _Parameter
    scopes = [vars(metafunc.module)]
    if metafunc.cls is not None:
        scopes.insert(0, {k: getattr(metafunc.cls, k) for k in dir(metafunc.cls)})
    for name in metafunc.fixturenames:
        for scope in scopes:
            p = scope.get(name)
            if isinstance(p, _Parameter):
                metafunc.parametrize(name, p.values, ids=p.ids)
                break


def pytest_runtest_setup(item):
    mark = item.get_closest_marker("tvm_out_of_scope")
    if mark is not None:
        pytest.skip(f"tvm_out_of_scope: {mark.args[0] if mark.args else ''}")


def _expects_error(item) -> bool:
    try:
        return "pytest.raises" in inspect.getsource(item.obj)
    except (OSError, TypeError):
        return False


def _reason(exc) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text.strip().splitlines()[0][:300] if text.strip() else type(exc).__name__


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" or (rep.when == "setup" and not rep.passed):
        _record(item, call, rep)


def _record(item, call, rep) -> None:
    file = os.path.basename(str(item.fspath))
    case = item.nodeid.split("::", 1)[-1]
    if rep.skipped:
        reason = str(rep.longrepr[-1]) if isinstance(rep.longrepr, tuple) else ""
        xfail = hasattr(rep, "wasxfail")
        bucket = "out_of_scope" if "tvm_out_of_scope" in reason else "tvm_skip"
        _write({"file": file, "case": case, "bucket": bucket,
                "reason": "xfail in TVM" if xfail else reason[:300]})
        return
    if rep.passed:
        bucket = "tvm_skip" if hasattr(rep, "wasxfail") else "passed"
        _write({"file": file, "case": case, "bucket": bucket, "reason": ""})
        return
    exc = call.excinfo.value if call.excinfo is not None else None
    if exc is None:
        _write({"file": file, "case": case, "bucket": "crash", "reason": "no exception"})
        return
    bases = tuple(c.__name__ for c in type(exc).__mro__[1:])
    files = [str(entry.path) for entry in call.excinfo.traceback]
    bucket = classify(type(exc).__name__, bases, str(exc), files, _expects_error(item),
                      getattr(exc, "verdict", None))
    detail = getattr(exc, "detail", "")
    _write({"file": file, "case": case, "bucket": bucket,
            "reason": (f"{detail} | " if detail else "") + _reason(exc)})


def pytest_collectreport(report):
    if report.failed and report.nodeid.endswith(".py"):
        _write({"file": os.path.basename(report.nodeid), "collect_error":
                str(report.longrepr).strip().splitlines()[-1][:300]})
