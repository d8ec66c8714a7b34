"""The C printer base and the ``c`` target: what only C has (the numerical matrix is
shared with llvm in test_llvm_dtypes.py, test_llvm_workloads.py …)."""

import ctypes

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from targets.c import CTargetPrinter
from targets.cstyle.compiler import compile_shared, openmp_supported
from targets.cstyle import CPrinter


def _scaled(n=64):
    A = T.placeholder((n,), name="A")
    B = T.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    return T.create_prim_func([A, B])


def test_module_interface_matches_llvm():
    mod = targets.build(_scaled(), "c")
    assert mod.source_formats == ("c", "tir")
    src = mod.get_source()
    assert src == mod.get_source("c") and "int32_t main(float *restrict A" in src
    a, b = np.arange(64, dtype="float32"), np.zeros(64, "float32")
    mod(a, b)
    np.testing.assert_array_equal(b, a * 2 + 1)
    assert mod.benchmark(a, b, repeat=2, number=2).number == 2
    with pytest.raises(targets.ArgumentError, match="expected dtype float32"):
        mod(a.astype("float64"), b)
    with pytest.raises(targets.TargetError, match="no source format 'll'"):
        mod.get_source("ll")


def test_same_source_compiles_once_per_process():
    src = targets.build(_scaled(), "c").get_source()
    assert compile_shared(src, "cc", "-O1") is compile_shared(src, "cc", "-O1")


def test_compile_cache_hit_loads_the_library_without_the_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CUVIL_CACHE", raising=False)
    first = targets.build(_scaled(), "c")
    assert not first.from_cache
    with monkeypatch.context() as m:
        m.setattr("targets.c.compile_shared", None)   # a hit never compiles
        second = targets.build(_scaled(), "c")
    assert second.from_cache and second.get_source() == first.get_source()
    a, b = np.arange(64, dtype="float32"), np.zeros(64, "float32")
    second(a, b)
    np.testing.assert_array_equal(b, a * 2 + 1)
    assert not targets.build(_scaled(), targets.Target("c", cflags="-O1")).from_cache


def test_compiler_error_names_the_line():
    with pytest.raises(targets.CodegenError, match=r"rejected line 2 of the generated "
                                                   r"source: .*\n +2 \|   return nope;"):
        compile_shared("int f(void) {\n  return nope;\n}\n", "cc", "-O0")


def test_missing_compiler_is_a_target_error():
    with pytest.raises(targets.TargetError, match="no C compiler 'no-such-cc-9' found"):
        targets.build(_scaled(), targets.Target("c", cc="no-such-cc-9", openmp=False))


def test_unknown_option_is_refused():
    with pytest.raises(targets.TargetError, match="unknown option 'mcpu'"):
        targets.Target("c", mcpu="haswell")


def _parallel_rows():
    A = T.placeholder((37, 64), name="A")
    k = T.reduce_axis((0, 64), name="k")
    R = T.compute((37,), lambda i: T.sum(A[i, k], axis=k), name="R")
    sch = S.Schedule(T.create_prim_func([A, R]))
    i, _ = sch.get_loops(sch.get_block("R"))
    sch.parallel(i)
    return sch


@pytest.mark.parametrize("openmp", [True, False])
def test_parallel_loop_through_openmp_or_serial(openmp):
    mod = targets.build(_parallel_rows(), targets.Target("c", openmp=openmp))
    pragma = "#pragma omp parallel for" in mod.get_source()
    assert pragma == (openmp and openmp_supported("cc"))
    a = np.random.default_rng(0).standard_normal((37, 64)).astype("float32")
    r = np.zeros(37, "float32")
    mod(a, r)
    np.testing.assert_allclose(r, a.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_nested_parallel_gets_one_pragma():
    A = T.placeholder((8, 16), name="A")
    B = T.compute((8, 16), lambda i, j: A[i, j] * 3.0, name="B")
    sch = S.Schedule(T.create_prim_func([A, B]))
    i, j = sch.get_loops(sch.get_block("B"))
    sch.parallel(i)
    sch.parallel(j)
    src = CTargetPrinter(openmp=True).print_function(T.lower(sch.func, "c").entry)
    assert src.count("#pragma omp parallel for") == 1


def test_vector_code_prints_lane_by_lane_and_runs():
    # the llvm pipeline vectorizes; the C printer scalarizes Ramp/Broadcast per lane
    A = T.placeholder((16,), name="A")
    B = T.compute((16,), lambda i: A[i] * 2.0 + 1.0, name="B")
    sch = S.Schedule(T.create_prim_func([A, B]))
    (i,) = sch.get_loops(sch.get_block("B"))
    _, ii = sch.split(i, [None, 4])
    sch.vectorize(ii)
    with T.transform.PassContext(target=targets.Target("llvm", mcpu="haswell")):
        lowered = T.lower(sch.func, "llvm")
    assert "Ramp" in repr(lowered.entry.body)
    src = CPrinter().print_function(lowered.entry, "vec")
    assert "cvl_lane < 4" in src
    lib = compile_shared(src, "cc", "-O1")
    a, b = np.arange(16, dtype="float32"), np.zeros(16, "float32")
    lib.vec(ctypes.c_void_p(a.ctypes.data), ctypes.c_void_p(b.ctypes.data))
    np.testing.assert_array_equal(b, a * 2 + 1)


def test_unlowered_blocks_and_thread_bindings_are_refused():
    with pytest.raises(targets.CodegenError, match="block 'root' was not lowered"):
        CPrinter().print_function(_scaled())
    A = T.decl_buffer((4,), "float32", "A")
    tx = T.var("tx")
    f = T.PrimFunc([A], T.For(tx, T.const(0), T.const(4), "thread_binding",
                              T.BufferStore(A, T.const(1.0), (tx,)), thread_tag="threadIdx.x"))
    with pytest.raises(targets.CodegenError, match="bound to threadIdx.x; thread bindings "
                                                   "need a GPU target"):
        CPrinter().print_function(f)


def test_unknown_op_is_a_codegen_error():
    A = T.decl_buffer((1,), "float32", "A")
    call = T.Call("float32", "no_such_op", (A[0],))
    f = T.PrimFunc([A], T.BufferStore(A, call, (T.const(0),)))
    with pytest.raises(targets.CodegenError, match="unknown op 'no_such_op'"):
        CPrinter().print_function(f)


def test_names_never_clash_with_the_c_library():
    A = T.placeholder((4,), name="exp")
    B = T.compute((4,), lambda i: T.exp(A[i]), name="free")
    src = targets.build(T.create_prim_func([A, B]), "c").get_source()
    assert "float *restrict v_exp" in src and "v_free[i] = expf(v_exp[i]);" in src


class _Dialect(CPrinter):
    lang = "toy"
    function_prefix = 'extern "C"'
    restrict = "__restrict__"
    loop_pragmas = {"unrolled": "#pragma unroll {extent}"}
    ops = {"exp": "__expf({0})"}


def test_subclass_changes_text_through_attributes():
    A = T.decl_buffer((8,), "float32", "A")
    i = T.var("i")
    f = T.PrimFunc([A], T.For(i, T.const(0), T.const(8), "unrolled",
                              T.BufferStore(A, T.exp(A[i]), (i,))))
    src = _Dialect().print_function(f, "k")
    assert 'extern "C" int32_t k(float *__restrict__ A)' in src
    assert "#pragma unroll 8" in src and "A[i] = __expf(A[i]);" in src


def test_data_arithmetic_wraps_without_flags_and_index_arithmetic_is_plain():
    A = T.placeholder((4, 8), "int32", name="A")
    B = T.compute((4, 8), lambda i, j: A[i, j] * 3 + 1, name="B")
    mod = targets.build(T.create_prim_func([A, B]), "c")
    src = mod.get_source()
    assert "-fwrapv" not in " ".join(targets.cstyle.compiler.REQUIRED_FLAGS)
    assert "((int32_t)((uint32_t)A[(i * 8) + j] * (uint32_t)3))" in src   # data: wraps
    assert "B[(i * 8) + j] = " in src                                     # index: plain
    a = np.full((4, 8), 2**31 - 1, "int32")
    b = np.zeros((4, 8), "int32")
    mod(a, b)
    np.testing.assert_array_equal(b, a * np.int32(3) + np.int32(1))
