"""Deeply nested expressions (issue 25): a chain of a few thousand terms builds, runs
and round-trips; deeper than Cuvil can walk is a coded NestingError, never a raw
RecursionError (350 terms used to fail in the build, 1,000 in T.compute)."""

import sys

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir.deep import DEEP_LIMIT, deep_ok, nesting_depth


def _chain(terms, n=8):
    A = T.placeholder((n,), name="A")

    def f(i):
        e = A[i]
        for k in range(terms):
            e = e + A[(i + k) % n] * float(k % 3)
        return e
    return T.create_prim_func([A, T.compute((n,), f, name="B")])


def _want(a, terms):
    out = a.astype("float64")
    for k in range(terms):
        out = out + np.roll(a, -k) * float(k % 3)
    return out


def test_a_chain_of_1200_terms_schedules_builds_runs_and_round_trips():
    terms = 1200
    func = _chain(terms)
    assert nesting_depth(func) > terms
    a = np.arange(8, dtype="float32")
    ref = np.zeros(8, "float32")
    T.interpret(func, a, ref)
    np.testing.assert_allclose(ref, _want(a, terms), rtol=1e-5)
    sch = S.Schedule(func)
    sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 4])
    assert T.structural_equal(T.parse(str(sch.func)), sch.func)
    b = np.zeros(8, "float32")
    targets.build(sch, "llvm")(a, b)
    np.testing.assert_allclose(b, ref, rtol=1e-5)


def test_a_chain_of_4000_terms_is_computed_and_interpreted():
    func = _chain(4000)
    a = np.arange(8, dtype="float32")
    b = np.zeros(8, "float32")
    T.interpret(func, a, b)
    np.testing.assert_allclose(b, _want(a, 4000), rtol=1e-5)


def test_building_a_chain_costs_linear_time_in_its_length():
    # each node's dtype is computed once when it is built (it used to walk the
    # whole chain below it: n**2 / 2 steps, and a RecursionError at 1,000 terms)
    e = T.var("x", "float32")
    for k in range(20000):
        e = e + float(k)
    assert e.dtype == "float32" and (e < 0.0).dtype == "bool"


def test_deeper_than_the_limit_is_a_coded_error():
    @deep_ok
    def endless(n):
        return endless(n + 1)
    with pytest.raises(T.NestingError, match=rf"endless: the IR is nested deeper than "
                       rf"Cuvil can walk \(more than {DEEP_LIMIT} Python frames.*split the "
                       r"expression into stages") as err:
        endless(0)
    assert err.value.code == "CVL-E250"
    assert sys.getrecursionlimit() < DEEP_LIMIT        # restored afterwards
