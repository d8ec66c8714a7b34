"""Buffers past 2**31 elements: refused with a fix, never indexed in wrapping int32
(issue 10 §0). The arrays are untouched ``np.zeros`` (virtual memory only)."""
import numpy as np
import pytest

import cuvil_tir as T
import targets
from targets import ArgumentError


def _row_heads(dtype):
    n, m = T.size_var("n", dtype), T.size_var("m", dtype)
    A = T.placeholder((n, m), "int8", "A")
    B = T.compute((n,), lambda i: A[i, 0], "B")
    return targets.build(T.create_prim_func([A, B]), "llvm")


def test_more_than_2_31_elements_with_int32_sizes_is_refused():
    mod = _row_heads("int32")
    rows = (1 << 16) + 1                       # rows * 2**15 > 2**31, each size fits int32
    a, b = np.zeros((rows, 1 << 15), "int8"), np.zeros(rows, "int8")
    for call in (lambda: mod(a, b), lambda: mod._call.slow((a, b))):
        with pytest.raises(ArgumentError, match=r"argument 0 'A': 2147516416 elements .*"
                                                r"T.size_var\(name, 'int64'\)"):
            call()
    assert not b.any()                          # nothing native ran


def test_int64_sizes_index_in_64_bits():
    mod = _row_heads("int64")
    assert " mul nsw i64 " in mod.get_source("ll")      # nsw: index arithmetic
    a = np.arange(12, dtype="int8").reshape(3, 4)
    b = np.zeros(3, "int8")
    mod(a, b)
    np.testing.assert_array_equal(b, a[:, 0])


def test_huge_constant_shape_names_its_size_not_extent_0():
    N = 1 << 20
    A = T.placeholder((N, N), "float32", "A")
    B = T.compute((N, N), lambda i, j: A[i, j] * 2.0, "B")
    with pytest.raises(T.LoweringError, match=r"buffer 'A' of shape \(1048576, 1048576\) "
                                              r"has 1099511627776 elements.*T.int64"):
        targets.build(T.create_prim_func([A, B]), "llvm")
