"""compute_at / reverse_compute_at / compute_inline / reverse_compute_inline on general
quasi-affine index maps (fused ``vi * 16 + vj``, ``//`` and ``%`` layouts, reversed
``9 - vi``, blockized producers, constant store indices, over-computed and predicated
producers), scope-aware relaxation (``shared`` under thread-bound loops), and the
refusals of maps that cannot be inverted.

Each accepted schedule is checked against numpy with the interpreter and with LLVM, and
its trace and text round trips are verified.
"""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from cuvil_tir.analysis import tree
from schedules.errors import BlockLocationError, InlineError

from .testing import assert_refused, run, run_llvm, verify_trace_roundtrip


TRUE = "T.bool(True)"


def check(sch, func, arrays, want, out=-1, llvm=True):
    """The scheduled function computes ``want`` in argument ``out``, interpreted and
    built with LLVM; the trace and the text round-trip."""
    np.testing.assert_allclose(run(sch, arrays)[out], want, rtol=1e-6)
    if llvm:
        np.testing.assert_allclose(run_llvm(sch, arrays)[out], want, rtol=1e-6)
    verify_trace_roundtrip(sch, func)


def block_text(sch, name):
    """The printed block realize ``name`` with the loops above it (their headers)."""
    f = sch.func
    path = tree.find_block(f, name)
    heads = [f"for {l.loop_var.name} in {l.extent}" for _, l in tree.loops_above(f, path)]
    realize = tree.get(f, path)
    values = [str(v) for v in realize.iter_values]
    return heads, values, str(realize.predicate)


# compute_at ------------------------------------------------------------------------------

FUSED = '''
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
'''

FUSED_AFTER = '''@T.prim_func
def main(A: T.Buffer((64, 8), "float32"), C: T.Buffer((64, 8), "float32")):
    B = T.alloc_buffer((64, 8), "float32")
    for i_0 in T.serial(8):
        for ax0 in T.serial(8):
            for ax1 in T.serial(8):
                with T.block("B"):
                    vi = T.axis.spatial(4, i_0 // 2)
                    vj = T.axis.spatial(16, i_0 % 2 * 8 + ax0)
                    vk = T.axis.spatial(8, ax1)
                    T.reads(A[vi * 16 + vj, vk])
                    T.writes(B[vi * 16 + vj, vk])
                    B[vi * 16 + vj, vk] = A[vi * 16 + vj, vk] * T.float32(2)
        for i_1 in T.serial(8):
            for k in T.serial(8):
                with T.block("C"):
                    vi_1 = T.axis.spatial(64, i_0 * 8 + i_1)
                    vk_1 = T.axis.spatial(8, k)
                    T.reads(B[vi_1, vk_1])
                    T.writes(C[vi_1, vk_1])
                    C[vi_1, vk_1] = B[vi_1, vk_1] + T.float32(1)'''


def test_compute_at_fused_index_exact_ir():
    f = T.parse(FUSED)
    sch = S.Schedule(f)
    io, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 8])
    sch.compute_at(sch.get_block("B"), io)
    assert str(sch.func) == FUSED_AFTER
    a = np.random.default_rng(0).random((64, 8), dtype="float32")
    check(sch, f, [a, np.zeros((64, 8), "float32")], a * 2 + 1)


@pytest.mark.parametrize("factor, heads, values", [
    (16, ["for i_0 in 4", "for ax0 in 16", "for ax1 in 8"], ["i_0", "ax0", "ax1"]),
    (32, ["for i_0 in 2", "for ax0 in 2", "for ax1 in 16", "for ax2 in 8"],
     ["i_0 * 2 + ax0", "ax1", "ax2"]),
    (4, ["for i_0 in 16", "for ax0 in 4", "for ax1 in 8"],
     ["i_0 // 4", "i_0 % 4 * 4 + ax0", "ax1"]),
])
def test_compute_at_fused_index_tiles(factor, heads, values):
    f = T.parse(FUSED)
    sch = S.Schedule(f)
    io, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], [None, factor])
    sch.compute_at(sch.get_block("B"), io)
    assert block_text(sch, "B") == (heads, values, TRUE)
    a = np.random.default_rng(1).random((64, 8), dtype="float32")
    check(sch, f, [a, np.zeros((64, 8), "float32")], a * 2 + 1, llvm=factor == 4)


LAYOUT = '''
@T.prim_func
def main(X: T.Buffer((16,), "float32"), C: T.Buffer((4, 4), "float32")):
    B = T.alloc_buffer((4, 4), "float32")
    for v in T.serial(16):
        with T.block("B"):
            vv = T.axis.spatial(16, v)
            B[vv // 4, vv % 4] = X[vv] * T.float32(2)
    for i, j in T.grid(4, 4):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
'''


@pytest.mark.parametrize("depth, heads, values", [
    (0, ["for i in 4", "for ax0 in 4"], ["i * 4 + ax0"]),
    (1, ["for i in 4", "for j in 4"], ["i * 4 + j"]),
])
def test_compute_at_floordiv_floormod_layout(depth, heads, values):
    f = T.parse(LAYOUT)
    sch = S.Schedule(f)
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[depth])
    assert block_text(sch, "B") == (heads, values, TRUE)
    x = np.arange(16, dtype="float32")
    check(sch, f, [x, np.zeros((4, 4), "float32")], (x * 2 + 1).reshape(4, 4))


REVERSED = '''
@T.prim_func
def main(X: T.Buffer((10,), "float32"), Z: T.Buffer((10,), "float32")):
    Y = T.alloc_buffer((10,), "float32")
    for i in T.serial(10):
        with T.block("Y"):
            vi = T.axis.spatial(10, i)
            Y[9 - vi] = X[vi] * T.float32(2)
    for i in T.serial(10):
        with T.block("Z"):
            vi = T.axis.spatial(10, i)
            Z[vi] = Y[vi] + T.float32(1)
'''


def test_compute_at_reversed_index():
    f = T.parse(REVERSED)
    sch = S.Schedule(f)
    sch.compute_at(sch.get_block("Y"), sch.get_loops(sch.get_block("Z"))[0])
    assert block_text(sch, "Y") == (["for i in 10"], ["9 - i"], TRUE)
    x = np.arange(10, dtype="float32")
    check(sch, f, [x, np.zeros(10, "float32")], x[::-1] * 2 + 1)


def test_reverse_compute_at_reversed_read():
    f = T.parse(REVERSED.replace("Y[9 - vi] = X[vi]", "Y[vi] = X[vi]")
                .replace("Z[vi] = Y[vi]", "Z[vi] = Y[9 - vi]"))
    sch = S.Schedule(f)
    sch.reverse_compute_at(sch.get_block("Z"), sch.get_loops(sch.get_block("Y"))[0])
    assert block_text(sch, "Z") == (["for i in 10"], ["9 - i"], TRUE)
    x = np.arange(10, dtype="float32")
    check(sch, f, [x, np.zeros(10, "float32")], x[::-1] * 2 + 1)


def chain(n=16):
    A = T.placeholder((n,), name="A")
    B = T.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = T.compute((n,), lambda i: B[i] + 1.0, name="C")
    return T.create_prim_func([A, C])


def test_compute_at_blockized_producer():
    f = chain()
    sch = S.Schedule(f)
    _, i1 = sch.split(sch.get_loops(sch.get_block("B"))[0], [4, 4])
    outer = sch.blockize(i1)
    c0, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], [2, 8])
    sch.compute_at(outer, c0)
    assert block_text(sch, "B_o") == (["for i_0 in 2", "for ax0 in 2"], ["i_0 * 2 + ax0"],
                                      TRUE)
    a = np.arange(16, dtype="float32")
    check(sch, f, [a, np.zeros(16, "float32")], a * 2 + 1)


def test_compute_at_predicated_producer_simplified_bounds():
    f = chain(10)
    sch = S.Schedule(f)
    sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 4])
    c0, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 3])
    sch.compute_at(sch.get_block("B"), c0)
    # the boundary tile keeps the domain guard, nothing else
    assert block_text(sch, "B") == (["for i_0 in 4", "for ax0 in 3"], ["i_0 * 3 + ax0"],
                                    "i_0 * 3 + ax0 < 10")
    a = np.arange(10, dtype="float32")
    check(sch, f, [a, np.zeros(10, "float32")], a * 2 + 1)


def test_compute_at_over_computed_window():
    A = T.placeholder((9,), name="A")
    B = T.compute((9,), lambda i: A[i] * 2.0, name="B")
    C = T.compute((8,), lambda i: B[i] + B[i + 1], name="C")
    f = T.create_prim_func([A, C])
    sch = S.Schedule(f)
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0])
    # neighbouring iterations recompute the shared element; the extent is a constant
    assert block_text(sch, "B") == (["for i in 8", "for ax0 in 2"], ["i + ax0"], TRUE)
    a = np.arange(9, dtype="float32")
    check(sch, f, [a, np.zeros(8, "float32")], a[:-1] * 2 + a[1:] * 2)


NON_INJECTIVE = '''
@T.prim_func
def main(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((8,), "float32")
    for v in T.serial(16):
        with T.block("B"):
            vv = T.axis.spatial(16, v)
            B[vv // 2] = A[vv]
    for i in T.serial(16):
        with T.block("C"):
            vi = T.axis.spatial(16, i)
            C[vi] = B[vi // 2] * T.float32(2)
'''


def test_compute_at_covers_every_value_writing_an_element():
    f = T.parse(NON_INJECTIVE)
    sch = S.Schedule(f)
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0])
    assert block_text(sch, "B") == (["for i in 16", "for ax0 in 2"], ["i // 2 * 2 + ax0"],
                                    TRUE)
    a = np.arange(16, dtype="float32")
    check(sch, f, [a, np.zeros(16, "float32")], np.repeat(a[1::2], 2) * 2)


def test_reverse_compute_at_consumer_of_a_divided_index():
    f = T.parse(NON_INJECTIVE)
    sch = S.Schedule(f)
    sch.reverse_compute_at(sch.get_block("C"), sch.get_loops(sch.get_block("B"))[0])
    heads, values, _ = block_text(sch, "C")
    assert (heads, values) == (["for v in 16", "for ax0 in 2"], ["v // 2 * 2 + ax0"])
    a = np.arange(16, dtype="float32")
    # C reads B[k] right after v = 2k + 1 has written it, and again after 2k: the last
    # reading is the final value
    check(sch, f, [a, np.zeros(16, "float32")], np.repeat(a[1::2], 2) * 2)


def test_compute_at_symbolic_extent_stays_symbolic():
    n, m = T.size_var("n"), T.size_var("m")
    A = T.placeholder((n, m), name="A")
    B = T.compute((n, m), lambda i, j: A[i, j] * 2.0, name="B")
    C = T.compute((n, m), lambda i, j: B[i, j] + 1.0, name="C")
    f = T.create_prim_func([A, C])
    sch = S.Schedule(f)
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0])
    assert block_text(sch, "B") == (["for i in n", "for ax0 in m"], ["i", "ax0"], TRUE)
    a = np.arange(12, dtype="float32").reshape(3, 4)
    check(sch, f, [a, np.zeros((3, 4), "float32")], a * 2 + 1)


# scopes ----------------------------------------------------------------------------------

def gpu_matmul():
    M = N = 64
    K = 32
    A = T.placeholder((M, K), name="A")
    B = T.placeholder((K, N), name="B")
    k = T.reduce_axis((0, K), name="k")
    C = T.compute((M, N), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
    f = T.create_prim_func([A, B, C])
    sch = S.Schedule(f)
    i, j, kk = sch.get_loops(sch.get_block("C"))
    bx, ii = sch.split(i, [8, 8])
    tx, jj = sch.split(j, [16, 4])
    ko, ki = sch.split(kk, [4, 8])
    sch.reorder(bx, tx, ko, ii, jj, ki)
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return f, sch


@pytest.mark.parametrize("scope, heads, values", [
    # one thread block's threads all read the shared tile: 8 rows x 64 columns
    ("shared", ["for i_0 in 8", "for j_0 in 16", "for k_0 in 4", "for ax0 in 8",
                "for ax1 in 64"], ["k_0 * 8 + ax0", "ax1"]),
    # a local copy is per thread: that thread's 8 x 4
    ("local", ["for i_0 in 8", "for j_0 in 16", "for k_0 in 4", "for ax0 in 8",
               "for ax1 in 4"], ["k_0 * 8 + ax0", "j_0 * 4 + ax1"]),
])
def test_compute_at_relaxes_thread_loops_by_scope(scope, heads, values):
    f, sch = gpu_matmul()
    cached = sch.cache_read(sch.get_block("C"), 1, scope)
    sch.compute_at(cached, sch.get_loops(sch.get_block("C"))[2])
    assert block_text(sch, f"B_{scope}") == (heads, values, TRUE)
    rng = np.random.default_rng(2)
    a, b = rng.random((64, 32), dtype="float32"), rng.random((32, 64), dtype="float32")
    np.testing.assert_allclose(run(sch, [a, b, np.zeros((64, 64), "float32")])[2], a @ b,
                               rtol=1e-5)
    verify_trace_roundtrip(sch, f)


# refusals --------------------------------------------------------------------------------

OVERLAP = '''
@T.prim_func
def main(A: T.Buffer((4, 4), "float32"), C: T.Buffer((7,), "float32")):
    B = T.alloc_buffer((7,), "float32")
    for i, j in T.grid(4, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi + vj] = A[vi, vj]
    for i in T.serial(7):
        with T.block("C"):
            vi = T.axis.spatial(7, i)
            C[vi] = B[vi] * T.float32(2)
'''


def test_compute_at_refuses_overlapping_digits():
    sch = S.Schedule(T.parse(OVERLAP))
    blk, loop = sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0]
    assert_refused(sch, lambda: sch.compute_at(blk, loop),
                   r"compute_at: cannot derive the iteration domain of block 'B' from its "
                   r"accesses B\[vi \+ vj\]: the block variables' digits overlap in one "
                   r"index", BlockLocationError)


def test_compute_at_refuses_a_non_quasi_affine_index():
    sch = S.Schedule(T.parse(NON_INJECTIVE.replace("B[vv // 2] = A[vv]",
                                                   "B[vv * vv % 8] = A[vv]")))
    blk, loop = sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0]
    assert_refused(sch, lambda: sch.compute_at(blk, loop),
                   r"accesses B\[vv \* vv % 8\]: vv \* vv is not quasi-affine in the block "
                   r"variables", BlockLocationError)


def test_reverse_compute_at_refuses_mixed_signs():
    f = T.parse(OVERLAP.replace("B[vi + vj] = A[vi, vj]", "B[vi] = A[vi, vj]")
                .replace("T.alloc_buffer((7,)", "T.alloc_buffer((4,)")
                .replace("C[vi] = B[vi] * T.float32(2)", "C[vi] = B[vi // 4 - vi % 4 + 3]"))
    sch = S.Schedule(f)
    blk, loop = sch.get_block("C"), sch.get_loops(sch.get_block("B"))[0]
    assert_refused(sch, lambda: sch.reverse_compute_at(blk, loop),
                   r"the index mixes positive and negative coefficients", BlockLocationError)


# compute_inline / reverse_compute_inline ------------------------------------------------

def test_compute_inline_floordiv_floormod_store():
    f = T.parse(LAYOUT)
    sch = S.Schedule(f)
    sch.compute_inline(sch.get_block("B"))
    body = tree.get(sch.func, tree.find_block(sch.func, "C")).block.body
    assert str(body.value) == "X[vi * 4 + vj] * T.float32(2) + T.float32(1)"
    x = np.arange(16, dtype="float32")
    check(sch, f, [x, np.zeros((4, 4), "float32")], (x * 2 + 1).reshape(4, 4))


def test_compute_inline_fused_and_reversed_stores():
    f = T.parse(FUSED)
    sch = S.Schedule(f)
    sch.compute_inline(sch.get_block("B"))
    body = tree.get(sch.func, tree.find_block(sch.func, "C")).block.body
    assert str(body.value) == "A[vi, vk] * T.float32(2) + T.float32(1)"
    a = np.random.default_rng(3).random((64, 8), dtype="float32")
    check(sch, f, [a, np.zeros((64, 8), "float32")], a * 2 + 1)
    g = T.parse(REVERSED)
    sch = S.Schedule(g)
    sch.compute_inline(sch.get_block("Y"))
    body = tree.get(sch.func, tree.find_block(sch.func, "Z")).block.body
    assert str(body.value) == "X[9 - vi] * T.float32(2) + T.float32(1)"
    x = np.arange(10, dtype="float32")
    check(sch, g, [x, np.zeros(10, "float32")], x[::-1] * 2 + 1)


CONST_STORE = '''
@T.prim_func
def main(A: T.Buffer((8,), "float32"), C: T.Buffer((2, 8), "float32")):
    B = T.alloc_buffer((8,), "float32")
    for i in T.serial(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] * T.float32(2)
    for i in T.serial(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[1, 7 - vi] = B[vi] + T.float32(1)
'''


def test_reverse_compute_inline_consumer_storing_at_constant_index():
    f = T.parse(CONST_STORE)
    sch = S.Schedule(f)
    sch.reverse_compute_inline(sch.get_block("C"))
    realize = tree.get(sch.func, tree.find_block(sch.func, "B"))
    assert str(realize.block.body.indices) == "(1, 7 - vi)"
    assert str(realize.predicate) == TRUE
    a = np.arange(8, dtype="float32")
    c = np.zeros((2, 8), "float32")
    want = c.copy()
    want[1] = (a * 2 + 1)[::-1]
    check(sch, f, [a, c], want)


def test_reverse_compute_inline_layout_and_diagonal():
    # C[u] = B[u // 4, u % 4]: the producer iterates B's (i, j) and writes C[i * 4 + j]
    A = T.placeholder((4, 4), name="A")
    B = T.compute((4, 4), lambda i, j: A[i, j] + 1.0, name="B")
    C = T.compute((16,), lambda u: B[u // 4, u % 4] * 2.0, name="C")
    f = T.create_prim_func([A, C])
    sch = S.Schedule(f)
    sch.reverse_compute_inline(sch.get_block("C"))
    realize = tree.get(sch.func, tree.find_block(sch.func, "B"))
    assert str(realize.block.body.indices) == "(v_i * 4 + v_j,)"
    a = np.arange(16, dtype="float32").reshape(4, 4)
    check(sch, f, [a, np.zeros(16, "float32")], (a.reshape(16) + 1) * 2)
    # D[u] = B[u, u] reads only the diagonal: the producer keeps only those iterations
    D = T.compute((4,), lambda u: B[u, u] * 2.0, name="D")
    g = T.create_prim_func([A, D])
    sch = S.Schedule(g)
    sch.reverse_compute_inline(sch.get_block("D"))
    realize = tree.get(sch.func, tree.find_block(sch.func, "B"))
    assert str(realize.predicate) == "i == j"
    check(sch, g, [a, np.zeros(4, "float32")], (np.diag(a) + 1) * 2)


def test_reverse_compute_inline_smaller_consumer_gets_a_predicate():
    A = T.placeholder((10,), name="A")
    B = T.compute((10,), lambda i: A[i] + 1.0, name="B")
    C = T.compute((8,), lambda u: B[u + 2] * 2.0, name="C")
    f = T.create_prim_func([A, C])
    sch = S.Schedule(f)
    sch.reverse_compute_inline(sch.get_block("C"))
    realize = tree.get(sch.func, tree.find_block(sch.func, "B"))
    assert str(realize.block.body.indices) == "(v_i - 2,)"
    assert str(realize.predicate) == "2 <= i"
    a = np.arange(10, dtype="float32")
    check(sch, f, [a, np.zeros(8, "float32")], (a[2:] + 1) * 2)


def test_reverse_compute_inline_refuses_a_non_injective_store():
    A = T.placeholder((8,), name="A")
    B = T.compute((8,), lambda i: A[i] + 1.0, name="B")
    C = T.compute((8,), lambda u: B[u] * 2.0, name="C")
    f = T.create_prim_func([A, C])
    path = tree.find_block(f, "C")
    st = tree.get(f, path).block.body
    f = tree.replace(f, path + ("block", "body"),
                     T.BufferStore(st.buffer, st.value, (st.indices[0] % 4,)))
    sch = S.Schedule(f)
    blk = sch.get_block("C")
    assert_refused(sch, lambda: sch.reverse_compute_inline(blk),
                   r"block 'C' stores to \[v_u % 4\]: the index map is not injective "
                   r"\(block variable v_u appears only modulo 4", InlineError)


# caches inside a nested block -----------------------------------------------------------

def cache_shapes(sch):
    return {b.name: tuple(int(s) for s in b.shape)
            for r in tree.blocks_under(sch.func.body) for b in r.block.alloc_buffers}


def test_caches_of_a_nested_block_hold_its_tile():
    A = T.placeholder((8, 8), name="A")
    B = T.compute((8, 8), lambda i, j: A[i, j] * 2.0, name="B")
    f = T.create_prim_func([A, B])
    sch = S.Schedule(f)
    i, j = sch.get_loops(sch.get_block("B"))
    i0, i1 = sch.split(i, [2, 4])
    j0, j1 = sch.split(j, [2, 4])
    sch.reorder(i0, j0, i1, j1)
    sch.blockize(i1)
    sch.cache_write(sch.get_block("B"), 0, "local")
    sch.cache_read(sch.get_block("B"), 0, "local")
    assert cache_shapes(sch) == {"B_local": (4, 4), "A_local": (4, 4)}
    inner = tree.get(sch.func, tree.find_block(sch.func, "B")).block
    assert str(inner.body) == "B_local[v_i_i, v_j_i] = A_local[v_i_i, v_j_i] * T.float32(2)"
    # the copies run over the tile, indexed from its start (TensorIR's form): no guard
    assert block_text(sch, "A_local")[1:] == (["ax0", "ax1"], TRUE)
    copy = tree.get(sch.func, tree.find_block(sch.func, "A_local")).block
    assert str(copy.body) == "A_local[v0, v1] = A[v_i_o * 4 + v0, v_j_o * 4 + v1]"
    a = np.random.default_rng(4).random((8, 8), dtype="float32")
    check(sch, f, [a, np.zeros((8, 8), "float32")], a * 2)


def test_cache_read_inside_a_blockized_reduction():
    X = T.placeholder((4, 3), name="X")
    k = T.reduce_axis((0, 3), name="k")
    Y = T.compute((4,), lambda i: T.sum(X[i, k], axis=k), name="Y")
    f = T.create_prim_func([X, Y])
    sch = S.Schedule(f)
    sch.blockize(sch.get_loops(sch.get_block("Y"))[1])
    sch.cache_read(sch.get_block("Y"), 1, "local")
    assert cache_shapes(sch) == {"X_local": (1, 3)}
    x = np.arange(12, dtype="float32").reshape(4, 3)
    check(sch, f, [x, np.zeros(4, "float32")], x.sum(axis=1))


def test_reverse_compute_inline_refuses_a_consumer_reading_beyond_the_producer():
    # the padding stage reads X_global under a condition, also where nothing is stored
    X = T.placeholder((1, 4), name="X")
    P = T.compute((1, 6), lambda b, h: T.if_then_else(
        T.all(h >= 1, h < 5), X[b, h - 1], T.const(0.0, "float32")), name="P")
    Y = T.compute((1, 6), lambda b, h: P[b, h] * 2.0, name="Y")
    sch = S.Schedule(T.create_prim_func([X, Y]))
    sch.cache_read(sch.get_block("P"), 0, "global")
    blk = sch.get_block("P")
    assert_refused(sch, lambda: sch.reverse_compute_inline(blk),
                   r"block 'P' loads X_global in \[-1, 4\] along dimension 1, but the "
                   r"producer 'X_global' stores only \[0, 3\] there", InlineError)


def test_reverse_compute_at_refuses_a_window_read():
    A = T.placeholder((9,), name="A")
    B = T.compute((9,), lambda i: A[i] * 2.0, name="B")
    C = T.compute((8,), lambda i: B[i] + B[i + 1], name="C")
    sch = S.Schedule(T.create_prim_func([A, C]))
    blk, loop = sch.get_block("C"), sch.get_loops(sch.get_block("B"))[0]
    assert_refused(sch, lambda: sch.reverse_compute_at(blk, loop),
                   r"reverse_compute_at: block 'C' reads B\[v_i:v_i \+ 2\], a window over "
                   r"several elements", BlockLocationError)
