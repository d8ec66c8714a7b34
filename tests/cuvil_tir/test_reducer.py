"""The one reducer analysis (cuvil_tir.analysis.reducer): combiners and identities as te
builds them, and the reducer rfactor, decompose_reduction, the CUDA cross-thread
reduction and the tuner read back."""

import numpy as np
import pytest

import cuvil_tir as T
from cuvil_tir.analysis import tree
from cuvil_tir.analysis.reducer import (COMBINERS, NotAReduction, combine, has_reduce_axes,
                                        identity, is_identity, match_reducer,
                                        reduction_block)
from cuvil_tir.arith import simplify

REDUCE = {"sum": T.sum, "prod": T.prod, "max": T.max, "min": T.min}


def block(f, name):
    return tree.get(f, tree.find_block(f, name)).block


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int32", "float16", "float32"])
@pytest.mark.parametrize("combiner", sorted(COMBINERS))
def test_identity_is_neutral_and_recognised(combiner, dtype):
    ident = identity(combiner, dtype)
    assert ident.dtype == dtype and is_identity(combiner, ident)
    for v in (0, 1, 3, 100):
        x = T.const(v, dtype)
        assert simplify(combine(combiner, ident, x)).value == x.value, (combiner, v)


@pytest.mark.parametrize("combiner", sorted(COMBINERS))
def test_te_reductions_are_read_back_by_match_reducer(combiner):
    A = T.placeholder((4, 6), name="A")
    k = T.reduce_axis((0, 6), name="k")
    f = T.create_prim_func([A, T.compute((4,), lambda i: REDUCE[combiner](A[i, k], axis=k),
                                         name="R")])
    got, rhs = match_reducer(block(f, "R"))
    assert got == combiner and str(rhs) == "A[v_i, v_k]"
    assert has_reduce_axes(block(f, "R"))
    i_loop = tree.get(f, ("block", "body"))
    assert reduction_block(i_loop) is None and reduction_block(i_loop.body) == "R"


def test_match_reducer_refusals_say_what_is_missing():
    f = T.parse('''
@T.prim_func
def f(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4,), "float32"),
      C: T.Buffer((4,), "float32"), D: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 4):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(1)
            B[vi] = B[vi] + A[vi, vk]
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] - A[vi, vk]
        with T.block("D"):
            vi, vk = T.axis.remap("SS", [i, k])
            D[vi] = A[vi, vk]
''')
    with pytest.raises(NotAReduction, match=r"has init B\[vi\] = T.float32\(1\) which is not "
                                            "the identity of its sum reduction"):
        match_reducer(block(f, "B"))
    with pytest.raises(NotAReduction, match="no recognised combiner"):
        match_reducer(block(f, "C"))
    with pytest.raises(NotAReduction, match="is not a reduction block"):
        match_reducer(block(f, "D"))
    assert not has_reduce_axes(block(f, "D"))


def test_max_of_minus_infinity_is_minus_infinity_on_the_interpreter():
    A = T.placeholder((2, 4), name="A")
    k = T.reduce_axis((0, 4), name="k")
    f = T.create_prim_func([A, T.compute((2,), lambda i: T.max(A[i, k], axis=k), name="R")])
    a = np.full((2, 4), -np.inf, "float32")
    out = np.zeros(2, "float32")
    T.interpret(f, a, out)
    assert np.all(out == -np.inf)
