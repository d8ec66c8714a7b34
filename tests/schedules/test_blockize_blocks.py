"""blockize of a list of blocks: one outer block around sibling nests; numerics, trace,
refusals."""

import numpy as np

import cuvil_tir as T
import schedules as S
from cuvil_tir.analysis import tree
from schedules.errors import LoopNestError, ScheduleArgumentError
from tests.schedules.testing import (assert_refused, run, run_llvm, verify_text_roundtrip,
                                     verify_trace_roundtrip)

TWO_NESTS = '''
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for m in T.serial(2):
        for i, j in T.grid(3, 1):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2)
        for i, j in T.grid(8, 4):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj + 4] = A[vi, vj + 4] * T.float32(3)
'''


def block(sch, name):
    return tree.get(sch.func, tree.find_block(sch.func, name)).block


def expected(a):
    b = np.zeros_like(a)
    b[:3, :1] = a[:3, :1] * 2
    b[:, 4:] = a[:, 4:] * 3
    return b


def test_blocks_of_one_loop_body_get_one_outer_block():
    f = T.parse(TWO_NESTS)
    sch = S.Schedule(f)
    outer = sch.blockize(["B", "C"])
    assert outer == S.BlockRV("outer_B_C_")
    blk = block(sch, "outer_B_C_")
    assert [(iv.var.name, int(iv.dom.extent)) for iv in blk.iter_vars] == [("vi_o", 1),
                                                                            ("vj_o", 1)]
    assert [str(r) for r in blk.reads] == ["A[0:8, 0:8]"]
    assert [str(w) for w in blk.writes] == ["B[0:8, 0:8]"]
    assert sch.get_child_blocks(outer) == [S.BlockRV("B"), S.BlockRV("C")]
    assert [iv.var.name for iv in block(sch, "B").iter_vars] == ["vi_i", "vj_i"]
    a = np.random.default_rng(0).random((8, 8), dtype="float32")
    out = run(sch, [a, np.zeros((8, 8), "float32")])[1]
    np.testing.assert_allclose(out, expected(a), rtol=1e-6)
    np.testing.assert_allclose(run_llvm(sch, [a, np.zeros((8, 8), "float32")])[1], out)
    verify_trace_roundtrip(sch, f)
    verify_text_roundtrip(sch.func)
    assert "b0 = sch.blockize(['B', 'C'])" in sch.trace.as_python()


def test_unit_iterators_dropped_without_preserve_unit_iters():
    f = T.parse(TWO_NESTS)
    sch = S.Schedule(f)
    sch.blockize(["B", "C"], preserve_unit_iters=False)
    assert [iv.var.name for iv in block(sch, "B").iter_vars] == ["vi_i"]
    assert "B[vi_i, 0] = A[vi_i, 0]" in str(sch.func)
    a = np.random.default_rng(1).random((8, 8), dtype="float32")
    np.testing.assert_allclose(run(sch, [a, np.zeros((8, 8), "float32")])[1], expected(a),
                               rtol=1e-6)
    verify_trace_roundtrip(sch, f)


def test_refusals():
    f = T.parse(TWO_NESTS)
    sch = S.Schedule(f)
    assert_refused(sch, lambda: sch.blockize(["B"]), r"block 'B' uses loop i outside the "
                   "blocks' common loop", LoopNestError)
    assert_refused(sch, lambda: sch.blockize(["B", "B"]), "a block is given twice",
                   LoopNestError)
    assert_refused(sch, lambda: sch.blockize([]), "argument 1, 'loop' to blockize: "
                   "expected a loop handle .* or a list of block handles or names, found "
                   r"\[\] \(list\): an empty list", ScheduleArgumentError)
    A = T.placeholder((4,), name="A")
    B = T.compute((4,), lambda i: A[i] * 2.0, name="B")
    C = T.compute((4,), lambda i: A[i] + 1.0, name="C")
    D = T.compute((4,), lambda i: A[i] - 1.0, name="D")
    sch = S.Schedule(T.create_prim_func([A, B, C, D]))
    assert_refused(sch, lambda: sch.blockize(["B", "D"]), r"holds \[\['B'\], \['C'\], "
                   r"\['D'\]\]: blockize of blocks \['B', 'D'\] needs it to hold exactly",
                   LoopNestError)
    k = T.reduce_axis((0, 4), name="k")
    S_ = T.compute((1,), lambda i: T.sum(A[k], axis=k), name="S")
    sch = S.Schedule(T.create_prim_func([A, B, S_]))
    assert_refused(sch, lambda: sch.blockize(["B", "S"]), "block 'S' has an init",
                   LoopNestError)
