"""The IR forms schedule primitives give, written as TensorIR writes them: exact
before/after functions (our own programs), each also checked numerically."""

import numpy as np

import cuvil_tir as T
import schedules as S
from tests.schedules.testing import run, verify_text_roundtrip, verify_trace_roundtrip


def assert_ir(got, want_text):
    want = T.parse(want_text)
    assert T.structural_equal(got, want), f"got:\n{got}\nwant:\n{want}"


def same_numbers(before, after, shapes=None):
    """Both functions give the same outputs on random inputs (``shapes`` per buffer
    parameter when they are symbolic)."""
    rng = np.random.default_rng(0)
    shapes = shapes or [tuple(int(s) for s in p.shape) for p in before.params]
    arrays = [rng.random(shape, dtype="float32") for shape in shapes]
    want = run(before, [a.copy() for a in arrays])
    got = run(after, [a.copy() for a in arrays])
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-6)


# compute_at --------------------------------------------------------------------------------

WINDOW = '''
@T.prim_func
def window(X: T.Buffer((40,), "float32"), Y: T.Buffer((40,), "float32")):
    P = T.alloc_buffer((40,), "float32")
    for i in T.serial(40):
        with T.block("P"):
            vi = T.axis.remap("S", [i])
            P[vi] = X[vi] * 2.0
    for i in T.serial(40):
        with T.block("Y"):
            vi = T.axis.remap("S", [i])
            Y[vi] = T.if_then_else(1 <= vi, P[vi - 1], T.float32(0)) + P[vi]
'''


def test_compute_at_binding_is_tile_start_plus_loop_and_predicate_is_normal():
    f = T.parse(WINDOW)
    sch = S.Schedule(f)
    io, _ = sch.split(sch.get_loops(sch.get_block("Y"))[0], [5, 8])
    sch.compute_at(sch.get_block("P"), io)
    assert_ir(sch.func, '''
@T.prim_func
def window(X: T.Buffer((40,), "float32"), Y: T.Buffer((40,), "float32")):
    P = T.alloc_buffer((40,), "float32")
    for i_0 in T.serial(5):
        for ax0 in T.serial(9):
            with T.block("P"):
                vi = T.axis.spatial(40, i_0 * 8 - 1 + ax0)
                T.where(1 <= i_0 * 8 + ax0)
                T.reads(X[vi])
                T.writes(P[vi])
                P[vi] = X[vi] * 2.0
        for i_1 in T.serial(8):
            with T.block("Y"):
                vi = T.axis.spatial(40, i_0 * 8 + i_1)
                Y[vi] = T.if_then_else(1 <= vi, P[vi - 1], T.float32(0)) + P[vi]
''')
    same_numbers(f, sch.func)
    verify_trace_roundtrip(sch, f)


def test_compute_at_range_wider_than_the_domain_is_cut_to_it():
    # Y's j loop runs past the one column of B (T.where(j < 1)): B is computed once,
    # not under a 32-iteration loop with a predicate
    f = T.parse('''
@T.prim_func
def narrow(A: T.Buffer((8, 1), "float32"), C: T.Buffer((8, 1), "float32")):
    B = T.alloc_buffer((8, 1), "float32")
    for i, j in T.grid(8, 1):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + 1.0
    for i, j in T.grid(8, 32):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            vj = T.axis.spatial(1, j)
            T.where(j < 1)
            C[vi, vj] = B[vi, vj] * 3.0
''')
    sch = S.Schedule(f)
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0],
                   preserve_unit_loops=True)
    assert_ir(sch.func, '''
@T.prim_func
def narrow(A: T.Buffer((8, 1), "float32"), C: T.Buffer((8, 1), "float32")):
    B = T.alloc_buffer((8, 1), "float32")
    for i in T.serial(8):
        for ax0, ax1 in T.grid(1, 1):
            with T.block("B"):
                vi = T.axis.spatial(8, i + ax0)
                vj = T.axis.spatial(1, ax1)
                T.reads(A[vi, vj])
                T.writes(B[vi, vj])
                B[vi, vj] = A[vi, vj] + 1.0
        for j in T.serial(32):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                vj = T.axis.spatial(1, j)
                T.where(j < 1)
                T.reads(B[vi, vj])
                T.writes(C[vi, vj])
                C[vi, vj] = B[vi, vj] * 3.0
''')
    same_numbers(f, sch.func)


def test_compute_at_repeat_reads_one_element_per_tile():
    # Y[i] reads X2[i // 8]: a tile of 4 consecutive i reads one element of X2
    f = T.parse('''
@T.prim_func
def repeat(X: T.Buffer((5,), "float32"), Y: T.Buffer((40,), "float32")):
    X2 = T.alloc_buffer((5,), "float32")
    for i in T.serial(5):
        with T.block("X2"):
            vi = T.axis.remap("S", [i])
            X2[vi] = X[vi] * 2.0
    for i in T.serial(40):
        with T.block("Y"):
            vi = T.axis.remap("S", [i])
            Y[vi] = X2[vi // 8]
''')
    sch = S.Schedule(f)
    io, _ = sch.split(sch.get_loops(sch.get_block("Y"))[0], [10, 4])
    sch.compute_at(sch.get_block("X2"), io)
    assert_ir(sch.func, '''
@T.prim_func
def repeat(X: T.Buffer((5,), "float32"), Y: T.Buffer((40,), "float32")):
    X2 = T.alloc_buffer((5,), "float32")
    for i_0 in T.serial(10):
        with T.block("X2"):
            vi = T.axis.spatial(5, i_0 // 2)
            T.reads(X[vi])
            T.writes(X2[vi])
            X2[vi] = X[vi] * 2.0
        for i_1 in T.serial(4):
            with T.block("Y"):
                vi = T.axis.spatial(40, i_0 * 4 + i_1)
                T.reads(X2[vi // 8])
                T.writes(Y[vi])
                Y[vi] = X2[vi // 8]
''')
    same_numbers(f, sch.func)


# split and fuse ----------------------------------------------------------------------------

def test_split_of_a_symbolic_multiple_needs_no_guard():
    n = T.size_var("n")
    X = T.placeholder((n * 16,), name="X")
    f = T.create_prim_func([X, T.compute((n * 16,), lambda i: X[i] + 1.0, name="Y")])
    sch = S.Schedule(f)
    sch.split(sch.get_loops(sch.get_block("Y"))[0], [None, 16])
    assert_ir(sch.func, '''
@T.prim_func
def main(X: T.Buffer((n * 16,), "float32"), Y: T.Buffer((n * 16,), "float32")):
    n = T.size_var("n")
    for i_0 in T.serial(n):
        for i_1 in T.serial(16):
            with T.block("Y"):
                v_i = T.axis.spatial(n * 16, i_0 * 16 + i_1)
                T.reads(X[v_i])
                T.writes(Y[v_i])
                Y[v_i] = X[v_i] + T.float32(1)
''')
    same_numbers(f, sch.func, [(48,), (48,)])


def test_split_in_three_guards_in_nested_form():
    X = T.placeholder((50,), name="X")
    f = T.create_prim_func([X, T.compute((50,), lambda i: X[i] * 2.0, name="Y")])
    sch = S.Schedule(f)
    sch.split(sch.get_loops(sch.get_block("Y"))[0], [3, 4, 5])
    assert "T.where((i_0 * 4 + i_1) * 5 + i_2 < 50)" in str(sch.func)
    assert "v_i = T.axis.spatial(50, i_0 * 20 + i_1 * 5 + i_2)" in str(sch.func)
    same_numbers(f, sch.func)


def test_fuse_extent_is_simplified():
    n = T.size_var("n")
    X = T.placeholder((4, 8, n), name="X")
    f = T.create_prim_func([X, T.compute((4, 8, n), lambda i, j, k: X[i, j, k] * 2.0,
                                         name="Y")])
    sch = S.Schedule(f)
    sch.fuse(*sch.get_loops(sch.get_block("Y")))
    text = str(sch.func)
    assert "for i_j_k_fused in T.serial(n * 32):" in text
    assert "v_i = T.axis.spatial(4, i_j_k_fused // (n * 8))" in text
    same_numbers(f, sch.func, [(4, 8, 3), (4, 8, 3)])


# reindex -----------------------------------------------------------------------------------

def test_reindex_leaves_out_a_variable_the_access_does_not_depend_on():
    # c // 8 is 0 over c's domain: X is read at [i, r], so its copy has no c axis
    f = T.parse('''
@T.prim_func
def windows(X: T.Buffer((4, 3), "float32"), Y: T.Buffer((4, 8), "float32")):
    for i, c, r in T.grid(4, 8, 3):
        with T.block("Y"):
            vi, vc, vr = T.axis.remap("SSR", [i, c, r])
            with T.init():
                Y[vi, vc] = T.float32(0)
            Y[vi, vc] = Y[vi, vc] + X[vi, vc // 8 * 3 + vr]
''')
    sch = S.Schedule(f)
    sch.reindex("Y", ("read", 0))
    assert_ir(sch.func, '''
@T.prim_func
def windows(X: T.Buffer((4, 3), "float32"), Y: T.Buffer((4, 8), "float32")):
    X_reindex = T.alloc_buffer((4, 3), "float32")
    for i, r in T.grid(4, 3):
        with T.block("X_reindex"):
            vi, vr = T.axis.remap("SS", [i, r])
            X_reindex[vi, vr] = X[vi, vr]
    for i, c, r in T.grid(4, 8, 3):
        with T.block("Y"):
            vi, vc, vr = T.axis.remap("SSR", [i, c, r])
            T.reads(X_reindex[vi, vr])
            T.writes(Y[vi, vc])
            with T.init():
                Y[vi, vc] = T.float32(0)
            Y[vi, vc] = Y[vi, vc] + X_reindex[vi, vr]
''')
    same_numbers(f, sch.func)


# cache_read / cache_write ------------------------------------------------------------------

def test_cache_read_of_an_int64_shaped_buffer_keeps_int32_indices():
    f = T.parse('''
@T.prim_func
def wide(A: T.Buffer((T.int64(8),), "float32"), B: T.Buffer((T.int64(8),), "float32")):
    for i in T.serial(8):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] + 1.0
''')
    sch = S.Schedule(f)
    sch.cache_read("B", 0, "local")
    assert_ir(sch.func, '''
@T.prim_func
def wide(A: T.Buffer((T.int64(8),), "float32"), B: T.Buffer((T.int64(8),), "float32")):
    A_local = T.alloc_buffer((T.int64(8),), "float32", scope="local")
    for ax0 in T.serial(T.int64(8)):
        with T.block("A_local"):
            v0 = T.axis.remap("S", [ax0])
            A_local[v0] = A[v0]
    for i in T.serial(8):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A_local[vi] + 1.0
''')
    same_numbers(f, sch.func)


TILED = '''
@T.prim_func
def tiled(X: T.Buffer((32,), "float32"), Y: T.Buffer((32,), "float32")):
    for o in T.serial(4):
        with T.block("tile"):
            vo = T.axis.remap("S", [o])
            T.reads(X[vo * 8:vo * 8 + 8])
            T.writes(Y[vo * 8:vo * 8 + 8])
            for t in T.serial(8):
                with T.block("Y"):
                    vt = T.axis.spatial(32, vo * 8 + t)
                    Y[vt] = X[vt] * 2.0
'''


def test_cache_of_a_tile_is_indexed_from_the_tile_start():
    f = T.parse(TILED)
    sch = S.Schedule(f)
    sch.cache_read("Y", 0, "local")
    sch.cache_write("Y", 0, "local")
    assert_ir(sch.func, '''
@T.prim_func
def tiled(X: T.Buffer((32,), "float32"), Y: T.Buffer((32,), "float32")):
    for o in T.serial(4):
        with T.block("tile"):
            vo = T.axis.remap("S", [o])
            X_local = T.alloc_buffer((8,), "float32", scope="local")
            Y_local = T.alloc_buffer((8,), "float32", scope="local")
            T.reads(X[vo * 8:vo * 8 + 8])
            T.writes(Y[vo * 8:vo * 8 + 8])
            for ax0 in T.serial(8):
                with T.block("X_local"):
                    v0 = T.axis.remap("S", [ax0])
                    X_local[v0] = X[vo * 8 + v0]
            for t in T.serial(8):
                with T.block("Y"):
                    vt = T.axis.spatial(32, vo * 8 + t)
                    Y_local[vt - vo * 8] = X_local[vt - vo * 8] * 2.0
            for ax0 in T.serial(8):
                with T.block("Y_local"):
                    v0 = T.axis.remap("S", [ax0])
                    Y[vo * 8 + v0] = Y_local[v0]
''')
    same_numbers(f, sch.func)
    verify_trace_roundtrip(sch, f)


def test_cache_in_an_opaque_block_using_the_loops_keeps_the_bindings():
    # the scope block has no axes and names loop o itself; a block inside it may not,
    # so the copy binds o through its iter values instead of the tile form
    f = T.parse('''
@T.prim_func
def tiled(X: T.Buffer((32,), "float32"), Y: T.Buffer((32,), "float32")):
    for o in T.serial(4):
        with T.block("tile"):
            T.reads(X[o * 8:o * 8 + 8])
            T.writes(Y[o * 8:o * 8 + 8])
            for t in T.serial(8):
                with T.block("Y"):
                    vt = T.axis.spatial(32, o * 8 + t)
                    Y[vt] = X[vt] * 2.0
''')
    sch = S.Schedule(f)
    sch.cache_read("Y", 0, "local")
    verify_text_roundtrip(sch.func)
    same_numbers(f, sch.func)
