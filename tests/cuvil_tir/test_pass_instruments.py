"""PassManager, PassContext and the instruments (timing, IR dumps, verification, env)."""

from __future__ import annotations

import os
import re

import pytest

import cuvil_tir as T
from cuvil_tir.transform import (DumpIR, PassContext, PassInstrument, PassManager,
                                 PassTiming, VerifyEach, lower_blocks)
from cuvil_tir.transform.pass_manager import env_instruments
from tests import workloads as W

PIPELINE = ["lower_blocks", "flatten_buffers", "simplify", "verify"]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv("CUVIL_PASS_TIMING", raising=False)
    monkeypatch.delenv("CUVIL_DUMP_IR", raising=False)


def func():
    return W.elementwise_chain(8).func


def test_pass_timing_counts_and_table():
    timing = PassTiming()
    with PassContext(instruments=[timing]):
        T.lower(func())
        T.lower(func())
    assert list(timing.stats) == PIPELINE
    assert all(timing.calls(p) == 2 for p in PIPELINE)
    assert timing.total_ms() == pytest.approx(sum(timing.total_ms(p) for p in PIPELINE))
    lines = timing.table().splitlines()
    assert re.match(r"pass\s+calls\s+total ms\s+share$", lines[0])
    assert [ln.split()[0] for ln in lines[1:]] == PIPELINE + ["total"]
    assert [int(ln.split()[1]) for ln in lines[1:]] == [2, 2, 2, 2, 8]
    assert lines[-1].endswith("100.0%")
    assert str(timing) == timing.table()
    shares = [float(ln.split()[3].rstrip("%")) for ln in lines[1:-1]]
    assert sum(shares) == pytest.approx(100.0, abs=0.5)


def test_dump_ir_writes_numbered_files(tmp_path):
    d = tmp_path / "dump"
    f = func()
    with PassContext(instruments=[DumpIR(d)]):
        out = T.lower(f)
    names = sorted(os.listdir(d))
    want = []
    for n, p in enumerate(PIPELINE):
        want += [f"{2 * n:03d}_before_{p}.tir", f"{2 * n + 1:03d}_after_{p}.tir"]
    assert names == want
    # lowering runs on the module of the function
    assert (d / "000_before_lower_blocks.tir").read_text() == str(T.IRModule.from_func(f)) + "\n"
    assert (d / "007_after_verify.tir").read_text() == str(out) + "\n"
    # the text after a pass is the text before the next
    assert (d / "001_after_lower_blocks.tir").read_text() == \
        (d / "002_before_flatten_buffers.tir").read_text()


def test_verify_each_names_the_bad_pass():
    def drop_allocs(f):
        """An ill-formed result: removes the Allocate but keeps its uses."""
        return f.with_body(f.body.body)

    drop_allocs.pass_name = "drop_allocs"
    with pytest.raises(T.LoweringError, match=r"after pass 'drop_allocs': buffer 'E' is "
                       "used but not defined"):
        with PassContext(instruments=[VerifyEach()]):
            PassManager([lower_blocks, drop_allocs])(func())
    # without the instrument the bad IR goes through
    assert PassManager([lower_blocks, drop_allocs])(func()) is not None


def test_pass_names_and_manager_instruments():
    seen = []

    class Record(PassInstrument):
        def enter_pass_ctx(self): seen.append("enter")
        def exit_pass_ctx(self): seen.append("exit")
        def run_before_pass(self, f, name): seen.append("before " + name)
        def run_after_pass(self, f, name): seen.append("after " + name)

    def plain(f):
        return f

    def named(f):
        return f
    named.pass_name = "custom-name"

    PassManager([plain, named], instruments=[Record()])(func())
    assert seen == ["enter", "before plain", "after plain", "before custom-name",
                    "after custom-name", "exit"]
    with pytest.raises(T.LoweringError, match="expected passes PrimFunc -> PrimFunc"):
        PassManager([3])
    with pytest.raises(T.LoweringError, match="expected a PrimFunc or an IRModule, found str"):
        PassManager([plain])("not a func")


def test_pass_context_options_and_nesting():
    assert not PassContext.active()
    with PassContext(opt_level=1, config={"x": 2}) as outer:
        assert PassContext.current() is outer
        with PassContext(opt_level=2) as inner:
            assert PassContext.current() is inner and inner.opt_level == 2
        assert PassContext.current().config == {"x": 2}
    assert PassContext.current().opt_level == 3
    assert T.transform.PassContext is PassContext


def test_env_pass_timing_prints_after_each_lowering(monkeypatch, capsys):
    monkeypatch.setenv("CUVIL_PASS_TIMING", "1")
    T.lower(func())
    err = capsys.readouterr().err
    assert "pass timing for 'main':" in err
    assert [ln.split()[0] for ln in err.splitlines()[2:]] == PIPELINE + ["total"]
    with PassContext():
        T.lower(func())
        T.lower(func())
    err = capsys.readouterr().err
    assert err.count("pass timing for 'main':") == 2
    # each table covers one lowering
    assert err.splitlines()[2].split()[1] == "1"


def test_env_dump_ir(monkeypatch, tmp_path):
    monkeypatch.setenv("CUVIL_DUMP_IR", str(tmp_path / "ir"))
    T.lower(func())
    assert len(os.listdir(tmp_path / "ir")) == 8
    assert sorted(os.listdir(tmp_path / "ir"))[0] == "000_before_lower_blocks.tir"


def test_env_read_only_at_top_level(monkeypatch, capsys, tmp_path):
    with PassContext():
        # set after the top-level context was entered: not seen by passes
        monkeypatch.setenv("CUVIL_PASS_TIMING", "1")
        monkeypatch.setenv("CUVIL_DUMP_IR", str(tmp_path / "late"))
        with PassContext():
            T.lower(func())
    assert capsys.readouterr().err == ""
    assert not (tmp_path / "late").exists()
    assert env_instruments({"CUVIL_PASS_TIMING": "0"}) == []
    assert [type(i).__name__ for i in env_instruments({"CUVIL_DUMP_IR": "d"})] == ["DumpIR"]
