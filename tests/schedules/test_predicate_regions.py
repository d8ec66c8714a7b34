"""Regions relaxed over loops that a block's T.where cuts: found by the schedule fuzzer.

- cache_write of a block under ``T.where(ax0 < 1)`` inside a blockized block copied
  back the whole tile, rows the block never wrote (the interpreter read NaN);
- blockize under a non-dividing split inside a loop_partition block declared more than
  its parent (the printed function did not parse back)."""

import itertools

import numpy as np
from hypothesis import given, strategies as st

import cuvil_tir as T
import schedules as S
from cuvil_tir.analysis.predicate_doms import tighten
from cuvil_tir.stmt import Range
from tests.schedules.testing import run, run_llvm, verify_trace_roundtrip

GUARDED_TILE = '''
def f(X: T.Buffer((3, 4), "float32"), Z: T.Buffer((3, 4), "float32")):
    for i0 in range(3):
        with T.block("Z_o"):
            v = T.axis.spatial(3, 2 - i0)
            T.reads(X[v:v + 3, 0:4])
            T.writes(Z[v:v + 3, 0:4])
            for ax0, ax1 in T.grid(3, 4):
                with T.block("Z"):
                    a, b = T.axis.remap("SS", [ax0, ax1])
                    T.where(ax0 < 1)
                    Z[v + a, b] = X[v + a, b] * T.float32(2)
'''


def test_cache_write_copies_back_only_what_the_guarded_writer_wrote():
    f = T.parse(GUARDED_TILE)
    sch = S.Schedule(f)
    sch.cache_write("Z", 0, "local")
    back = sch.get_loops("Z_local")
    assert [sch.get(lp).extent.value for lp in back] == [1, 4]
    x = np.arange(12, dtype="float32").reshape(3, 4)
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, np.zeros((3, 4), "float32")])[1],
                                      x * 2)
    verify_trace_roundtrip(sch, f)


def test_blockize_under_a_guard_declares_what_runs():
    A = T.placeholder((4,), name="A")
    f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] * 2.0, name="B")])
    sch = S.Schedule(f)
    sch.loop_partition(sch.get_loops("B")[0], [3, None])
    _, inner = sch.split(sch.get_loops("B_i0")[-1], [None, 4])
    outer = sch.blockize(inner)
    blk = sch.get(outer)
    assert [str(r) for r in blk.reads + blk.writes] == ["A[0:3]", "B[0:3]"]
    verify_trace_roundtrip(sch, f)          # prints and parses back
    a = np.arange(4, dtype="float32")
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [a, np.zeros(4, "float32")])[1], a * 2)


@given(e0=st.integers(1, 6), e1=st.integers(1, 6), c0=st.integers(-3, 3),
       c1=st.integers(-3, 3), k=st.integers(-6, 12), op=st.sampled_from("<>lg"))
def test_tighten_keeps_every_point_the_predicate_lets_run(e0, e1, c0, c1, k, op):
    a, b = T.var("a"), T.var("b")
    lhs = a * c0 + b * c1
    cond = {"<": lhs < k, ">": lhs > k, "l": lhs <= k, "g": lhs >= k}[op]
    doms = {a: Range.from_extent(e0), b: Range.from_extent(e1)}
    cut = tighten(doms, cond)
    holds = {"<": lambda x: x < k, ">": lambda x: x > k, "l": lambda x: x <= k,
             "g": lambda x: x >= k}[op]
    for x, y in itertools.product(range(e0), range(e1)):
        if holds(x * c0 + y * c1):
            for v, val in ((a, x), (b, y)):
                lo, ext = cut[v].min.value, cut[v].extent.value
                assert lo <= val < lo + ext, (str(cond), x, y, str(v), lo, ext)
