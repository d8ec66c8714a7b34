"""The TVM schedule-suite runner on a tiny TVM-style test file written here: one case
per bucket, read from a work tree and from a git tag."""

import os
import shutil
import subprocess
import textwrap

import pytest

from benchmarks.tvm_schedule_suite.__main__ import main
from benchmarks.tvm_schedule_suite.outcome import BUCKETS, classify
from benchmarks.tvm_schedule_suite.report import render
from benchmarks.tvm_schedule_suite.runner import percent, run, tally
from benchmarks.tvm_schedule_suite.source import SourceError, read_tests, static_cases

SYNTHETIC = textwrap.dedent('''
    import pytest
    import tvm
    import tvm.testing
    from tvm import tir
    from tvm.script import tir as T
    from tvm.tir.schedule.testing import verify_trace_roundtrip


    @T.prim_func
    def double(a: T.handle, b: T.handle) -> None:
        A = T.match_buffer(a, (16,))
        B = T.match_buffer(b, (16,))
        for i in range(16):
            with T.block("B"):
                vi = T.axis.S(16, i)
                B[vi] = A[vi] * 2.0


    @T.prim_func
    def double_split(a: T.handle, b: T.handle) -> None:
        A = T.match_buffer(a, (16,))
        B = T.match_buffer(b, (16,))
        for i0, i1 in T.grid(4, 4):
            with T.block("B"):
                vi = T.axis.S(16, i0 * 4 + i1)
                B[vi] = A[vi] * 2.0


    @T.prim_func
    def triple_split(a: T.handle, b: T.handle) -> None:
        A = T.match_buffer(a, (16,))
        B = T.match_buffer(b, (16,))
        for i0, i1 in T.grid(4, 4):
            with T.block("B"):
                vi = T.axis.S(16, i0 * 4 + i1)
                B[vi] = A[vi] * 3.0


    @T.prim_func
    def double_renamed(a: T.handle, b: T.handle) -> None:
        A = T.match_buffer(a, (16,))
        B = T.match_buffer(b, (16,))
        for i in range(16):
            with T.block("another_name"):
                vi = T.axis.S(16, i)
                B[vi] = A[vi] * 2.0


    @T.prim_func
    def unreadable(a: T.handle) -> None:
        A = T.match_buffer(a, (16,))
        T.no_such_builtin(A)


    flavour = tvm.testing.parameter("a", "b")


    def test_pass(flavour):
        sch = tir.Schedule(double)
        (i,) = sch.get_loops(sch.get_block("B"))
        sch.split(i, factors=[4, 4])
        tvm.ir.assert_structural_equal(sch.mod["main"], double_split)
        verify_trace_roundtrip(sch=sch, mod=double)


    def test_block_names_are_not_compared():
        # as in TVM, whose structural equality ignores a block's name
        tvm.ir.assert_structural_equal(double_renamed, tir.Schedule(double).mod["main"])


    def test_numerically_equal():
        sch = tir.Schedule(double)
        tvm.ir.assert_structural_equal(sch.mod["main"], double_split)


    def test_wrong():
        sch = tir.Schedule(double)
        (i,) = sch.get_loops(sch.get_block("B"))
        sch.split(i, factors=[4, 4])
        tvm.ir.assert_structural_equal(triple_split, sch.mod["main"])


    def test_refused():
        sch = tir.Schedule(double)
        (i,) = sch.get_loops(sch.get_block("B"))
        sch.split(i, factors=[3, 3])


    def test_error_mismatch():
        sch = tir.Schedule(double)
        (i,) = sch.get_loops(sch.get_block("B"))
        with pytest.raises(tvm.tir.ScheduleError):
            sch.split(i, factors=[2, 8])


    def test_parse():
        tir.Schedule(unreadable)


    def test_missing_primitive():
        # a method of TVM's Schedule that Cuvil has no primitive for (any other name is
        # an AttributeError, as on TVM's Schedule)
        sch = tir.Schedule(double)
        sch.unsafe_hide_buffer_access(sch.get_block("B"), "read", [0])


    def test_forwarded_primitive_with_an_unknown_option():
        # a Cuvil primitive the shim does not translate is forwarded; a keyword it
        # does not have is a gap of the shim, not a refusal
        sch = tir.Schedule(double)
        sch.tile(sch.get_loops(sch.get_block("B"))[0], no_such_option=1)


    @tvm.testing.requires_cuda
    def test_out_of_scope():
        pass
''')


def _checkout(tmp_path):
    suite = tmp_path / "tvm" / "tests" / "python" / "tir-schedule"
    suite.mkdir(parents=True)
    (suite / "test_synthetic.py").write_text(SYNTHETIC)
    (suite / "helper.py").write_text("# not a test file\n")
    return str(tmp_path / "tvm")


def test_runner_puts_each_case_in_its_bucket(tmp_path):
    files = read_tests(_checkout(tmp_path))
    assert list(files) == ["test_synthetic.py"]
    summary = run(files, jobs=1, timeout=120)
    got = {c["case"]: c["bucket"] for c in summary["cases"]}
    assert got == {"test_pass[a]": "passed", "test_pass[b]": "passed",
                   "test_block_names_are_not_compared": "passed",
                   "test_numerically_equal": "numeq", "test_wrong": "wrong",
                   "test_refused": "refused", "test_error_mismatch": "error_mismatch",
                   "test_parse": "unsupported_parse",
                   "test_missing_primitive": "missing_primitive",
                   "test_forwarded_primitive_with_an_unknown_option": "unsupported_shim",
                   "test_out_of_scope": "out_of_scope"}
    total = summary["total"]
    assert (total["cases"], total["in_scope"], total["passed"]) == (11, 10, 3)
    text = render(summary)
    assert "## WRONG cases (1)" in text and "test_synthetic.py::test_wrong" in text
    assert "elements differ" in text


def test_reads_a_git_tag_and_the_command_line(tmp_path, capsys):
    if shutil.which("git") is None:
        pytest.skip("needs the git command")
    repo = _checkout(tmp_path)

    def git(*args):
        subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True,
                       env=dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
                                GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t"))
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "tests")
    git("tag", "v0.0.1")
    (tmp_path / "tvm" / "tests" / "python" / "tir-schedule" / "test_synthetic.py").unlink()
    assert list(read_tests(repo, "v0.0.1")) == ["test_synthetic.py"]
    assert list(read_tests(os.path.join(repo, ".git"), "v0.0.1", ["synth"])) == \
        ["test_synthetic.py"]
    with pytest.raises(SourceError, match="not a commit, tag or branch"):
        read_tests(repo, "v9.9.9")
    out = tmp_path / "s.json"
    assert main(["--tvm", repo, "--ref", "v0.0.1", "--only", "synthetic", "--jobs", "1",
                 "--json", str(out), "--list", "wrong"]) == 0
    printed = capsys.readouterr().out
    assert "Passed 3 of 11 cases" in printed and "test_synthetic.py::test_wrong:" in printed
    assert "Passed or equivalent (passed + numerically equal, reported apart from the " \
           "pass rate): 4 of 10 in scope (40.0%)." in printed
    assert out.exists()


def test_source_errors(tmp_path):
    with pytest.raises(SourceError, match="is not a directory"):
        read_tests(str(tmp_path / "missing"))
    with pytest.raises(SourceError, match="is not a git directory"):
        read_tests(str(tmp_path))
    assert main(["--tvm", str(tmp_path / "missing")]) == 2


def test_classify_and_counts():
    assert classify("OutOfScope", ("ShimGap",), "", []) == "out_of_scope"
    assert classify("ParseFailure", (), "", []) == "unsupported_parse"
    assert classify("LoweringError", ("CuvilError",), "", [], expects_error=True) == \
        "error_mismatch"
    assert classify("LoweringError", ("CuvilError",), "", []) == "other_error"
    assert classify("TypeError", (), "", ["/x/test_a.py"]) == "unsupported_shim"
    assert classify("AssertionError", (), "", []) == "assertion"
    assert set(BUCKETS) >= {"passed", "wrong", "numeq", "refused", "out_of_scope"}
    src = ("import pytest\n@pytest.mark.parametrize('x', [1, 2, 3])\ndef test_a(x): pass\n"
           "class TestB:\n    def test_c(self): pass\n")
    assert static_cases(src) == 4 and static_cases("def (") == 0
    # a file that did not import counts its cases from the source, as shim gaps
    s = tally([{"file": "t.py", "collect_error": "boom"}], {"t.py": 4})
    assert s["files"]["t.py"]["unsupported_shim"] == 4 and s["notes"]["t.py"] == "boom"
    assert percent(s["total"]) == 0.0
