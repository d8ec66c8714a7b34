"""Dtype parsing, properties, promotion rules and every DTypeError of cuvil_tir.dtype."""

from __future__ import annotations

import numpy as np
import pytest

import cuvil_tir as T
from cuvil_tir import dtype as D


@pytest.mark.parametrize("dt,want", [
    ("float32", ("float", 32, 1)), ("float32x8", ("float", 32, 8)),
    ("bfloat16", ("bfloat", 16, 1)), ("int8x16", ("int", 8, 16)),
    ("uint64", ("uint", 64, 1)), ("bool", ("bool", 1, 1)), ("boolx4", ("bool", 1, 4)),
])
def test_parse(dt, want):
    assert D.parse(dt) == want


def test_properties():
    assert (D.element("float32x8"), D.lanes("float32x8"), D.bits("bfloat16")) == \
        ("float32", 8, 16)
    assert D.with_lanes("int8", 4) == "int8x4" and D.with_lanes("int8x4", 1) == "int8"
    assert [D.itemsize(d) for d in ("bool", "int8", "float16", "float32", "int64")] == \
        [1, 1, 2, 4, 8]
    assert D.is_float("bfloat16") and D.is_float("float16x2") and not D.is_float("int32")
    assert D.is_int("int8") and not D.is_int("uint8") and D.is_uint("uint8")
    assert D.is_integer("uint16") and not D.is_integer("bool") and D.is_bool("boolx2")


def test_canonical_accepts_numpy():
    assert D.canonical(np.float32) == "float32"
    assert D.canonical(np.dtype("int16")) == "int16"
    assert D.parse(np.dtype("uint8")) == ("uint", 8, 1)


def test_to_numpy_storage():
    assert D.to_numpy("bfloat16") == np.dtype("uint16")
    assert D.to_numpy("float16x4") == np.dtype("float16")
    assert D.to_numpy("bool") == np.dtype(bool)


@pytest.mark.parametrize("dt,rng", [("int8", (-128, 127)), ("uint8", (0, 255)),
                                    ("int64", (-2 ** 63, 2 ** 63 - 1)), ("bool", (0, 1))])
def test_int_range(dt, rng):
    assert D.int_range(dt) == rng


@pytest.mark.parametrize("value,dt,want", [(130, "int8", -126), (-1, "uint8", 255),
                                          (2 ** 32 + 5, "int32", 5), (2, "bool", 1),
                                          (-129, "int8", 127)])
def test_wrap_int(value, dt, want):
    assert D.wrap_int(value, dt) == want


@pytest.mark.parametrize("a,b,want", [
    ("int32", "int32", "int32"), ("int8", "int32", "int32"), ("int64", "int16", "int64"),
    ("uint8", "uint32", "uint32"), ("float16", "float32", "float32"),
    ("float64", "float32", "float64"), ("bfloat16", "float16", "float32"),
    ("bfloat16", "float64", "float64"), ("float32", "float32x4", "float32x4"),
    ("int8x4", "int32", "int32x4"), ("bool", "bool", "bool"),
])
def test_promote(a, b, want):
    assert D.promote(a, b) == want
    assert D.promote(b, a) == want


@pytest.mark.parametrize("a,b", [("int32", "float32"), ("int32", "uint32"), ("uint8", "int8"),
                                 ("bool", "int32"), ("float16", "bool")])
def test_promote_refuses_to_guess(a, b):
    with pytest.raises(T.DTypeError, match=rf"cannot combine {a} with {b}; Cuvil does not "
                                           rf"guess a common dtype. Cast one side explicitly"):
        D.promote(a, b)


def test_promote_lane_mismatch():
    with pytest.raises(T.DTypeError, match=r"cannot combine float32x4 with float32x8: vector "
                                           r"lanes differ \(4 vs 8\)"):
        D.promote("float32x4", "float32x8")


def test_unknown_dtypes():
    with pytest.raises(T.DTypeError, match=r"unknown dtype 'float31'; expected one of bool, "
                                           r"int8, .* optionally with a lane suffix"):
        D.parse("float31")
    with pytest.raises(T.DTypeError, match=r"unknown dtype 'complex64'"):
        T.placeholder((2,), "complex64")
    with pytest.raises(T.DTypeError, match=r"expected a dtype string such as 'float32', found 3"):
        D.parse(3)
    with pytest.raises(T.DTypeError, match=r"expected a dtype string such as 'float32', found None"):
        D.canonical(None)


def test_other_dtype_errors():
    with pytest.raises(T.DTypeError, match=r"int_range: expected an integer dtype, found 'float32'"):
        D.int_range("float32")
    with pytest.raises(T.DTypeError, match=r"the 'handle' dtype has no numpy equivalent"):
        D.to_numpy("handle")


def test_error_codes_and_bases():
    err = T.DTypeError("x")
    assert err.code == "CVL-E101" and str(err) == "[CVL-E101] x"
    assert isinstance(err, TypeError) and isinstance(err, T.CuvilError)
    assert isinstance(T.ShapeError("y"), ValueError)


def test_element_answers_the_same_from_its_table_and_refuses_unknown_dtypes_each_time():
    """``element`` keeps the answers for the dtypes ``parse`` accepts (asked for every
    node a pass builds); an unknown dtype is refused every time, never kept."""
    for dt, want in (("int8x16", "int8"), ("float32", "float32"), ("boolx4", "bool"),
                     ("bfloat16x32", "bfloat16")):
        assert D.element(dt) == want and D.element(dt) == want
    assert D._ELEMENTS["int8x16"] == "int8"
    for _ in range(2):
        with pytest.raises(T.DTypeError, match=r"unknown dtype 'complex64x2'"):
            D.element("complex64x2")
    assert "complex64x2" not in D._ELEMENTS
