"""Fused row reductions (softmax, layernorm, RMSNorm; targets/toolkit/cuda_norms.py):
exact against numpy through the interpreter with race checking, one block per row or
long rows in chunks over two kernels; 16-byte loads and stores, warp shuffles and no
spills in the machine code for sm_80 and sm_90."""

from __future__ import annotations

import re

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from targets.cuda.nvcc import nvcc_ptx, resource_usage, sass
from targets.toolkit import cuda_norms as N

from .cuda_helpers import ARCHS


def _softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _layernorm(x, g, b, eps=1e-5):
    m = x.mean(1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(1, keepdims=True) + eps) * g + b


def _rmsnorm(x, g, eps=1e-6):
    return x / np.sqrt((x * x).mean(1, keepdims=True) + eps) * g


def _data(rows, n, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, n)) * 3 + 1).astype("float32")
    return x, rng.standard_normal(n).astype("float32"), rng.standard_normal(n).astype("float32")


def _run(f, *args, target="cuda"):
    y = np.zeros_like(args[0])
    T.interpret(T.lower(f, target), *args, y, check_races=True)
    return y


def _check_all(rows, n, kw, x, g, b, target="cuda"):
    """The three reductions built with ``kw``, interpreted for ``target``, vs numpy."""
    np.testing.assert_allclose(_run(N.softmax(rows, n, **kw), x, target=target),
                               _softmax(x), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(_run(N.layernorm(rows, n, **kw), x, g, b, target=target),
                               _layernorm(x, g, b), rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(_run(N.rmsnorm(rows, n, **kw), x, g, target=target),
                               _rmsnorm(x, g), rtol=1e-4, atol=2e-5)


# (rows, n, row_limit, chunk): one block per row with 1 and 4 warps, and long rows
# split into 8 and 40 chunks (40 > 32: two chunks per lane when a warp combines them)
CASES = [(3, 512, N.ROW_LIMIT, N.CHUNK), (2, 2048, N.ROW_LIMIT, N.CHUNK),
         (2, 2048, 512, 256), (1, 10240, 512, 256)]


@pytest.mark.parametrize("rows, n, limit, chunk", CASES)
def test_fused_reductions_match_numpy(rows, n, limit, chunk):
    x, g, b = _data(rows, n)
    _check_all(rows, n, {"row_limit": limit, "chunk": chunk}, x, g, b)


def test_long_rows_run_as_two_kernels_over_chunks():
    mod = targets.build(N.layernorm(16, 262144), "cuda", name="ln_long")
    assert mod.runtime.launch_plan() == [("ln_long_kernel0", (64, 16, 1), (256, 1, 1), 0),
                                         ("ln_long_kernel1", (64, 16, 1), (256, 1, 1), 0)]
    short = targets.build(N.softmax(4096, 4096), "cuda", name="sm_short")
    assert short.runtime.launch_plan() == [("sm_short_kernel0", (4096, 1, 1), (256, 1, 1), 0)]
    assert N.splits(16, 16384) and not N.splits(4096, 16384)


def test_the_combining_kernel_declares_no_shared_partials():
    # its reduction stays within one warp: an unused shared array made nvcc refuse the
    # chunked kernels (the memory planner keeps what a function allocates)
    for make in (N.softmax, N.layernorm, N.rmsnorm):
        mod = targets.build(make(2, 2048, row_limit=512, chunk=256), "cuda",
                            name=f"chunks_{make.__name__}")
        src = mod.get_source("cuda")
        assert src.count("__shared__") == 1, make.__name__         # kernel0's partials
        for arch in ARCHS:
            assert ".entry chunks_" in nvcc_ptx(src, arch)


def test_a_removed_barrier_is_caught():
    x, _, _ = _data(2, 2048)
    low = T.lower(N.softmax(2, 2048), "cuda")

    class Strip(T.Mutator):
        def visit_Evaluate(self, s):
            if getattr(s.value, "op", None) == "tvm_storage_sync":
                return T.Evaluate(T.const(0))
            return s
    stripped = low.map_functions(lambda f: f.with_body(Strip().visit(f.body)))
    with pytest.raises(T.RaceError, match="data race on shared buffer part") as err:
        T.interpret(stripped, x, np.zeros_like(x), check_races=True)
    assert "part[tx // 32] = acc[0]" in err.value.statements[0]


def _build_all():
    mods = [targets.build(N.softmax(8, 4096), "cuda", name="mc_softmax"),
            targets.build(N.layernorm(8, 4096), "cuda", name="mc_layernorm"),
            targets.build(N.rmsnorm(8, 32768), "cuda", name="mc_rmsnorm"),
            targets.build(N.softmax(16, 262144), "cuda", name="mc_softmax_long")]
    return mods


MODS = _build_all()


@pytest.mark.parametrize("arch", ARCHS)
def test_sixteen_byte_accesses_shuffles_and_no_spills(arch):
    for mod in MODS:
        src = mod.get_source("cuda")
        usage = resource_usage(src, arch)
        for name, code in sass(src, arch).items():
            assert "LDG.E.128" in code, name                 # 16-byte loads
            assert usage[name]["spill_stores"] == usage[name]["spill_loads"] == 0, name
            assert "LDL" not in code and "STL" not in code, name
        last = sorted(sass(src, arch))[-1]
        code = sass(src, arch)[last]
        assert "STG.E.128" in code and re.search(r"\bSHFL\.BFLY\b", code), last


def test_row_lengths_the_kernels_cannot_take_are_refused():
    with pytest.raises(S.ScheduleError, match="row length 100 must be a multiple of 128"):
        N.softmax(2, 100)
    with pytest.raises(S.ScheduleError, match="not a multiple of 4096"):
        N.rmsnorm(2, 40960 + 128)


SM90 = targets.Target("cuda", arch="sm_90a")


# (rows, n, blocks per cluster): two warps of one block each, and one warp each
@pytest.mark.parametrize("rows, n, blocks", [(2, 2048, 4), (3, 1024, 8)])
def test_cluster_rows_match_numpy_in_one_kernel(rows, n, blocks):
    x, g, b = _data(rows, n, seed=blocks)
    x[0, 5] = 40.0     # the row's max lies in one block: the others rescale their sums
    _check_all(rows, n, {"cluster": blocks}, x, g, b, target=SM90)


def test_long_rows_on_sm_90_are_one_kernel_over_a_cluster():
    assert N.cluster_blocks(16, 262144, "sm_90") == 8
    assert N.cluster_blocks(16, 262144, "sm_80") == 0          # two kernels there
    assert N.cluster_blocks(16, 524288, "sm_90") == 0          # 65536 a block: too long
    mod = targets.build(N.layernorm(16, 262144, arch="sm_90a"), SM90, name="ln_cluster")
    assert mod.runtime.launch_plan() == [("ln_cluster_kernel0", (8, 16, 1), (1024, 1, 1), 0)]
    src = mod.get_source("cuda")
    assert "__cluster_dims__(8, 1, 1) ln_cluster_kernel0" in src
    # the statistics published, then read by the peers before the arrive; the wait
    # at the end keeps them alive
    order = [src.index("barrier.cluster.arrive.release;\\n"),
             src.rindex("cvl_dsmem_ld_float32("), src.index("(void)cvl_cluster_arrive();"),
             src.rindex("*(float4*)(&Y["), src.index("(void)cvl_cluster_wait();")]
    assert order == sorted(order)
    # each lane reads each statistic of its peer once (Chan's combine keeps the mean)
    assert src.count("cvl_dsmem_ld_float32(&stats[0]") == 1
    assert src.count("cvl_dsmem_ld_float32(&stats[1]") == 1
    two = targets.build(N.layernorm(16, 262144, arch="sm_80"), "cuda", name="ln_two")
    assert len(two.runtime.launch_plan()) == 2


def test_a_removed_cluster_barrier_is_caught_naming_the_publish_and_the_dsmem_read():
    x, _, _ = _data(2, 2048)
    low = T.lower(N.softmax(2, 2048, cluster=4), SM90)

    class Strip(T.Mutator):
        def visit_Evaluate(self, s):
            if getattr(s.value, "op", None) == "cluster_sync":
                return T.Evaluate(T.const(0))   # between publishing and reading
            return s
    stripped = low.map_functions(lambda f: f.with_body(Strip().visit(f.body)))
    with pytest.raises(T.RaceError, match="no cluster_sync\\(\\) between them") as err:
        T.interpret(stripped, x, np.zeros_like(x), check_races=True)
    assert err.value.statements[0].startswith("stats[0] = acc[1]")
    assert "T.dsmem_load(stats[0]" in err.value.statements[1]


@pytest.mark.parametrize("kind", ["softmax", "layernorm", "rmsnorm"])
def test_cluster_kernels_compile_for_sm_90a_with_the_cluster_barrier_and_no_spills(kind):
    src = targets.build(getattr(N, kind)(16, 262144, arch="sm_90a"), SM90,
                        name=f"cl_{kind}").get_source("cuda")
    name = f"cl_{kind}_kernel0"
    code = sass(src, "sm_90a")[name]
    usage = resource_usage(src, "sm_90a")[name]
    assert usage["spill_stores"] == usage["spill_loads"] == 0 and usage["registers"] <= 64
    assert "LDL" not in code and "STL" not in code
    # one read and one write of the row, 16 bytes at a time; two cluster barriers and
    # the statistics read through the cluster's shared window
    assert code.count("UCGABAR_ARV") == code.count("UCGABAR_WAIT") == 2
    assert "SR_SWINHI" in code and "STG.E.128" in code and "LDG.E.128" in code
    assert len(re.findall(r"\bLDG\.E\.128\b", code)) == 8 * (1 + (kind != "softmax")
                                                           + (kind == "layernorm"))


def test_a_cluster_the_row_cannot_be_cut_into_is_refused():
    with pytest.raises(S.ScheduleError, match="a cluster of 3 blocks per row of 2048.*pick "
                                              "a cluster size dividing 16"):
        N.softmax(2, 2048, cluster=3)
    with pytest.raises(S.ScheduleError, match="a cluster of 16 blocks per row.*expected 1 "
                                              "to 8 blocks"):
        N.softmax(2, 4096, cluster=16)
