"""``S.IndexMap`` (compare, invert, use as a primitive's index map) and
``S.suggest_index_map``: our own accesses, with the exact layouts expected."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from cuvil_tir.stmt import Evaluate, For
from schedules.errors import ScheduleArgumentError
from schedules.primitives.layout import LayoutError


def _loops(*pairs):
    return [For(v, T.const(0), T.const(n), "serial", Evaluate(T.const(0))) for v, n in pairs]


def test_index_maps_apply_compare_and_print():
    m = S.IndexMap.from_func(lambda r, c: (c // 4, r, c % 4))
    assert [e.value for e in m(2, 13)] == [3, 2, 1]
    assert repr(m) == "IndexMap(lambda r, c: (c // 4, r, c % 4))"
    assert m.is_equivalent_to(lambda a, b: (b // 4, a, b - b // 4 * 4))
    assert not m.is_equivalent_to(lambda a, b: (b // 4, a, b % 2))
    assert not m.is_equivalent_to(lambda a, b: (b // 4, a))          # other arity
    assert S.IndexMap.from_func(m) is m


def test_inverse_undoes_the_map_over_the_shape():
    m = S.IndexMap.from_func(lambda r, c: (c // 4, r, c % 4))
    inv = m.inverse((3, 8))
    assert repr(inv) == "IndexMap(lambda o0, o1, o2: (o1, o0 * 4 + o2))"
    for r in range(3):
        for c in range(8):
            assert [e.value for e in inv(*[e.value for e in m(r, c)])] == [r, c]


def test_index_map_errors_say_what_is_wrong():
    m = S.IndexMap.from_func(lambda x: (x // 2,))
    with pytest.raises(LayoutError, match=r"IndexMap.inverse: IndexMap\(lambda x: "
                       r"\(x // 2,\)\) is not invertible over shape \(8,\)"):
        m.inverse((8,))
    with pytest.raises(LayoutError, match=r"IndexMap.inverse: shape \(8, 2\) has 2 "
                       r"dimension\(s\), the map takes 1"):
        m.inverse((8, 2))
    with pytest.raises(LayoutError, match=r"IndexMap: the map takes 1 index\(es\), found 2"):
        m(1, 2)
    with pytest.raises(ScheduleArgumentError, match=r"IndexMap.from_func: expected a "
                       r"function of the indices \(a lambda\), found 3"):
        S.IndexMap.from_func(3)


def test_a_transposed_read_suggests_the_transpose():
    i, j = T.var("i"), T.var("j")
    m = S.suggest_index_map(T.decl_buffer((6, 5), name="B"), [j, i],
                            _loops((i, 5), (j, 6)))
    assert repr(m) == "IndexMap(lambda i0, i1: (i1, i0))"


def test_digits_are_ordered_by_loop_then_significance():
    i, j = T.var("i"), T.var("j")
    # B[i % 3 * 4 + j, i // 3]: loop i feeds both dimensions, j the low digit
    m = S.suggest_index_map(T.decl_buffer((12, 2), name="B"), [i % 3 * 4 + j, i // 3],
                            _loops((i, 6), (j, 4)))
    assert m.is_equivalent_to(lambda x, y: (y, x // 4, x % 4))


def test_neighbouring_digits_of_one_loop_stay_one_dimension():
    f = T.var("f")
    m = S.suggest_index_map(T.decl_buffer((4, 8), name="B"), [f // 8, f % 8],
                            _loops((f, 32)))
    assert m.is_equivalent_to(lambda x, y: (x * 8 + y,))


@pytest.mark.parametrize("index, extent", [
    (lambda i: i * 2, 4),          # every other element: not onto the buffer
    (lambda i: i + 1, 8),          # an offset
    (lambda i: i * i, 3),          # not quasi-affine
])
def test_no_suggestion_for_an_access_that_does_not_tile_the_buffer(index, extent):
    i = T.var("i")
    assert S.suggest_index_map(T.decl_buffer((8,), name="B"), [index(i)],
                               _loops((i, extent))) is None


def test_no_suggestion_under_a_predicate_or_a_symbolic_loop():
    i = T.var("i")
    B = T.decl_buffer((8,), name="B")
    assert S.suggest_index_map(B, [i], _loops((i, 8)), predicate=i < 6) is None
    loop = For(i, T.const(0), T.size_var("n"), "serial", Evaluate(T.const(0)))
    assert S.suggest_index_map(B, [i], [loop]) is None


def test_the_suggested_layout_is_a_transform_layout_that_keeps_the_results():
    A = T.placeholder((6, 4), name="A")
    B = T.compute((6, 4), lambda r, c: A[r, c] * 2.0, name="B")
    f = T.create_prim_func([A, T.compute((4, 6), lambda i, j: B[j, i] + 1.0, name="C")])
    sch = S.Schedule(f)
    br = sch.get("C")
    loops = [sch.get(lv) for lv in sch.get_loops("C")]
    read = br.reads[0]
    vm = {iv.var: lv.loop_var for iv, lv in zip(br.iter_vars, loops)}
    from cuvil_tir.visitor import substitute
    m = S.suggest_index_map(read.buffer, [substitute(r.min, vm) for r in read.region], loops)
    assert repr(m) == "IndexMap(lambda i0, i1: (i1, i0))"
    sch.transform_layout("B", 0, m)
    assert tuple(s.value for s in sch.func.body.block.alloc_buffers[0].shape) == (4, 6)
    a = np.random.default_rng(0).standard_normal((6, 4)).astype("float32")
    want, got = np.zeros((4, 6), "float32"), np.zeros((4, 6), "float32")
    T.interpret(f, a, want)
    T.interpret(sch.func, a, got)
    np.testing.assert_allclose(got, a.T * 2.0 + 1.0, rtol=1e-6)
    np.testing.assert_array_equal(got, want)
