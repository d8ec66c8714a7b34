"""structural_equal / structural_hash: equality up to renaming, and what breaks it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cuvil_tir as T
from cuvil_tir.node import same
from cuvil_tir.visitor import substitute


def stage(name_a="A", name_b="B", scale=2.0, n=4, dtype="float32"):
    A = T.placeholder((n,), dtype, name=name_a)
    B = T.compute((n,), lambda x: A[x] * T.const(scale, dtype), name=name_b)
    return T.create_prim_func([A, B])


def test_renamed_functions_are_equal_and_hash_alike():
    f, g = stage(), stage(name_a="X", name_b="B")
    assert T.structural_equal(f, g)
    assert T.structural_hash(f) == T.structural_hash(g)
    T.assert_structural_equal(f, g)


def test_expressions_up_to_renaming():
    i, j, k = T.var("i"), T.var("j"), T.var("k")
    assert T.structural_equal(i * 2 + 1, j * 2 + 1)
    assert T.structural_equal(i + j, j + i)  # consistent renaming i<->j
    assert not T.structural_equal(i + i, i + j)
    assert not T.structural_equal(i + j, k + k)
    assert T.structural_hash(i * 2 + 1) == T.structural_hash(k * 2 + 1)
    assert T.structural_hash(i + i) != T.structural_hash(i + j)


def test_negative_cases():
    i = T.var("i")
    assert not T.structural_equal(stage(scale=2.0), stage(scale=3.0))      # constant
    assert not T.structural_equal(stage(n=4), stage(n=5))                  # shape
    assert not T.structural_equal(stage(), stage(dtype="float16"))         # dtype
    assert not T.structural_equal(stage(name_b="B"), stage(name_b="C"))    # block name
    assert not T.structural_equal(i + 1, i - 1)                            # operator
    assert not T.structural_equal(i, T.var("n", "int64"))                  # var dtype
    assert not T.structural_equal(T.var("i"), T.size_var("i"))             # var kind
    assert not T.structural_equal(T.const(1), T.const(1, "int64"))


def test_loop_kind_and_annotations_matter():
    A = T.decl_buffer((4,), "float32", "A")
    i = T.var("i")
    body = T.BufferStore(A, T.const(0.0), (i,))
    serial = T.For(i, T.const(0), T.const(4), "serial", body)
    par = T.For(i, T.const(0), T.const(4), "parallel", body)
    ann = T.For(i, T.const(0), T.const(4), "serial", body, annotations={"k": 1})
    assert not T.structural_equal(serial, par)
    assert not T.structural_equal(serial, ann)
    j = T.var("j")
    assert T.structural_equal(serial, T.For(j, T.const(0), T.const(4), "serial",
                                            T.BufferStore(A, T.const(0.0), (j,))))


def test_buffers_map_one_to_one_and_check_scope():
    A, B = T.decl_buffer((4,), "float32", "A"), T.decl_buffer((4,), "float32", "B")
    i = T.var("i")
    same_buf = T.BufferStore(A, A[i], (i,))
    two_bufs = T.BufferStore(A, B[i], (i,))
    assert not T.structural_equal(same_buf, two_bufs)
    L = T.decl_buffer((4,), "float32", "L", scope="local")
    assert not T.structural_equal(T.BufferStore(A, A[i], (i,)), T.BufferStore(L, L[i], (i,)))


def test_assert_structural_equal_shows_both_texts():
    i = T.var("i")
    with pytest.raises(AssertionError, match=r"IR differs:\n--- first\ni \+ 1\n--- second\n"
                                             r"i \+ 2"):
        T.assert_structural_equal(i + 1, i + 2)


def test_exact_same_vs_structural():
    i = T.var("i")
    assert same(i + 1, i + 1) and not same(i + 1, T.var("i") + 1)
    assert T.structural_equal(i + 1, T.var("i") + 1)


# hypothesis: random expressions ------------------------------------------------------------

OPS = [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b,
       lambda a, b: a // b, lambda a, b: a % b, T.min, T.max]


def _exprs(vars_):
    leaf = st.one_of(st.sampled_from(vars_), st.integers(-5, 5).map(T.const))
    return st.recursive(leaf, lambda sub: st.tuples(st.sampled_from(range(len(OPS))), sub, sub)
                        .map(lambda t: _build(t)), max_leaves=8)


def _build(t):
    k, a, b = t
    try:
        return OPS[k](a, b)
    except ZeroDivisionError:
        return a + b


VARS = [T.var("a"), T.var("b"), T.var("c")]


@settings(max_examples=40)
@given(_exprs(VARS), st.permutations([0, 1, 2]))
def test_renaming_preserves_equality_and_hash(e, perm):
    fresh = [T.var(f"z{k}") for k in range(3)]
    renamed = substitute(e, {VARS[k]: fresh[perm[k]] for k in range(3)})
    assert T.structural_equal(e, renamed)
    assert T.structural_hash(e) == T.structural_hash(renamed)


@settings(max_examples=40)
@given(_exprs(VARS), _exprs(VARS))
def test_equal_implies_same_hash_and_matches_same(e1, e2):
    eq = T.structural_equal(e1, e2)
    if eq:
        assert T.structural_hash(e1) == T.structural_hash(e2)
    # exact equality (same variables) implies equality up to renaming
    if same(e1, e2):
        assert eq


@settings(max_examples=40)
@given(_exprs(VARS))
def test_changing_a_constant_breaks_equality(e):
    changed = T.Add(e, T.const(1)) if not isinstance(e, T.IntImm) else T.const(e.value + 1)
    assert not T.structural_equal(e, changed)


def _two_loops(a, b):
    A = T.decl_buffer((8,), "float32", "A")
    return T.PrimFunc([A], T.seq(
        T.For(a, T.const(0), T.const(4), "serial", T.BufferStore(A, T.const(1.0), (a,))),
        T.For(b, T.const(0), T.const(4), "serial", T.BufferStore(A, T.const(2.0), (b + 4,)))))


def test_a_variable_bound_twice_equals_two_distinct_variables():
    # binding sites start a new scope (TVM's def-point remapping): the unroll pass and
    # the parser rely on it, since printing names both loops `x` and parsing makes two
    x, y, z = T.var("x"), T.var("y"), T.var("z")
    same_var, fresh = _two_loops(x, x), _two_loops(y, z)
    assert T.structural_equal(same_var, fresh) and T.structural_equal(fresh, same_var)
    assert T.structural_hash(same_var) == T.structural_hash(fresh)
    assert T.structural_equal(T.parse(str(same_var)), same_var)


def test_rebinding_does_not_hide_a_different_use():
    x, y, z = T.var("x"), T.var("y"), T.var("z")
    A = T.decl_buffer((8,), "float32", "A")
    # second loop stores at the FIRST loop's variable in one, at its own in the other
    f = T.PrimFunc([A], T.For(x, T.const(0), T.const(4), "serial", T.For(
        y, T.const(0), T.const(2), "serial", T.BufferStore(A, T.const(1.0), (x,)))))
    g = T.PrimFunc([A], T.For(x, T.const(0), T.const(4), "serial", T.For(
        z, T.const(0), T.const(2), "serial", T.BufferStore(A, T.const(1.0), (z,)))))
    assert not T.structural_equal(f, g)
    assert T.structural_hash(f) != T.structural_hash(g)
