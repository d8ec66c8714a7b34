"""Thread bindings as TVM's GPU schedules write them: nested loops bound to the same
axis (MetaSchedule's cooperative fetching), lowered TIR with T.env_thread and
T.launch_thread, an extent-1 grid; checked by the interpreter's GPU semantics and
nvcc (no warnings)."""

from __future__ import annotations

import numpy as np
import pytest

import cuvil_tir as T
import targets

from .cuda_helpers import compile_all, rand

# the tile copy under the k loop, inside the loops bound to threadIdx.y/x, its fused
# loop split and bound to threadIdx.y/x again: the same hardware indices
COOPERATIVE = '''
@T.prim_func
def gemm(A: T.Buffer((32, 32), "float32"), B: T.Buffer((32, 32), "float32"),
         C: T.Buffer((32, 32), "float32")):
    A_shared = T.alloc_buffer((32, 32), scope="shared")
    for by in T.thread_binding(2, thread="blockIdx.y"):
        for ty in T.thread_binding(4, thread="threadIdx.y"):
            for tx in T.thread_binding(16, thread="threadIdx.x"):
                for ko in T.serial(4):
                    for f0 in T.serial(2):
                        for f1 in T.thread_binding(4, thread="threadIdx.y"):
                            for f2 in T.thread_binding(16, thread="threadIdx.x"):
                                with T.block("A_shared"):
                                    v0 = T.axis.spatial(32, by * 16 + (f0 * 64 + f1 * 16 + f2) // 8)
                                    v1 = T.axis.spatial(32, ko * 8 + (f0 * 64 + f1 * 16 + f2) % 8)
                                    A_shared[v0, v1] = A[v0, v1]
                    for ty_i, ki in T.grid(4, 8):
                        with T.block("C"):
                            vi = T.axis.spatial(32, by * 16 + ty * 4 + ty_i)
                            vj = T.axis.spatial(32, tx * 2 + ko % 2)
                            vk = T.axis.reduce(32, ko * 8 + ki)
                            with T.init():
                                C[vi, vj] = T.float32(0)
                            C[vi, vj] = C[vi, vj] + A_shared[vi, vk] * B[vk, vj]
'''


def test_cooperative_fetch_nested_thread_axes_matches_numpy():
    f = T.parse(COOPERATIVE)
    mod = targets.build(f, targets.Target("cuda"), name="coop")
    compile_all([mod])
    low = T.to_text(mod.lowered)
    assert low.count('thread="threadIdx.y"') == 1          # one hardware index
    a, b = rand((32, 32)), rand((32, 32), seed=1)
    c = np.full((32, 32), np.nan, "float32")
    T.interpret(mod.lowered, a, b, c, check_races=True)
    want = np.full((32, 32), np.nan, "float32")
    T.interpret(_serial(f), a, b, want)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


def _serial(f):
    class Serial(T.Mutator):
        def visit_For(self, loop):
            body = self.visit(loop.body)
            kind = "serial" if loop.kind == "thread_binding" else loop.kind
            return T.For(loop.loop_var, loop.min, loop.extent, kind, body, None,
                         loop.annotations)
    return f.with_body(Serial().visit(f.body))


NESTED = '''
@T.prim_func
def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    S = T.alloc_buffer((64,), scope="shared")
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(OUTER, thread="threadIdx.x"):
            for f0 in T.serial(64 // INNER):
                for f1 in T.thread_binding(INNER, thread="threadIdx.x"):
                    with T.block("S"):
                        v = T.axis.spatial(64, f0 * INNER + f1)
                        vt = T.axis.spatial(OUTER, tx)
                        T.reads(READS)
                        S[v] = BODY
            for j in T.serial(64 // OUTER):
                with T.block("B"):
                    v = T.axis.spatial(64, j * OUTER + tx)
                    B[v] = S[v]
'''


def _nested(outer=16, inner=16, body="A[v]", reads="A[v]"):
    return T.parse(NESTED.replace("OUTER", str(outer)).replace("INNER", str(inner))
                   .replace("BODY", body).replace("READS", reads))


@pytest.mark.parametrize("kw,match", [
    (dict(body="A[v] + T.Cast(\"float32\", vt)", reads="A[v]"),
     "its body reads the outer loop's index"),
    (dict(body="S[v] + A[v]", reads="S[v], A[v]"), "reads a buffer it writes"),
    (dict(outer=8, inner=16), "exceeds the outer loop's 8"),
])
def test_nested_thread_axis_refusals(kw, match):
    with pytest.raises(T.LoweringError, match=match):
        T.lower(_nested(**kw), "cuda")


def test_nested_thread_axis_with_a_smaller_inner_extent_is_guarded():
    mod = targets.build(_nested(outer=16, inner=8), targets.Target("cuda"), name="guarded")
    a, b = rand(64), np.zeros(64, "float32")
    T.interpret(mod.lowered, a, b, check_races=True)
    np.testing.assert_array_equal(b, a)


LOWERED = '''
@T.prim_func
def lowered(A: T.Buffer((4, 4), "float32"), E: T.Buffer((4, 4), "float32")):
    bx = T.launch_thread("blockIdx.x", 1)
    B = T.allocate([24], "float32", "shared.dyn")
    C = T.allocate([1], "float32", "local")
    tx = T.launch_thread("threadIdx.x", 16)
    B_1 = T.Buffer((24,), data=B, scope="shared.dyn")
    A_1 = T.Buffer((16,), data=A.data)
    B_1[tx // 4 * 6 + tx % 4] = A_1[tx]
    C_1 = T.Buffer((1,), data=C, scope="local")
    C_1[0] = B_1[(15 - tx) // 4 * 6 + (15 - tx) % 4]
    E_1 = T.Buffer((16,), data=E.data)
    E_1[tx] = C_1[0]
'''


def test_lowered_tir_with_launch_thread_builds_without_warnings_and_computes():
    mod = targets.build(T.parse(LOWERED), targets.Target("cuda"), name="lowered")
    src = mod.get_source("cuda")
    assert "blockIdx" not in src.split("lowered_kernel0(")[1]   # the unused index
    compile_all([mod])                                           # -Werror all-warnings
    a, e = rand((4, 4)), np.zeros((4, 4), "float32")
    T.interpret(mod.lowered, a, e, check_races=True)
    np.testing.assert_array_equal(e, a.reshape(-1)[::-1].reshape(4, 4))


# the tile copy does not depend on the virtual thread (every one repeats it); each
# virtual thread reads its own rows and accumulates into its own local tile
VTHREAD = '''
@T.prim_func
def vt(A: T.Buffer((32, 16), "float32"), B: T.Buffer((16, 32), "float32"),
       C: T.Buffer((32, 32), "float32")):
    C_local = T.alloc_buffer((32, 32), scope="local")
    A_shared = T.alloc_buffer((32, 16), scope="shared")
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for v in T.thread_binding(2, thread="vthread.x"):
            for tx in T.thread_binding(8, thread="threadIdx.x"):
                for f in T.serial(32):
                    with T.block("A_shared"):
                        v0 = T.axis.spatial(32, bx * 16 + (f * 8 + tx) // 16)
                        v1 = T.axis.spatial(16, (f * 8 + tx) % 16)
                        A_shared[v0, v1] = A[v0, v1]
                for j, k in T.grid(32, 16):
                    with T.block("C"):
                        vi = T.axis.spatial(32, bx * 16 + v * 8 + tx)
                        vj = T.axis.spatial(32, j)
                        vk = T.axis.reduce(16, k)
                        with T.init():
                            C_local[vi, vj] = T.float32(0)
                        C_local[vi, vj] = C_local[vi, vj] + A_shared[vi, vk] * B[vk, vj]
                for j in range(32):
                    with T.block("C_local"):
                        vi = T.axis.spatial(32, bx * 16 + v * 8 + tx)
                        vj = T.axis.spatial(32, j)
                        C[vi, vj] = C_local[vi, vj]
'''


def test_vthread_tiles_shared_over_virtual_threads_local_per_virtual_thread():
    f = T.parse(VTHREAD)
    mod = targets.build(f, targets.Target("cuda"), name="vt")
    compile_all([mod])
    low = T.to_text(mod.lowered)
    # shared: the block's 16 rows (the virtual threads share it); local: one virtual
    # thread's row
    assert 'T.allocate((256,), "float32", scope="shared")' in low
    assert 'T.allocate((32,), "float32", scope="local")' in low
    a, b = rand((32, 16)), rand((16, 32), seed=1)
    c = np.full((32, 32), np.nan, "float32")
    T.interpret(mod.lowered, a, b, c, check_races=True)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


# TVMScript as TVM's pipeline tests write it: a block under the thread loop allocates
# the shared buffer that all threads of the block fill and read
SHARED_IN_THREAD_BLOCK = '''
@T.prim_func
def inner(A: T.Buffer((16, 4), "float32"), C: T.Buffer((16, 4), "float32")):
    for tx in T.thread_binding(16, thread="threadIdx.x"):
        for i in range(4):
            with T.block():
                T.reads(A[tx, i])
                T.writes(C[tx, i])
                B = T.alloc_buffer((16, 1), scope="shared")
                with T.block():
                    T.reads(A[tx, i])
                    T.writes(B[tx, 0])
                    B[tx, 0] = A[tx, i] * T.float32(2)
                with T.block():
                    T.reads(B[tx, 0])
                    T.writes(C[tx, i])
                    C[tx, i] = B[tx, 0] + T.float32(1)
'''


def test_shared_buffer_allocated_under_the_thread_loop_covers_every_thread():
    # regression: the planner sized it for one thread (B[0] shared by all 16: a race)
    mod = targets.build(T.parse(SHARED_IN_THREAD_BLOCK), targets.Target("cuda"),
                        name="inner")
    compile_all([mod])
    assert 'T.allocate((16,), "float32", scope="shared")' in T.to_text(mod.lowered)
    a = rand((16, 4))
    c = np.full((16, 4), np.nan, "float32")
    T.interpret(mod.lowered, a, c, check_races=True)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


# MetaSchedule's GEMM sketch in small: the shared tiles allocated by the root block,
# each copied at the k step inside the loops bound to vthread.x and threadIdx.x
VTHREAD_K_STEP = '''
@T.prim_func
def gmm(X: T.Buffer((32, 32), "float32"), Y: T.Buffer((32, 32), "float32"),
        Z: T.Buffer((32, 32), "float32")):
    Z_local = T.alloc_buffer((32, 32), scope="local")
    X_shared = T.alloc_buffer((32, 32), scope="shared")
    Y_shared = T.alloc_buffer((32, 32), scope="shared")
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for v in T.thread_binding(2, thread="vthread.x"):
            for tx in T.thread_binding(16, thread="threadIdx.x"):
                for k_0 in T.serial(4ANNOTATION):
                    for f0 in range(8):
                        for f1 in T.thread_binding(16, thread="threadIdx.x"):
                            with T.block("X_shared"):
                                v1 = T.axis.spatial(32, bx // 2 * 16 + (f0 * 16 + f1) // 8)
                                v2 = T.axis.spatial(32, k_0 * 8 + (f0 * 16 + f1) % 8)
                                X_shared[v1, v2] = X[v1, v2]
                    for f0 in range(8):
                        for f1 in T.thread_binding(16, thread="threadIdx.x"):
                            with T.block("Y_shared"):
                                v1 = T.axis.spatial(32, k_0 * 8 + (f0 * 16 + f1) // 16)
                                v2 = T.axis.spatial(32, bx % 2 * 16 + (f0 * 16 + f1) % 16)
                                Y_shared[v1, v2] = Y[v1, v2]
                    for k_1, j in T.grid(8, 8):
                        with T.block("Z"):
                            vi = T.axis.spatial(32, bx // 2 * 16 + v * 8 + tx // 2)
                            vj = T.axis.spatial(32, bx % 2 * 16 + tx % 2 * 8 + j)
                            vk = T.axis.reduce(32, k_0 * 8 + k_1)
                            with T.init():
                                Z_local[vi, vj] = T.float32(0)
                            Z_local[vi, vj] = Z_local[vi, vj] + X_shared[vi, vk] * Y_shared[vk, vj]
                for j in range(8):
                    with T.block("Z_local"):
                        vi = T.axis.spatial(32, bx // 2 * 16 + v * 8 + tx // 2)
                        vj = T.axis.spatial(32, bx % 2 * 16 + tx % 2 * 8 + j)
                        Z[vi, vj] = Z_local[vi, vj]
'''


@pytest.mark.parametrize("annotation, versions", [
    ("", 1),
    (', annotations={"software_pipeline_stage": [0, 0, 1]}', 2)])
def test_shared_tiles_under_thread_loops_are_sized_to_the_k_step(annotation, versions):
    # TVM compacts a shared tile at the statement holding its accesses (here the k
    # step, inside the thread loops, relaxed over their threads): a 16 x 8 tile, not
    # the 16 x 32 rows of every k step (MetaSchedule's sketches needed up to 2 MB of
    # shared memory), and a pipelined k loop keeps one version per stage
    mod = targets.build(T.parse(VTHREAD_K_STEP.replace("ANNOTATION", annotation)),
                        targets.Target("cuda"), name="gmm")
    compile_all([mod])
    low = T.to_text(mod.lowered)
    assert low.count(f'T.allocate(({128 * versions},), "float32", scope="shared")') == 2
    x, y = rand((32, 32)), rand((32, 32), seed=1)
    z = np.full((32, 32), np.nan, "float32")
    T.interpret(mod.lowered, x, y, z, check_races=True)
    np.testing.assert_allclose(z, x @ y, rtol=1e-5, atol=1e-5)


# TVM's thread_broadcast_2 in small: a local buffer of a symbolic shape whose element per
# thread block sits at a row and column taken from blockIdx (bx // n, bx % n)
SYMBOLIC_LOCAL = '''
@T.prim_func
def f(a: T.handle, c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (4, n), "float32")
    C = T.match_buffer(c, (4, n), "float32")
    B_local = T.alloc_buffer((4, n), scope="local")
    for bx in T.thread_binding(n * 4, thread="blockIdx.x"):
        with T.block("B"):
            v0 = T.axis.spatial(4, bx // n)
            v1 = T.axis.spatial(n, bx % n)
            B_local[v0, v1] = A[v0, v1] * T.float32(2)
        with T.block("C"):
            v0 = T.axis.spatial(4, bx // n)
            v1 = T.axis.spatial(n, bx % n)
            C[v0, v1] = B_local[v0, v1] + T.float32(1)
'''


def test_a_symbolic_local_buffer_shrinks_to_its_one_element():
    # the box is one element, which the analyzer could not compare with a symbolic n
    # (n may be 0 for all it knows): it kept (1, n), refused as not of a constant size
    mod = targets.build(T.parse(SYMBOLIC_LOCAL), targets.Target("cuda"), name="f")
    compile_all([mod])
    assert 'T.allocate((1,), "float32", scope="local")' in T.to_text(mod.lowered)
    a = rand((4, 3))
    c = np.full((4, 3), np.nan, "float32")
    T.interpret(mod.lowered, a, c, check_races=True)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)
