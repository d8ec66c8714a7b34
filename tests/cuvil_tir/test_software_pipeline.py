"""N-stage software pipelines (TVM's software_pipeline_stage / software_pipeline_order):
exact IR, results through the interpreter and every backend (llvm, c, cuda with race
checks, the toy NPU bit-exact), and the refusals."""

import json

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir.transform import PassContext, lower_blocks, plan_buffer_allocation, simplify
from cuvil_tir.transform.gpu_sync import is_barrier
from cuvil_tir.transform.software_pipeline import inject_software_pipeline
from cuvil_tir.visitor import Mutator
from targets.toolkit.npu.gemm import gemm, schedule_gemm
from targets.accel.examples.toy_npu import toy_npu
from tests.cuvil_tir.test_memory_planner import _gemm_cuda
from tests.cuvil_tir.test_plan_allocation import ROW_TILE

targets.register_target(toy_npu, replace=True)

def rows(ann, n=None):
    """ROW_TILE's loop annotated ``ann`` over ``n`` rows (a symbolic count when None)."""
    if n is not None:
        return T.parse(ROW_TILE.replace("(8, 4)", f"({n}, 4)").replace(
            "for i in T.serial(8):", f"for i in T.serial({n}, annotations={ann}):"))
    size = T.size_var("n")
    A = T.placeholder((size, 4), name="A")
    B = T.compute((size, 4), lambda i, j: A[i, j] * 2.0, name="B")
    C = T.compute((size, 4), lambda i, j: B[i, j] + 1.0, name="C")
    sch = S.Schedule(T.create_prim_func([A, C]))
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0])
    for key, value in json.loads(ann).items():
        sch.annotate(sch.get_loops(sch.get_block("C"))[0], key, value)
    return sch.func


def pipelined(func, target="llvm"):
    with PassContext(target=targets.Target(target)):
        return inject_software_pipeline(lower_blocks(plan_buffer_allocation(func)))


def test_three_versions_for_a_two_step_lead_exact_ir():
    g = pipelined(rows('{"software_pipeline_stage": [0, 2]}', n=8))
    assert g.attr("buffer_versions") == (("B", 3),)
    # a prologue of two steps, then the row 2 ahead is computed beside the one used
    assert T.to_text(simplify(g).body) == '''with T.allocate((3, 1, 4), "float32") as B:
    for j in T.serial(4):
        B[0, 0, j] = A[0, j] * T.float32(2)
    for j in T.serial(4):
        B[1, 0, j] = A[1, j] * T.float32(2)
    for i in T.serial(8):
        if i < 6:
            for j in T.serial(4):
                B[(i + 2) % 3, 0, j] = A[i + 2, j] * T.float32(2)
        for j_1 in T.serial(4):
            C[i, j_1] = B[i % 3, 0, j_1] + T.float32(1)'''


def test_engines_that_run_ahead_get_the_versions_in_program_order():
    # an accelerator's queues overlap the stages themselves: no statement moves
    f = rows('{"software_pipeline_stage": [0, 2]}', n=8)
    with PassContext(target=targets.Target("llvm")):
        g = inject_software_pipeline(lower_blocks(plan_buffer_allocation(f)), reorder=False)
    assert g.attr("buffer_versions") == (("B", 3),)
    assert T.to_text(simplify(g).body) == '''with T.allocate((3, 1, 4), "float32") as B:
    for i in T.serial(8):
        for j in T.serial(4):
            B[i % 3, 0, j] = A[i, j] * T.float32(2)
        for j_1 in T.serial(4):
            C[i, j_1] = B[i % 3, 0, j_1] + T.float32(1)'''


@pytest.mark.parametrize("ann", [
    '{"software_pipeline_stage": [0, 1]}',
    '{"software_pipeline_stage": [0, 2]}',
    '{"software_pipeline_stage": [1, 4]}',
    '{"software_pipeline_stage": [0, 1], "software_pipeline_order": [1, 0]}',
])
@pytest.mark.parametrize("n", [1, 2, 7])
def test_pipelines_compute_what_the_loop_did_on_llvm_c_and_the_interpreter(ann, n):
    f = rows(ann)                               # n rows at run time: guarded prologue
    rng = np.random.default_rng(n)
    a = rng.random((n, 4), dtype="float32")
    want = a * 2 + 1
    for target in ("llvm", "c"):
        c = np.zeros((n, 4), "float32")
        targets.build(f, target, name="rows")(a, c)
        np.testing.assert_allclose(c, want, rtol=1e-6)
    c = np.zeros((n, 4), "float32")
    T.interpret(T.lower(f, "llvm"), a, c)
    np.testing.assert_allclose(c, want, rtol=1e-6)


class _DropBarriers(Mutator):
    def visit_Evaluate(self, s):
        return T.Evaluate(T.const(0)) if is_barrier(s) else s


@pytest.mark.parametrize("stages,shared", [(2, 256), (3, 384)])
def test_cuda_multi_buffered_shared_tiles_are_race_free_and_exact(stages, shared):
    sch = _gemm_cuda(stages=stages)
    mod = targets.build(sch, "cuda", name=f"gemm{stages}")
    assert f"float A_shared[{shared}];" in mod.get_source("cuda")      # stages x 16 x 8
    rng = np.random.default_rng(stages)
    a, b = rng.random((32, 32), dtype="float32"), rng.random((32, 32), dtype="float32")
    c = np.zeros((32, 32), "float32")
    T.interpret(mod.lowered, a, b, c, check_races=True)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    broken = mod.lowered.map_functions(lambda f: f.with_body(_DropBarriers().visit(f.body)))
    with pytest.raises(T.RaceError):      # the checker sees the pipelined tiles' phases
        T.interpret(broken, a, b, np.zeros((32, 32), "float32"), check_races=True)


def test_accelerator_three_versions_of_each_staged_tile_bit_exact():
    sch = schedule_gemm(gemm(128), double=True)
    ko = sch.get_loops(sch.get_block("C_update_o"))[2]
    sch.annotate(ko, "software_pipeline_stage", [0, 0, 2])
    mod = targets.build(sch, "toy-npu", name="gemm3")
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, (128, 128)).astype("int8")
    b = rng.integers(-128, 128, (128, 128)).astype("int8")
    c = np.zeros((128, 128), "int32")
    mod(a, b, c)
    np.testing.assert_array_equal(c, a.astype("int32") @ b.astype("int32"))
    assert "A_npu.inp[2]" in mod.memory_map() and mod.stats["bank_conflict_stalls"] == 0


# refusals ------------------------------------------------------------------------------------

@pytest.mark.parametrize("ann,message", [
    ('{"software_pipeline_stage": [0, 1, 1]}', r"software pipeline on loop i: "
     r"software_pipeline_stage gives 3 stages, but the loop's body has 2 statements"),
    ('{"software_pipeline_stage": [0, -1]}', r"software pipeline on loop i: "
     r"software_pipeline_stage must be a list of ints >= 0, found \(0, -1\)"),
    ('{"software_pipeline_stage": [0, 1], "software_pipeline_order": [0, 0]}',
     r"software pipeline on loop i: software_pipeline_order must be an order of the 2 "
     r"statements \(a permutation of 0..1\), found \(0, 0\)"),
    # a consumer run before its producer (TVM refuses these; they computed wrong sums)
    ('{"software_pipeline_stage": [1, 0]}', r"statement 1 depends on statement 0 through "
     r"buffer B\w*, but runs before it \(stages 1 and 0, places 0 and 1 in "
     r"software_pipeline_order\); give statement 1 a later stage than 0"),
    ('{"software_pipeline_stage": [0, 0], "software_pipeline_order": [1, 0]}',
     r"statement 1 depends on statement 0 through buffer B\w*, but runs before it "
     r"\(stages 0 and 0, places 1 and 0"),
    ('{"double_buffer": 1}',
     r"annotated 'double_buffer', which Cuvil no longer reads; write "
     r"sch.annotate\(loop, 'software_pipeline_stage'"),
    ('{"accel.double_buffer": 1}', r"annotated 'accel.double_buffer'"),
])
def test_annotations_the_pass_cannot_honour_are_refused(ann, message):
    with pytest.raises(T.LoweringError, match=message):
        pipelined(rows(ann, n=8))


def test_a_buffer_crossing_stages_outside_the_loop_is_refused():
    # B is read one row later than it is written: not a tile of the loop's iterations
    f = T.parse('''
@T.prim_func
def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((9,), "float32")
    for i in T.serial(8, annotations={"software_pipeline_stage": [0, 1]}):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi + 1] = A[vi]
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi]
''')
    with pytest.raises(T.LoweringError, match=r"buffer B is written in one stage and used "
                       r"in another \(stages \[0, 1\]\) but is not allocated in the loop"):
        pipelined(f)


def test_a_consumer_ordered_before_its_producer_in_one_stage_is_refused_on_cuda():
    # TVM's simple_compute_incorrect_reorder: d (stage 1) placed before c (stage 1),
    # which writes the C it reads; built, it gave 223 of 256 wrong values
    f = T.parse('''
@T.prim_func
def f(A: T.Buffer((16, 16), "float32"), D: T.Buffer((16, 16), "float32")):
    for tx in T.thread_binding(16, thread="threadIdx.x"):
        for i in T.serial(16, annotations={"software_pipeline_stage": [0, 1, 1],
                                           "software_pipeline_order": [0, 2, 1]}):
            with T.block("outer"):
                T.reads(A[tx, i])
                T.writes(D[tx, i])
                B = T.alloc_buffer((16, 1), scope="shared")
                C = T.alloc_buffer((16, 1), scope="shared")
                with T.block("b"):
                    B[tx, 0] = A[tx, i] * T.float32(2)
                with T.block("c"):
                    C[tx, 0] = B[tx, 0] + T.float32(2)
                with T.block("d"):
                    D[tx, i] = C[tx, 0] + T.float32(1)
''')
    with pytest.raises(T.LoweringError, match=r"statement 2 depends on statement 1 through "
                       r"buffer C, but runs before it \(stages 1 and 1, places 2 and 1"):
        targets.build(f, targets.Target("cuda"))


# TVM's nested_pipeline_interleaving with in-bounds indices (TVM's own reads row i of a
# one-row tile): the inner pipeline counts as its prologue, loop and epilogue (the
# statements 2, 3, 4 of the outer annotation); software_pipeline_order [0, 2, 3, 1, 4]
# places statement 3 second (TVM's meaning: order[i] is statement i's place)
NESTED = '''
@T.prim_func
def f(A: T.Buffer((16, 16, 16), "float32"), C: T.Buffer((16, 16, 16), "float32")):
    for tx in T.thread_binding(16, thread="threadIdx.x"):
        for i in T.serial(16, annotations={"software_pipeline_stage": [0, 0, 0, 1, 1],
                                           "software_pipeline_order": [0, 2, 3, 1, 4]}):
            with T.block():
                A_shared = T.alloc_buffer((16, 1, 16), scope="shared")
                A_local = T.alloc_buffer((1, 1, 16), scope="local")
                for j in T.serial(16):
                    with T.block():
                        A_shared[tx, 0, j] = A[tx, i, j]
                for j in T.serial(16):
                    with T.block():
                        A_local[0, 0, j] = A_shared[tx, 0, j]
                for j in T.serial(16, annotations={"software_pipeline_stage": [0, 1],
                                                   "software_pipeline_order": [0, 1]}):
                    with T.block():
                        B = T.alloc_buffer((16, 1, 1), scope="shared")
                        with T.block():
                            B[tx, 0, 0] = A_local[0, 0, j] * T.float32(2)
                        with T.block():
                            C[tx, i, j] = B[tx, 0, 0] + T.float32(1)
'''


def test_a_nested_pipeline_counts_as_its_prologue_loop_and_epilogue():
    mod = targets.build(T.parse(NESTED), targets.Target("cuda"))
    low = T.to_text(mod.lowered)
    # the inner loop runs its 15 steady steps unguarded; its last step is unrolled
    assert "in T.serial(15):" in low and "if j" not in low
    a = np.random.default_rng(0).random((16, 16, 16), dtype="float32")
    c = np.full((16, 16, 16), np.nan, "float32")
    T.interpret(mod.lowered, a, c, check_races=True)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


def test_the_order_gives_each_statement_its_place():
    # [1, 2, 0]: statement 2 runs first, before statement 1 that writes the C it reads
    # (read as a list of the statements to run, 1, 2, 0 would look valid)
    f = T.parse('''
@T.prim_func
def main(A: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32")):
    for i in T.serial(8, annotations={"software_pipeline_stage": [0, 1, 1],
                                      "software_pipeline_order": [1, 2, 0]}):
        with T.block("outer"):
            B = T.alloc_buffer((1,), "float32")
            C = T.alloc_buffer((1,), "float32")
            with T.block("b"):
                B[0] = A[i] * T.float32(2)
            with T.block("c"):
                C[0] = B[0] + T.float32(2)
            with T.block("d"):
                D[i] = C[0] + T.float32(1)
''')
    with pytest.raises(T.LoweringError, match=r"statement 2 depends on statement 1 through "
                       r"buffer C, but runs before it \(stages 1 and 1, places 2 and 0"):
        pipelined(f)


OP_WRITTEN = '''
def f(A: T.Buffer((256, 64), "float16"), C: T.Buffer((4, 64), "float16")):
    with T.allocate((1,), "uint64", scope="shared") as M:
        for k in T.serial(4, annotations={"software_pipeline_stage": [0, 1]}):
            with T.allocate((64, 64), "float16", scope="shared") as S:
                T.evaluate(T.call_intrin("int32", "tma_load", S[0, 0], A[k * 64, 0], M[0],
                                         64, 64))
                for j in T.serial(64):
                    C[k, j] = S[0, j]
'''


def test_a_tile_an_op_writes_in_one_stage_gets_a_version_per_stage():
    # the tensor copy writes S through its destination element (a tile the op
    # declares it writes), the loop reads S one stage later: two versions
    g = inject_software_pipeline(T.parse(OP_WRITTEN))
    assert g.attr("buffer_versions") == (("S", 2),)
    assert "S[(k + 1) % 2, 0, 0], A[(k + 1) * 64, 0]" in str(g)
    assert "C[k, j] = S[k % 2, 0, j]" in str(g)
