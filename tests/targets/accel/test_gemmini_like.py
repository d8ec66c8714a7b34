"""The Gemmini-like NPU (scratchpad + accumulator, accumulate on write, activation on
read-out) end to end on the simulator, bit-exact against numpy; the DMA modes it needs
(zero fill, broadcast load, store with an element-wise op) and their refusals."""

import json
import shutil
import subprocess

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from targets.accel import (DMA, AccelLoweringError, Accelerator, DescriptionError, DMAOp,
                           Memory, Move)
from targets.accel.examples.gemmini_like import RELU_REQUANT, gemmini, relu_requant
from targets.accel.examples.toy_npu import SHIFT, gemm_desc, toy_npu
from targets.toolkit.npu.conv2d import conv2d, schedule_conv2d
from targets.toolkit.npu.fused import fused_gemm_bias_init, schedule_fused_readout
from targets.toolkit.npu.gemm import gemm, schedule_gemm, tile_gemm_loops, whole_tile
from targets.toolkit.npu.mlp import mlp, schedule_mlp

targets.register_target(gemmini, replace=True)
targets.register_target(toy_npu, replace=True)
ON = dict(gemm="gemmini.matmul_16x16x16_i8", zero=None,
          scopes=("gem.spad", "gem.spad", "gem.acc"))


def _ints(rng, shape, lo=-128, hi=128, dtype="int8"):
    return rng.integers(lo, hi, shape).astype(dtype)


@pytest.mark.parametrize("n,m,k,tile,double", [(64, 64, 64, 32, False),
                                               (128, 128, 128, 64, True),
                                               (136, 72, 40, 32, False)])
def test_gemm_bit_exact_with_dma_zero_fill(n, m, k, tile, double):
    mod = targets.build(schedule_gemm(gemm(n, m, k), tile=tile, double=double, **ON),
                        "gemmini-like", name="g")
    rng = np.random.default_rng(n)
    a, b = _ints(rng, (n, k)), _ints(rng, (k, m))
    c = np.full((n, m), 5, "int32")
    mod(a, b, c)
    np.testing.assert_array_equal(c, a.astype("int32") @ b.astype("int32"))
    src = mod.get_source("c")
    # the matmul as Gemmini issues it: preload (B, C) then compute_preloaded (A)
    assert "gemmini_like_dma_fill(" in src and "gemmini_like_matmul(" not in src
    assert "(void)(gemmini_preload(" in src and "), gemmini_compute_preloaded(" in src
    assert mod.stats["dma_bytes_out"] == n * m * 4 and mod.stats["bank_conflict_stalls"] == 0


def _fused_ref(a, b, bias):
    acc = np.maximum(a.astype("int64") @ b.astype("int64") + bias, 0)
    return np.clip(np.floor_divide(acc, 1 << SHIFT), -128, 127).astype("int8")


@pytest.mark.parametrize("n,m,k,double", [(64, 64, 64, False), (128, 128, 128, True)])
def test_fused_gemm_bias_relu_requantize_on_read_out(n, m, k, double):
    mod = targets.build(schedule_fused_readout(fused_gemm_bias_init(n, m, k), double=double),
                        "gemmini-like", name="f")
    rng = np.random.default_rng(k)
    a, b = _ints(rng, (n, k)), _ints(rng, (k, m))
    bias = _ints(rng, (m,), -20000, 20000, "int32")
    q = np.zeros((n, m), "int8")
    mod(a, b, bias, q)
    np.testing.assert_array_equal(q, _fused_ref(a, b, bias))
    src = mod.get_source("c")
    # the bias row repeated down the tile (source stride 0), the int8 result on the way out
    # (the vendor's mvin_acc; its DRAM stride 0 the state config_ld_acc sets, once at the
    # start since every mvin_acc passes it)
    assert "&bias[" in next(line for line in src.splitlines() if "gemmini_mvin_acc(" in line)
    assert src.count("gemmini_config_ld_acc(") == 1 and "(void)gemmini_config_ld_acc(0);" in src
    assert "gemmini_like_dma_store_relu_requant(" in src
    assert mod.stats["dma_bytes_out"] == n * m


def test_int8_conv2d_bit_exact():
    f = conv2d(1, 18, 18, 16, 32)
    mod = targets.build(schedule_conv2d(f, double=True, **ON), "gemmini-like", name="c")
    rng = np.random.default_rng(2)
    x, w = _ints(rng, (1, 18, 18, 16)), _ints(rng, (3, 3, 16, 32))
    out = np.zeros((1, 16, 16, 32), "int32")
    mod(x, w, out)
    ref = sum(np.einsum("bhwc,co->bhwo", x[:, r:r + 16, s:s + 16].astype("int32"),
                        w[r, s].astype("int32")) for r in range(3) for s in range(3))
    np.testing.assert_array_equal(out, ref)


def test_store_op_header_and_kernel_compile_warning_free(tmp_path):
    mod = targets.build(schedule_fused_readout(fused_gemm_bias_init(32, 32, 32)),
                        "gemmini-like", name="f")
    hdr = mod.get_source("h")
    assert "int32_t gemmini_like_dma_store_relu_requant(void *dst, const void *src, " \
           "int32_t rows, int32_t cols" in hdr and "gemmini_like_dma_fill(" in hdr
    cc = shutil.which("cc")
    assert cc is not None, "the accelerator simulator needs a C compiler"
    (tmp_path / "gemmini_like_hal.h").write_text(hdr)
    (tmp_path / "k.c").write_text(mod.get_source("c"))
    r = subprocess.run([cc, "-std=c99", "-Wall", "-Werror", "-c", "k.c", "-o", "k.o"],
                       cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_describe_keys_the_store_ops():
    d = gemmini.describe(targets.Target("gemmini-like"))["dma"]
    assert d["broadcast"] and [op[0] for op in d["store_ops"]] == ["requant", "relu_requant"]
    assert "T.max" in d["store_ops"][1][3]


# refusals ------------------------------------------------------------------------------

def test_broadcast_needs_the_dma_mode():
    # the toy NPU's DMA does not repeat rows: the bias preload is refused, with the fix
    sch = schedule_fused_readout(fused_gemm_bias_init(32, 32, 32), tile_i=16, tile_j=16,
                                 tile_k=16, scopes=("npu.inp", "npu.wgt", "npu.acc"),
                                 gemm="toy.gemm_16x16x16_i8")
    with pytest.raises(AccelLoweringError, match=r"the copy bias -> C is not a 2-D strided "
                       r"transfer.*needs DMA\(broadcast=True\)"):
        targets.build(sch, "toy-npu")


def test_fill_needs_a_dma_that_writes_zeros():
    npu = Accelerator("nofill-npu", [Memory("nf.a", 2, 4096, 128), Memory("nf.b", 2, 4096, 128),
                                     Memory("nf.c", 2, 8192, 512)],
                      DMA(128, 8, padding=False),
                      [toy_intrinsic("nofill.gemm", ("nf.a", "nf.b", "nf.c"))])
    targets.register_target(npu, replace=True)
    sch = schedule_gemm(gemm(32), tile=32, gemm="nofill.gemm", zero=None,
                        scopes=("nf.a", "nf.b", "nf.c"))
    with pytest.raises(AccelLoweringError, match=r"the zero fill of C_nf.c: the DMA of "
                       r"accelerator 'nofill-npu' cannot write zeros; describe it with "
                       r"DMA\(..., padding=True\)"):
        targets.build(sch, "nofill-npu")


def toy_intrinsic(name, scopes):
    from targets.accel import Intrinsic
    return Intrinsic(name, gemm_desc(scopes=scopes), dict(zip("ABC", scopes)), "gemm",
                     cycles=18)


def test_store_op_dtype_must_match_the_copy():
    npu = Accelerator("relu-npu", [Memory("rl.a", 2, 4096, 128), Memory("rl.b", 2, 4096, 128),
                                   Memory("rl.c", 2, 8192, 512)],
                      DMA(128, 8, broadcast=True, store_ops=[DMAOp("relu8", lambda x: T.cast(
                          T.max(x, T.const(0, "int32")), "int8"), "int32", "int8")]),
                      [toy_intrinsic("relu.gemm", ("rl.a", "rl.b", "rl.c"))])
    targets.register_target(npu, replace=True)
    f = fused_gemm_bias_init(32, 32, 32, requantize=lambda x: T.cast(x, "int8"))
    sch = schedule_fused_readout(f, scopes=("rl.a", "rl.b", "rl.c"), gemm="relu.gemm")
    mod = targets.build(sch, "relu-npu", name="r")     # relu8 matches: built and exact
    assert "relu_npu_dma_store_relu8(" in mod.get_source("c")
    rng = np.random.default_rng(4)
    a, b, bias = _ints(rng, (32, 32), -4, 4), _ints(rng, (32, 32), -4, 4), \
        _ints(rng, (32,), -9, 9, "int32")
    q = np.zeros((32, 32), "int8")
    mod(a, b, bias, q)
    np.testing.assert_array_equal(
        q, np.maximum(a.astype("int32") @ b.astype("int32") + bias, 0).astype("int8"))
    # without the op the int32 -> int8 copy is a conversion the DMA cannot do
    plain = Accelerator("plain-npu", [Memory("pl.a", 2, 4096, 128), Memory("pl.b", 2, 4096, 128),
                                      Memory("pl.c", 2, 8192, 512)], DMA(128, 8, broadcast=True),
                        [toy_intrinsic("plain.gemm", ("pl.a", "pl.b", "pl.c"))])
    targets.register_target(plain, replace=True)
    sch = schedule_fused_readout(f, scopes=("pl.a", "pl.b", "pl.c"), gemm="plain.gemm")
    with pytest.raises(AccelLoweringError, match="is read element by element by the host"):
        targets.build(sch, "plain-npu")


@pytest.mark.parametrize("kwargs,message", [
    (dict(store_ops=["relu"]), r"store_ops must be DMAOp objects, found 'relu'"),
    (dict(store_ops=[DMAOp("r", lambda x: x, "int32", "int32")] * 2),
     r"store op\(s\) \['r'\] declared twice"),
])
def test_dma_mode_description_errors(kwargs, message):
    with pytest.raises(DescriptionError, match=message):
        DMA(128, 8, **kwargs)


@pytest.mark.parametrize("args,message", [
    (("1x", lambda x: x, "int32", "int32"), r"DMAOp: name must be a C identifier, found '1x'"),
    (("r", 3, "int32", "int32"), r"DMAOp 'r': fn must be a function of one TIR expression"),
    (("r", lambda x: x, "int33", "int32"), r"in_dtype must be a dtype such as 'int32', "
                                           r"found 'int33'"),
])
def test_dma_op_description_errors(args, message):
    with pytest.raises(DescriptionError, match=message):
        DMAOp(*args)


# the timeline and the stalls by cause ------------------------------------------------------

def test_chrome_trace_matches_the_counters(tmp_path):
    mod = targets.build(schedule_gemm(gemm(64), tile=32, double=True, **ON), "gemmini-like",
                        name="g")
    rng = np.random.default_rng(0)
    mod(_ints(rng, (64, 64)), _ints(rng, (64, 64)), np.zeros((64, 64), "int32"))
    path = mod.save_trace(tmp_path / "g.json")
    trace = json.loads(open(path).read())
    threads = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert sorted(threads.values()) == sorted(gemmini.engines)
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    for tid, engine in threads.items():       # each engine's slices: its busy cycles,
        mine = sorted((e for e in slices if e["tid"] == tid), key=lambda e: e["ts"])
        assert sum(e["args"]["cycles"] for e in mine) == mod.stats["engine_busy"][engine]
        for a, b in zip(mine, mine[1:]):      # one instruction at a time
            assert a["ts"] + a["dur"] <= b["ts"] + 1e-9
    assert round(max(e["ts"] + e["dur"] for e in slices) * 1000) == mod.stats["cycles"]
    assert {e["name"] for e in slices} == {"dma_load", "dma_fill", "dma_store", "matmul"}
    assert trace["otherData"]["dropped"] == 0


def test_dependency_stalls_fall_with_double_buffering():
    rng = np.random.default_rng(1)
    args = (_ints(rng, (128, 128)), _ints(rng, (128, 128)))
    stalls = []
    for double in (False, True):
        mod = targets.build(schedule_gemm(gemm(128), tile=64, double=double, **ON),
                            "gemmini-like", name="g")
        mod(*args, np.zeros((128, 128), "int32"))
        stalls.append(mod.stats["dependency_stalls"]["matrix"])
    assert stalls[0] > stalls[1] > 0


# on-chip moves between levels -------------------------------------------------------------

def test_two_layers_keep_the_hidden_activations_on_chip():
    """A -> (acc) -> relu_requant move -> (spad) -> second GEMM: bit-exact, and the DMA
    moves only A, W1, W2 in and O out."""
    f = mlp(32, 32, 48, 32, relu_requant)
    mod = targets.build(schedule_mlp(f, "gemmini.matmul_16x16x16_i8", "gem.spad", "gem.acc"),
                        "gemmini-like", name="mlp")
    rng = np.random.default_rng(6)
    a, w1, w2 = _ints(rng, (32, 32)), _ints(rng, (32, 48)), _ints(rng, (48, 32))
    out = np.zeros((32, 32), "int32")
    mod(a, w1, w2, out)
    hidden = np.clip(np.floor_divide(np.maximum(a.astype("int64") @ w1, 0), 1 << SHIFT),
                     -128, 127).astype("int32")
    np.testing.assert_array_equal(out, hidden @ w2.astype("int32"))
    assert "gemmini_like_move_gem_acc_gem_spad_relu_requant(" in mod.get_source("c")
    assert mod.stats["dma_bytes_in"] == a.nbytes + w1.nbytes + w2.nbytes
    assert mod.stats["dma_bytes_out"] == out.nbytes
    assert "int32_t gemmini_like_move_gem_acc_gem_spad(void *dst" in mod.get_source("h")


def test_a_move_the_device_lacks_is_refused():
    npu = Accelerator("nomove-npu", [Memory("nm.spad", 4, 16384, 128),
                                     Memory("nm.acc", 2, 16384, 512)],
                      DMA(128, 8, store_ops=[RELU_REQUANT]),
                      [toy_intrinsic("nomove.gemm", ("nm.spad", "nm.spad", "nm.acc"))])
    targets.register_target(npu, replace=True)
    sch = schedule_mlp(mlp(32, 32, 32, 32, relu_requant), "nomove.gemm", "nm.spad", "nm.acc")
    with pytest.raises(AccelLoweringError, match=r"the move C1 \(nm.acc\) -> H \(nm.spad\): "
                       r"accelerator 'nomove-npu' declares no move from 'nm.acc' to 'nm.spad' "
                       r"\(its moves: none\); describe Move\('nm.acc', 'nm.spad'"):
        targets.build(sch, "nomove-npu")


def test_an_op_the_move_lacks_is_refused():
    # requant is one of the DMA's store ops, not the move's
    from targets.accel.examples.toy_npu import requant
    sch = schedule_mlp(mlp(32, 32, 32, 32, requant), "gemmini.matmul_16x16x16_i8",
                       "gem.spad", "gem.acc")
    with pytest.raises(AccelLoweringError, match=r"applies 'requant', which the move "
                       r"gem.acc -> gem.spad does not \(its ops: \['relu_requant'\]\)"):
        targets.build(sch, "gemmini-like")


@pytest.mark.parametrize("make,message", [
    (lambda: Move("a.x", "a.y", "1st", 64), r"engine must be a C identifier, found '1st'"),
    (lambda: Move("a.x", "a.y", "mte", 60), r"width_bits=60 is not a whole number of bytes"),
    (lambda: Move("a.x", "a.y", "mte", 64, ops=["relu"]), r"ops must be DMAOp objects"),
    (lambda: Accelerator("mv-npu", [Memory("mv.a", 1, 1024, 64)], DMA(64, 1), [],
                         moves=[Move("mv.a", "mv.b", "mte", 64)]),
     r"Move mv.a -> mv.b names memory 'mv.b', which is not one of its memories \(mv.a\)"),
    (lambda: Accelerator("mv-npu", [Memory("mv.a", 1, 1024, 64), Memory("mv.b", 1, 1024, 64)],
                         DMA(64, 1, store_ops=[DMAOp("r", lambda x: x, "int32", "int32")]),
                         [], moves=[Move("mv.a", "mv.b", "mte", 64, ops=[
                             DMAOp("r", lambda x: x + 1, "int32", "int32")])]),
     r"two different ops are named 'r'"),
])
def test_move_description_errors(make, message):
    with pytest.raises(DescriptionError, match=message):
        make()


def test_a_move_engine_of_its_own_runs_beside_the_others():
    npu = Accelerator("mte-npu", [Memory("mt.l1", 2, 4096, 128), Memory("mt.l0", 2, 4096, 128),
                                  Memory("mt.w", 2, 4096, 128), Memory("mt.c", 2, 8192, 512)],
                      DMA(128, 8), [toy_intrinsic("mte.gemm", ("mt.l0", "mt.w", "mt.c"))],
                      moves=[Move("mt.l1", "mt.l0", "mte1", 256, 2)])
    assert npu.engines == ("load", "store", "gemm", "mte1")
    assert npu.describe(targets.Target("llvm"))["moves"][0]["engine"] == "mte1"


# a transposing load ----------------------------------------------------------------------

def _gemm_bt(n, m, k, gemm="gemmini.matmul_16x16x16_i8", inp="gem.spad", acc="gem.acc"):
    """``C = A @ B.T`` with B stored (m, k), staged transposed to (k, m)."""
    A = T.placeholder((n, k), "int8", name="A")
    B = T.placeholder((m, k), "int8", name="B")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((n, m), lambda i, j: T.sum(T.cast(A[i, r], "int32") *
                                             T.cast(B[j, r], "int32"), axis=r), name="C")
    sch = S.Schedule(T.create_prim_func([A, B, C]))
    blk = sch.get_block("C")
    a, b = sch.cache_read(blk, 0, inp), sch.cache_read(blk, 1, inp)
    c = sch.cache_write(blk, 0, acc)
    sch.transform_layout(b, 0, lambda j, kk: (kk, j))
    jo, ko, ii = tile_gemm_loops(sch, blk, (32, 32, 32), 16)
    sch.compute_at(a, ko)
    sch.compute_at(b, ko)
    sch.reverse_compute_at(c, jo)
    init = sch.decompose_reduction(blk, ko)
    sch.tensorize(ii, gemm)
    whole_tile(sch, init)
    return sch


def test_transposing_load_gemm_with_b_transposed_bit_exact():
    mod = targets.build(_gemm_bt(64, 96, 32), "gemmini-like", name="bt")
    assert "gemmini_like_dma_load_t(&B_gem_spad[0]" in mod.get_source("c")
    assert "int32_t gemmini_like_dma_load_t(void *dst" in mod.get_source("h")
    rng = np.random.default_rng(8)
    a, b = _ints(rng, (64, 32)), _ints(rng, (96, 32))
    c = np.zeros((64, 96), "int32")
    mod(a, b, c)
    np.testing.assert_array_equal(c, a.astype("int32") @ b.astype("int32").T)


def test_transposing_load_needs_the_dma_mode():
    npu = Accelerator("notr-npu", [Memory("nt.spad", 4, 16384, 128),
                                   Memory("nt.acc", 2, 16384, 512)], DMA(128, 8),
                      [toy_intrinsic("notr.gemm", ("nt.spad", "nt.spad", "nt.acc"))])
    targets.register_target(npu, replace=True)
    sch = _gemm_bt(32, 32, 32, "notr.gemm", "nt.spad", "nt.acc")
    with pytest.raises(AccelLoweringError, match=r"the copy B -> B_nt.spad is not a 2-D "
                       r"strided transfer"):
        targets.build(sch, "notr-npu")
