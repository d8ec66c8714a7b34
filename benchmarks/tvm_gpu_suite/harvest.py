"""The functions of one TVM test file, as Cuvil parses them, collected by running it.

The file is imported with the shim first on ``sys.path`` (``import tvm`` is the shim of
:mod:`benchmarks.tvm_schedule_suite`), with ``T.prim_func`` recording every function it
parses by the line of its first decorator.  A definition inside a function runs when
that function runs: each test function is called with every combination of its
literal ``pytest.mark.parametrize`` values, and each other function holding a
definition (a factory such as ``gen_simple_compute(num_stages)``) with the literal
arguments of its calls in the file.  What such a call raises afterwards (TVM APIs the
shim lacks: meta_schedule, TVM's passes) does not matter: the definitions before it
have been recorded.

Example::

    >>> import ast
    >>> tree = ast.parse("def f(n, k=1):\\n    pass\\nf(1)\\nf(2, k=3)\\nf(x)\\n")
    >>> literal_calls(tree, "f")
    [((1,), {}), ((2,), {'k': 3})]
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import os
import signal
import sys

#: seconds one test function or factory may run while collecting
CALL_SECONDS = 60


def literal_calls(tree, name: str) -> list:
    """The distinct argument lists of the calls to ``name`` whose arguments are all
    literals."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == name:
            try:
                args = tuple(ast.literal_eval(a) for a in node.args)
                kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
            except (ValueError, TypeError, SyntaxError):
                continue
            if (args, kwargs) not in found:
                found.append((args, kwargs))
    return found


def _param_sets(fn) -> list:
    # the literal parametrize lists of a test function, combined
    axes = []
    for mark in getattr(fn, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names, values = mark.args[0], list(mark.args[1])
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else names
        if len(names) == 1:
            values = [(v,) for v in values]
        axes.append([dict(zip(names, v)) for v in values])
    sets = []
    for combo in itertools.product(*axes):
        merged = {}
        for part in combo:
            merged.update(part)
        sets.append(merged)
    return sets or [{}]


def _label(kwargs: dict, args: tuple = ()) -> str:
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return ",".join(parts)


class _Alarm(Exception):
    pass


def _call(fn, args, kwargs) -> None:
    def on_alarm(signum, frame):
        raise _Alarm(f"{fn.__name__} ran past {CALL_SECONDS} s")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(CALL_SECONDS)
    try:
        fn(*args, **kwargs)
    except BaseException as err:  # noqa: BLE001 - the TVM test may fail in any way
        if isinstance(err, KeyboardInterrupt):
            raise
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def collect(path: str, definitions: list) -> dict:
    """``{first decorator line: [(label, parsed function or Unparsed), ...]}`` for the
    test file at ``path`` (on disk: the parser reads each function's source)."""
    from tvm.script import tir as shim_tir

    records: dict = {}
    current = {"label": ""}
    parse_function = shim_tir.parse_function

    def recording(fn, caller):
        result = parse_function(fn, caller)
        line = fn.__code__.co_firstlineno if hasattr(fn, "__code__") else -1
        records.setdefault(line, []).append((current["label"], result))
        return result

    shim_tir.parse_function = recording
    try:
        name = "tvm_gpu_case_" + os.path.basename(path)[:-3]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException as err:  # noqa: BLE001 - recorded definitions still count
            if isinstance(err, KeyboardInterrupt):
                raise
        with open(path) as f:
            tree = ast.parse(f.read())
        holders = {d.scope[0] for d in definitions if d.scope}
        for holder in sorted(holders):
            fn = getattr(module, holder, None)
            if not callable(fn):
                continue
            if holder.startswith("test"):
                calls = [((), p) for p in _param_sets(fn)]
            else:
                calls = literal_calls(tree, holder)
            for args, kwargs in calls:
                current["label"] = _label(kwargs, args)
                _call(fn, args, kwargs)
    finally:
        shim_tir.parse_function = parse_function
    return records


__all__ = ["collect", "literal_calls", "CALL_SECONDS"]
