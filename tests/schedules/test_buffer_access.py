"""annotate_buffer_access: declared regions, the annotation, what compute_at makes of
them, the coverage check."""

import numpy as np

import cuvil_tir as T
import schedules as S
from cuvil_tir.analysis import tree
from schedules.errors import AnnotationError
from tests.schedules.testing import assert_refused, run, verify_trace_roundtrip


def block(sch, name):
    return tree.get(sch.func, tree.find_block(sch.func, name)).block


def stencil():
    A = T.placeholder((10,), name="A")
    B = T.compute((10,), lambda i: A[i] * 2.0, name="B")
    C = T.compute((8,), lambda i: B[i] + B[i + 2], name="C")
    return T.create_prim_func([A, C])


def test_read_region_replaced_and_annotated():
    f = stencil()
    sch = S.Schedule(f)
    sch.annotate_buffer_access("C", 0, "read", lambda vi: ((vi - 1, vi + 3),))
    c = block(sch, "C")
    assert str(c.reads[0]) == "B[v_i - 1:v_i - 1 + 4]"
    assert [x.value for x in dict(c.annotations)["explicit_read_region"]] == [0]
    verify_trace_roundtrip(sch, f)
    assert "annotate_buffer_access" in sch.trace.as_python()


def test_second_annotation_replaces_the_first():
    f = stencil()
    sch = S.Schedule(f)
    sch.annotate_buffer_access("C", 0, "read", lambda vi: ((vi - 1, vi + 3),))
    sch.annotate_buffer_access("C", 0, "read", lambda vi: ((vi, vi + 3),))
    c = block(sch, "C")
    assert str(c.reads[0]) == "B[v_i:v_i + 3]"
    assert len(dict(c.annotations)["explicit_read_region"]) == 1
    verify_trace_roundtrip(sch, f)


def test_write_region_and_indices_only():
    f = stencil()
    sch = S.Schedule(f)
    sch.annotate_buffer_access("B", 0, "write", lambda vi: (vi,))
    sch.annotate_buffer_access("B", 0, "read", lambda vi: ((0, 10),))
    b = block(sch, "B")
    assert set(dict(b.annotations)) == {"explicit_read_region", "explicit_write_region"}
    verify_trace_roundtrip(sch, f)


UPSAMPLE = '''@T.prim_func
def f(X: T.Buffer((16,), "float32"), Y: T.Buffer((8,), "float32")):
    Xc = T.alloc_buffer((16,))
    for i in T.serial(16):
        with T.block("copy"):
            vi = T.axis.remap("S", [i])
            Xc[vi] = X[vi] * 2.0
    for i in T.serial(8):
        with T.block("Y"):
            vi = T.axis.remap("S", [i])
            Y[vi] = Xc[T.max(T.min(T.Cast("int32", T.floor(T.Cast("float32", vi) * 2.0 + 0.5)), 15), 0)]
'''


def test_compute_at_sizes_the_producer_from_the_annotation():
    f = T.parse(UPSAMPLE)
    sch = S.Schedule(f)
    # the index is a clamp of a float: bounded only by the whole buffer, but it is
    # 2 * vi, which [2 * vi, 2 * vi + 1) covers (checked at every point)
    sch.annotate_buffer_access("Y", 0, "read", lambda vi: ((vi * 2, vi * 2 + 1),))
    io, _ = sch.split(sch.get_loops("Y")[0], [4, 2])
    sch.compute_at("copy", io)
    extent = [lp.extent.value for lp in
              (tree.get(sch.func, tree.find_loop(sch.func, rv.var))
               for rv in sch.get_loops("copy"))][-1]
    assert extent == 3       # rows 4k .. 4k + 2 for the tile vi = 2k, 2k + 1
    x = np.random.default_rng(0).standard_normal(16).astype("float32")
    np.testing.assert_allclose(run(sch, [x, np.zeros(8, "float32")])[1],
                               run(f, [x, np.zeros(8, "float32")])[1])
    verify_trace_roundtrip(sch, f)


def test_refuses_a_region_that_misses_an_access():
    sch = S.Schedule(stencil())
    assert_refused(sch, lambda: sch.annotate_buffer_access(
        "C", 0, "read", lambda vi: ((vi, vi + 2),)),
        r"the region B\[v_i:v_i \+ 2\] does not cover what block 'C' reads of 'B'",
        AnnotationError)


def test_refuses_a_data_dependent_index_it_cannot_bound():
    src = UPSAMPLE.replace("T.max(T.min(T.Cast(\"int32\", T.floor(T.Cast(\"float32\", vi) "
                           "* 2.0 + 0.5)), 15), 0)", "T.Cast(\"int32\", X[vi]) % 16")
    sch = S.Schedule(T.parse(src))
    assert_refused(sch, lambda: sch.annotate_buffer_access(
        "Y", 0, "read", lambda vi: ((vi * 2, vi * 2 + 1),)),
        "an index depends on data", AnnotationError)


def test_refuses_bad_arguments():
    sch = S.Schedule(stencil())
    assert_refused(sch, lambda: sch.annotate_buffer_access("C", 1, "read", lambda vi: (vi,)),
                   r"buffer_index 1 is out of range: block 'C' reads 1 buffer",
                   AnnotationError)
    assert_refused(sch, lambda: sch.annotate_buffer_access("C", 0, "load", lambda vi: (vi,)),
                   "expected 'read' or 'write', found 'load'", AnnotationError)
    assert_refused(sch, lambda: sch.annotate_buffer_access(
        "C", 0, "read", lambda vi: (vi, vi, vi)),
        "the ranges give 3 values for buffer 'B' of 1 dimension", AnnotationError)
    assert_refused(sch, lambda: sch.annotate_buffer_access(
        "C", 0, "read", lambda vi: ((vi + 2, vi),)),
        r"dimension 0 of the region \[v_i \+ 2, v_i\) is empty", AnnotationError)
    assert_refused(sch, lambda: sch.annotate_buffer_access(
        "C", 0, "read", lambda vi: ((vi, vi, vi),)),
        r"argument 4, 'gen_new_ranges' to annotate_buffer_access: .*is not a pair",
        AnnotationError)
    n = T.var("n")
    assert_refused(sch, lambda: sch.annotate_buffer_access(
        "C", 0, "read", lambda vi: ((vi, vi + n),)),
        r"uses \['n'\], not iteration variables of block 'C'", AnnotationError)
