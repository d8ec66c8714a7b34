"""rfactor refuses the blocks TensorIR refuses, each with a coded error naming why."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from schedules.errors import LoopNestError, ReductionLoopError, StagePipelineError
from schedules.primitives.reduction import NotReductionError
from tests.schedules.testing import assert_refused, run, verify_trace_roundtrip

HEAD = '''@T.prim_func
def main(A: T.Buffer((4, 8), "float32"), B: T.Buffer(SHAPE, "float32")):
'''


def _func(body: str, shape: str = "(4,)"):
    return T.parse(HEAD.replace("SHAPE", shape) + body)


NOT_QUASI_AFFINE = '''    for i in T.serial(4):
        for k in T.serial(3):
            with T.block("B"):
                v_i = T.axis.spatial(4, i)
                v_k = T.axis.reduce(8, k * k // 2)
                T.reads(A[v_i, v_k])
                T.writes(B[v_i])
                with T.init():
                    B[v_i] = T.float32(0)
                B[v_i] = B[v_i] + A[v_i, v_k]
'''

NOT_DOMINANT = '''    for i in T.serial(4):
        for k in T.serial(8):
            with T.block("B"):
                v_i, v_k = T.axis.remap("SR", [i, k])
                T.reads(A[v_i, v_k], B[v_i, v_k])
                T.writes(B[v_i, v_k])
                with T.init():
                    B[v_i, v_k] = T.float32(0)
                B[v_i, v_k] = B[v_i, v_k] + A[v_i, v_k]
'''

PARALLEL_REDUCTION = '''    for i in T.serial(4):
        for k in T.parallel(8):
            with T.block("B"):
                v_i, v_k = T.axis.remap("SR", [i, k])
                T.reads(A[v_i, v_k])
                T.writes(B[v_i])
                with T.init():
                    B[v_i] = T.float32(0)
                B[v_i] = B[v_i] + A[v_i, v_k]
'''

INIT_ELSEWHERE = '''    for i in T.serial(3):
        for k in T.serial(8):
            with T.block("B"):
                v_i, v_k = T.axis.remap("SR", [i, k])
                T.reads(A[v_i, v_k])
                T.writes(B[v_i:v_i + 2])
                with T.init():
                    B[v_i + 1] = T.float32(0)
                B[v_i] = B[v_i] + A[v_i, v_k]
'''

MIXED_LOOP = '''    for io in T.serial(2):
        for f in T.serial(8):
            for ki in T.serial(2):
                with T.block("B"):
                    v_i = T.axis.spatial(4, io * 2 + f // 4)
                    v_k = T.axis.reduce(8, f % 4 * 2 + ki)
                    T.reads(A[v_i, v_k])
                    T.writes(B[v_i])
                    with T.init():
                        B[v_i] = T.float32(0)
                    B[v_i] = B[v_i] + A[v_i, v_k]
'''


@pytest.mark.parametrize("body, shape, loop, match, cls", [
    (NOT_QUASI_AFFINE, "(4,)", 1, r"rfactor: block 'B' binds the reduction variable v_k "
     r"to k \* k // 2, which is not quasi-affine", NotReductionError),
    (NOT_DOMINANT, "(4, 8)", 1, r"rfactor: block 'B' writes B\[v_i, v_k\], indexed by "
     r"the reduction variable v_k: .* \(not dominant\)", NotReductionError),
    (PARALLEL_REDUCTION, "(4,)", 1, r"rfactor: block 'B' has the reduction loop k "
     r"marked 'parallel': rfactor needs the reduction loops serial", ReductionLoopError),
    (INIT_ELSEWHERE, "(4,)", 1, r"rfactor: block 'B' initialises B\[v_i \+ 1\] but "
     r"updates B\[v_i\]: the init and the update must store at the same indices",
     NotReductionError),
    (MIXED_LOOP, "(4,)", 2, r"rfactor: block 'B' has the loop f driving both a spatial "
     r"and a reduction iter var", LoopNestError),
])
def test_rfactor_refusals(body, shape, loop, match, cls):
    f = _func(body, shape)
    sch = S.Schedule(f)
    loops = sch.get_loops("B")
    err = assert_refused(sch, lambda: sch.rfactor(loops[loop], 0), match, cls)
    assert err.code == "CVL-E103"
    verify_trace_roundtrip(sch, f)


def test_rfactor_of_a_quasi_affine_split_reduction_is_still_exact():
    # the legal neighbour of the refused cases: k split (quasi-affine), serial loops
    A = T.placeholder((4, 8), name="A")
    k = T.reduce_axis((0, 8), name="k")
    f = T.create_prim_func([A, T.compute((4,), lambda i: T.sum(A[i, k], axis=k),
                                         name="B")])
    sch = S.Schedule(f)
    _, kk = sch.get_loops("B")
    ko, ki = sch.split(kk, [None, 2])
    sch.rfactor(ko, 0)
    a = np.random.default_rng(0).standard_normal((4, 8)).astype("float32")
    out = run(sch, [a, np.zeros(4, "float32")])
    np.testing.assert_allclose(out[1], a.sum(axis=1), rtol=1e-5)
    verify_trace_roundtrip(sch, f)


def test_decompose_reduction_keeps_the_blocks_annotations_on_both_blocks():
    A = T.placeholder((4, 8), name="A")
    k = T.reduce_axis((0, 8), name="k")
    f = T.create_prim_func([A, T.compute((4,), lambda i: T.sum(A[i, k], axis=k),
                                         name="B")])
    sch = S.Schedule(f)
    sch.annotate("B", "pragma_unroll", 4)
    i, _ = sch.get_loops("B")
    init = sch.decompose_reduction("B", i)
    from cuvil_tir.analysis import tree
    for name in (init.name, "B_update"):
        blk = tree.get(sch.func, tree.find_block(sch.func, name)).block
        assert blk.annotations == (("pragma_unroll", 4),)
    a = np.random.default_rng(1).standard_normal((4, 8)).astype("float32")
    np.testing.assert_allclose(run(sch, [a, np.zeros(4, "float32")])[1], a.sum(axis=1),
                               rtol=1e-5)
    verify_trace_roundtrip(sch, f)


NOT_STAGE_PIPELINE = '''@T.prim_func
def main(A: T.Buffer((4, 8), "float32"), D: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,))
    for i in T.serial(4):
        for k in T.serial(8):
            with T.block("B"):
                v_i, v_k = T.axis.remap("SR", [i, k])
                T.reads(A[v_i, v_k])
                T.writes(B[v_i])
                with T.init():
                    B[v_i] = T.float32(0)
                B[v_i] = B[v_i] + A[v_i, v_k]
    for i in T.serial(8):
        with T.block("D"):
            v_i = T.axis.spatial(8, i)
            T.reads(B[v_i])
            T.writes(D[v_i])
            D[v_i] = B[v_i]
'''


def test_rfactor_in_a_scope_that_is_not_a_stage_pipeline_is_refused():
    # D reads B[0:8], B writes only B[0:4]: TensorIR's rfactor needs a stage pipeline
    f = T.parse(NOT_STAGE_PIPELINE)
    sch = S.Schedule(f)
    loops = sch.get_loops("B")
    assert_refused(sch, lambda: sch.rfactor(loops[1], 0),
                   r"rfactor: the scope 'root' of block 'B' is not a stage pipeline: "
                   r"block 'D' reads elements that its producers in the scope do not "
                   r"write", StagePipelineError)
    verify_trace_roundtrip(sch, f)
