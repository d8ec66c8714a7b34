"""Bounded queues between engines: the placement of pushes and pops, the build-time
proof that a queue of the declared depth cannot deadlock (CVL-E175), the serialised
fallback, and the simulator's queue-full stalls; results stay bit-exact."""

import json

import numpy as np
import pytest

import targets
from tests.targets.accel.small_npu import build_gemm, run_gemm, small_npu
from tests.workloads import conv2d_nhwc_ref
from cuvil_tir.errors import TargetError
from targets.accel import (DescriptionError, Queue,
                           QueueDepthError)
from targets.accel.examples.toy_npu import toy_npu
from targets.toolkit.npu.conv2d import conv2d, schedule_conv2d
from targets.toolkit.npu.gemm import gemm, schedule_gemm

SCOPES = ("q.inp", "q.wgt", "q.acc")


def _npu(name, queues=(), queue_depth=2):
    """The toy NPU's geometry with its own intrinsic names and the given queues."""
    return small_npu(name, "q", queues=queues, queue_depth=queue_depth)


def _gemm(acc, n=128, double=True, **options):
    return build_gemm(acc, "q", n=n, double=double, **options)


_run = run_gemm


def test_pushes_and_pops_are_placed_once_per_tile_and_balanced():
    mod = _gemm(_npu("q-plain"))
    src = mod.get_source("c")
    # the loads of a k tile push once; the GEMMs of the tile pop once, not per call
    assert src.count("q_plain_push(0, 2,") == 1 and src.count("q_plain_wait") == 0
    body = src[src.index("q_plain_gemm("):]
    assert "q_plain_pop(" not in body.split("\n")[0]
    stats = _run(mod)
    assert stats["bank_conflict_stalls"] == 0
    assert set(stats["queue_full_stalls"]) == {"load", "store", "gemm", "vector"}
    chans = json.loads(mod.program.meta["queues"])
    # double-buffered tiles: two tokens in their carried channels, one elsewhere
    assert max(c["tokens"] for c in chans) == 2
    assert {c["tokens"] for c in chans if c["distance"] == 0} == {1}


def test_double_buffering_needs_depth_two_and_the_error_names_the_engines():
    shallow = _npu("q-shallow", queues=[Queue("gemm", "load", depth=1)])
    with pytest.raises(QueueDepthError, match=r"CVL-E175.*from engine 'gemm' to engine "
                       r"'load' has depth 1, but this program holds up to 2 tokens.*"
                       r"A_q\.inp.*2 copies.*deadlock.*Queue\('gemm', 'load', depth=2\)"):
        _gemm(shallow)
    # single buffering needs one token: the same device builds it
    _run(_gemm(shallow, double=False))


def test_serialised_fallback_is_exact_and_slower():
    shallow = _npu("q-serial", queues=[Queue("gemm", "load", depth=1)])
    slow = _run(_gemm(shallow, on_shallow_queue="serialise"))["cycles"]
    fast = _run(_gemm(_npu("q-deep", queues=[Queue("gemm", "load", depth=2)])))["cycles"]
    assert slow > fast


def test_unknown_policy_and_bad_queues_are_refused():
    targets.register_target(toy_npu, replace=True)
    with pytest.raises(TargetError, match="on_shallow_queue"):
        targets.Target("toy-npu", on_shallow_queue="maybe")
    with pytest.raises(DescriptionError, match="names engine 'mac'"):
        _npu("q-bad", queues=[Queue("load", "mac", 2)])
    with pytest.raises(DescriptionError, match=r"declared twice"):
        _npu("q-twice", queues=[Queue("load", "gemm", 2), Queue("load", "gemm", 3)])
    with pytest.raises(DescriptionError, match="depth=65 is more than"):
        Queue("load", "gemm", 65)
    with pytest.raises(DescriptionError, match="queue_depth must be a positive int"):
        _npu("q-zero", queue_depth=0)


def test_too_few_channels_is_refused():
    one = _npu("q-ids", queues=[Queue("gemm", "load", depth=2, ids=1),
                                Queue("store", "vector", depth=2, ids=1)])
    _run(_gemm(one))          # one kind of dependency each: enough
    with pytest.raises(QueueDepthError, match=r"needs 2 channels from engine 'gemm' to "
                       r"engine 'load', but Queue\('gemm', 'load'\) has ids=1"):
        targets.register_target(one, replace=True)
        _gemm(one, n=136)     # a padded k loop of 3 tiles: within and across runs


def test_a_shallow_forward_queue_stalls_the_producer():
    """Three copies of each input tile let the loads run two tiles ahead; a depth-1
    queue from load to gemm holds them back (queue-full stalls), results exact."""
    acc = _npu("q-full", queues=[Queue("load", "gemm", depth=1)], queue_depth=3)
    targets.register_target(acc, replace=True)
    sch = schedule_gemm(gemm(256), tile=64, gemm="q_full.gemm", zero="q_full.zero",
                        scopes=SCOPES)
    ko = sch.get_loops(sch.get_block("C_update_o"))[2]
    sch.annotate(ko, "software_pipeline_stage", [0, 0, 2])
    mod = targets.build(sch, "q-full", name="q3")
    stats = _run(mod, 256)
    assert stats["queue_full_stalls"]["load"] > 0


def test_tiles_side_by_side_need_no_token_between_iterations():
    """A conv row's two output-channel tiles: zeroing tile o + 1 does not wait for the
    GEMMs of tile o (disjoint columns); only the row two rows later (same copy of the
    double-buffered accumulator) waits for them.  Results exact."""
    targets.register_target(toy_npu, replace=True)
    mod = targets.build(schedule_conv2d(conv2d(1, 10, 10, 8, 32), double=True), "toy-npu",
                        name="qconv")
    rng = np.random.default_rng(4)
    x = rng.integers(-128, 128, (1, 10, 10, 8)).astype("int8")
    w = rng.integers(-128, 128, (3, 3, 8, 32)).astype("int8")
    y = np.zeros((1, 8, 8, 32), "int32")
    mod(x, w, y)
    ref = conv2d_nhwc_ref(x, w)
    np.testing.assert_array_equal(y, ref)
    chans = json.loads(mod.program.meta["queues"])
    to_vector = [c for c in chans if (c["src"], c["dst"]) == ("gemm", "vector")]
    assert [(c["distance"], c["tokens"]) for c in to_vector] == [(1, 2)]
    assert mod.stats["bank_conflict_stalls"] == 0
