"""The register-tiled GEMM recipe of benchmarks/gemm_recipe.py: its micro-kernel loop
has no compare-and-branch per k step on pinned AVX2 and AVX-512 targets (issue 10 §0),
and it computes the right numbers."""
import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir.stmt import For, IfThenElse
from cuvil_tir.transform import PassContext
from cuvil_tir.transform.inline import inline_launches
from cuvil_tir.visitor import post_order_visit
from tests.workloads import load_script


def _recipe():
    return load_script("benchmarks/gemm_recipe.py")


@pytest.mark.parametrize("mcpu, width, reg", [("haswell", 16, "ymm"),
                                              ("skylake-avx512", 32, "zmm")])
def test_inner_loop_has_no_guard_per_k_step(mcpu, width, reg):
    g = _recipe()
    target = targets.Target("llvm", mcpu=mcpu)
    assert g.tile_width(target) == width
    sch = g.recipe(13, 35, 64, width)           # 6 does not divide 13, width not 35
    asm = targets.build(sch, target).get_source("asm")
    loops = g.fma_loops(asm)
    # the 6 rows x 2 vectors kernel is there; it and every tail copy of it close with
    # one branch (and at most its compare): no guard per k step
    assert 12 in [lp["fma"] for lp in loops], loops
    assert all(lp["branches"] == 1 and lp["compares"] <= 1 for lp in loops), loops
    assert f"%{reg}" in asm


def _k_loop_guards(mod) -> int:
    """IfThenElse statements inside the first k loop of a lowered module (its parallel
    tasks seen inside their loops)."""
    loops, ifs = [], []
    func = inline_launches(mod)
    post_order_visit(func.body, lambda n: loops.append(n) if isinstance(n, For)
                     and n.loop_var.name == "k" else None)
    post_order_visit(loops[-1].body, lambda n: ifs.append(n)
                     if isinstance(n, IfThenElse) else None)
    return len(ifs)


def test_without_partitioning_the_k_loop_keeps_the_split_guards():
    g = _recipe()
    target = targets.Target("llvm", mcpu="haswell")
    sch = g.recipe(13, 35, 64, 16)
    assert _k_loop_guards(T.lower(sch, target)) == 0
    with PassContext(config={"loop_partition.max_nodes": 0}):   # the config reaches lower
        assert _k_loop_guards(T.lower(sch, target)) >= 6       # one per row at least


def test_recipe_matches_numpy_and_refuses_too_many_vectors():
    g = _recipe()
    target = targets.Target("llvm", mcpu="haswell")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((13, 5)).astype("float32")
    b = rng.standard_normal((5, 19)).astype("float32")
    sch = g.recipe(13, 19, 5, 16)
    c = np.zeros((13, 19), "float32")
    T.interpret(T.lower(sch, target), a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    if targets.llvm.host_vector_bits() >= 256:      # haswell code runs on this host
        c[:] = 0
        targets.build(sch, target)(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    with pytest.raises(targets.TargetError, match="needs 22 vector registers, haswell has 16"):
        g.tile_width(target, vectors=3)


def test_tutorial04_blocks_of_panels_with_a_partial_last_block():
    t04 = load_script("tutorials/04_fast_matmul_cpu.py")
    info = targets.llvm.cpu_info(targets.Target("llvm", mcpu="haswell", l2_kb=512,
                                                num_cores=2))
    assert t04.panel_block(2048, 2048, 16, info) == 8        # 8 x 128 KB: twice the L2
    assert t04.panel_block(512, 512, 16, info) == 8          # 2 blocks per core
    assert t04.panel_block(1000, 1000, 16, info) == 11       # 6 blocks: 3 per core
    assert t04.panel_block(48, 16, 16, info) == 1            # too few panels to block
    sch = t04.gemm_schedule(13, 70, 5, mr=6, nr=16, jb=4)    # 5 panels: blocks of 4 + 1
    target = targets.Target("llvm", mcpu="haswell")
    lowered = T.lower(sch, target)
    assert 'T.allocate((96,), "float32", scope="local")' in str(lowered)
    rng = np.random.default_rng(2)
    a = rng.standard_normal((13, 5)).astype("float32")
    b = rng.standard_normal((5, 70)).astype("float32")
    c = np.zeros((13, 70), "float32")
    T.interpret(lowered, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    if targets.llvm.host_vector_bits() >= 256:
        c[:] = 0
        targets.build(sch, target)(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
