"""loop_partition: guard-free main ranges for the guards of non-dividing splits."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir.expr import LT
from cuvil_tir.stmt import For, IfThenElse
from cuvil_tir.transform import PassContext, simplify
from cuvil_tir.transform.loop_partition import LoopPartitioner, loop_partition
from cuvil_tir.visitor import post_order_visit

HASWELL = targets.Target("llvm", mcpu="haswell")


def _text(f):
    return T.to_text(f.body).strip()


def _ifs(stmt) -> int:
    n = []
    post_order_visit(stmt, lambda x: n.append(1) if isinstance(x, IfThenElse) else None)
    return len(n)


def _tail_guard(kind="serial", extent=4, factor=3, limit=10):
    A = T.decl_buffer((limit,), "float32", "A")
    io, ii = T.var("io"), T.var("ii")
    body = T.For(io, T.const(0), T.const(extent), kind,
                 T.For(ii, T.const(0), T.const(factor), "serial",
                       T.IfThenElse(io * factor + ii < limit,
                                    T.BufferStore(A, T.const(1.0), (io * factor + ii,)))))
    return T.PrimFunc([A], body)


def test_serial_loop_splits_into_guard_free_main_and_guarded_tail_exactly():
    assert _text(loop_partition(_tail_guard())) == (
        "for io in T.serial(3):\n"
        "    for ii in T.serial(3):\n"
        "        A[io * 3 + ii] = T.float32(1)\n"
        "A[3 * 3 + 0] = T.float32(1)\n"
        "for ii_1 in T.serial(1, 3):\n"
        "    if 3 * 3 + ii_1 < 10:\n"
        "        A[3 * 3 + ii_1] = T.float32(1)")
    assert _text(simplify(loop_partition(_tail_guard()))) == (
        "for io in T.serial(3):\n"
        "    for ii in T.serial(3):\n"
        "        A[io * 3 + ii] = T.float32(1)\n"
        "A[9] = T.float32(1)")


def test_parallel_loop_keeps_one_loop_and_tests_once_per_iteration():
    assert _text(loop_partition(_tail_guard("parallel"))) == (
        "for io in T.parallel(4):\n"
        "    if io < 3:\n"
        "        for ii in T.serial(3):\n"
        "            A[io * 3 + ii] = T.float32(1)\n"
        "    else:\n"
        "        A[3 * 3 + 0] = T.float32(1)\n"
        "        for ii_1 in T.serial(1, 3):\n"
        "            if 3 * 3 + ii_1 < 10:\n"
        "                A[3 * 3 + ii_1] = T.float32(1)")


def test_lower_bound_guard_gives_a_head():
    A = T.decl_buffer((16,), "float32", "A")
    i = T.var("i")
    f = T.PrimFunc([A], T.For(i, T.const(0), T.const(16), "serial", T.IfThenElse(
        (i >= 2) & (i < 14), T.BufferStore(A, T.const(1.0), (i,)))))
    out = simplify(loop_partition(f))
    assert _text(out) == "for i in T.serial(2, 14):\n    A[i] = T.float32(1)"


def test_parallel_head_and_tail_stay_exact():
    A = T.decl_buffer((16,), "float32", "A")
    i = T.var("i")
    f = T.PrimFunc([A], T.For(i, T.const(0), T.const(16), "parallel", T.IfThenElse(
        (i >= 2) & (i < 14), T.BufferStore(A, T.const(1.0), (i,)))))
    out = loop_partition(f)
    assert _text(out).splitlines()[:3] == [
        "for i in T.parallel(16):", "    if 2 <= i and i < 14:", "        A[i] = T.float32(1)"]
    a = np.zeros(16, "float32")
    T.interpret(out, a)
    np.testing.assert_array_equal(a, (np.arange(16) >= 2) & (np.arange(16) < 14))


def test_guard_true_everywhere_is_removed_without_copies():
    f = _tail_guard(extent=3)
    assert _text(loop_partition(f)) == (
        "for io in T.serial(3):\n    for ii in T.serial(3):\n        A[io * 3 + ii] = "
        "T.float32(1)")


def test_what_cannot_be_proved_is_left_alone():
    A = T.decl_buffer((64,), "float32", "A")
    i, j = T.var("i"), T.var("j")
    store = T.BufferStore(A, T.const(1.0), (i,))
    for cond in (i * i < 10, (i // 3) < 2, i == 3, (i < 5) | (i > 9)):
        f = T.PrimFunc([A], T.For(i, T.const(0), T.const(8), "serial", T.IfThenElse(cond, store)))
        assert loop_partition(f) is f
    # the inner loop's bound depends on i: no bound over it at i's level (j splits)
    tri = T.PrimFunc([A], T.For(i, T.const(0), T.const(8), "serial", T.For(
        j, T.const(0), i + 1, "serial", T.IfThenElse(i + j < 6, T.BufferStore(
            A, T.const(1.0), (i * 8 + j,))))))
    p = LoopPartitioner()
    p.visit(tri.body)
    assert p.partitioned == ["j"]
    # a vectorized loop is never split (the vectorizer owns its guards)
    vec = _tail_guard(extent=1, factor=16, limit=10)
    vec = vec.with_body(T.For(vec.body.body.loop_var, T.const(0), T.const(16), "vectorized",
                              vec.body.body.body))
    assert loop_partition(vec) is vec


def test_max_nodes_limits_copies():
    f = _tail_guard()
    with PassContext(config={"loop_partition.max_nodes": 0}):
        assert loop_partition(f) is f
    with PassContext(config={"loop_partition.max_nodes": -1}):
        with pytest.raises(T.LoweringError, match="loop_partition.max_nodes.*non-negative"):
            loop_partition(f)


def _split_func(n, factor, m=None, factor2=None):
    """``B[i, j] = A[i, j] * 2 + 1`` with i (and j) split by a factor that may not
    divide; sizes may be symbolic."""
    m = m if m is not None else 5
    A = T.placeholder((n, m), name="A")
    B = T.compute((n, m), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    sch = S.Schedule(T.create_prim_func([A, B]))
    i, j = sch.get_loops(sch.get_block("B"))
    sch.split(i, [None, factor])
    if factor2 is not None:
        sch.split(j, [None, factor2])
    return sch


@pytest.mark.parametrize("n, factor, factor2", [(12, 4, None), (13, 4, None), (13, 4, 2),
                                                (1, 4, 3)])
def test_numbers_match_on_interpreter_and_llvm(n, factor, factor2):
    sch = _split_func(n, factor, factor2=factor2)
    lowered = T.lower(sch, HASWELL)
    a = np.random.default_rng(n).standard_normal((n, 5)).astype("float32")
    b = np.zeros_like(a)
    T.interpret(lowered, a, b)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)
    b2 = np.zeros_like(a)
    targets.build(sch, "llvm")(a, b2)
    np.testing.assert_allclose(b2, a * 2 + 1, rtol=1e-6)


def test_symbolic_extent_main_range_is_guard_free_and_exact():
    n = T.size_var("n")
    sch = _split_func(n, 4)
    lowered = T.lower(sch, HASWELL)
    main = lowered.entry.body
    assert isinstance(main, T.SeqStmt) or isinstance(main, For)
    first = main.seq[0] if isinstance(main, T.SeqStmt) else main
    assert isinstance(first, For) and _ifs(first) == 0      # the hot loop has no guard
    assert _ifs(lowered.entry.body) >= 1                      # the tail keeps it
    mod = targets.build(sch, "llvm")
    for rows in (0, 1, 3, 4, 5, 8, 11):
        a = np.arange(rows * 5, dtype="float32").reshape(rows, 5)
        b, b2 = np.zeros_like(a), np.zeros_like(a)
        mod(a, b)
        T.interpret(lowered, a, b2)
        np.testing.assert_array_equal(b, a * 2 + 1)
        np.testing.assert_array_equal(b2, a * 2 + 1)


@given(n=st.integers(1, 40), f1=st.integers(1, 9), m=st.integers(1, 12),
       f2=st.integers(1, 9), parallel=st.booleans())
def test_partitioned_nest_equals_numpy(n, f1, m, f2, parallel):
    sch = _split_func(n, f1, m=m, factor2=f2)
    if parallel:
        sch.parallel(sch.get_loops(sch.get_block("B"))[0])
    func = T.lower(sch)                       # target-blind: the default pipeline
    part = simplify(loop_partition(T.transform.flatten_buffers(
        T.transform.lower_blocks(sch.func))))
    a = np.random.default_rng(n * 100 + m).standard_normal((n, m)).astype("float32")
    want = a * 2 + 1
    for f in (func, part):
        b = np.zeros_like(a)
        T.interpret(f, a, b)
        np.testing.assert_allclose(b, want, rtol=1e-6)
    # every serial loop a guard depends on runs its main range guard-free
    if not parallel and n % f1 and n > f1:
        outer = part.body.seq[0] if isinstance(part.body, T.SeqStmt) else part.body
        assert isinstance(outer, For)
        conds = []
        post_order_visit(outer, lambda x: conds.append(x.condition)
                         if isinstance(x, IfThenElse) else None)
        assert not any(isinstance(c, LT) and "i_0" in str(c) for c in conds)


def test_nested_splits_of_a_reduction_match_numpy():
    A = T.placeholder((10, 7), name="A")
    B = T.placeholder((7, 9), name="B")
    k = T.reduce_axis((0, 7), name="k")
    C = T.compute((10, 9), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = S.Schedule(T.create_prim_func([A, B, C]))
    i, j, kk = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, [None, 4])
    ko, ki = sch.split(kk, [None, 3])
    sch.reorder(io, jo, ko, ii, ki, ji)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((10, 7)).astype("float32")
    b = rng.standard_normal((7, 9)).astype("float32")
    c, c2 = np.zeros((10, 9), "float32"), np.zeros((10, 9), "float32")
    T.interpret(T.lower(sch, HASWELL), a, b, c)
    targets.build(sch, "llvm")(a, b, c2)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(c2, a @ b, rtol=1e-5, atol=1e-5)
