"""compute_at under a consumer whose index comes from a float (a resize's source pixel).

Such an index is bounded only by its dtype unless a clamp bounds it.  The region a
tile reads used to be computed as ``hi - lo + 1`` over the int32 extremes, which wrapped
to an empty loop: the producer never ran and the consumer read uninitialised memory.
"""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from cuvil_tir.analysis import regions
from cuvil_tir.stmt import BufferRegion, Range
from tests.schedules.testing import run, verify_trace_roundtrip

SOURCE = '''@T.prim_func
def main(X: T.Buffer((16,), "float32"), Y: T.Buffer((8,), "float32")):
    Xc = T.alloc_buffer((16,), "float32")
    for i in T.serial(16):
        with T.block("copy"):
            vi = T.axis.spatial(16, i)
            Xc[vi] = X[vi] * T.float32(2.0)
    for i in T.serial(8):
        with T.block("Y"):
            vi = T.axis.spatial(8, i)
            Y[vi] = Xc[INDEX]
'''

PIXEL = 'T.Cast("int32", T.floor(T.Cast("float32", vi) * T.float32(2.0) + T.float32(0.5)))'


@pytest.mark.parametrize("index", [f"T.max(T.min({PIXEL}, 15), 0)", PIXEL],
                         ids=["clamped", "unclamped"])
def test_compute_at_of_a_float_indexed_read_computes_the_whole_buffer(index):
    f = T.parse(SOURCE.replace("INDEX", index))
    sch = S.Schedule(f)
    io, _ = sch.split(sch.get_loops("Y")[0], [4, 2])
    sch.compute_at(sch.get_block("copy"), io)
    # every tile computes all of Xc
    assert "for ax0 in T.serial(16):" in str(sch.func)
    x = np.arange(16, dtype="float32")
    want = run(f, [x, np.zeros(8, "float32")])[1]
    np.testing.assert_array_equal(want, x[np.minimum(np.arange(8) * 2, 15)] * 2)
    np.testing.assert_array_equal(run(sch, [x, np.zeros(8, "float32")])[1], want)
    verify_trace_roundtrip(sch, f)


def test_relax_of_an_index_bounded_only_by_its_dtype_covers_the_buffer_dimension():
    A = T.decl_buffer((16, 4), "float32", "A")
    i, j = T.var("i"), T.var("j")
    pixel = T.Cast("int32", T.floor(T.Cast("float32", i) * T.const(0.5, "float32")))
    r = regions.relax(BufferRegion(A, (Range(pixel, T.const(1)), Range(j, T.const(1)))),
                      {i: Range.from_extent(8), j: Range.from_extent(2)})
    assert [(d.min.value, d.extent.value) for d in r.region] == [(0, 16), (0, 2)]
