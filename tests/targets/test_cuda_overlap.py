"""Overlapping GPU arguments are judged by their device address ranges
(targets/cuda/args.py), never by the zero-storage host views that describe them to
the shared checker: those views' made-up host ranges overlapped whenever two small
host allocations lay close, so valid calls were refused at random (a test failed
under one test order and passed under another)."""

from __future__ import annotations

import pytest

import cuvil_tir as T
from cuvil_tir.errors import ArgumentError
from cuvil_tir.target import Signature
from targets.cuda.args import make_device_caller


class Dev:
    def __init__(self, shape, ptr, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f4",
                                         "strides": strides, "data": (ptr, False),
                                         "version": 3}


def caller(inplace=False):
    n = T.size_var("n")
    A = T.placeholder((n, 1024), name="A")
    B = T.compute((n, 1024), lambda i, j: A[i, j] + 1.0, name="B")
    f = T.create_prim_func([A, B])
    if inplace:
        f = f.with_attr("cuvil.allow_inplace", True)
    return make_device_caller(Signature.from_func(f), lambda *xs: [x.ptr for x in xs[:2]])


MB4 = 1024 * 1024 * 4


def test_large_arrays_far_apart_are_accepted_every_time():
    call = caller()
    for k in range(50):      # the old check failed almost always at this size
        assert call((Dev((1024, 1024), (k + 1) << 32), Dev((1024, 1024), (k + 2) << 32))) \
            == [(k + 1) << 32, (k + 2) << 32]


def test_adjacent_arrays_do_not_overlap():
    call = caller()
    assert call((Dev((1024, 1024), 1 << 32), Dev((1024, 1024), (1 << 32) + MB4))) \
        == [1 << 32, (1 << 32) + MB4]


@pytest.mark.parametrize("offset", [0, 4, MB4 - 4])
def test_overlapping_device_ranges_are_refused(offset):
    call = caller()
    with pytest.raises(ArgumentError, match=r"argument 1 'B': overlaps argument 0 'A' in "
                       r"memory, and the function writes B; pass separate arrays"):
        call((Dev((1024, 1024), 1 << 32), Dev((1024, 1024), (1 << 32) + offset)))


def test_in_place_use_declared_by_the_function_is_accepted():
    assert caller(inplace=True)((Dev((4, 1024), 1 << 32), Dev((4, 1024), 1 << 32)))


def test_empty_arrays_never_overlap():
    assert caller()((Dev((0, 1024), 1 << 32), Dev((0, 1024), 1 << 32)))
