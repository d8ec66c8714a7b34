"""targets.build_key: fingerprint + resolved target + tool versions, stable across processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import cuvil_tir as T
import targets
from cuvil_tir.target import keys
from targets.llvm.engine import host_cpu, resolve_cpu
from tests import workloads as W


def _func():
    return W.matmul(8, 8, 8).func


def test_same_inputs_same_key_renaming_included():
    f = _func()
    assert targets.build_key(f, "llvm -mcpu=haswell") == targets.build_key(
        T.parse(str(f)), targets.Target("llvm", mcpu="haswell"))
    lowered = T.lower(f, "llvm")
    assert targets.build_key(lowered, "llvm") == targets.build_key(T.parse(str(lowered)),
                                                                   "llvm")


@pytest.mark.parametrize("other", ["llvm -mcpu=skylake-avx512", "llvm -mcpu=haswell -mattr=-fma",
                                   "llvm -mcpu=haswell -opt-level=2",
                                   "llvm -mcpu=haswell -fast-math=false"])
def test_any_target_difference_changes_it(other):
    f = _func()
    assert targets.build_key(f, "llvm -mcpu=haswell") != targets.build_key(f, other)


def test_ir_difference_changes_it():
    assert targets.build_key(_func(), "llvm") != targets.build_key(W.matmul(8, 8, 4).func,
                                                                   "llvm")


def test_native_resolves_to_the_host_cpu():
    cpu, feats = resolve_cpu(targets.Target("llvm"))
    d = targets.describe_target("llvm")
    assert (d["kind"], d["cpu"], d["features"]) == ("llvm", host_cpu(), feats)
    assert "mcpu" not in d and "mattr" not in d
    # the native target and the host spelled out explicitly build the same code
    assert targets.build_key(_func(), "llvm") == targets.build_key(
        _func(), targets.Target("llvm", mcpu=cpu, mattr=feats))


def test_tool_versions_enter_the_key(monkeypatch):
    f = _func()
    before = targets.build_key(f, "llvm")
    versions = keys.tool_versions("llvm")
    assert versions["cuvil"] == T.__version__ and versions["llvm"].count(".") == 2
    monkeypatch.setattr(keys, "tool_versions", lambda target: {**versions, "cuvil": "99.0"})
    assert targets.build_key(f, "llvm") != before


class _Plain(targets.TargetKind):
    name = "key-plain"
    options = {"level": 1}

    def codegen(self, module, target):
        raise AssertionError("not built")

    def load(self, program, target):
        raise AssertionError("not built")


def test_a_kind_without_describe_uses_its_options():
    targets.register_target(_Plain(), replace=True)
    try:
        assert targets.describe_target("key-plain") == {"kind": "key-plain",
                                                        "options": {"level": 1}}
        f = _func()
        assert targets.build_key(f, "key-plain") != targets.build_key(f, "key-plain -level=2")
    finally:
        targets.unregister_target("key-plain")


def test_a_describe_with_odd_values_is_a_target_error():
    class Odd(_Plain):
        name = "key-odd"

        def describe(self, target):
            return {"cpu": object()}

    targets.register_target(Odd(), replace=True)
    try:
        with pytest.raises(targets.TargetError, match="description of target 'key-odd' is "
                                                      "not JSON-serialisable"):
            targets.build_key(_func(), "key-odd")
    finally:
        targets.unregister_target("key-odd")


_CHILD = """
import json
import targets
from tests import workloads as W
print(json.dumps([targets.build_key(W.matmul(8, 8, 8).func, t)
                  for t in ("llvm", "llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512")]))
"""


def test_identical_in_another_process():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONHASHSEED="777")
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                         env=env, cwd=root, timeout=120)
    assert res.returncode == 0, res.stderr
    f = _func()
    assert json.loads(res.stdout) == [targets.build_key(f, t) for t in
                                      ("llvm", "llvm -mcpu=haswell",
                                       "llvm -mcpu=skylake-avx512")]
