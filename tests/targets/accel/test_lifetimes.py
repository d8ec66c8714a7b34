"""Scratchpad lifetimes at instruction granularity inside a nest (issue 23 item 4):
two buffers whose lifetimes are apart inside one loop may share an address, the reuse
is ordered by a token between the engines (statement order is not time order), and a
buffer that may carry a value between iterations keeps its coarse lifetime."""

import json

import numpy as np
import pytest

import cuvil_tir as T
import targets
from targets.accel.examples.ascend_like import ascend
from targets.accel.examples.toy_npu import toy_npu
from targets.accel.lifetimes import lifetimes, writes_whole
from targets.accel.queues import aliases
from targets.toolkit.npu.conv2d import conv2d
from targets.toolkit.npu.fused import fused_gemm, schedule_fused
from targets.toolkit.npu.multicore import schedule_conv2d_cores
from tests.workloads import conv2d_nhwc_ref


@pytest.fixture(autouse=True)
def _registered():
    targets.register_target(toy_npu, replace=True)
    targets.register_target(ascend, replace=True)


def _fused(n, pins=None):
    target = targets.Target("toy-npu", pin_banks=pins) if pins else "toy-npu"
    mod = targets.build(schedule_fused(fused_gemm(n, n, n), double=False), target,
                        name="fused")
    rng = np.random.default_rng(2)
    a, b = (rng.integers(-128, 128, (n, n)).astype("int8") for _ in range(2))
    bias = rng.integers(-60000, 60000, (n,)).astype("int32")
    q = np.zeros((n, n), "int8")
    mod(a, b, bias, q)
    acc = np.maximum(a.astype("int32") @ b.astype("int32") + bias, 0)
    np.testing.assert_array_equal(q, np.clip(acc >> 8, -128, 127).astype("int8"))
    return mod


def _units(mod, memory):
    return {u["buffer"]: u for u in mod.program.memory[memory]}


def test_the_epilogue_buffers_of_one_nest_live_only_between_their_instructions():
    # each epilogue step's result is written whole (a tile per call, the calls' loops
    # walking all of it) before it is read: it lives from that write to its last read,
    # not over the whole nest; the peak of the accumulator memory drops to what is live
    # at once (it was every buffer: 26880 bytes)
    mod = _fused(64)
    u = _units(mod, "npu.acc")
    assert u["D"]["steps"][1] <= u["R"]["steps"][0]
    assert u["R"]["steps"][1] <= u["Q_npu.acc"]["steps"][0]
    assert mod.stats["peak_bytes"]["npu.acc"] == 16640


def test_two_buffers_apart_in_one_nest_share_an_address_and_the_reuse_waits_a_token():
    # C (the accumulator, gemm then vector) and R (the ReLU result, vector only) are
    # apart inside the output tile loop: pinned to one bank they take one address, the
    # result stays exact, and the gemm engine's next tile into C waits for the vector
    # unit's last read of R (a carried token; R's name in the channel with C's)
    mod = _fused(128, pins={"C": 0, "R": 0})
    u = _units(mod, "npu.acc")
    assert u["C"]["addresses"] == u["R"]["addresses"] == [0]
    assert u["C"]["steps"][1] < u["R"]["steps"][0]
    chans = json.loads(mod.program.meta["queues"])
    assert any(c["src"] == "vector" and c["dst"] == "gemm" and "R~C" in c["buffers"]
               and c["distance"] == 1 for c in chans)


def test_an_address_reused_across_engines_is_synchronised_where_nothing_else_orders_it():
    # one core: the weights in L1 (read by mte1 into L0B before the row loop) and the
    # input rows in L1 (written by the load engine in the loop) pinned to one bank share
    # its start; no buffer orders the load engine after mte1 there, the reuse does
    # (before, the load engine could overwrite the weights mte1 was still reading)
    mod = targets.build(schedule_conv2d_cores(conv2d(1, 18, 18, 8, 24), cores=1),
                        targets.Target("ascend-like",
                                       pin_banks={"W_asc.l1": 0, "I_asc.l1": 0}),
                        name="conv")
    u = _units(mod, "asc.l1")
    assert u["W_asc.l1"]["addresses"][0] == u["I_asc.l1"]["addresses"][0] == 0
    chans = json.loads(mod.program.meta["queues"])
    assert [c["buffers"] for c in chans if c["src"] == "mte1" and c["dst"] == "load"
            and c["distance"] == 0] == [["W_asc.l1~I_asc.l1"]]
    run_small_conv(mod)


def run_small_conv(mod):
    """Run the conv 18x18 8->24 ``mod`` on random int8 data, bit-exact against numpy."""
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (1, 18, 18, 8)).astype("int8")
    w = rng.integers(-128, 128, (3, 3, 8, 24)).astype("int8")
    y = np.zeros((1, 16, 16, 24), "int32")
    mod(x, w, y)
    np.testing.assert_array_equal(y, conv2d_nhwc_ref(x, w))


def test_the_allocator_prefers_a_free_address_to_a_reused_one():
    mod = _fused(128)
    u = _units(mod, "npu.acc")
    spans = [(a, a + v["bytes"]) for v in u.values() for a in v["addresses"]]
    assert all(a1 <= b0 or b1 <= a0 for k, (a0, a1) in enumerate(spans)
               for (b0, b1) in spans[k + 1:])
    assert not aliases(mod.program.memory)


def _gemm_call(C, A, B):
    it = next(i for i in toy_npu.intrinsics if i.name == "toy.gemm_16x16x16_i8")
    return T.Evaluate(T.call_extern("int32", toy_npu.call_name(it), A[0:16, 0:16],
                                    B[0:16, 0:16], C[0:16, 0:16], 16, 16, 16))


def _buffers():
    """A (inputs), B (weights), C (accumulators), G and H (host)."""
    return (T.decl_buffer((16, 16), "int8", "A", scope="npu.inp"),
            T.decl_buffer((16, 16), "int8", "B", scope="npu.wgt"),
            T.decl_buffer((16, 16), "int32", "C", scope="npu.acc"),
            T.decl_buffer((64, 16), "int8", "G"), T.decl_buffer((64, 16), "int32", "H"))


def test_an_accumulation_first_keeps_the_coarse_lifetime():
    # the GEMM intrinsic reads C before it writes it: C may carry a value from the
    # previous iteration, so it lives over its whole top-level statement (and the
    # store after it); A, loaded whole first in each iteration, only there
    A, B, C, G, H = _buffers()
    i = T.var("i")
    load = T.Evaluate(T.call_extern("int32", "toy_npu_dma_load", A[0:1, 0:16],
                                    G[i * 16:i * 16 + 1, 0:16], 16, 16, 16, 16))
    store = T.Evaluate(T.call_extern("int32", "toy_npu_dma_store", H[0:1, 0:16],
                                     C[0:1, 0:16], 16, 64, 64, 64))
    body = T.SeqStmt([T.For(i, T.const(0), T.const(4), "serial",
                            T.SeqStmt([load, _gemm_call(C, A, B)])), store])
    life, engines, _ = lifetimes(body, toy_npu, {})
    assert life["A"] == (0, 1) and life["C"] == (0, 2) and engines["C"] == {"gemm", "store"}
    assert not writes_whole(_gemm_call(C, A, B).value, C, toy_npu)


def test_a_partial_or_conditional_first_write_keeps_the_coarse_lifetime():
    # A is used only inside the loop (steps 1-2 of 0-3): loaded whole first, it lives
    # from that load to the GEMM; loaded in part, or under a condition, it may keep a
    # value from the previous iteration and lives over the whole loop
    A, B, C, G, H = _buffers()
    i = T.var("i")

    def load(buf, rows):
        return T.Evaluate(T.call_extern("int32", "toy_npu_dma_load", buf[0:1, 0:16],
                                        G[i * 16:i * 16 + 1, 0:16], rows, 16, 16, 16))

    store = T.Evaluate(T.call_extern("int32", "toy_npu_dma_store", H[i * 16:i * 16 + 1, 0:16],
                                     C[0:1, 0:16], 16, 64, 64, 64))
    for first, want in ((load(A, 16), (1, 2)), (load(A, 8), (0, 3)),
                        (T.IfThenElse(i > 0, load(A, 16), None), (0, 3))):
        body = T.For(i, T.const(0), T.const(4), "serial",
                     T.SeqStmt([load(B, 16), first, _gemm_call(C, A, B), store]))
        assert lifetimes(body, toy_npu, {})[0]["A"] == want
