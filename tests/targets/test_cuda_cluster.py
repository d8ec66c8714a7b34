"""Thread-block clusters on the ``cuda`` target: ``__cluster_dims__``, the cluster
barrier and DSMEM loads in the source and in the machine code nvcc makes, and the
refusal of clusters below sm_90."""

import re

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from targets.cuda.nvcc import resource_usage, sass

from tests.cuvil_tir.test_gpu_cluster import rotate_text

ROTATE = rotate_text()


def _source(arch="sm_90a"):
    return targets.build(T.parse(ROTATE), targets.Target("cuda", arch=arch)).get_source("cuda")


def test_the_kernel_declares_its_cluster_and_spells_the_cluster_ops():
    src = _source()
    assert re.search(r"__launch_bounds__\(32\) __cluster_dims__\(4, 1, 1\) rotate_kernel0",
                     src)
    assert src.count("barrier.cluster.arrive.release") == 2
    assert "mapa.shared::cluster.u32" in src and "ld.shared::cluster.f32" in src
    assert "cvl_dsmem_ld_float32(&S[" in src


def test_nvcc_makes_the_cluster_barrier_and_a_dsmem_load_without_spills():
    src = _source()
    code = sass(src, "sm_90a")["rotate_kernel0"]
    assert code.count("UCGABAR_ARV") == 2 and code.count("UCGABAR_WAIT") == 2
    # a DSMEM load is a generic load through the cluster's shared window
    assert "SR_SWINHI" in code and re.search(r"\bLD\.E\b", code)
    usage = resource_usage(src, "sm_90a")["rotate_kernel0"]
    assert usage["spill_stores"] == usage["spill_loads"] == 0


@pytest.mark.parametrize("arch", ["sm_80", "sm_89"])
def test_clusters_below_sm_90_are_refused_saying_what_to_change(arch):
    with pytest.raises(T.LoweringError, match=rf"rotate: a cluster of \(4, 1, 1\) blocks "
                                              rf"needs sm_90 or newer.*the target is {arch}: "
                                              r"build for Target\('cuda', arch='sm_90'\)"):
        _source(arch)


def test_a_cluster_op_without_a_cluster_is_refused_below_sm_90_too():
    text = ROTATE.replace(', annotations={"cluster": 4}', "").replace("(b + 1) % 4", "0")
    with pytest.raises(T.LoweringError, match=r"cluster_sync needs sm_90 or newer"):
        targets.build(T.parse(text), targets.Target("cuda", arch="sm_80"))


def test_a_schedule_declares_a_cluster_with_annotate_and_the_trace_replays_it():
    A = T.placeholder((64, 32), name="A")
    B = T.compute((64, 32), lambda i, j: A[i, j] * 2.0, name="B")
    func = T.create_prim_func([A, B])
    sch = S.Schedule(func)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    sch.annotate(i, "cluster", 4)
    replayed = S.Trace.from_json(sch.trace.as_json()).apply(func)
    sm90 = targets.Target("cuda", arch="sm_90")
    src = targets.build(replayed, sm90, name="scaled").get_source("cuda")
    assert "__cluster_dims__(4, 1, 1) scaled_kernel0" in src
    a = np.random.default_rng(0).standard_normal((64, 32)).astype("float32")
    b = np.zeros_like(a)
    T.interpret(T.lower(sch, sm90), a, b, check_races=True)
    np.testing.assert_array_equal(b, 2 * a)
