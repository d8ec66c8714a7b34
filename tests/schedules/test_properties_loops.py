"""Property tests: random legal sequences of loop primitives keep results exact.

Each example applies a few randomly chosen primitives (split with random factors,
fuse, reorder, tile, parallel/vectorize/unroll on legal loops, perfect-tile sampling)
to a tiny workload, checks the results against numpy with the reference interpreter,
and replays the trace.
"""

import random

from hypothesis import given, settings, strategies as st
import pytest

import schedules as S
from cuvil_tir.analysis import tree
from schedules.analysis import reduction_block
from schedules.sampling import perfect_tiles
from tests import workloads
from tests.schedules.testing import check_workload, verify_trace_roundtrip

WORKLOADS = {
    "elementwise_chain": lambda: workloads.elementwise_chain(12),
    "matmul": lambda: workloads.matmul(4, 6, 5),
    "matmul_bias_relu": lambda: workloads.matmul_bias_relu(4, 4, 6),
    "conv2d_nchw": lambda: workloads.conv2d_nchw(1, 2, 4, 4, 2, 3, 1),
    "softmax": lambda: workloads.softmax(3, 6),
}

OPS = ["split", "split3", "fuse", "reorder", "tile", "parallel", "vectorize", "unroll",
       "sampled_split"]


def _loop(sch, rv):
    return tree.get(sch.func, tree.find_loop(sch.func, rv.var))


def apply_random(sch, data):
    """Apply one random primitive to a random block of ``sch``; the one refusal a
    random sequence may meet (moving a loop fused from spatial and reduction axes) is
    accepted, every other must not happen."""
    try:
        _apply_random(sch, data)
    except S.ScheduleError as err:
        if "drives both a spatial and a reduction axis" not in err.message:
            raise


def _apply_random(sch, data):
    blocks = [b for b in sch.get_child_blocks(sch.get_block("root"))]
    blk = data.draw(st.sampled_from(blocks), label="block")
    loops = sch.get_loops(blk)
    if not loops:  # a blockized block's outer loops may all be gone
        return
    op = data.draw(st.sampled_from(OPS), label="op")
    plain = [l for l in loops if _loop(sch, l).kind == "serial" and not
             _loop(sch, l).annotations]
    if op in ("split", "split3", "sampled_split", "fuse", "tile") and plain != loops:
        return  # split/fuse refuse loops whose kind or annotations they would drop
    pick = lambda: data.draw(st.sampled_from(loops), label="loop")  # noqa: E731
    factor = lambda: data.draw(st.integers(1, 5), label="factor")  # noqa: E731
    if op == "split":
        f = factor()
        sch.split(pick(), data.draw(st.sampled_from([[None, f], [f, None]])))
    elif op == "split3":
        sch.split(pick(), [factor(), None, factor()])
    elif op == "sampled_split":
        loop = pick()
        sch.split(loop, sch.sample_perfect_tile(loop, 2, max_innermost_factor=4))
    elif op in ("fuse", "tile") and len(loops) >= 2:
        k = data.draw(st.integers(0, len(loops) - 2), label="position")
        if op == "fuse":
            sch.fuse(loops[k], loops[k + 1])
        else:
            sch.tile(loops[k], loops[k + 1], factor(), factor())
    elif op == "reorder" and len(loops) >= 2:
        sch.reorder(*data.draw(st.permutations(loops), label="order"))
    elif op in ("parallel", "vectorize", "unroll"):
        legal = [l for l in loops if op == "unroll" or reduction_block(_loop(sch, l)) is None]
        if legal:
            getattr(sch, op)(data.draw(st.sampled_from(legal), label="loop"))


@pytest.mark.parametrize("name", sorted(WORKLOADS))
@settings(max_examples=50)
@given(data=st.data(), steps=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_random_loop_schedules_stay_exact(name, data, steps, seed):
    w = WORKLOADS[name]()
    sch = S.Schedule(w.func, seed=seed)
    for _ in range(steps):
        apply_random(sch, data)
    # compiling C costs a process: one example in four also runs on the c target
    check_workload(sch, w, seed=seed % 7, targets=("llvm", "c") if seed % 4 == 0 else ("llvm",))
    verify_trace_roundtrip(sch, w.func)


@settings(max_examples=40)
@given(seed=st.integers(0, 2**16), n=st.integers(2, 3), swap=st.booleans())
def test_trace_round_trip_with_new_decisions(seed, n, swap):
    w = workloads.matmul(8, 12, 6)
    sch = S.Schedule(w.func, seed=seed)
    i, j, k = sch.get_loops(sch.get_block("C"))
    ti = sch.split(i, sch.sample_perfect_tile(i, n, max_innermost_factor=4))
    tj = sch.split(j, sch.sample_perfect_tile(j, n, max_innermost_factor=4))
    order = [ti[0], tj[0], ti[1], tj[1]] + ti[2:] + tj[2:] + [k]
    if swap:
        order[-1], order[-2] = order[-2], order[-1]
    sch.reorder(*order)
    sch.unroll(k)
    verify_trace_roundtrip(sch, w.func)
    rng = random.Random(seed)
    new = {idx: rng.choice(perfect_tiles(8 if idx == 2 else 12, n, 4))
           for idx in sch.trace.decisions}
    other = sch.trace.with_decisions(new).apply(w.func)
    assert other.trace.decisions == new
    check_workload(other, w, seed=seed % 5,
                   targets=("llvm", "c") if seed % 4 == 0 else ("llvm",))
    verify_trace_roundtrip(other, w.func)
