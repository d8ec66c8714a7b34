"""What the schedule fuzzer found of cache copies inside blockized blocks: a copy sized
from a blockized block's whole tile (its inner T.where cuts the tile) read elements
outside the regions the blocks around it declare, and the printed function did not
parse back (fuzz cases 2175115933 and 2626021493).  The copy is now cut to those
regions; a step whose result still breaks the region contract is refused."""

import numpy as np
import pytest

import cuvil_tir as T
from cuvil_tir.analysis import tree
import schedules as S
import schedules.primitives.cache as cache_module
from cuvil_tir.region_check import verify_block_regions
from schedules.errors import RegionContractError
from tests.schedules.testing import assert_refused, run, run_llvm, verify_trace_roundtrip


def _int8_matmul():
    X = T.placeholder((6, 6), "int8", name="X")
    W = T.placeholder((6, 4), "int8", name="W")
    k = T.reduce_axis((0, 6), name="k")
    return T.create_prim_func([X, W, T.compute(
        (6, 4), lambda i, j: T.sum(X[i, k].astype("int32") * W[k, j].astype("int32"),
                                   axis=k), name="Y")])


def test_a_cache_in_a_blockized_partition_part_copies_only_the_part():
    """The first part of a partitioned reduction (k in [0, 2)) split again by 2 and
    blockized: the outer block declares its whole tile X[v_i_o, v_k_o*4 : +4], and a
    cache_read of X in it copied four columns where the part declares X[i, 0:2]
    (case 2175115933)."""
    f = _int8_matmul()
    sch = S.Schedule(f)
    _, _, k = sch.get_loops("Y")
    k0, _ = sch.split(k, [None, 2])
    sch.loop_partition(k0, [1, None])
    sch.cache_read("Y_k_00", 1, "local")
    outer, _ = sch.get_loops("Y_k_00")
    _, inner = sch.split(outer, [None, 2])
    sch.blockize(inner)
    copy = sch.cache_read("Y_k_00", 1, "local")
    assert sch.get(copy).reads[0].buffer.name == "X"
    # the part's two columns, not the tile's four (nor the buffer's six)
    realize = tree.get(sch.func, tree.find_block(sch.func, copy.name))
    assert str(realize.predicate) == "v_k_o * 4 + ax1 < 2"
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (6, 6)).astype("int8")
    w = rng.integers(-128, 128, (6, 4)).astype("int8")
    want = x.astype("int32") @ w.astype("int32")
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [x, w, np.zeros((6, 4), "int32")])[2],
                                      want)
    verify_trace_roundtrip(sch, f)


def _reversed_sum():
    X = T.placeholder((8, 4), name="X")
    k = T.reduce_axis((1, 4), name="k")
    return T.create_prim_func([X, T.compute((8,), lambda i: T.sum(X[i, 3 - k + 1], axis=k),
                                            name="Y")])


def _nested_blockize(sch):
    """Split k by 3 and blockize, then split the inner k by 2 (not dividing 3) and
    blockize again; returns the outer block."""
    _, k = sch.get_loops("Y")
    _, k1 = sch.split(k, [None, 3])
    outer = sch.blockize(k1)
    (k1,) = sch.get_loops("Y")
    _, k11 = sch.split(k1, [None, 2])
    sch.blockize(k11)
    return outer


def test_a_cache_in_a_nested_blockized_block_stays_in_its_parent():
    """The inner block of a nested blockize of a reversed read declares its whole tile
    X[v_i_o, 2 - v_k_i_o*2 : +2]; for its second tile that reaches column 0, where its
    T.where lets it read column 1 only and its parent declares X[v_i_o, 1:4].  A
    cache_read there copied column 0 (case 2626021493)."""
    f = _reversed_sum()
    sch = S.Schedule(f)
    outer = _nested_blockize(sch)
    sch.cache_read("Y", 1, "local")
    sch.reorder(*reversed(sch.get_loops(outer)))
    x = np.random.default_rng(1).integers(-3, 4, (8, 4)).astype("float32")
    for runner in (run, run_llvm):
        np.testing.assert_allclose(runner(sch, [x, np.zeros(8, "float32")])[1],
                                   x[:, 1:].sum(1))
    verify_trace_roundtrip(sch, f)


def test_a_step_breaking_the_region_contract_is_refused(monkeypatch):
    """A primitive whose result has a block accessing outside what a block around it
    declares (here cache_read without its cut, as before the fix) is refused with the
    check's finding, and the schedule is left as it was."""
    monkeypatch.setattr(cache_module, "within_enclosing", lambda *a, **k: None)
    sch = S.Schedule(_reversed_sum())
    _nested_blockize(sch)
    assert_refused(sch, lambda: sch.cache_read("Y", 1, "local"),
                   r"cache_read: the result breaks the region contract: block 'Y_o' "
                   r"reads X\[v_i_o, 2 - v_k_i_o \* 2:.*outside its declared "
                   r"T.reads\(X\[v_i_o, 1:4\]\): dimension 1 starts at 0, before the "
                   r"declared start 1", RegionContractError)


def test_verify_block_regions_since_checks_only_the_new_blocks(monkeypatch):
    """With ``since``, a block the transform kept (the same object) is not checked
    again; a block it made is."""
    sch = S.Schedule(_reversed_sum())
    _nested_blockize(sch)
    good = sch.func
    with monkeypatch.context() as m:
        m.setattr(cache_module, "within_enclosing", lambda *a, **k: None)
        bad, _ = cache_module.cache_read.raw(good, S.BlockRV("Y"), 1, "local")
    with pytest.raises(T.LoweringError, match="block 'Y_o' reads X"):
        verify_block_regions(bad, since=good)
    assert verify_block_regions(bad, since=bad) is bad
