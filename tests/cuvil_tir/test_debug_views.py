"""T.graph, T.diff and mod.profile: the debugging views."""

import os
import stat

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir.debug.graph import render
from cuvil_tir.visitor import Mutator
from tests.workloads import softmax


def _three_stage(n=16):
    A = T.placeholder((n,), name="A")
    B = T.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = T.compute((n,), lambda i: B[i] + 1.0, name="C")
    D = T.compute((n,), lambda i: C[i] * C[i], name="D")
    return T.create_prim_func([A, D])


def test_graph_of_softmax_shows_four_blocks_with_their_times():
    w = softmax(8, 64)
    mod = targets.build(w.func)
    arrays = w.make_inputs(np.random.default_rng(0))
    prof = mod.profile(*arrays, repeat=3)
    assert list(prof.blocks) == ["row_max", "exp", "row_sum", "softmax"]
    assert all(t > 0 for t in prof.blocks.values())
    w.check(arrays)                     # profiling leaves the real results behind
    dot = T.graph(w.func, profile=prof)
    for name in ("row_max", "exp", "row_sum", "softmax"):
        assert f'"blk:{name}" [shape=box, label="{name}\\n' in dot
    assert dot.count("ms (") == 4 and dot.count("fillcolor=\"#ff") == 4
    hot = max(prof.blocks, key=prof.blocks.get)
    assert f'"blk:{hot}"' in dot
    assert '"buf:A" -> "blk:row_max"' in dot and '"blk:softmax" -> "buf:softmax"' in dot
    assert "float32(8, 64)" in dot and "param" in dot and "global" in dot
    assert "row_max" in str(prof) and "share" in str(prof)


def test_graph_accepts_a_schedule_and_shows_cache_scopes():
    sch = S.Schedule(_three_stage())
    sch.cache_read(sch.get_block("C"), 0, "local")
    dot = T.graph(sch)
    assert '"buf:B_local" [shape=ellipse, label="B_local\\nfloat32(16,)\\nlocal"]' in dot
    assert '"buf:B" -> "blk:B_local"' in dot and '"buf:B_local" -> "blk:C"' in dot


def test_graph_rejects_other_objects():
    with pytest.raises(T.CuvilError, match="expected a PrimFunc or a Schedule"):
        T.graph(42)


def test_render_needs_graphviz_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))           # no 'dot' on the PATH
    with pytest.raises(T.CuvilError, match="needs Graphviz's 'dot' program"):
        render("digraph g {}\n", str(tmp_path / "g.svg"))
    with pytest.raises(T.CuvilError, match="expected a .dot, .svg, .png or .pdf"):
        render("digraph g {}\n", str(tmp_path / "g.txt"))
    render("digraph g {}\n", str(tmp_path / "g.dot"))
    assert (tmp_path / "g.dot").read_text() == "digraph g {}\n"


def test_render_runs_dot_when_installed(tmp_path, monkeypatch):
    fake = tmp_path / "dot"            # a stand-in 'dot' that records its input
    fake.write_text("#!/bin/sh\nout=\"$3\"\ncat > \"$out\"\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    T.graph(_three_stage(), path=str(tmp_path / "g.svg"))
    assert (tmp_path / "g.svg").read_text().startswith("digraph main {")


def test_diff_agrees_on_a_correct_schedule():
    f = _three_stage()
    sch = S.Schedule(f)
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0])
    a = np.random.default_rng(1).standard_normal(16).astype("float32")
    report = T.diff(sch, a, np.zeros(16, "float32"), reference=f)
    assert report.first_divergent is None
    assert [r.buffer for r in report.rows] == ["B", "C", "D"]
    assert "every buffer agrees" in str(report)


class _BreakBlock(Mutator):
    """Stands for a wrong primitive: block B computes A * 3 instead of A * 2."""

    def visit_FloatImm(self, e):
        return T.const(3.0, e.dtype) if e.value == 2.0 else e


def test_diff_names_the_block_a_broken_schedule_got_wrong():
    f = _three_stage()
    sch = S.Schedule(f)
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0])
    broken = sch.func.with_body(_BreakBlock().visit(sch.func.body))
    a = np.random.default_rng(2).standard_normal(16).astype("float32")
    out = np.zeros(16, "float32")
    report = T.diff(broken, a, out, reference=f)
    assert report.first_divergent == "B"
    assert [r.ok for r in report.rows] == [False, False, False]
    assert "first block that diverges: B" in str(report)
    assert not out.any()                 # the caller's arrays are left alone


def test_diff_checks_the_code_generator_against_the_interpreter_by_default():
    w = softmax(4, 8)
    arrays = w.make_inputs(np.random.default_rng(3))
    report = T.diff(w.func, *arrays, target="llvm")
    assert report.first_divergent is None
    assert [r.block for r in report.rows] == ["row_max", "exp", "row_sum", "softmax"]


def test_diff_argument_errors():
    f = _three_stage()
    with pytest.raises(T.ShapeError, match="takes 2 argument"):
        T.diff(f, np.zeros(16, "float32"))
    with pytest.raises(T.CuvilError, match="expected a PrimFunc or a Schedule"):
        T.diff("f")


def test_profile_of_a_symbolic_function_sizes_its_intermediates():
    n = T.size_var("n")
    A = T.placeholder((n,), name="A")
    B = T.compute((n,), lambda i: A[i] + 1.0, name="B")
    C = T.compute((n,), lambda i: B[i] * 2.0, name="C")
    mod = targets.build(T.create_prim_func([A, C]))
    a, c = np.arange(5, dtype="float32"), np.zeros(5, "float32")
    prof = mod.profile(a, c, repeat=1)
    assert list(prof.blocks) == ["B", "C"]
    np.testing.assert_allclose(c, (a + 1) * 2)
    with pytest.raises(targets.ArgumentError):
        mod.profile(a, np.zeros(4, "float32"))
