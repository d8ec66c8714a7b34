"""plan_buffer_allocation: buffers allocated where they are used, compacted per scope.

Each case checks where the allocation lands and its exact shape, and that the planned
function computes what the unplanned one does (interpreter; LLVM where the scopes
allow it).
"""

import numpy as np

import cuvil_tir as T
import schedules as S
from cuvil_tir.stmt import Allocate, BlockRealize, For, SeqStmt, Stmt
from cuvil_tir.transform import PassContext, plan_buffer_allocation
from cuvil_tir.visitor import post_order_visit
from tests.schedules.test_index_maps import gpu_matmul as tiled_gpu_matmul


def allocations(func) -> dict:
    """``{buffer name: (shape, names of the loops around the Allocate)}``."""
    out = {}

    def walk(node, loops):
        if isinstance(node, Allocate):
            out[node.buffer.name] = (tuple(int(s) for s in node.buffer.shape), loops)
        if isinstance(node, For):
            loops = loops + (node.loop_var.name,)
        kids = node.seq if isinstance(node, SeqStmt) else (
            (node.block,) if isinstance(node, BlockRealize) else
            tuple(x for x in (getattr(node, "body", None), getattr(node, "init", None))
                  if isinstance(x, Stmt)))
        for c in kids:
            walk(c, loops)

    walk(func.body, ())
    return out


def same_results(before, after, arrays, llvm=True):
    want = [np.array(a, copy=True) for a in arrays]
    T.interpret(before, *want)
    got = [np.array(a, copy=True) for a in arrays]
    T.interpret(after, *got)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    if llvm:
        import targets
        built = [np.array(a, copy=True) for a in arrays]
        targets.build(before, "llvm")(*built)
        for w, g in zip(want, built):
            np.testing.assert_allclose(g, w, rtol=1e-6)


ROW_TILE = '''
@T.prim_func
def main(A: T.Buffer((8, 4), "float32"), C: T.Buffer((8, 4), "float32")):
    B = T.alloc_buffer((8, 4), "float32")
    for i in T.serial(8):
        for j in T.serial(4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2)
        for j in T.serial(4):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj] + T.float32(1)
'''


def test_a_buffer_computed_at_a_loop_lives_in_it_as_one_tile():
    f = T.parse(ROW_TILE)
    g = plan_buffer_allocation(f)
    assert allocations(g) == {"B": ((1, 4), ("i",))}
    assert f.body.block.alloc_buffers and not g.body.block.alloc_buffers
    a = np.random.default_rng(0).random((8, 4), dtype="float32")
    same_results(f, g, [a, np.zeros((8, 4), "float32")])
    # built for llvm, the pass is part of the pipeline
    import targets
    c = np.zeros((8, 4), "float32")
    targets.build(f, "llvm")(a, c)
    np.testing.assert_allclose(c, a * 2 + 1)


def test_a_buffer_at_the_root_stays_whole():
    f = T.parse(ROW_TILE.replace('''        for j in T.serial(4):
            with T.block("C"):''', '''    for i in T.serial(8):
        for j in T.serial(4):
            with T.block("C"):'''))
    assert plan_buffer_allocation(f) is f


def test_fused_tile_after_compute_at():
    f = T.parse('''
@T.prim_func
def main(A: T.Buffer((64, 8), "float32"), C: T.Buffer((64, 8), "float32")):
    B = T.alloc_buffer((64, 8), "float32")
    for i, j, k in T.grid(4, 16, 8):
        with T.block("B"):
            vi, vj, vk = T.axis.remap("SSS", [i, j, k])
            B[vi * 16 + vj, vk] = A[vi * 16 + vj, vk] * T.float32(2)
    for i, k in T.grid(64, 8):
        with T.block("C"):
            vi, vk = T.axis.remap("SS", [i, k])
            C[vi, vk] = B[vi, vk] + T.float32(1)
''')
    sch = S.Schedule(f)
    io, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 8])
    sch.compute_at(sch.get_block("B"), io)
    g = plan_buffer_allocation(sch.func)
    assert allocations(g) == {"B": ((8, 8), ("i_0",))}
    text = str(g)
    assert "B[vi * 16 + vj - i_0 * 8, vk] = A[vi * 16 + vj, vk]" in text
    assert "C[vi_1, vk_1] = B[vi_1 - i_0 * 8, vk_1] + T.float32(1)" in text
    a = np.random.default_rng(1).random((64, 8), dtype="float32")
    same_results(sch.func, g, [a, np.zeros((64, 8), "float32")])


def gpu_matmul():
    """The thread-bound GEMM of the schedule tests with a shared B tile, a local A tile
    and a local accumulator, each computed at its loop."""
    _, sch = tiled_gpu_matmul()
    bs = sch.cache_read(sch.get_block("C"), 1, "shared")
    sch.compute_at(bs, sch.get_loops(sch.get_block("C"))[2])
    al = sch.cache_read(sch.get_block("C"), 0, "local")
    sch.compute_at(al, sch.get_loops(sch.get_block("C"))[2])
    cl = sch.cache_write(sch.get_block("C"), 0, "local")
    sch.reverse_compute_at(cl, sch.get_loops(sch.get_block("C"))[1])
    return sch.func


def test_scopes_place_shared_per_thread_block_and_local_per_thread():
    f = gpu_matmul()
    g = plan_buffer_allocation(f)
    assert allocations(g) == {
        # one per thread block, placed at the k step (as TVM compacts it): the step's
        # 8 rows for every thread of the block (the threadIdx loop is relaxed)
        "B_shared": ((8, 64), ("i_0", "j_0", "k_0")),
        # one per thread: its 8 x 4 accumulator
        "C_local": ((8, 4), ("i_0", "j_0")),
        # per thread and per k step: the 8 x 8 tile read in that step
        "A_local": ((8, 8), ("i_0", "j_0", "k_0")),
    }
    rng = np.random.default_rng(2)
    a, b = rng.random((64, 32), dtype="float32"), rng.random((32, 64), dtype="float32")
    same_results(f, g, [a, b, np.zeros((64, 64), "float32")], llvm=False)


def test_only_the_targets_memories_are_planned():
    f = gpu_matmul()
    import targets
    with PassContext(target=targets.Target("llvm")):
        g = plan_buffer_allocation(f)
    # llvm has global and local memories: the shared buffer is left to its owner
    assert set(allocations(g)) == {"C_local", "A_local"}
    assert [b.name for b in g.body.block.alloc_buffers] == ["B_shared"]


PARALLEL = '''
@T.prim_func
def main(A: T.Buffer((8, 4), "float32"), C: T.Buffer((8, 4), "float32")):
    B = T.alloc_buffer((8, 4), "float32", scope="SCOPE")
    for i in T.parallel(8):
        for j in T.serial(4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2)
        for j in T.serial(4):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj] + T.float32(1)
'''


def test_parallel_loops_privatise_local_but_not_global_buffers():
    local = T.parse(PARALLEL.replace("SCOPE", "local"))
    g = plan_buffer_allocation(local)
    assert allocations(g) == {"B": ((1, 4), ("i",))}
    a = np.random.default_rng(3).random((8, 4), dtype="float32")
    same_results(local, g, [a, np.zeros((8, 4), "float32")])
    shared_by_all = T.parse(PARALLEL.replace("SCOPE", "global"))
    g = plan_buffer_allocation(shared_by_all)
    # a global buffer stays one for all iterations (allocated at the top), only compacted
    # where that is exact: here its whole shape is used
    assert g is shared_by_all



def test_a_local_buffer_read_after_its_parallel_loop_is_shared_by_the_threads():
    # Y_local is written privately in each iteration of the parallel loop but read by
    # the serial copy after it: it must be one buffer for all threads, indexed by i
    # (it was sized per thread and indexed by i outside i's loop: a lowering error)
    f = T.parse('''
@T.prim_func
def main(X: T.Buffer((3, 5), "float32"), Y: T.Buffer((3,), "float32")):
    Y_local = T.alloc_buffer((3,), "float32", scope="local")
    for i in T.parallel(3):
        for k in T.serial(5):
            with T.block("Y"):
                v_i, v_k = T.axis.remap("SR", [i, k])
                with T.init():
                    Y_local[v_i] = T.float32(0)
                Y_local[v_i] = Y_local[v_i] + X[v_i, v_k]
    for ax0 in T.serial(3):
        with T.block("Y_local"):
            v0 = T.axis.remap("S", [ax0])
            Y[v0] = Y_local[v0]
''')
    g = plan_buffer_allocation(f)
    assert g is f
    x = np.random.default_rng(5).random((3, 5), dtype="float32")
    same_results(f, g, [x, np.zeros(3, "float32")])

ACCUMULATE = '''
@T.prim_func
def main(A: T.Buffer((8, 4), "float32"), C: T.Buffer((4,), "float32")):
    S = T.alloc_buffer((4,), "float32", scope="local")
    for k in T.serial(8):
        for j in T.serial(4):
            with T.block("S"):
                vk, vj = T.axis.remap("RS", [k, j])
                with T.init():
                    S[vj] = T.float32(0)
                S[vj] = S[vj] + A[vk, vj]
    for j in T.serial(4):
        with T.block("C"):
            vj = T.axis.remap("S", [j])
            C[vj] = S[vj]
'''


def test_an_accumulation_across_a_loop_keeps_its_buffer_outside_it():
    f = T.parse(ACCUMULATE.replace('''    for j in T.serial(4):
        with T.block("C"):''', '''        for j in T.serial(4):
            with T.block("C"):''').replace('''            vj = T.axis.remap("S", [j])
            C[vj] = S[vj]''', '''                vj = T.axis.remap("S", [j])
                C[vj] = S[vj]'''))
    g = plan_buffer_allocation(f)
    # S accumulates over k: it cannot become one buffer per k iteration
    assert g is f
    a = np.arange(32, dtype="float32").reshape(8, 4)
    same_results(f, g, [a, np.zeros(4, "float32")])


def test_a_read_of_a_previous_iteration_keeps_the_buffer_outside():
    f = T.parse('''
@T.prim_func
def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((9,), "float32", scope="local")
    for i in T.serial(8):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi + 1] = A[vi]
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi]
''')
    g = plan_buffer_allocation(f)
    # C reads B[i], written in iteration i - 1: the buffer must outlive the iteration
    assert g is f


def test_no_stray_allocations_remain():
    g = plan_buffer_allocation(T.parse(ROW_TILE))
    found = []
    post_order_visit(g.body, lambda n: found.append(n) if isinstance(n, Allocate) else None)
    assert len(found) == 1


def test_a_box_with_loose_symbolic_bounds_keeps_the_whole_dimension():
    # bounds through a symbolic // and % reach down to int32's minimum: the box must not
    # become a buffer of n + 2**31 elements at offset -2**31 (it failed to allocate)
    import targets
    n = T.size_var("n")
    X = T.placeholder((n,), "int32", name="X")
    Y = T.compute((n,), lambda i: X[i] + 1, name="Y")
    Z = T.compute((n,), lambda i: Y[i] * 2, name="Z")
    sch = S.Schedule(T.create_prim_func([X, Z]))
    sch.split(sch.get_loops("Y")[0], [2, None])
    sch.fuse(*sch.get_loops("Y"))
    assert plan_buffer_allocation(sch.func) is sch.func     # Y stays whole, at the root
    z = np.zeros(11, "int32")
    targets.build(sch.func, "llvm")(np.arange(11, dtype="int32"), z)
    np.testing.assert_array_equal(z, (np.arange(11) + 1) * 2)


def test_a_buffer_a_predicated_producer_reuses_across_iterations_stays_outside():
    # tile 1 recomputes only B[6:10] (the predicate skips what tile 0 left in B[4:6]):
    # B is not private to an iteration of i_0, so it is neither moved into the loop
    # nor compacted to a tile (which lost B[4:6], a wrong result once built)
    import targets
    f = T.parse('''@T.prim_func
def main(A: T.Buffer((12,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((10,), "float32")
    for i_0 in T.serial(2):
        for ax0 in T.serial(6):
            with T.block("B"):
                v = T.axis.spatial(10, i_0 * 4 + ax0)
                T.where(i_0 < 1 or 2 <= ax0)
                T.reads(A[v:v + 3])
                T.writes(B[v])
                B[v] = A[v] + A[v + 1] + A[v + 2]
        for i_1 in T.serial(4):
            with T.block("C"):
                v = T.axis.spatial(8, i_0 * 4 + i_1)
                T.reads(B[v:v + 3])
                T.writes(C[v])
                C[v] = B[v] + B[v + 1] + B[v + 2]
''')
    g = plan_buffer_allocation(f)
    (kept,) = g.body.block.alloc_buffers                     # still the root's, whole
    assert kept.name == "B" and [int(d) for d in kept.shape] == [10]
    a = np.arange(12, dtype="float32")
    b = a[:10] + a[1:11] + a[2:12]
    want = b[:8] + b[1:9] + b[2:10]
    c = np.zeros(8, "float32")
    targets.build(f, "llvm")(a, c)
    np.testing.assert_array_equal(c, want)
