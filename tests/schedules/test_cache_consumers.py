"""cache_read / cache_write with consumer_blocks: which readers see the cache, where
the copy goes, numerics, refusals."""

import numpy as np

import cuvil_tir as T
import schedules as S
from cuvil_tir.analysis import tree
from schedules.errors import CacheStageError, ScheduleArgumentError
from tests.schedules.testing import assert_refused, run, verify_trace_roundtrip

TWO_READERS = '''@T.prim_func
def f(X: T.Buffer((32,), "float32"), B: T.Buffer((32,), "float32"),
      C: T.Buffer((32,), "float32")):
    A = T.alloc_buffer((32,))
    for i in T.serial(4):
        for j in T.serial(8):
            with T.block("A"):
                vi = T.axis.spatial(32, i * 8 + j)
                A[vi] = X[vi] * 2.0
        for j in T.serial(8):
            with T.block("B"):
                vi = T.axis.spatial(32, i * 8 + j)
                B[vi] = A[vi] + 1.0
    for i in T.serial(32):
        with T.block("C"):
            vi = T.axis.spatial(32, i)
            C[vi] = A[vi] - X[vi]
'''


def func():
    return T.parse(TWO_READERS)


def reads_of(sch, name):
    blk = tree.get(sch.func, tree.find_block(sch.func, name)).block
    return [r.buffer.name for r in blk.reads]


def check(sch, f):
    x = np.random.default_rng(0).standard_normal(32).astype("float32")
    want = run(f, [x, np.zeros(32, "float32"), np.zeros(32, "float32")])
    got = run(sch, [x, np.zeros(32, "float32"), np.zeros(32, "float32")])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_cache_read_for_one_consumer():
    f = func()
    sch = S.Schedule(f)
    sch.cache_read("B", 0, "global", consumer_blocks=["C"])
    assert reads_of(sch, "B") == ["A"] and reads_of(sch, "C")[0] == "A_global"
    # the copy runs once, at the root, right before C
    root = [s for s in sch.func.body.block.body.seq]
    assert [b.block.name for b in tree.blocks_under(root[1])] == ["A_global"]
    check(sch, f)
    verify_trace_roundtrip(sch, f)


def test_cache_read_for_all_listed_consumers_is_the_default():
    f = func()
    a, b = S.Schedule(f), S.Schedule(f)
    a.cache_read("B", 0, "global")
    b.cache_read(b.get_block("B"), 0, "global", consumer_blocks=[b.get_block("B"), "C"])
    assert T.structural_equal(a.func, b.func)
    verify_trace_roundtrip(b, f)


def test_cache_write_read_by_one_consumer():
    f = func()
    sch = S.Schedule(f)
    sch.cache_write("A", 0, "global", consumer_blocks=["B"])
    # B reads the cache inside the tile; the copy back waits for C, at the root
    assert reads_of(sch, "B") == ["A_global"] and reads_of(sch, "C")[0] == "A"
    assert [b.block.name for b in tree.blocks_under(sch.func.body.block.body.seq[1])] == \
        ["A_global"]
    check(sch, f)
    verify_trace_roundtrip(sch, f)


def test_cache_write_read_by_the_later_consumer():
    f = func()
    sch = S.Schedule(f)
    sch.cache_write("A", 0, "global", consumer_blocks=["C"])
    # B still reads A: the copy back stays in the tile, before B
    assert reads_of(sch, "B") == ["A"] and reads_of(sch, "C")[0] == "A_global"
    check(sch, f)
    verify_trace_roundtrip(sch, f)


def test_cache_write_read_by_every_consumer_copies_back_last():
    f = func()
    sch = S.Schedule(f)
    sch.cache_write("A", 0, "local", consumer_blocks=["B", "C"])
    last = sch.func.body.block.body.seq[-1]
    assert [b.block.name for b in tree.blocks_under(last)] == ["A_local"]
    check(sch, f)
    verify_trace_roundtrip(sch, f)


def test_refuses_a_consumer_that_does_not_read_the_buffer():
    sch = S.Schedule(func())
    assert_refused(sch, lambda: sch.cache_read("B", 0, "global", consumer_blocks=["A"]),
                   r"consumer_blocks \['A'\] do not read 'A' in this scope \(its readers: "
                   r"\['B', 'C'\]\)", CacheStageError)
    assert_refused(sch, lambda: sch.cache_write("A", 0, "global", consumer_blocks=["Q"]),
                   r"consumer_blocks \['Q'\] do not read 'A'", CacheStageError)


def test_refuses_consumer_blocks_that_are_not_a_list():
    sch = S.Schedule(func())
    assert_refused(sch, lambda: sch.cache_read("B", 0, "global", consumer_blocks="C"),
                   "argument 4, 'consumer_blocks' to cache_read: expected a list of block "
                   "handles or block names", ScheduleArgumentError)
