"""The cuda target on a machine without a GPU: lowering, CUDA C compiled by nvcc for
sm_80 and sm_90, numbers through the interpreter's GPU semantics, barriers, races,
argument checks.  Launch tests run only where cupy finds a GPU."""

from __future__ import annotations

import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir.transform.gpu_sync import insert_barriers, is_barrier
from cuvil_tir.visitor import Mutator
from targets.toolkit import cuda_recipes as recipes

from .cuda_helpers import build, compile_all, gemm_case, needs_gpu, rand, sch_for

N_SYM = T.size_var("n")


def _elementwise():
    A = T.placeholder((N_SYM, 64), name="A")
    B = T.placeholder((64,), name="B")
    C = T.compute((N_SYM, 64), lambda i, j: A[i, j] + B[j] * 2.0, name="C")
    sch = sch_for(T.create_prim_func([A, B, C]))
    recipes.elementwise(sch, "C", threads=128)
    return build(sch, "ew")


def _half_math():
    A = T.placeholder((256,), "float16", name="A")
    Bf = T.placeholder((256,), "bfloat16", name="Bf")
    C = T.compute((256,), lambda i: T.exp(A[i]) * A[i] + 1.0, name="C")
    D = T.compute((256,), lambda i: (Bf[i] * Bf[i]).astype("float32"), name="D")
    sch = sch_for(T.create_prim_func([A, Bf, C, D]))
    recipes.elementwise(sch, "C", threads=64)
    recipes.elementwise(sch, "D", threads=64)
    return build(sch, "halfmath")


ELEMENTWISE = _elementwise()
HALF = _half_math()
GEMM = gemm_case()


def test_every_kernel_compiles_with_nvcc_for_sm80_and_sm90():
    ptx = compile_all([m for m, _ in (ELEMENTWISE, HALF, GEMM)])
    for arch, text in ptx.items():
        assert f".target {arch}" in text
        for name in ("ew_kernel0", "halfmath_kernel0", "halfmath_kernel1",
                     "gemm32x32x16v4_kernel0"):
            assert f".entry {name}(" in text


def test_elementwise_broadcast_symbolic_size_matches_numpy():
    mod, low = ELEMENTWISE
    src = mod.get_source("cuda")
    assert 'extern "C" __global__ void __launch_bounds__(128) ew_kernel0(' in src
    assert "int32_t n)" in src
    for n in (1, 5):
        a, b = rand((n, 64)), rand(64, seed=1)
        c = np.zeros((n, 64), "float32")
        T.interpret(low, a, b, c, check_races=True)
        np.testing.assert_allclose(c, a + b * 2.0, rtol=1e-6)
    assert mod.runtime.launch_plan(5) == [("ew_kernel0", (3, 1, 1), (128, 1, 1), 0)]
    assert mod.runtime.launch_plan(0) == []        # a grid of 0 blocks launches nothing


def test_fp16_and_bf16_arithmetic():
    mod, low = HALF
    src = mod.get_source("cuda")
    assert "half* __restrict__ A" in src and "__nv_bfloat16* __restrict__ Bf" in src
    a = (rand(256) * 0.5).astype("float16")
    bf = np.arange(256, dtype="uint16") + 0x3f00      # bfloat16 bits near 0.5 .. 2
    c, d = np.zeros(256, "float16"), np.zeros(256, "float32")
    T.interpret(low, a, bf, c, d, check_races=True)
    want = (np.exp(a.astype("float32")).astype("float16") * a + np.float16(1)).astype("float16")
    np.testing.assert_allclose(c.astype("float32"), want.astype("float32"), rtol=2e-3)
    bfv = (bf.astype("uint32") << 16).view("float32")
    np.testing.assert_allclose(d, bfv * bfv, rtol=1e-2)


def test_tiled_gemm_shared_memory_vector_loads_matches_numpy():
    mod, low = GEMM
    src = mod.get_source("cuda")
    assert "__shared__ __align__(32) float A_shared[128];" in src
    assert "__shared__ __align__(32) float B_shared[128];" in src
    assert "float C_local[4];" in src
    assert src.count("__syncthreads();") == 2
    a, b = rand((32, 16)), rand((16, 32), seed=1)
    c = np.zeros((32, 32), "float32")
    T.interpret(low, a, b, c, check_races=True)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


class _DropBarriers(Mutator):
    def visit_SeqStmt(self, s):
        s = self.generic_visit(s)
        return T.SeqStmt(tuple(x for x in s.seq if not is_barrier(x))) if \
            isinstance(s, T.SeqStmt) else s


def test_race_checker_catches_a_removed_barrier():
    _, low = GEMM
    broken = low.map_functions(lambda f: f.with_body(_DropBarriers().visit(f.body)))
    a, b = rand((32, 16)), rand((16, 32), seed=1)
    with pytest.raises(T.RaceError, match=r"data race on shared buffer [AB]_shared at "
                       r"address \d+ in block \(0, 0, 0\): thread \(\d+, \d+, 0\) "
                       r"(writes|reads)") as info:
        T.interpret(broken, a, b, np.zeros((32, 32), "float32"), check_races=True)
    err = info.value
    assert err.code == "CVL-E200" and err.threads[0] != err.threads[1]
    assert all("_shared[" in s for s in err.statements)


def _shared_kernel(body_of):
    A = T.decl_buffer((64,), "float32", "A")
    S_ = T.decl_buffer((64,), "float32", "S", scope="shared")
    tx = T.var("tx")
    body = T.For(tx, T.const(0), T.const(64), "thread_binding",
                 T.Allocate(S_, body_of(A, S_, tx)), "threadIdx.x")
    return T.PrimFunc([A], body)


def test_barrier_needed_inside_divergent_code_is_refused():
    f = _shared_kernel(lambda A, S_, tx: T.IfThenElse(tx < 32, T.seq(
        T.BufferStore(S_, A[tx], (tx,)), T.BufferStore(A, S_[tx + 1], (tx,)))))
    with pytest.raises(T.DivergentBarrierError, match=r"a __syncthreads\(\) is needed "
                       r"inside control flow that depends on the thread(.|\n)*\^\^\^"):
        insert_barriers(f)


def test_barrier_before_a_divergent_region_is_placed_outside_it():
    f = _shared_kernel(lambda A, S_, tx: T.seq(
        T.BufferStore(S_, A[tx], (tx,)),
        T.IfThenElse(tx < 32, T.BufferStore(A, S_[tx + 1], (tx,)))))
    text = T.to_text(insert_barriers(f).body)
    assert text.index("tvm_storage_sync") < text.index("if tx < 32")
    a = rand(64)
    want = a.copy()
    want[:32] = a[1:33]
    T.interpret(insert_barriers(f), a, check_races=True)
    np.testing.assert_array_equal(a, want)


def test_loop_carried_write_after_read_gets_a_barrier():
    def body(A, S_, tx):
        k = T.var("k")
        return T.For(k, T.const(0), T.const(4), "serial", T.seq(
            T.BufferStore(S_, A[tx] + T.cast(k, "float32"), (tx,)),
            T.BufferStore(A, S_[63 - tx], (tx,))))
    g = insert_barriers(_shared_kernel(body))
    loop = g.body.body.body
    assert is_barrier(loop.body.seq[0]) and is_barrier(loop.body.seq[2])
    T.interpret(g, rand(64), check_races=True)


def test_thread_axis_errors():
    A = T.placeholder((2048,), name="A")
    B = T.compute((2048,), lambda i: A[i] * 2.0, name="B")
    sch = sch_for(T.create_prim_func([A, B]))
    recipes.elementwise(sch, "B", threads=2048)
    with pytest.raises(T.LoweringError, match="2048 threads per block"):
        T.lower(sch, targets.Target("cuda"))
    sch = sch_for(T.create_prim_func([A, B]))
    (i,) = sch.get_loops(sch.get_block("B"))
    with pytest.raises(T.LoweringError, match="runs on the host, outside every loop"):
        T.lower(sch, targets.Target("cuda"))
    n = T.size_var("n")
    X = T.placeholder((n,), name="X")
    Y = T.compute((n,), lambda i: X[i] + 1.0, name="Y")
    sch = sch_for(T.create_prim_func([X, Y]))
    sch.bind(sch.get_loops(sch.get_block("Y"))[0], "threadIdx.x")
    with pytest.raises(T.LoweringError, match="symbolic extent n; the threads of a block"):
        T.lower(sch, targets.Target("cuda"))


def test_argument_errors_before_any_launch():
    mod, _ = ELEMENTWISE

    class Dev:
        def __init__(self, shape, typestr="<f4", strides=None, ptr=1 << 20, ro=False):
            self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                             "strides": strides, "data": (ptr, ro),
                                             "version": 3}
    ok_a, ok_b, ok_c = Dev((5, 64)), Dev((64,)), Dev((5, 64))
    cases = [
        ((ok_a, ok_b), r"expected 3 arguments \(A, B, C\), got 2"),
        ((np.zeros((5, 64), "float32"), ok_b, ok_c),
         r"argument 0 'A': expected a GPU array .* got numpy.ndarray; copy it with cupy"),
        ((ok_a, Dev((64,), "<f8"), ok_c), r"argument 1 'B': expected dtype float32, got float64"),
        ((ok_a, Dev((64, 1)), ok_c), r"argument 1 'B': expected 1 dimension"),
        ((ok_a, ok_b, Dev((4, 64))), r"argument 2 'C': expected shape \(n, 64\); n = 5"),
        ((ok_a, Dev((32,)), ok_c), r"argument 1 'B': expected shape \(64,\), got \(32,\)"),
        ((ok_a, ok_b, Dev((5, 64), strides=(4, 20))),
         r"argument 2 'C': expected a C-contiguous array"),
        ((ok_a, ok_b, Dev((5, 64), ro=True)), r"argument 2 'C': the function writes to C"),
        ((ok_a, Dev((64,), ptr=(1 << 20) + 2), ok_c),
         r"argument 1 'B': expected a device pointer aligned to 4 bytes"),
        ((ok_a, "B", ok_c), r"argument 1 'B': expected a GPU array"),
    ]
    for args, msg in cases:
        with pytest.raises(targets.ArgumentError, match=msg):
            mod(*args)


def test_vector_loads_need_16_byte_aligned_pointers():
    mod, _ = GEMM
    assert mod.runtime.program.alignment == {"A": 16, "B": 16}

    class Dev:
        def __init__(self, shape, ptr):
            self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f4",
                                             "strides": None, "data": (ptr, False)}
    with pytest.raises(targets.ArgumentError, match="'A': expected a device pointer "
                       "aligned to 16 bytes"):
        mod(Dev((32, 16), 4100), Dev((16, 32), 4096), Dev((32, 32), 8192))


def test_ptx_and_host_sources():
    mod, _ = ELEMENTWISE
    assert ".entry ew_kernel0(" in mod.get_source("ptx")
    host = mod.get_source("host")
    assert "int32_t ew(const cvl_device *cvl_dev, float *restrict A" in host
    assert "cvl_dev->launch(cvl_dev->kernels[0]" in host
    assert 'T.device_launch("ew_kernel0"' in mod.get_source("host_ir")
    with pytest.raises(targets.TargetError, match="no source format 'll'"):
        mod.get_source("ll")


@needs_gpu
def test_launch_on_the_gpu_matches_numpy():
    import cupy
    mod, _ = ELEMENTWISE
    a, b = rand((5, 64)), rand(64, seed=1)
    c = cupy.zeros((5, 64), "float32")
    mod(cupy.asarray(a), cupy.asarray(b), c)
    np.testing.assert_allclose(c.get(), a + b * 2.0, rtol=1e-6)
    gm, _ = GEMM
    a, b = rand((32, 16)), rand((16, 32), seed=1)
    c = cupy.zeros((32, 32), "float32")
    gm(cupy.asarray(a), cupy.asarray(b), c)
    np.testing.assert_allclose(c.get(), a @ b, rtol=1e-5, atol=1e-5)
    assert gm.benchmark(cupy.asarray(a), cupy.asarray(b), c, repeat=2, number=2).median > 0


def test_cli_emits_cuda_and_ptx(tmp_path, capsys):
    from targets.toolkit.cli import main
    src = tmp_path / "k.py"
    src.write_text(
        "import cuvil_tir as T, schedules as S\n"
        "A = T.placeholder((256,), name='A')\n"
        "_s = S.Schedule(T.create_prim_func([A, T.compute((256,), lambda i: A[i] * 2.0, "
        "name='B')]))\n"
        "bx, tx = _s.split(_s.get_loops(_s.get_block('B'))[0], [None, 64])\n"
        "_s.bind(bx, 'blockIdx.x'); _s.bind(tx, 'threadIdx.x')\n"
        "scaled = _s.func\n")
    assert main(["build", str(src), "--target", "cuda", "--emit", "cuda"]) == 0
    assert '__global__ void __launch_bounds__(64) main_kernel0(' in capsys.readouterr().out
    out = tmp_path / "k.ptx"
    assert main(["build", str(src), "--target", "cuda", "--emit", "ptx", "-o", str(out)]) == 0
    assert ".entry main_kernel0(" in out.read_text()
