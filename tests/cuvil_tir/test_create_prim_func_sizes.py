"""create_prim_func refuses a size var that no parameter binds."""

import numpy as np
import pytest

import cuvil_tir as T


def _stages():
    n = T.size_var("n")
    X = T.placeholder((4,), name="X")
    Y = T.compute((n,), lambda i: X[i % 4] + 1.0, name="Y")
    Z = T.compute((4,), lambda i: Y[i] * 2.0, name="Z")
    return n, X, Z


def test_an_unbound_size_var_is_a_shape_error_naming_it_and_the_fix():
    _, X, Z = _stages()
    with pytest.raises(T.ShapeError, match=r"create_prim_func: the size var 'n' is used "
                       r"\(the shape of Y\) but no parameter binds it: .* pass 'n' itself: "
                       r"T.create_prim_func\(\[..., n\]\)") as info:
        T.create_prim_func([X, Z])
    assert info.value.code == "CVL-E102"


def test_a_size_var_passed_as_a_scalar_or_bound_by_a_tensor_shape_is_accepted():
    n, X, Z = _stages()
    f = T.create_prim_func([X, Z, n])
    x = np.arange(4, dtype="float32")
    z = np.zeros(4, "float32")
    T.interpret(f, x, z, 6)
    np.testing.assert_array_equal(z, (x + 1) * 2)
    m = T.size_var("m")
    A = T.placeholder((m,), name="A")
    T.create_prim_func([A, T.compute((m,), lambda i: A[i], name="B")])
