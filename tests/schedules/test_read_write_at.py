"""read_at / write_at: the staged tile, its copy block, numerics, refusals."""

import numpy as np

import cuvil_tir as T
import schedules as S
from cuvil_tir.analysis import tree
from schedules.errors import CacheStageError
from tests.schedules.testing import assert_refused, run, verify_trace_roundtrip


def matmul(n=8, m=6, k=8):
    A = T.placeholder((n, k), name="A")
    B = T.placeholder((k, m), name="B")
    r = T.reduce_axis((0, k), name="r")
    C = T.compute((n, m), lambda i, j: T.sum(A[i, r] * B[r, j], axis=r), name="C")
    return T.create_prim_func([A, B, C])


def check(sch, f, seed=0):
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal([int(d) for d in p.shape]).astype("float32")
            for p in f.params]
    for got, want in zip(run(sch, args), run(f, args)):
        np.testing.assert_allclose(got, want, rtol=1e-5)


def tiled():
    f = matmul()
    sch = S.Schedule(f)
    i, j, r = sch.get_loops("C")
    io, ii = sch.split(i, [2, 4])
    ro, ri = sch.split(r, [2, 4])
    sch.reorder(io, ro, ii, j, ri)
    return f, sch, io, ro


def block(sch, name):
    return tree.get(sch.func, tree.find_block(sch.func, name)).block


def test_read_at_stages_the_tile_of_one_iteration():
    f, sch, io, ro = tiled()
    sch.read_at(ro, "C", 0, "local")
    sch.read_at(ro, "C", 1, "local")
    a = block(sch, "A_local")
    # A[i_0 * 4 : +4, r_0 * 4 : +4] per iteration of r_0, indexed by the loops it moves with
    assert [iv.dom.extent.value for iv in a.iter_vars] == [2, 2]
    assert [int(d.extent) for d in a.reads[0].region] == [4, 4]
    assert dict(a.annotations)["auto_copy"] is True
    assert [r.buffer.name for r in block(sch, "C").reads] == ["A_local", "B_local"]
    check(sch, f)
    verify_trace_roundtrip(sch, f)


def test_write_at_copies_back_after_the_loop_body():
    f, sch, io, ro = tiled()
    sch.write_at(io, "C", 0, "local")
    c = block(sch, "C_local")
    assert [int(d.extent) for d in c.writes[0].region] == [4, 6]
    assert block(sch, "C").writes[0].buffer.name == "C_local"
    check(sch, f, seed=1)
    verify_trace_roundtrip(sch, f)


def test_refuses_a_loop_beside_the_block():
    X = T.placeholder((4,), name="X")
    g = T.create_prim_func([X, T.compute((4,), lambda i: X[i] * 2.0, name="Y"),
                            T.compute((4,), lambda i: X[i] + 1.0, name="Z")])
    sch = S.Schedule(g)
    zloop = sch.get_loops("Z")[0]
    assert_refused(sch, lambda: sch.read_at(zloop, "Y", 0, "local"),
                   "is not a loop above block 'Y'", CacheStageError)


def test_refuses_an_index_out_of_range():
    f, sch, io, ro = tiled()
    assert_refused(sch, lambda: sch.write_at(io, "C", 1, "local"),
                   r"write_buffer_index 1 is out of range: block 'C' writes 1 buffer",
                   CacheStageError)


ACCUMULATE = '''@T.prim_func
def f(X: T.Buffer((8,), "float32"), Y: T.Buffer((8,), "float32")):
    for i in T.serial(8):
        with T.block("Y"):
            vi = T.axis.remap("S", [i])
            Y[vi] = Y[vi] + X[vi]
'''


def test_refuses_read_at_of_what_the_block_writes():
    sch = S.Schedule(T.parse(ACCUMULATE))
    i = sch.get_loops("Y")[0]
    k = [r.buffer.name for r in block(sch, "Y").reads].index("Y")
    assert_refused(sch, lambda: sch.read_at(i, "Y", k, "local"),
                   "block 'Y' also writes 'Y'; stage it with write_at", CacheStageError)


STRIDED = '''@T.prim_func
def f(X: T.Buffer((8,), "float32"), Y: T.Buffer((16,), "float32")):
    for io in T.serial(2):
        for ii in T.serial(4):
            with T.block("Y"):
                vi = T.axis.spatial(8, io * 4 + ii)
                Y[vi * 2] = X[vi]
'''


def test_refuses_write_at_of_a_tile_written_sparsely():
    sch = S.Schedule(T.parse(STRIDED))
    io = sch.get_loops("Y")[0]
    assert_refused(sch, lambda: sch.write_at(io, "Y", 0, "local"),
                   r"block 'Y' does not write all of its tile Y\[io \* 8:io \* 8 \+ 7\]",
                   CacheStageError)


STALE = '''@T.prim_func
def f(X: T.Buffer((8,), "float32"), Y: T.Buffer((8,), "float32")):
    T_ = T.alloc_buffer((8,))
    for i in T.serial(8):
        with T.block("T"):
            vi = T.axis.remap("S", [i])
            T_[vi] = X[vi] * 2.0
        with T.block("Y"):
            vi = T.axis.remap("S", [i])
            Y[vi] = T_[vi] + 1.0
'''


def test_refuses_read_at_of_a_buffer_written_under_the_loop():
    sch = S.Schedule(T.parse(STALE))
    i = sch.get_loops("Y")[0]
    assert_refused(sch, lambda: sch.read_at(i, "Y", 0, "local"),
                   r"buffer 'T_' is also written by \['T'\] under the loop", CacheStageError)


def test_refuses_a_partial_tile():
    f = matmul(n=6)
    sch = S.Schedule(f)
    io, _ = sch.split(sch.get_loops("C")[0], [2, 4])      # 8 rows for 6: guarded
    assert_refused(sch, lambda: sch.read_at(io, "C", 0, "local"),
                   "may reach outside the buffer \\(a partial tile\\)", CacheStageError)
    assert_refused(sch, lambda: sch.write_at(io, "C", 0, "local"),
                   "may reach outside the buffer", CacheStageError)


GUARDED = '''@T.prim_func
def f(X: T.Buffer((8,), "float32"), Y: T.Buffer((8,), "float32")):
    for io in T.serial(2):
        for ii in T.serial(4):
            with T.block("Y"):
                vi = T.axis.spatial(8, io * 4 + ii)
                T.where(ii < 3)
                Y[vi] = X[vi]
'''


def test_refuses_write_at_of_a_predicated_block():
    sch = S.Schedule(T.parse(GUARDED))
    io = sch.get_loops("Y")[0]
    assert_refused(sch, lambda: sch.write_at(io, "Y", 0, "local"),
                   "the copy back of its whole tile would store elements it skips",
                   CacheStageError)
