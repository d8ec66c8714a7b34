"""vectorize_loops / unroll_loops: exact IR, vector instructions, results against numpy."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cuvil_tir as T
import targets
from cuvil_tir import Allocate, BufferStore, For, IfThenElse, LetStmt, PrimFunc, seq
from cuvil_tir.transform.unroll import unroll_loops
from cuvil_tir.transform.vectorize import explain_vectorize, vectorize_loops


class _Vec(type(targets.get_target_kind("llvm"))):
    """The llvm backend with only the two passes under test (the input is lowered IR)."""

    name = "llvm-vectorize-test"
    passes = [vectorize_loops, unroll_loops]


@pytest.fixture(scope="module", autouse=True)
def vec_kind():
    targets.register_target(_Vec(), replace=True)
    yield
    targets.unregister_target(_Vec.name)


def _func(params, body, name="k"):
    return PrimFunc(params, body, {"global_symbol": name})


def _build(params, body, **options):
    return targets.build(_func(params, body), targets.Target(_Vec.name, **options))


def _c(v):
    return T.const(v)


def _text(stmt):
    return T.to_text(stmt).strip()


# exact output of the pass ----------------------------------------------------------------

def test_pass_output_chunks_and_tail_exactly():
    A = T.decl_buffer((20,), "float32", "A")
    B = T.decl_buffer((40,), "float32", "B")
    i = T.var("i")
    f = _func([A, B], For(i, _c(0), _c(20), "vectorized",
                          BufferStore(B, A[i] * 2.0 + 1.0, (i * 2,))))
    assert _text(vectorize_loops(f).body) == (
        "for i_c in T.unroll(2):\n"
        "    B[T.Ramp(i_c * 16, 2, 8)] = A[T.Ramp(i_c * 8, 1, 8)] * "
        "T.Broadcast(T.float32(2), 8) + T.Broadcast(T.float32(1), 8)\n"
        "B[T.Ramp(32, 2, 4)] = A[T.Ramp(16, 1, 4)] * T.Broadcast(T.float32(2), 4) + "
        "T.Broadcast(T.float32(1), 4)")


def test_unroll_pass_output_exactly_and_limits():
    C = T.decl_buffer((4,), "float32", "C", scope="local")
    i = T.var("i")
    f = _func([C], For(i, _c(0), _c(4), "unrolled", BufferStore(C, T.const(0.0), (i + 0,))))
    assert _text(unroll_loops(f).body) == "\n".join(f"C[{k}] = T.float32(0)" for k in range(4))
    big = _func([C], For(i, _c(0), _c(100), "unrolled",
                         BufferStore(C, T.const(0.0), (i % 4,))))
    assert unroll_loops(big) is big              # over MAX_EXTENT: stays a loop
    assert unroll_loops(f, max_extent=2) is f


def test_unroll_simplifies_each_distinct_index_once(monkeypatch):
    # a 3 x 4 register tile: C[i, j] += A[i] * B[j], both loops unrolled; the copies
    # repeat A's index in every j and B's in every i, C's in its load and its store
    from cuvil_tir.transform import unroll
    A = T.decl_buffer((3,), "float32", "A")
    B = T.decl_buffer((4,), "float32", "B")
    C = T.decl_buffer((12,), "float32", "C", scope="local")
    i, j = T.var("i"), T.var("j")
    store = BufferStore(C, T.BufferLoad(C, (i * 4 + j,)) + T.BufferLoad(A, (i + 0,)) *
                        T.BufferLoad(B, (j * 1,)), (i * 4 + j,))
    f = _func([A, B, C], For(i, _c(0), _c(3), "unrolled",
                             For(j, _c(0), _c(4), "unrolled", store)))
    seen = []
    simplify = unroll.Analyzer.simplify
    monkeypatch.setattr(unroll.Analyzer, "simplify",
                        lambda self, e, steps=2: seen.append(str(e)) or simplify(self, e, steps))
    out = _text(unroll_loops(f).body).splitlines()
    assert out[0] == "C[0] = C[0] + A[0] * B[0]" and out[-1] == "C[11] = C[11] + A[2] * B[3]"
    assert len(out) == 12 and len(seen) == len(set(seen))


# vector instructions and results ------------------------------------------------------------

@pytest.mark.parametrize("n", [8, 20, 17, 3])
def test_elementwise_with_tails(n):
    A = T.decl_buffer((n,), "float32", "A")
    B = T.decl_buffer((n,), "float32", "B")
    i = T.var("i")
    mod = _build([A, B], For(i, _c(0), _c(n), "vectorized",
                             BufferStore(B, T.exp(A[i]) * A[i] + 1.0, (i,))))
    ll = mod.get_source("ll")
    lanes = min(n, 8)
    assert f"load <{lanes} x float>" in ll and f"store <{lanes} x float>" in ll
    a = np.linspace(-2, 2, n, dtype="float32")
    b = np.zeros(n, "float32")
    mod(a, b)
    np.testing.assert_allclose(b, np.exp(a) * a + 1, rtol=1e-6)


def test_strided_gather_and_scatter():
    A = T.decl_buffer((32,), "int32", "A")
    B = T.decl_buffer((48,), "int32", "B")
    i = T.var("i")
    mod = _build([A, B], For(i, _c(0), _c(16), "vectorized",
                             BufferStore(B, A[i * 2] + A[i // 2], (i * 3,))))
    a, b = np.arange(32, dtype="int32") * 7, np.zeros(48, "int32")
    mod(a, b)
    ref = np.zeros(48, "int32")
    ref[::3] = a[::2] + a[np.arange(16) // 2]
    np.testing.assert_array_equal(b, ref)


def test_float16_and_int8_vector_paths():
    H = T.decl_buffer((32,), "float16", "H")
    G = T.decl_buffer((32,), "float16", "G")
    X = T.decl_buffer((64,), "int8", "X")
    Y = T.decl_buffer((64,), "int8", "Y")
    i, j = T.var("i"), T.var("j")
    body = seq(For(i, _c(0), _c(32), "vectorized",
                   BufferStore(G, H[i] * T.const(3.0, "float16") + H[i], (i,))),
               For(j, _c(0), _c(64), "vectorized",
                   BufferStore(Y, X[j] * T.const(3, "int8") + T.const(100, "int8"), (j,))))
    mod = _build([H, G, X, Y], body)
    ll = mod.get_source("ll")
    assert "<16 x half>" in ll            # 256 bits of float16
    assert "load <32 x i8>" in ll         # 256 bits of int8
    h = np.linspace(-4, 4, 32).astype("float16")
    g = np.zeros(32, "float16")
    x = np.arange(-32, 32, dtype="int8")
    y = np.zeros(64, "int8")
    mod(h, g, x, y)
    np.testing.assert_array_equal(g, (h * np.float16(3)) + h)
    np.testing.assert_array_equal(y, (x * np.int8(3) + np.int8(100)).astype("int8"))


def test_select_and_if_then_else_become_vector_selects():
    A = T.decl_buffer((16,), "float32", "A")
    B = T.decl_buffer((16,), "float32", "B")
    i = T.var("i")
    value = T.select(A[i] > 0.0, A[i], A[i] * 0.5) + T.if_then_else(i < 5, T.const(1.0),
                                                                      T.const(2.0))
    f = _func([A, B], For(i, _c(0), _c(16), "vectorized", BufferStore(B, value, (i,))))
    assert explain_vectorize(f) == []
    mod = targets.build(f, _Vec.name)
    assert "select <8 x i1>" in mod.get_source("ll")
    a = np.linspace(-3, 3, 16, dtype="float32")
    b = np.zeros(16, "float32")
    mod(a, b)
    np.testing.assert_allclose(b, np.where(a > 0, a, a * 0.5) + np.where(np.arange(16) < 5,
                                                                         1.0, 2.0))


def test_inner_loop_and_let_inside_a_vectorized_loop():
    # C[j] = sum_k A[k] * B[k, j] with j vectorized and the k loop inside
    K, N = 5, 12
    A = T.decl_buffer((K,), "float32", "A")
    B = T.decl_buffer((K * N,), "float32", "B")
    C = T.decl_buffer((N,), "float32", "C")
    j, k = T.var("j"), T.var("k")
    t = T.var("t", "float32")
    body = For(j, _c(0), _c(N), "vectorized", seq(
        BufferStore(C, T.const(0.0), (j,)),
        For(k, _c(0), _c(K), "serial",
            LetStmt(t, B[k * N + j], BufferStore(C, C[j] + A[k] * t, (j,))))))
    f = _func([A, B, C], body)
    assert explain_vectorize(f) == []
    mod = targets.build(f, _Vec.name)
    assert "<8 x float>" in mod.get_source("ll")
    a, b = np.random.rand(K).astype("float32"), np.random.rand(K * N).astype("float32")
    c = np.zeros(N, "float32")
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b.reshape(K, N), rtol=1e-5)


# refusals: the loop stays serial and the results stay right ----------------------------------

def test_reduction_across_lanes_is_not_vectorized():
    A = T.decl_buffer((100,), "float32", "A")
    S = T.decl_buffer((1,), "float32", "S")
    i, j = T.var("i"), T.var("j")
    small = For(i, _c(0), _c(8), "vectorized", BufferStore(S, S[0] + A[i], (_c(0),)))
    large = For(j, _c(0), _c(100), "vectorized", BufferStore(S, S[0] + A[j], (_c(0),)))
    f = _func([A, S], seq(small, large))
    why = explain_vectorize(f)
    assert [w[0] for w in why] == ["i", "j"]
    assert "may write the same location (a reduction across lanes)" in why[0][1]
    out = vectorize_loops(f).body
    assert [s.kind for s in out.seq] == ["unrolled", "vectorized"]
    mod = targets.build(f, _Vec.name)
    a, s = np.random.rand(100).astype("float32"), np.zeros(1, "float32")
    mod(a, s)
    np.testing.assert_allclose(s[0], a[:8].sum() + a.sum(), rtol=1e-5)


def test_dependences_between_lanes_keep_the_loop_serial():
    A = T.decl_buffer((17,), "float32", "A")
    C = T.decl_buffer((24,), "float32", "C")
    i, j, k = T.var("i"), T.var("j"), T.var("k")
    chain = For(i, _c(0), _c(16), "vectorized", BufferStore(A, A[i] * 2.0, (i + 1,)))
    overlap = For(j, _c(0), _c(8), "vectorized",
                  For(k, _c(0), _c(4), "serial", BufferStore(C, C[j + k] * 2.0 + 1.0,
                                                             (j + k,))))
    f = _func([A, C], seq(chain, overlap))
    why = dict(explain_vectorize(f))
    assert "accessed through different indices" in why["i"]
    assert "may write the same location" in why["j"]
    mod = targets.build(f, _Vec.name)
    a, c = np.ones(17, "float32"), np.arange(24, dtype="float32")
    ref_a, ref_c = a.copy(), c.copy()
    for x in range(16):
        ref_a[x + 1] = ref_a[x] * 2
    for x in range(8):
        for y in range(4):
            ref_c[x + y] = ref_c[x + y] * 2 + 1
    mod(a, c)
    np.testing.assert_array_equal(a, ref_a)
    np.testing.assert_array_equal(c, ref_c)


def test_linear_tail_guards_get_a_vector_fast_path():
    n = T.size_var("n")
    A = T.decl_buffer((n,), "float32", "A")
    B = T.decl_buffer((16,), "float32", "B")
    i, j = T.var("i"), T.var("j")
    guard = For(i, _c(0), _c(16), "vectorized",
                IfThenElse(i < n, BufferStore(B, A[i], (i,))))
    guarded_load = For(j, _c(0), _c(16), "vectorized",
                       BufferStore(B, B[j] + T.if_then_else(j < n, A[j], T.const(0.0)), (j,)))
    f = _func([A, B], seq(guard, guarded_load))
    assert explain_vectorize(f) == []
    first = vectorize_loops(f).body.seq[0]
    assert _text(first) == ("for i_c in T.unroll(2):\n"
                            "    if i_c * 8 < n and i_c * 8 + 7 < n:\n"
                            "        B[T.Ramp(i_c * 8, 1, 8)] = A[T.Ramp(i_c * 8, 1, 8)]\n"
                            "    else:\n"
                            "        for i_s in T.unroll(8):\n"
                            "            if n > i_c * 8 + i_s:\n"
                            "                B[i_c * 8 + i_s] = A[i_c * 8 + i_s]")
    mod = targets.build(f, _Vec.name)
    assert "load <8 x float>" in mod.get_source("ll")
    for size in (5, 8, 13, 16):
        a, b = np.arange(size, dtype="float32") + 1, np.full(16, 10.0, "float32")
        mod(a, b)
        ref = np.full(16, 10.0, "float32")
        ref[:size] = a * 2
        np.testing.assert_array_equal(b, ref)


def test_other_lane_dependent_guards_keep_the_loop_serial():
    A = T.decl_buffer((16,), "float32", "A")
    B = T.decl_buffer((16,), "float32", "B")
    i, j = T.var("i"), T.var("j")
    guard = For(i, _c(0), _c(16), "vectorized",
                IfThenElse(i % 3 == 0, BufferStore(B, A[i], (i,))))
    guarded_load = For(j, _c(0), _c(16), "vectorized",
                       BufferStore(B, B[j] + T.if_then_else(j % 2 == 1, A[j], T.const(0.0)),
                                   (j,)))
    f = _func([A, B], seq(guard, guarded_load))
    why = dict(explain_vectorize(f))
    assert "condition around a statement depends on the loop variable" in why["i"]
    assert "guards a load" in why["j"]
    mod = targets.build(f, _Vec.name)
    a, b = np.arange(16, dtype="float32") + 1, np.full(16, 10.0, "float32")
    mod(a, b)
    ref = np.full(16, 10.0, "float32")
    ref[::3] = a[::3]
    ref[1::2] += a[1::2]
    np.testing.assert_array_equal(b, ref)


# register blocking ------------------------------------------------------------------------------

def test_local_accumulators_become_registers_and_fma():
    M, N, K = 4, 16, 32
    A = T.decl_buffer((M * K,), "float32", "A")
    B = T.decl_buffer((K * N,), "float32", "B")
    C = T.decl_buffer((M * N,), "float32", "C")
    L = T.decl_buffer((M * N,), "float32", "L", scope="local")
    v = [T.var(x) for x in ("i0", "j0", "k", "i1", "j1", "i2", "j2")]

    def nest(i, j, store):
        return For(i, _c(0), _c(M), "unrolled", For(j, _c(0), _c(N), "vectorized",
                                                     store(i, j)))

    body = Allocate(L, seq(
        nest(v[0], v[1], lambda i, j: BufferStore(L, T.const(0.0), (i * N + j,))),
        For(v[2], _c(0), _c(K), "serial", nest(v[3], v[4], lambda i, j: BufferStore(
            L, L[i * N + j] + A[i * K + v[2]] * B[v[2] * N + j], (i * N + j,)))),
        nest(v[5], v[6], lambda i, j: BufferStore(C, L[i * N + j], (i * N + j,)))))
    mod = _build([A, B, C], body)
    assert "alloca" in mod.get_source("ll")
    assert "alloca" not in mod.get_source("ll-opt")      # promoted to registers
    assert "fmul contract" in mod.get_source("ll")        # contraction is the default
    assert "vfmadd" in mod.get_source("asm")
    a = np.random.rand(M * K).astype("float32")
    b = np.random.rand(K * N).astype("float32")
    c = np.zeros(M * N, "float32")
    mod(a, b, c)
    np.testing.assert_allclose(c.reshape(M, N), a.reshape(M, K) @ b.reshape(K, N), rtol=1e-5)
    plain = _build([A, B, C], body, fast_math=False)
    assert "contract" not in plain.get_source("ll")


# the llvm pipeline end to end ----------------------------------------

def test_llvm_pipeline_names():
    from cuvil_tir.transform import pass_name
    from targets.llvm import llvm_pipeline
    assert [pass_name(p) for p in llvm_pipeline()] == [
        "plan_buffer_allocation", "lower_blocks", "inject_software_pipeline", "flatten_buffers",
        "loop_partition", "simplify", "vectorize_loops", "unroll_loops", "simplify",
        "outline_parallel", "verify"]


def _tutorial04():
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[2] / "tutorials" / "04_fast_matmul_cpu.py"
    spec = importlib.util.spec_from_file_location("tutorial04", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("shape", [(32, 48, 16), (37, 45, 19)])
def test_tutorial_gemm_schedule_end_to_end(shape):
    M, N, K = shape
    sch = _tutorial04().gemm_schedule(M, N, K, mr=6, nr=16)
    mod = targets.build(sch, targets.Target("llvm", mcpu="haswell"))   # 8-lane vectors
    lowered = str(mod.get_source("tir"))
    assert 'T.allocate((96,), "float32", scope="local")' in lowered   # the 6 x 16 tile
    assert "alloca [96 x float]" in mod.get_source("ll")
    assert "alloca [96 x float]" not in mod.get_source("ll-opt")      # now registers
    assert "vfmadd231ps" in mod.get_source("asm")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((M, K)).astype("float32")
    b = rng.standard_normal((K, N)).astype("float32")
    c = np.zeros((M, N), "float32")
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@settings(max_examples=12)
@given(extent=st.integers(1, 40), stride=st.integers(-2, 3), offset=st.integers(0, 3),
       lo=st.integers(0, 5))
def test_random_affine_accesses_match_numpy(extent, stride, offset, lo):
    n = 256                                         # 44 * 3 + 93 < 256
    A = T.decl_buffer((n,), "float32", "A")
    B = T.decl_buffer((n,), "float32", "B")
    i = T.var("i")
    src = i * stride + (offset + 2 * 45)          # stays inside A for every lane
    value = T.select(A[src] > 0.0, A[src] * 2.0, A[i] + 1.0)
    f = _func([A, B], For(i, _c(lo), _c(extent), "vectorized", BufferStore(B, value, (i * 2,))))
    mod = targets.build(f, _Vec.name)
    a = np.random.default_rng(extent).standard_normal(n).astype("float32")
    b = np.zeros(n, "float32")
    mod(a, b)
    ref = np.zeros(n, "float32")
    for x in range(lo, lo + extent):
        s = a[x * stride + offset + 90]
        ref[x * 2] = s * 2 if s > 0 else a[x] + 1
    np.testing.assert_array_equal(b, ref)


def test_tutorial_gemm_for_avx512_compiles_to_zmm_fmas_on_any_host():
    sch = _tutorial04().gemm_schedule(48, 64, 32, mr=12, nr=32)
    mod = targets.build(sch, targets.Target("llvm", mcpu="skylake-avx512"))
    asm = mod.get_source("asm")
    fmas = [line for line in asm.splitlines() if "vfmadd" in line]
    assert fmas and all("zmm" in line for line in fmas)
    assert "<16 x float>" in mod.get_source("ll")
