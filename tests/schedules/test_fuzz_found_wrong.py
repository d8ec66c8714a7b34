"""Accepted schedules the differential fuzzer found computing wrong results (seed
1445087623: fuzz cases 1567903225, 1532791086, 1863173224); each reduced to its
smallest form: the step is refused with a coded error, or it now computes right."""

import numpy as np

import cuvil_tir as T
import schedules as S
from schedules.primitives.pad import PadEinsumError
from tests.schedules.testing import assert_refused, run


def _row_matmul():
    X = T.placeholder((1, 4), name="X")
    W = T.placeholder((4, 7), name="W")
    k = T.reduce_axis((0, 4), name="k")
    Y = T.compute((1, 7), lambda i, j: T.sum(X[i, k] * W[k, j], axis=k), name="Y")
    return T.create_prim_func([X, W, Y])


def test_pad_einsum_refuses_a_padded_iter_var_that_does_not_index_the_output():
    """transform_layout folds the unit dimension of Y to 0 (Y[v_j, 0]): padding v_i to 2
    made iteration i = 1 re-initialise and overwrite every Y[j] with zeros (case
    1567903225)."""
    sch = S.Schedule(_row_matmul())
    sch.transform_layout("Y", 0, lambda a, b: (b, a))
    assert_refused(sch, lambda: sch.pad_einsum("Y", [2, 1, 1]),
                   r"CVL-E103.*spatial iter var 'v_i' must index its output.*"
                   r"found Y\[v_j, 0\].*Use padding 1 for 'v_i'", PadEinsumError)
    sch.pad_einsum("Y", [1, 8, 1])          # padding the vars that index Y stays right
    x, w = np.arange(4, dtype="float32").reshape(1, 4), np.ones((4, 7), "float32")
    got = run(sch, [x, w, np.zeros((7, 1), "float32")])[2]
    np.testing.assert_array_equal(got, (x @ w).T)
