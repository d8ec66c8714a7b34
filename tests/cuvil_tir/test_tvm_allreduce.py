"""TVM's lowered cross-thread reductions read from TVMScript
(cuvil_tir/parser/tvm_allreduce.py): ``T.comm_reducer`` (a ``lambda``),
``T.attr(..., "reduce_scope", ...)`` in both forms and ``T.tvm_thread_allreduce``,
run by the interpreter's GPU semantics and through the CUDA build, nvcc included; and
the dead stores such a function leaves (cuvil_tir/transform/dead_stores.py)."""

from __future__ import annotations

import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir.errors import ParseError
from cuvil_tir.transform.dead_stores import drop_dead_stores
from targets.cuda.nvcc import nvcc_ptx

SUM = '''
def row_sums(A: T.Buffer((4, 64), "float32"), B: T.Buffer((4,), "float32")):
    bx = T.launch_thread("blockIdx.x", 4)
    red = T.allocate([1], "float32", "local")
    tx = T.launch_thread("threadIdx.x", 64)
    red_1 = T.Buffer((1,), data=red, scope="local")
    with T.attr(T.comm_reducer(lambda x, y: x + y, [T.float32(0)]), "reduce_scope",
                T.reinterpret("handle", T.uint64(0))):
        T.tvm_thread_allreduce(T.uint32(1), A[bx, tx], tx < 48, red_1[0], tx)
    if tx == 0:
        B[bx] = red_1[0]
'''

#: argmax over threadIdx.x, one group per threadIdx.y; every thread writes its copy
ARGMAX = '''
def argmax(A: T.Buffer((2, 32), "float32"), V: T.Buffer((2, 32), "float32"),
           I: T.Buffer((2, 32), "int32")):
    ty = T.launch_thread("threadIdx.y", 2)
    tx = T.launch_thread("threadIdx.x", 32)
    v = T.allocate([1], "float32", "local")
    i = T.allocate([1], "int32", "local")
    v_1 = T.Buffer((1,), data=v, scope="local")
    i_1 = T.Buffer((1,), "int32", data=i, scope="local")
    T.attr(T.comm_reducer(lambda x0, x1, y0, y1: (T.Select(x0 >= y0, x0, y0),
                                                  T.Select(x0 >= y0, x1, y1)),
                          [T.float32(-1e30), -1]),
           "reduce_scope", T.reinterpret("handle", T.uint64(0)))
    T.tvm_thread_allreduce(T.uint32(2), A[ty, tx], tx, T.bool(True), v_1[0], i_1[0], tx)
    V[ty, tx] = v_1[0]
    I[ty, tx] = i_1[0]
'''


def _run_both(text, *arrays):
    """The function's own GPU semantics and its CUDA build's (interpreted with race
    checks, compiled by nvcc): the arrays after each."""
    f = T.parse(text)
    mine = [a.copy() for a in arrays]
    T.interpret(f, *mine)
    mod = targets.build(f, targets.Target("cuda", arch="sm_80"))
    nvcc_ptx(mod.get_source("cuda"), "sm_80")
    built = [a.copy() for a in arrays]
    T.interpret(mod.lowered, *built, check_races=True)
    return mine, built


def test_a_sum_with_a_condition_reduces_the_threads_that_pass_it():
    a = np.random.default_rng(0).integers(-3, 4, (4, 64)).astype("float32")
    for out in _run_both(SUM, a, np.zeros(4, "float32")):
        np.testing.assert_array_equal(out[1], a[:, :48].sum(axis=1))


def test_a_tuple_reducer_leaves_the_result_in_every_thread():
    a = np.random.default_rng(1).permutation(64).reshape(2, 32).astype("float32")
    for _, v, i in _run_both(ARGMAX, a, np.zeros((2, 32), "float32"),
                             np.zeros((2, 32), "int32")):
        np.testing.assert_array_equal(v, np.repeat(a.max(axis=1)[:, None], 32, axis=1))
        np.testing.assert_array_equal(i, np.repeat(a.argmax(axis=1)[:, None], 32, axis=1))


def test_the_reducer_kind_picks_warp_shuffles_for_a_sum():
    assert "warp_sum" in T.to_text(T.parse(SUM))
    assert "warp_" not in T.to_text(T.parse(ARGMAX))      # a tuple: the shared-memory tree


@pytest.mark.parametrize("text, msg", [
    (SUM.replace("    with T.attr(T.comm_reducer(lambda x, y: x + y, [T.float32(0)]), "
                 "\"reduce_scope\",\n                T.reinterpret(\"handle\", "
                 "T.uint64(0))):\n        T.tvm", "    if True:\n        T.tvm"),
     r"must be inside T\.attr\(T\.comm_reducer\(\.\.\.\) of n values"),
    (SUM.replace('"reduce_scope"', '"pragma_unroll"'),
     r"only TVM's reducer attribute T\.attr\(T\.comm_reducer\(\.\.\.\), \"reduce_scope\""),
    (SUM.replace("lambda x, y: x + y", "lambda x: x"), r"the lambda takes 1 arguments, "
                                                       r"given 2"),
    (SUM.replace("red_1[0], tx)", "red_1[0], bx)"),
     r"each reduced thread variable must be a threadIdx launched around the call"),
])
def test_bad_reductions_are_refused(text, msg):
    with pytest.raises(ParseError, match=msg):
        T.parse(text)


def test_a_reduction_nothing_reads_is_dropped_and_nvcc_accepts_the_kernel():
    # the result stays in a local buffer (TVM's thread-sync test does this): without
    # the pass nvcc rejects the kernel ("variable ... was set but never used")
    text = SUM.replace("    if tx == 0:\n        B[bx] = red_1[0]\n", "")
    mod = targets.build(T.parse(text), targets.Target("cuda", arch="sm_80"))
    src = mod.get_source("cuda")
    nvcc_ptx(src, "sm_80")
    assert "red" not in src.split("__global__")[1]


def test_a_store_whose_value_calls_an_opaque_op_is_kept():
    f = T.parse('''
def f(A: T.Buffer((4,), "float32")):
    with T.allocate((1,), "float32", scope="local") as t:
        t[0] = T.call_extern("float32", "side_effect", A[0])
        A[1] = A[0]
''')
    assert "side_effect" in T.to_text(drop_dead_stores(f))
    g = T.parse('''
def g(A: T.Buffer((4,), "float32")):
    with T.allocate((1,), "float32", scope="local") as t:
        t[0] = A[0] * T.float32(2)
        A[1] = t[0]
''')
    assert drop_dead_stores(g) is g
