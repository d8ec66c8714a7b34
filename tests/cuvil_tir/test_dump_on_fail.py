"""When lowering or code generation fails, the IR it was given is written out and the
error names the file (CUVIL_DUMP_ON_FAIL=dir, or a DumpOnFail instrument)."""

import os

import pytest

import cuvil_tir as T
import targets
from cuvil_tir.transform import DumpOnFail, PassContext, PassManager


def _func():
    A = T.placeholder((4,), name="A")
    return T.create_prim_func([A, T.compute((4,), lambda i: A[i] + 1.0, name="B")])


def _broken_pass(func):
    raise T.LoweringError("broken_pass: cannot lower this loop")


def test_failing_pass_writes_the_ir_it_was_given(tmp_path):
    with PassContext(instruments=[DumpOnFail(tmp_path)]):
        with pytest.raises(T.LoweringError, match=r"cannot lower this loop\n\(the IR before "
                                                   r"'_broken_pass' was written to .*main_"
                                                   r"before__broken_pass.tir\)"):
            PassManager([T.transform.lower_blocks, _broken_pass]).run(_func())
    (path,) = [os.path.join(tmp_path, n) for n in os.listdir(tmp_path)]
    text = open(path).read()
    assert "def main(" in text and "T.block" not in text     # after lower_blocks
    assert T.structural_equal(T.parse(text), T.transform.lower_blocks(_func()))


def test_environment_variable_covers_code_generation(tmp_path, monkeypatch):
    class Failing(targets.TargetKind):
        name = "failing-codegen"

        def codegen(self, module, target):
            raise targets.CodegenError("failing-codegen: no spelling for this loop")

        def load(self, program, target):
            raise AssertionError("not reached")

    targets.register_target(Failing())
    try:
        monkeypatch.setenv("CUVIL_DUMP_ON_FAIL", str(tmp_path / "dumps"))
        with pytest.raises(targets.CodegenError,
                           match=r"no spelling for this loop\n\(the IR before 'codegen for "
                                 r"failing-codegen' was written to"):
            targets.build(_func(), "failing-codegen")
        (name,) = os.listdir(tmp_path / "dumps")
        assert name.startswith("main_before_codegen")
    finally:
        targets.unregister_target("failing-codegen")


def test_no_dump_without_asking(tmp_path, monkeypatch):
    monkeypatch.delenv("CUVIL_DUMP_ON_FAIL", raising=False)
    with pytest.raises(T.LoweringError) as info:
        PassManager([_broken_pass]).run(_func())
    assert "written to" not in str(info.value)


def test_a_non_cuvil_failure_gets_a_note(tmp_path):
    def buggy(func):
        raise KeyError("oops")
    with PassContext(instruments=[DumpOnFail(tmp_path)]):
        with pytest.raises(KeyError) as info:
            PassManager([buggy]).run(_func())
    assert any("the IR before 'buggy' was written to" in n
               for n in getattr(info.value, "__notes__", []))
