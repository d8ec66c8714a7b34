"""Debug mode: every primitive is checked against the reference interpreter."""

import warnings

import numpy as np
import pytest

import cuvil_tir
import cuvil_tir as T
import schedules as S
from cuvil_tir.expr import FloatImm
from cuvil_tir.stmt import BufferStore
from cuvil_tir.visitor import Mutator
from cuvil_tir.analysis import tree
from schedules.debug import MAX_ITERATIONS, random_inputs
from schedules.errors import DebugCheckError
from schedules.primitive import PRIMITIVES, primitive
from tests import workloads
from tests.schedules.testing import (assert_refused, check_workload, interpreter,
                                     verify_trace_roundtrip)


@pytest.fixture(autouse=True)
def reference_interpreter(monkeypatch):
    monkeypatch.setattr(cuvil_tir, "interpret", interpreter())


class _Triple(Mutator):
    def visit_FloatImm(self, c):
        return FloatImm(3.0, c.dtype) if c.value == 2.0 else c


@pytest.fixture
def broken():
    """A primitive that silently changes the computation (x * 2 becomes x * 3)."""
    @primitive("test_broken_scale")
    def broken_scale(func, block):
        path = tree.find_block(func, block.name)
        return tree.replace(func, path, _Triple().visit(tree.get(func, path))), None

    yield "test_broken_scale"
    del PRIMITIVES["test_broken_scale"]


def scale(n):
    A = T.placeholder((n,), name="A")
    return T.create_prim_func([A, T.compute((n,), lambda i: A[i] * 2.0, name="B")])


def test_debug_mode_accepts_legal_schedules():
    w = workloads.matmul_bias_relu(8, 8, 8)
    sch = S.Schedule(w.func, debug=True)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.tile(i, j, 4, 3)
    sch.split(k, [None, 3])
    di, dj = sch.get_loops(sch.get_block("D"))
    sch.fuse(di, dj)
    sch.parallel(sch.get_loops(sch.get_block("D"))[0])
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func, debug=True)


def test_debug_mode_catches_a_primitive_that_changes_results(broken):
    f = scale(16)
    sch = S.Schedule(f, debug=True)
    blk = sch.get_block("B")
    err = assert_refused(sch, lambda: sch._apply(broken, blk), r"test_broken_scale: "
                         r"changed the results: buffer B differs from before the "
                         r"primitive in \d+ of 16 elements", DebugCheckError)
    assert err.primitive == broken
    verify_trace_roundtrip(sch, f)


def test_without_debug_the_broken_primitive_goes_through(broken):
    f = scale(16)
    sch = S.Schedule(f)
    sch._apply(broken, sch.get_block("B"))
    assert isinstance(tree.get(sch.func, tree.find_block(sch.func, "B")).block.body,
                      BufferStore)
    a = np.arange(16, dtype="float32")
    out = [a, np.zeros(16, "float32")]
    interpreter()(sch.func, *out)
    np.testing.assert_array_equal(out[1], a * 3)


def test_a_large_function_is_checked_on_a_smaller_twin(broken):
    """Issue 25: above MAX_ITERATIONS block instances debug mode used to skip its
    check silently; now the same steps run on the function with smaller extents."""
    f = scale(MAX_ITERATIONS + 8)
    sch = S.Schedule(f, debug=True)
    outer, _ = sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 16])
    sch.parallel(outer)
    blk = sch.get_block("B")
    assert_refused(sch, lambda: sch._apply(broken, blk), r"test_broken_scale: changed the "
                   r"results: buffer B differs from before the primitive in \d+ of 10004 "
                   r"elements", DebugCheckError)


def test_symbolic_sizes_are_bound_to_small_values(broken):
    n = T.size_var("n")
    A = T.placeholder((n,), name="A")
    f = T.create_prim_func([A, T.compute((n,), lambda i: A[i] * 2.0, name="B")])
    sch = S.Schedule(f, debug=True)
    sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 4])
    blk = sch.get_block("B")
    assert_refused(sch, lambda: sch._apply(broken, blk), r"test_broken_scale: changed the "
                   r"results: buffer B differs from before the primitive in \d+ of 13 "
                   r"elements", DebugCheckError)


def test_a_step_that_cannot_be_checked_warns_once(broken):
    f = scale(1 << 16)
    sch = S.Schedule(f, debug=True)
    (i,) = sch.get_loops(sch.get_block("B"))
    tiles = sch.sample_perfect_tile(i, n=2)          # a product of 65536 exactly
    with pytest.warns(UserWarning, match=r"Schedule\(debug=True\): split and the steps "
                      r"after it are checked by the IR verifier only, not by the "
                      r"interpreter: sample_perfect_tile does not apply to the smaller "
                      r"function"):
        outer, inner = sch.split(i, tiles)          # the twin's loop is 16384 long
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # once per schedule
        sch.vectorize(inner)
        sch._apply(broken, sch.get_block("B"))      # unchecked: only the verifier runs


def test_a_legal_schedule_of_a_large_function_passes_quietly():
    w = workloads.matmul_bias_relu(128, 128, 128)
    sch = S.Schedule(w.func, debug=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        i, j, k = sch.get_loops(sch.get_block("C"))
        io, ii = sch.split(i, [None, 8])
        jo, ji = sch.split(j, [None, 16])
        sch.reorder(io, jo, k, ii, ji)
        sch.vectorize(ji)
        sch.parallel(io)
    assert sch._checker.twin not in (None, False)


def test_random_inputs_match_parameter_dtypes():
    A = T.placeholder((3, 2), "int32", name="A")
    B = T.compute((3, 2), lambda i, j: A[i, j] + 1, name="B")
    arrays = random_inputs(T.create_prim_func([A, B]), 0)
    assert [a.dtype for a in arrays] == [np.dtype("int32")] * 2
    assert arrays[0].min() >= -8 and arrays[0].max() < 8
    n = T.size_var("n")
    X = T.placeholder((n,), name="X")
    g = T.create_prim_func([X, T.compute((n,), lambda i: X[i], name="Y")])
    assert random_inputs(g, 0) is None
    assert [a.shape for a in random_inputs(g, 0, {id(n): 5})] == [(5,), (5,)]
