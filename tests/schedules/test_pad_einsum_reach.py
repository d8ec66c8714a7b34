"""pad_einsum of a block that reaches only part of a buffer's dimension: found by the
schedule fuzzer.  The padded iterations read the buffer's own elements past the block's
as if they were padding (a sum over k < 2 of a 4-column X padded to 4 summed all four
columns) or wrote rows another block owns (a loop_partition part): refused."""

import numpy as np

import cuvil_tir as T
import schedules as S
from schedules.primitives.pad import PadEinsumError
from tests.schedules.testing import assert_refused, run


def _partial_sum():
    X = T.placeholder((4, 4), name="X")
    k = T.reduce_axis((0, 2), name="k")
    return T.create_prim_func([X, T.compute((4,), lambda i: T.sum(X[i, k], axis=k),
                                            name="Y")])


def test_padding_a_reduction_into_real_columns_is_refused():
    sch = S.Schedule(_partial_sum())
    assert_refused(sch, lambda: sch.pad_einsum("Y", [1, 4]),
                   "pad_einsum: block 'Y': index v_k of 'X' reaches 2 of the 4 elements "
                   "along its dimension 1; padded, it would reach 4, elements of 'X' the "
                   "block does not read now", PadEinsumError)
    # the same reduction padded to 8: past the buffer too, and still wrong to fill
    # columns 2 and 3 from X
    assert_refused(sch, lambda: sch.pad_einsum("Y", [1, 8]), "reaches 2 of the 4",
                   PadEinsumError)
    x = np.arange(16, dtype="float32").reshape(4, 4)
    np.testing.assert_array_equal(run(sch, [x, np.zeros(4, "float32")])[1],
                                  x[:, :2].sum(1))


def test_padding_a_partition_into_its_neighbours_rows_is_refused():
    A = T.placeholder((7, 4), name="A")
    W = T.placeholder((4, 6), name="W")
    k = T.reduce_axis((0, 4), name="k")
    f = T.create_prim_func([A, W, T.compute((7, 6), lambda i, j: T.sum(A[i, k] * W[k, j],
                                                                       axis=k), name="Y")])
    sch = S.Schedule(f)
    sch.loop_partition(sch.get_loops("Y")[0], [2, None])
    assert_refused(sch, lambda: sch.pad_einsum("Y_i0", [4, 1, 2]),
                   "index v_i of 'Y' reaches 2 of the 7 elements along its dimension 0; "
                   "padded, it would reach 4, elements of 'Y' the block does not write now",
                   PadEinsumError)


def test_padding_a_whole_dimension_still_works():
    X = T.placeholder((4, 6), name="X")
    k = T.reduce_axis((0, 6), name="k")
    f = T.create_prim_func([X, T.compute((4,), lambda i: T.sum(X[i, k], axis=k),
                                         name="Y")])
    sch = S.Schedule(f)
    sch.pad_einsum("Y", [1, 8])
    x = np.arange(24, dtype="float32").reshape(4, 6)
    np.testing.assert_array_equal(run(sch, [x, np.zeros(4, "float32")])[1], x.sum(1))


def test_padding_an_update_whose_init_is_elsewhere_is_refused():
    """blockize moves the init into the outer block, over the old shape: the padded
    elements of the intermediate Y would accumulate onto memory nothing wrote."""
    X = T.placeholder((4, 8), "int32", name="X")
    W = T.placeholder((8, 5), "int32", name="W")
    k = T.reduce_axis((0, 8), name="k")
    Y = T.compute((4, 5), lambda i, j: T.sum(X[i, k] * W[k, j], axis=k), name="Y")
    f = T.create_prim_func([X, W, T.compute((4, 5), lambda i, j: Y[i, j] + 1, name="Z")])
    sch = S.Schedule(f)
    sch.blockize(sch.get_loops("Y")[0])
    assert_refused(sch, lambda: sch.pad_einsum("Y", [1, 4, 2]),
                   "pad_einsum: block 'Y' updates 'Y' without an init: its padded "
                   "elements would start uninitialised", PadEinsumError)
    sch = S.Schedule(f)
    sch.decompose_reduction("Y", sch.get_loops("Y")[0])
    assert_refused(sch, lambda: sch.pad_einsum("Y", [1, 4, 2]),
                   "block 'Y_update' updates 'Y' without an init", PadEinsumError)
