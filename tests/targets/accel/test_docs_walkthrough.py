"""``docs/accelerators.md`` walks a vendor from an empty file to a tuned GEMM: its two
files run here exactly as the page writes them (the device file imported from a
directory on ``sys.path``, the script executed there), and the page's CVL-E175 example
is what the build raises."""

import importlib
import pathlib
import re
import runpy
import sys

import pytest

import targets
from targets.accel import QueueDepthError

PAGE = pathlib.Path(__file__).resolve().parents[3] / "docs" / "accelerators.md"


def _files() -> dict:
    """``{file name: code}`` of the page's blocks marked ``<!-- file: name -->``."""
    text = PAGE.read_text()
    return dict(re.findall(r"<!-- file: (\S+) -->\n```python\n(.*?)```", text, re.S))


def test_the_walkthrough_runs_as_written(tmp_path, monkeypatch, capsys):
    files = _files()
    assert sorted(files) == ["my_npu.py", "run_my_npu.py"]
    for name, code in files.items():
        (tmp_path / name).write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    try:
        runpy.run_path(str(tmp_path / "run_my_npu.py"), run_name="__main__")
        out = capsys.readouterr().out
        assert "cycles;" in out and (tmp_path / "gemm256.json").exists()
        utilisation = float(out.strip().splitlines()[-1].split()[-1])
        assert utilisation > 0.9
    finally:
        sys.modules.pop("my_npu", None)
        targets.unregister_target("my-npu")


def test_the_pages_queue_error_is_the_one_raised(tmp_path, monkeypatch):
    text = PAGE.read_text()
    shown = re.search(r"```text\n(QueueDepthError: .*?)```", text, re.S).group(1)
    first = " ".join(shown.split())[:150]
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "my_npu.py").write_text(_files()["my_npu.py"].replace(
        'Queue("gemm", "load", depth=2)', 'Queue("gemm", "load", depth=1)'))
    sys.modules.pop("my_npu", None)
    mod = importlib.import_module("my_npu")
    try:
        from targets.toolkit.npu.gemm import gemm, schedule_gemm
        sch = schedule_gemm(gemm(256), tile=64, double=True, gemm="my.gemm_16x16x16",
                            zero=None, scopes=mod.SCOPES)
        with pytest.raises(QueueDepthError) as err:
            targets.build(sch, "my-npu", name="shallow")
        got = " ".join(f"QueueDepthError: {err.value}".split())
        assert got.startswith(first.split(" (...)")[0][:150]), (got, first)
    finally:
        sys.modules.pop("my_npu", None)
        targets.unregister_target("my-npu")
