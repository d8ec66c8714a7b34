"""transform_block_layout: new iteration spaces and loops, numerics, refusals."""

import numpy as np
from hypothesis import given, settings, strategies as st

import cuvil_tir as T
import schedules as S
from schedules.primitives.layout import LayoutError
from tests.schedules.testing import (assert_refused, run, run_llvm, verify_text_roundtrip,
                                     verify_trace_roundtrip)


def double(shape=(4, 8)):
    A = T.placeholder(shape, name="A")
    return T.create_prim_func([A, T.compute(shape, lambda *i: A[i] * 2.0, name="B")])


def rowsum(m=4, n=6):
    X = T.placeholder((m, n), name="X")
    k = T.reduce_axis((0, n), name="k")
    return T.create_prim_func([X, T.compute((m,), lambda i: T.sum(X[i, k], axis=k),
                                            name="Y")])


def check(sch, f, make, want):
    arrays = make()
    for runner in (run, run_llvm):
        np.testing.assert_allclose(runner(sch, [a.copy() for a in arrays])[-1], want(arrays),
                                   rtol=1e-5)
    verify_trace_roundtrip(sch, f)
    verify_text_roundtrip(sch.func)


def _double_inputs(shape):
    rng = np.random.default_rng(0)
    return lambda: [rng.random(shape, dtype="float32"), np.zeros(shape, "float32")]


def test_fuse_two_iteration_variables():
    f = double()
    sch = S.Schedule(f)
    sch.transform_block_layout("B", lambda i, j: (i * 8 + j,))
    text = str(sch.func)
    assert "for ax0 in T.serial(32):" in text
    assert "B[v0 // 8, v0 % 8] = A[v0 // 8, v0 % 8] * T.float32(2)" in text
    check(sch, f, _double_inputs((4, 8)), lambda a: a[0] * 2)


def test_permute_and_split_a_reduction():
    # a reduction variable split into two reduction variables, the spatial one between
    f = rowsum()
    sch = S.Schedule(f)
    sch.transform_block_layout("Y", lambda i, k: (k // 3, i, k % 3))
    text = str(sch.func)
    assert 'T.axis.remap("RSR", [ax0, ax1, ax2])' in text
    assert "Y[v1] = Y[v1] + X[v1, v0 * 3 + v2]" in text
    rng = np.random.default_rng(1)
    check(sch, f, lambda: [rng.random((4, 6), dtype="float32"), np.zeros(4, "float32")],
          lambda a: a[0].sum(axis=1))


def test_the_new_loops_can_be_scheduled():
    f = double((6, 4))
    sch = S.Schedule(f)
    sch.transform_block_layout("B", lambda i, j: (j, i))
    j, i = sch.get_loops("B")
    sch.parallel(j)
    check(sch, f, _double_inputs((6, 4)), lambda a: a[0] * 2)


@settings(max_examples=15)
@given(st.permutations([0, 1, 2]), st.sampled_from([None, 0, 1]))
def test_random_permutations_and_fusions_compute_the_same(perm, fuse_at):
    shape = (2, 3, 4)
    f = double(shape)
    sch = S.Schedule(f)

    def index_map(i, j, k):
        axes = [(i, 2), (j, 3), (k, 4)]
        axes = [axes[p] for p in perm]
        if fuse_at is None:
            return tuple(a for a, _ in axes)
        (a, _), (b, nb) = axes[fuse_at], axes[fuse_at + 1]
        rest = [x for n, (x, _) in enumerate(axes) if n not in (fuse_at, fuse_at + 1)]
        out = rest[:fuse_at] + [a * nb + b] + rest[fuse_at:]
        return tuple(out)

    sch.transform_block_layout("B", index_map)
    x = np.random.default_rng(2).random(shape, dtype="float32")
    np.testing.assert_array_equal(run(sch, [x, np.zeros(shape, "float32")])[1], x * 2)
    verify_trace_roundtrip(sch, f)


# refusals --------------------------------------------------------------------------------

def test_padding_map_is_refused():
    sch = S.Schedule(double((30,)))
    assert_refused(sch, lambda: sch.transform_block_layout("B", lambda i: (i // 7, i % 7)),
                   r"transform_block_layout: index_map maps the 30 iterations of block 'B' "
                   r"into a box of 35 \[5, 7\]; transform_block_layout needs a bijection",
                   LayoutError)


def test_non_injective_map_is_refused():
    sch = S.Schedule(double())
    assert_refused(sch, lambda: sch.transform_block_layout("B", lambda i, j: (i + j,)),
                   r"transform_block_layout: index_map is not one-to-one on the iteration "
                   r"domain of block 'B' of shape \[4, 8\]: 32 elements map to 11 positions",
                   LayoutError)


def test_wrong_arity_is_refused():
    sch = S.Schedule(double())
    assert_refused(sch, lambda: sch.transform_block_layout("B", lambda i: (i,)),
                   r"transform_block_layout: index_map takes 1 index\(es\) but block 'B' "
                   r"has 2 iteration variable\(s\)", LayoutError)


def test_mixing_spatial_and_reduction_is_refused():
    sch = S.Schedule(rowsum())
    assert_refused(sch, lambda: sch.transform_block_layout("Y", lambda i, k: (i * 6 + k,)),
                   r"the new iteration variable v_i \* 6 \+ v_k mixes spatial and reduction "
                   r"variables of block 'Y'", LayoutError)


def test_non_trivial_binding_is_refused():
    sch = S.Schedule(double((8,)))
    sch.split(sch.get_loops("B")[0], [2, 4])
    assert_refused(sch, lambda: sch.transform_block_layout("B", lambda i: (7 - i,)),
                   r"block 'B' binds v_i = i_0 \* 4 \+ i_1; transform_block_layout needs a "
                   r"trivial binding", LayoutError)


def test_bound_loop_is_refused():
    sch = S.Schedule(double((8,)))
    sch.parallel(sch.get_loops("B")[0])
    assert_refused(sch, lambda: sch.transform_block_layout("B", lambda i: (i,)),
                   r"loop i is parallel; the loops are rebuilt", LayoutError)


def test_fusing_iterators_of_a_symbolic_extent():
    n = T.size_var("n")
    A = T.placeholder((4, n), name="A")
    f = T.create_prim_func([A, T.compute((4, n), lambda i, j: A[i, j] * 2.0, name="B")])
    sch = S.Schedule(f)
    sch.transform_block_layout("B", lambda i, j: (i * n + j,))
    assert str(sch.func.body.block.body.extent) == "n * 4"
    a = np.arange(12, dtype="float32").reshape(4, 3)
    for runner in (run, run_llvm):
        np.testing.assert_array_equal(runner(sch, [a, np.zeros((4, 3), "float32")])[1],
                                      a * 2)
    verify_trace_roundtrip(sch, f)


def test_an_iterator_of_extent_one_reads_as_zero_after_fusing():
    # (n, i, j) -> (n * 32 + i * 8 + j,) with n of extent 1: n is v0 // 32, which the
    # new variable's range makes 0 in the body and the regions (TensorIR's form)
    f = double((1, 4, 8))
    sch = S.Schedule(f)
    sch.transform_block_layout("B", lambda n, i, j: (n * 32 + i * 8 + j,))
    text = str(sch.func)
    assert "A[0, v0 // 8, v0 % 8]" in text and "// 32" not in text
    check(sch, f, _double_inputs((1, 4, 8)), lambda a: a[0] * 2)
