"""The one memory planner (plan_buffer_allocation over the target's memory table) on
every kind of memory: exact IR of placement and compaction for an llvm register tile,
CUDA shared and local buffers, and accelerator scratchpads; the memory table each
target declares; the refusals."""

import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir.transform import PassContext, lower_blocks, plan_buffer_allocation
from cuvil_tir.transform.buffer_privacy import disjoint, private, relax_guarded, relax_region
from cuvil_tir.transform.memory_table import MemorySpec, memory_spec, memory_table
from cuvil_tir.transform.static_memory import hoist_static_allocations
from targets.toolkit.npu.conv2d import conv2d, schedule_conv2d
from targets.accel.examples.toy_npu import toy_npu
from targets.toolkit import cuda_recipes as recipes
from tests.cuvil_tir.test_plan_allocation import allocations, same_results

targets.register_target(toy_npu, replace=True)


def planned(func, target):
    with PassContext(target=targets.Target(target) if isinstance(target, str) else target):
        return plan_buffer_allocation(func)


# the memory table ----------------------------------------------------------------------------

def test_each_target_declares_its_memories_and_the_planner_reads_them():
    def table(name):
        return {s: (m.instance, m.shared_by, m.banks)
                for s, m in memory_table(targets.Target(name)).items()}
    assert table("llvm") == {"global": ("program", (), 1), "local": ("thread", (), 1)}
    assert table("cuda") == {"global": ("program", (), 1),
                             "shared": ("block", ("threadIdx", "vthread"), 32),
                             "local": ("thread", (), 1),
                             "wmma.accumulator": ("warp", ("threadIdx.x",), 1),
                             "wmma.matrix_a": ("warp", ("threadIdx.x",), 1),
                             "wmma.matrix_b": ("warp", ("threadIdx.x",), 1),
                             "warp": ("warp", ("threadIdx.x",), 1),
                             "warpgroup": ("warp", ("threadIdx.x",), 1)}
    npu = memory_table(targets.Target("toy-npu"))
    assert npu["npu.inp"] == MemorySpec("npu.inp", "static", (), 4 * 8192, 4, 8192, 16, 16)
    assert npu["npu.inp"].static and npu["npu.inp"].rebase_regions
    assert not npu["global"].static and memory_table() is None     # no target: by name


def test_which_loops_a_memory_may_enter():
    def loop(kind, tag=None):
        return T.For(T.var("i"), T.const(0), T.const(4), kind, T.Evaluate(T.const(0)), tag)
    kinds = [loop("serial"), loop("parallel"), loop("vectorized"), loop("unrolled"),
             loop("thread_binding", "blockIdx.x"), loop("thread_binding", "threadIdx.x")]
    got = {scope: [memory_spec(scope).may_enter(lp) for lp in kinds]
           for scope in ("global", "shared", "local")}
    assert got == {"global": [True, False, False, False, False, False],
                   "shared": [True, False, False, False, True, False],
                   "local": [True, True, False, False, True, True]}
    static = MemorySpec("npu.inp", "static")
    assert [static.may_enter(lp) for lp in kinds] == [True] + [False] * 5


# llvm: a register tile at a boundary ---------------------------------------------------------

TILE = '''
@T.prim_func
def main(A: T.Buffer((6, 20), "float32"), C: T.Buffer((6, 20), "float32")):
    L = T.alloc_buffer((6, 32), "float32", scope="local")
    for jo in T.serial(2):
        for i in T.serial(6):
            for ji in T.serial(16):
                with T.block("L"):
                    vi = T.axis.spatial(6, i)
                    vj = T.axis.spatial(32, jo * 16 + ji)
                    T.where(jo * 16 + ji < 20)
                    L[vi, vj] = A[vi, vj] * T.float32(2)
        for i in T.serial(6):
            for ji in T.serial(16):
                with T.block("C"):
                    vi = T.axis.spatial(6, i)
                    vj = T.axis.spatial(20, jo * 16 + ji)
                    T.where(jo * 16 + ji < 20)
                    C[vi, vj] = L[vi, vj] + T.float32(1)
'''


def test_a_guarded_register_tile_is_private_because_its_iterations_are_disjoint():
    # the producer skips the columns past 20, so it does not provably write what the
    # consumer reads; but each jo touches its own 16 columns: one tile per iteration
    f = T.parse(TILE)
    loop, buf = f.body.block.body, f.body.block.alloc_buffers[0]
    assert not private(loop, buf) and disjoint(loop, buf)
    g = planned(f, "llvm")
    text = str(g)
    assert allocations(g) == {"L": ((6, 16), ("jo",))}
    assert "L[vi, vj - jo * 16] = A[vi, vj] * T.float32(2)" in text
    assert "C[vi_1, vj_1] = L[vi_1, vj_1 - jo * 16] + T.float32(1)" in text
    rng = np.random.default_rng(0)
    same_results(f, g, [rng.random((6, 20), dtype="float32"), np.zeros((6, 20), "float32")])


def test_iterations_that_share_elements_keep_the_buffer_outside_the_loop():
    shared = TILE.replace("jo * 16 + ji", "jo * 4 + ji").replace("(2)", "(5)")
    f = T.parse(shared)
    loop, buf = f.body.block.body, f.body.block.alloc_buffers[0]
    assert not disjoint(loop, buf)
    g = planned(f, "llvm")
    assert [b.name for b in g.body.block.alloc_buffers] == ["L"] and not allocations(g)


def test_relaxation_narrowed_by_a_guard_and_computed_directly():
    A = T.decl_buffer((64, 64), "float32", "A")
    t, r = T.var("t"), T.var("r")
    region = T.BufferRegion(A, (T.Range(r * 8 + t // 4, T.const(1)),
                                T.Range(t % 4 * 4, T.const(4))))
    doms = {t: T.Range.from_extent(64)}
    loose = relax_region(region, doms)
    tight = relax_guarded(region, doms, (t < 32,))
    assert [(str(d.min), str(d.extent)) for d in loose.region] == [("r * 8", "16"),
                                                                  ("0", "16")]
    assert [(str(d.min), str(d.extent)) for d in tight.region] == [("r * 8", "8"),
                                                                  ("0", "16")]


# cuda: shared per thread block, local per thread -------------------------------------------

def _gemm_cuda(**kw):
    from tests.targets.cuda_helpers import sch_for
    A = T.placeholder((32, 32), name="A")
    B = T.placeholder((32, 32), name="B")
    r = T.reduce_axis((0, 32), name="k")
    C = T.compute((32, 32), lambda i, j: T.sum(A[i, r] * B[r, j], axis=r), name="C")
    sch = sch_for(T.create_prim_func([A, B, C]))
    recipes.gemm(sch, bm=16, bn=16, bk=8, tm=2, tn=2, vector=4, **kw)
    return sch


def test_cuda_local_tile_over_sibling_thread_nests_and_shared_tiles_per_block():
    g = planned(_gemm_cuda().func, "cuda")
    text = str(g)
    # the accumulator: per thread, allocated above the three nests that use it (zeroing,
    # product, copy-out), each access at its own nest's thread variables
    assert allocations(g)["C_local"] == ((2, 2), ("i_0", "j_0"))
    assert "C_local[v_i - i_0 * 16 - i_1_init * 2, v_j - j_0 * 16 - j_1_init * 2]" in text
    assert "C_local[v_i_1 - i_0 * 16 - i_1 * 2, v_j_1 - j_0 * 16 - j_1 * 2]" in text
    # the shared tiles: one per block and k step, over all threads; the copy's guard
    # (64 threads, 32 of them copy) bounds the rows it writes
    assert allocations(g)["A_shared"] == ((16, 8), ("i_0", "j_0", "k_0"))
    assert allocations(g)["B_shared"] == ((8, 16), ("i_0", "j_0", "k_0"))
    assert "A_shared[v0 - i_0 * 16, v1 - k_0 * 8] = A[v0, v1]" in text


def test_a_shared_buffer_of_symbolic_size_is_refused_with_the_fix():
    n = T.size_var("n")
    A = T.placeholder((n,), name="A")
    B = T.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = T.compute((n,), lambda i: B[i] + 1.0, name="C")
    import schedules as S
    sch = S.Schedule(T.create_prim_func([A, C]))
    sch.set_scope(sch.get_block("B"), 0, "shared")
    with pytest.raises(T.LoweringError, match=r"shared buffer B needs the shape \('n',\), "
                       r"but memory 'shared' holds buffers of a constant size only; "
                       r"compute_at its producer under a loop"):
        planned(sch.func, "cuda")


# accelerators: static scratchpads ------------------------------------------------------------

def test_scratchpad_tiles_with_a_unit_loop_and_their_intrinsic_regions():
    # compute_at binds the batch loop (one iteration) as 0 in the copy and as b in the
    # GEMM: both are the same tile (CVL-E171 in benchmarks/accel.py before)
    g = planned(schedule_conv2d(conv2d(1, 6, 6, 16, 16)).func, "toy-npu")
    got = allocations(g)
    assert got["I_npu.inp"] == ((1, 3, 18, 16), ("b", "y"))
    assert got["O_npu.acc"] == ((1, 1, 16, 16), ("b", "y"))
    assert [(b.name, [int(x) for x in b.shape]) for b in g.body.block.alloc_buffers] == [
        ("W_npu.wgt", [3, 3, 16, 16])]             # staged once, for the whole program
    text = str(g)
    # an intrinsic receives the layout with its region: the region moves with the tile
    assert ('I_npu_inp[v_b_o_1:v_b_o_1 + 1, v_y_o_1 + v_rh_o - y:v_y_o_1 + v_rh_o - y + 1, '
            'v_rw_o:v_rw_o + 16, 0:16]') in text
    assert "O_npu_acc[v_b_o_1:v_b_o_1 + 1, v_y_o_1 - y:v_y_o_1 - y + 1" in text
    # static memories then move to the top, once each
    with PassContext(target=targets.Target("toy-npu")):
        low = hoist_static_allocations(lower_blocks(g))
    tops, node = [], low.body
    while isinstance(node, T.Allocate):
        tops.append(node.buffer.name)
        node = node.body
    assert sorted(tops) == ["I_npu.inp", "O_npu.acc", "W_npu.wgt"]
    assert "T.allocate" not in T.to_text(node)


def test_a_call_that_computes_addresses_from_the_buffer_keeps_it_whole():
    # on llvm a region handed to an extern call is a pointer into the whole buffer
    f = T.parse('''
@T.prim_func
def main(A: T.Buffer((8, 4), "float32")):
    L = T.alloc_buffer((8, 4), "float32", scope="local")
    for i in T.serial(8):
        with T.block("L"):
            vi = T.axis.remap("S", [i])
            T.reads()
            T.writes(L[vi, 0:4])
            T.evaluate(T.call_extern("int32", "fill", L[vi:vi + 1, 0:4]))
        for j in T.serial(4):
            with T.block("A"):
                vi, vj = T.axis.remap("SS", [i, j])
                A[vi, vj] = L[vi, vj]
''')
    assert allocations(planned(f, "llvm"))["L"] == ((8, 4), ("i",))


KERNEL = '''
@T.prim_func
def main(A: T.Buffer((64,), "float32"), C: T.Buffer((64,), "float32")):
    B = T.alloc_buffer((64,), "float32", scope="SCOPE")
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for tx in T.thread_binding(16, thread="threadIdx.x"):
            with T.block("B"):
                vi = T.axis.spatial(64, bx * 16 + tx)
                B[vi] = A[vi] * T.float32(2)
        for tx in T.thread_binding(16, thread="threadIdx.x"):
            with T.block("C"):
                vi = T.axis.spatial(64, bx * 16 + 15 - tx)
                C[vi] = B[vi]
'''


def test_thread_loops_relax_a_buffer_by_who_shares_its_memory():
    # a global buffer is one for all threads: it stays whole; a shared one is one per
    # block: 16 elements, read by other threads than wrote them
    glob = planned(T.parse(KERNEL.replace("SCOPE", "global")), "cuda")
    assert [b.name for b in glob.body.block.alloc_buffers] == ["B"] and not allocations(glob)
    shared = planned(T.parse(KERNEL.replace("SCOPE", "shared")), "cuda")
    assert allocations(shared) == {"B": ((16,), ("bx",))}
    assert "C[vi_1] = B[vi_1 - bx * 16]" in str(shared)


def test_banks_keep_versions_partners_and_engines_apart_at_aligned_offsets():
    from cuvil_tir.transform.bank_plan import Unit, memory_map_text, place
    mem = MemorySpec("npu.x", "static", (), 4 * 1024, banks=4, bank_bytes=1024,
                     width_bytes=64)
    units = [Unit("T", 300, 2, (0, 3), {"load", "gemm"}),      # two versions of a tile
             Unit("W", 512, 1, (0, 3), {"load", "gemm"}, {"T"}),   # T's partner
             Unit("S", 100, 1, (4, 5), {"store"})]                 # later: may reuse
    plan = {u.name: (u.size, u.addrs, u.banks) for u in place(mem, units, {})}
    # sizes are whole 64-byte accesses; the two versions of T sit in two banks, W in
    # a third; S, live after both, takes the free fourth (a reused address would order
    # its engine after T's), and reuses the first bank's start where none is free
    assert plan == {"T": (320, (0, 1024), (0, 1)), "W": (512, (2048,), (2,)),
                    "S": (128, (3072,), (3,))}
    small = MemorySpec("npu.x", "static", (), 3 * 1024, banks=3, bank_bytes=1024,
                       width_bytes=64)
    assert [(u.name, u.addrs) for u in place(small, units, {})
            if u.name == "S"] == [("S", (0,))]
    text = memory_map_text([mem], {"npu.x": place(mem, units, {"W": 3})}, [])
    assert "  bank 3:\n    W                    offset      0  size    512" in text



def test_the_accelerator_bank_plan_travels_in_the_program_as_data():
    from cuvil_tir.target import Program
    from targets.toolkit.npu.gemm import gemm, schedule_gemm
    mod = targets.build(schedule_gemm(gemm(128), double=True), "toy-npu", name="plan")
    plan = mod.program.memory
    a = next(d for d in plan["npu.inp"] if d["buffer"] == "A_npu.inp")
    # two versions of a 64 x 64 int8 tile, in two banks of 8 KiB, touched by the DMA and
    # the GEMM unit, living over the instructions of its top-level statement (steps
    # count instructions; a multi-buffered tile keeps its whole statement); no JSON in
    # the C source
    assert a == {"buffer": "A_npu.inp", "addresses": [0, 8192], "bytes": 4096,
                 "steps": [0, 4], "engines": ["gemm", "load"], "conflicts": []}
    assert "cuvil-accel-plan" not in mod.get_source("c")
    again = Program.from_blobs(mod.program.to_blobs(), None)
    assert again.memory == plan
