"""cache_read and cache_write: numerics, printed IR, combination with compute_at."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir.analysis import tree
from schedules.errors import CacheStageError, ScheduleArgumentError
from tests import workloads
from tests.schedules.testing import (assert_refused, check_workload, run,
                                     verify_trace_roundtrip)


def block_names(sch):
    return [b.block.name for b in tree.blocks_under(sch.func.body)]


def reads_of(sch, name):
    blk = tree.get(sch.func, tree.find_block(sch.func, name)).block
    return [(r.buffer.name, r.buffer.scope) for r in blk.reads]


@pytest.mark.parametrize("scope", ["global", "local", "shared", "npu.wgt"])
def test_cache_read_matmul(scope):
    w = workloads.matmul(4, 5, 3)
    sch = S.Schedule(w.func)
    rv = sch.cache_read(sch.get_block("C"), 1, scope)
    assert rv == S.BlockRV(f"B_{scope}")
    assert block_names(sch) == ["root", f"B_{scope}", "C"]
    assert reads_of(sch, "C") == [("A", "global"), (f"B_{scope}", scope)]
    on_cpu = scope in ("global", "local")
    check_workload(sch, w, targets=("llvm", "c") if on_cpu else ())
    if not on_cpu:   # a CPU has no such memory: refused at build time
        with pytest.raises(targets.CodegenError, match=f"buffer 'B_{scope}' is in scope"):
            targets.build(sch, "llvm")
    verify_trace_roundtrip(sch, w.func)


def test_cache_read_printed_ir():
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func)
    sch.cache_read(sch.get_block("D"), 0, "local")
    lines = str(sch.func).splitlines()
    assert '    E_local = T.alloc_buffer((8,), "float32", scope="local")' in lines
    k = lines.index('        with T.block("E_local"):')
    assert lines[k - 1:k + 5] == [
        "    for ax0 in T.serial(8):",
        '        with T.block("E_local"):',
        '            v0 = T.axis.remap("S", [ax0])',
        "            T.reads(E[v0])",
        "            T.writes(E_local[v0])",
        "            E_local[v0] = E[v0]",
    ]
    # the copy runs after E's nest and before D's
    assert block_names(sch) == ["root", "E", "E_local", "D"]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_cache_read_then_compute_at():
    w = workloads.matmul(8, 8, 4)
    sch = S.Schedule(w.func)
    a_sh = sch.cache_read(sch.get_block("C"), 0, "shared")
    b_loc = sch.cache_read(sch.get_block("C"), 1, "local")
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.compute_at(a_sh, i)
    sch.compute_at(b_loc, k)
    blk_loops = tree.loops_above(sch.func, tree.find_block(sch.func, "A_shared"))
    assert [(l.loop_var.name, l.extent.value) for _, l in blk_loops] == [("i", 8),
                                                                         ("ax0", 4)]
    check_workload(sch, w, targets=())   # "shared" is a GPU memory: interpreter only
    verify_trace_roundtrip(sch, w.func)


def test_cache_read_inside_shared_loop_covers_written_region():
    # after compute_at the writer E and reader D share loop i: the copy goes there too
    w = workloads.elementwise_chain(8)
    sch = S.Schedule(w.func)
    (i,) = sch.get_loops(sch.get_block("D"))
    sch.compute_at(sch.get_block("E"), i)
    sch.cache_read(sch.get_block("D"), 0, "local")
    loops = tree.loops_above(sch.func, tree.find_block(sch.func, "E_local"))
    assert [l.loop_var.name for _, l in loops] == ["i"]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_cache_write_then_reverse_compute_at_classic():
    w = workloads.matmul(8, 8, 4)
    sch = S.Schedule(w.func)
    c = sch.get_block("C")
    cc = sch.cache_write(c, 0, "local")
    assert cc == S.BlockRV("C_local")
    i, j, k = sch.get_loops(c)
    io, ii = sch.split(i, [2, 4])
    sch.reverse_compute_at(cc, io)
    blk = tree.get(sch.func, tree.find_block(sch.func, "C")).block
    assert [(x.buffer.name, x.buffer.scope) for x in blk.writes] == [("C_local", "local")]
    loops = tree.loops_above(sch.func, tree.find_block(sch.func, "C_local"))
    assert [(l.loop_var.name, l.extent.value) for _, l in loops] == [
        ("i_0", 2), ("ax0", 4), ("ax1", 8)]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_cache_write_intermediate_then_compute_at():
    w = workloads.matmul_bias_relu(4, 4, 4)
    sch = S.Schedule(w.func)
    sch.cache_write(sch.get_block("C"), 0, "local")
    assert block_names(sch) == ["root", "C", "C_local", "D"]
    i, _ = sch.get_loops(sch.get_block("D"))
    sch.compute_at(sch.get_block("C_local"), i)
    sch.compute_at(sch.get_block("C"), i)
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_cache_names_are_unique():
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    first = sch.cache_read(sch.get_block("C"), 0, "local")
    second = sch.cache_read(sch.get_block("C"), 0, "local")
    assert (first.name, second.name) == ("A_local", "A_local_local")
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


# legality --------------------------------------------------------------------------------

def test_cache_read_index_out_of_range_is_refused():
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    blk = sch.get_block("C")
    assert_refused(sch, lambda: sch.cache_read(blk, 2, "local"),
                   r"cache_read: read_buffer_index 2 is out of range: block 'C' reads 2 "
                   r"buffer\(s\) \['A', 'B'\]", CacheStageError)


def test_cache_write_index_out_of_range_is_refused():
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    blk = sch.get_block("C")
    assert_refused(sch, lambda: sch.cache_write(blk, 1, "local"),
                   r"cache_write: write_buffer_index 1 is out of range", CacheStageError)


def test_cache_read_of_a_buffer_only_its_writer_reads_is_refused():
    # after loop_partition the tail block updates C without an init: it reads C, but
    # a copy of C made before it would be stale from its second iteration on
    w = workloads.matmul(3, 4, 2)
    sch = S.Schedule(w.func)
    sch.loop_partition(sch.get_loops(sch.get_block("C"))[2], [None, 1])
    tail = sch.get_block("C_k1")
    assert_refused(sch, lambda: sch.cache_read(tail, 0, "global"),
                   r"cache_read: 'C' is read in this scope only by its writer \['C_k1'\]"
                   r".*cache_write the buffer instead", CacheStageError)


def test_cache_bad_scope_is_refused():
    w = workloads.matmul(4, 4, 4)
    sch = S.Schedule(w.func)
    blk = sch.get_block("C")
    assert_refused(sch, lambda: sch.cache_read(blk, 0, "my scope"),
                   r"argument 3, 'scope' to cache_read: expected a storage scope name .* "
                   r"found 'my scope' \(str\)", ScheduleArgumentError)


TILE_SCOPE = '''@T.prim_func
def main(B: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    A = T.alloc_buffer((8, 8))
    for i0, j0 in T.grid(2, 2):
        with T.block("scope"):
            i, j = T.axis.remap("SS", [i0, j0])
            for x, y in T.grid(4, 4):
                with T.block("A"):
                    vi = T.axis.spatial(8, i * 4 + x)
                    vj = T.axis.spatial(8, j * 4 + y)
                    A[vi, vj] = T.Cast("float32", vi * 8 + vj)
            for x, y in T.grid(4, WIDTH):
                with T.block("B"):
                    vi = T.axis.spatial(8, i * 4 + x)
                    vj = T.axis.spatial(8, j * 4 + y)
                    B[vi, vj] = A[vi, vj] + T.float32(1)
    for i, j in T.grid(8, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] * T.float32(2)
'''


def test_cache_write_of_a_scope_block_that_reads_only_what_it_wrote():
    # "scope" reads A (its inner B does), but only the tile its inner A wrote just
    # before: the cache needs no initial contents, so cache_write is legal
    f = T.parse(TILE_SCOPE.replace("WIDTH", "4"))
    sch = S.Schedule(f)
    rv = sch.cache_write(sch.get_block("scope"), 0, "global")
    assert rv.name == "A_global"
    want = np.arange(64, dtype="float32").reshape(8, 8)
    out = run(sch, [np.zeros((8, 8), "float32"), np.zeros((8, 8), "float32")])
    np.testing.assert_array_equal(out[0], want + 1)
    np.testing.assert_array_equal(out[1], want * 2)
    verify_trace_roundtrip(sch, f)


def test_cache_write_of_a_scope_block_reading_outside_its_writes_is_refused():
    # here the inner B reads A[.., j*4 + 4] too: a column no inner block wrote
    f = T.parse(TILE_SCOPE.replace("WIDTH", "5").replace(
        "vj = T.axis.spatial(8, j * 4 + y)\n                    B[",
        "vj = T.axis.spatial(8, T.min(j * 4 + y, 7))\n                    B["))
    sch = S.Schedule(f)
    assert_refused(sch, lambda: sch.cache_write("scope", 0, "global"),
                   r"cache_write: block 'scope' reads 'A' before writing it and has no "
                   r"init", CacheStageError)


INPLACE = '''@T.prim_func
def main(D: T.Buffer((8,), "float32")):
    T1 = T.alloc_buffer((8,))
    for i in T.serial(8):
        with T.block("copy_in"):
            v = T.axis.spatial(8, i)
            T1[v] = D[v] * T.float32(2)
    for i in T.serial(8):
        with T.block("copy_out"):
            v = T.axis.spatial(8, i)
            D[v] = T1[7 - v]
'''


def test_cache_read_of_a_buffer_overwritten_later_copies_it_before_the_readers():
    # D is read, then overwritten in place: the copy is of D as copy_in sees it
    f = T.parse(INPLACE)
    sch = S.Schedule(f)
    rv = sch.cache_read(sch.get_block("copy_in"), 0, "local", [sch.get_block("copy_in")])
    assert block_names(sch)[:3] == ["root", rv.name, "copy_in"]
    assert reads_of(sch, "copy_in") == [("D_local", "local")]
    d = np.arange(8, dtype="float32")
    np.testing.assert_array_equal(run(sch, [d.copy()])[0], (2 * d)[::-1])
    verify_trace_roundtrip(sch, f)


def test_cache_read_where_one_loop_reads_then_overwrites_is_refused():
    # iteration i + 1 reads what iteration i wrote: no single copy serves the reader
    f = T.parse('''@T.prim_func
def main(D: T.Buffer((8,), "float32")):
    for i in T.serial(7):
        with T.block("rd"):
            v = T.axis.spatial(7, i)
            D[v + 1] = D[v] + T.float32(1)
''')
    sch = S.Schedule(f)
    blk = sch.get_block("rd")
    assert_refused(sch, lambda: sch.cache_read(blk, 0, "local"),
                   r"cache_read: 'D' is read in this scope only by its writer",
                   CacheStageError)


def _agrees(sch, f, inputs, out):
    """interpreted (fresh buffers poisoned: an unwritten read fails) and compiled, ``sch``
    computes what ``f`` does; the trace replays."""
    from tests.schedules.testing import run_llvm
    want = run(f, inputs)[out]
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, inputs)[out], want)
    verify_trace_roundtrip(sch, f)


def test_cache_read_inside_a_blockized_block_copies_only_what_lies_in_the_buffer():
    # X[i + 2] read under T.if_then_else(i + 2 < 4): the tile copy read X[4], X[5]
    # (issue 25, repro 16)
    X = T.placeholder((4,), "int32", name="X")
    f = T.create_prim_func([X, T.compute((4, 2), lambda i, j: T.if_then_else(
        i + 2 < 4, X[i + 2], T.const(0, "int32")), name="Y")])
    sch = S.Schedule(f)
    sch.blockize(sch.get_loops(sch.get_block("Y"))[1])
    sch.cache_read(sch.get_block("Y"), 0, "local")
    assert "T.where(v_i_o < 2)" in str(sch.func)
    _agrees(sch, f, [np.arange(1, 5, dtype="int32"), np.zeros((4, 2), "int32")], 1)


def test_cache_write_inside_a_blockized_block_copies_back_only_the_tile():
    # j split 1 x 4 with T.where(j_1 < 2), blockized: the write-back copied 4 columns of
    # a 2-column tile (issue 25, repro 23)
    X = T.placeholder((1, 2), name="X")
    A = T.compute((1, 2), lambda i, j: X[i, j] * 2.0, name="A")
    f = T.create_prim_func([X, T.compute((1, 2), lambda i, j: A[i, j] + 1.0, name="B")])
    sch = S.Schedule(f)
    _, j = sch.get_loops(sch.get_block("A"))
    j0, _ = sch.split(j, [None, 4])
    sch.blockize(j0)
    sch.cache_write(sch.get_block("A"), 0, "local")
    copy = sch.get_loops(sch.get_block("A_local"))
    assert [int(tree.get(sch.func, tree.find_loop(sch.func, l.var)).extent)
            for l in copy[-2:]] == [1, 2]
    _agrees(sch, f, [np.array([[1.0, 2.0]], "float32"), np.zeros((1, 2), "float32")], 1)


def test_cache_read_under_a_guarded_loop_copies_only_when_the_writer_writes():
    # the copy sat with its writer and reader under T.where(i_1_0 * 2 + i_1_1 < 1) but
    # without it: in the masked iterations it read A[1, k] before A's block wrote it
    # (issue 25, repro 21); cache_write's copy back is guarded the same way
    X = T.placeholder((2, 2), "int32", name="X")
    A = T.compute((2, 2), lambda i, j: X[i, j] + 1, name="A")
    k = T.reduce_axis((0, 2), name="k")
    f = T.create_prim_func([X, T.compute((2,), lambda i: T.min(A[i, k], axis=k), name="Y")])
    x = np.array([[3, 1], [5, 7]], "int32")
    for cache in ("cache_read", "cache_write"):
        sch = S.Schedule(f)
        i, kk = sch.get_loops(sch.get_block("Y"))
        sch.compute_at(sch.get_block("A"), kk)
        _, i1 = sch.split(i, [2, 1])
        sch.split(i1, [1, 2])            # extent 1 as 1 x 2: T.where(i_1_0 * 2 + i_1_1 < 1)
        if cache == "cache_read":
            rv = sch.cache_read(sch.get_block("Y"), 0, "local")
        else:
            rv = sch.cache_write(sch.get_block("A"), 0, "local")
        guard = tree.get(sch.func, tree.find_block(sch.func, rv.name)).predicate
        assert "i_1_0 * 2 + i_1_1 < 1" in str(guard), str(sch.func)
        _agrees(sch, f, [x, np.full(2, -1, "int32")], 1)


def test_cache_write_copy_back_stays_within_a_symbolic_buffer():
    # fuzz case 3688537001: after fuse + split under a symbolic size, the bound of
    # (f * 5 + g) % n is the index type's maximum, and the copy back ran
    # T.serial(2147483647) under a guard (the interpreter and the build never finished)
    n = T.size_var("n")
    X = T.placeholder((n, n), "float32", name="X")
    Y = T.compute((n, n), lambda i, j: X[i, j] * 2.0, name="Y")
    f = T.create_prim_func([X, Y])
    sch = S.Schedule(f)
    sch.split(sch.fuse(*sch.get_loops("Y")), [None, 5])
    sch.cache_write("Y", 0, "global")
    loops = {lp.loop_var.name: lp.extent for _, lp in
             tree.loops_above(sch.func, tree.find_block(sch.func, "Y_global"))}
    assert str(loops["ax1"]) == "n", loops
    x = np.arange(49, dtype="float32").reshape(7, 7)
    y = np.zeros((7, 7), "float32")
    T.interpret(sch.func, x, y)
    np.testing.assert_array_equal(y, x * 2)
    y = np.zeros((7, 7), "float32")
    targets.build(sch, "llvm")(x, y)
    np.testing.assert_array_equal(y, x * 2)


def test_cache_read_where_a_unit_loop_is_folded_on_one_side_only():
    # the copy into S names no bx (extent 1: folded away), its reader names bx * 8:
    # bx's range says the writer produces what the reader needs (TVM's mma schedule
    # on a single thread block)
    f = T.parse('''
@T.prim_func
def f(A: T.Buffer((8, 16), "float32"), C: T.Buffer((8, 16), "float32")):
    S = T.alloc_buffer((8, 16), scope="shared")
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for k0 in range(2):
            for f in range(64):
                with T.block("S"):
                    v0 = T.axis.spatial(8, f // 8)
                    v1 = T.axis.spatial(16, k0 * 8 + f % 8)
                    S[v0, v1] = A[v0, v1]
            for i, k1 in T.grid(8, 8):
                with T.block("C"):
                    vi = T.axis.spatial(8, bx * 8 + i)
                    vk = T.axis.spatial(16, k0 * 8 + k1)
                    C[vi, vk] = S[vi, vk] * T.float32(2)
''')
    sch = S.Schedule(f)
    sch.cache_read(sch.get_block("C"), 0, "local")
    a = np.arange(128, dtype="float32").reshape(8, 16)
    c = np.zeros_like(a)
    T.interpret(sch.func, a, c)
    np.testing.assert_array_equal(c, a * 2)
