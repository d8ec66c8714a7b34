"""The one affine decomposer (cuvil_tir.arith.affine.linear_form): what blockize,
tensorize, pad, the dependence analysis and the accelerator backend divide into outer
and inner parts.  Property: the form and its rebuilt expression equal the expression
at every point; a product of variables, a division or a modulo is not affine."""

from hypothesis import given, settings, strategies as st

import cuvil_tir as T
from cuvil_tir.arith.affine import from_linear_form, linear_form, quasi_affine
from cuvil_tir.arith import simplify
from cuvil_tir.visitor import substitute

VARS = [T.var("i"), T.var("j"), T.var("k")]


def affine_exprs():
    leaf = st.one_of(st.sampled_from(VARS), st.integers(-9, 9).map(T.const))
    return st.recursive(leaf, lambda sub: st.one_of(
        st.tuples(sub, sub).map(lambda t: t[0] + t[1]),
        st.tuples(sub, sub).map(lambda t: t[0] - t[1]),
        st.tuples(sub, st.integers(-5, 5)).map(lambda t: t[0] * T.const(t[1])),
        st.tuples(st.integers(-5, 5), sub).map(lambda t: T.const(t[0]) * t[1])),
        max_leaves=8)


def at(e, point) -> int:
    v = simplify(substitute(e, {x: T.const(p) for x, p in zip(VARS, point)}))
    assert isinstance(v, T.IntImm), v
    return v.value


@settings(max_examples=80, deadline=None)
@given(e=affine_exprs(), points=st.lists(st.tuples(*[st.integers(-20, 20)] * 3),
                                         min_size=1, max_size=4))
def test_linear_form_and_its_rebuild_equal_the_expression(e, points):
    form = linear_form(e)
    assert form is not None, e
    terms, c = form
    rebuilt = from_linear_form(terms, c, e.dtype)
    for p in points:
        env = dict(zip((id(v) for v in VARS), p))
        direct = c + sum(k * env[i] for i, (_, k) in terms.items())
        assert at(e, p) == direct == at(rebuilt, p), (e, rebuilt, p)


@settings(max_examples=40, deadline=None)
@given(e=affine_exprs(), bad=st.sampled_from(["mul", "div", "mod"]))
def test_a_product_of_variables_or_a_division_is_not_affine(e, bad):
    i, j = VARS[0], VARS[1]
    part = {"mul": i * j, "div": i // 4, "mod": j % 3}[bad]
    assert linear_form(e + part) is None


def test_cancelled_terms_drop_and_floats_are_not_index_forms():
    i, j = VARS[0], VARS[1]
    terms, c = linear_form((i * 4 + j) - i * 4 + 2)
    assert [(v.name, k) for v, k in terms.values()] == [("j", 1)] and c == 2
    assert linear_form(T.var("x", "float32")) is None
    assert str(from_linear_form({}, 5, "int64")) == "T.int64(5)"


@settings(max_examples=40, deadline=None)
@given(e=affine_exprs(), d=st.integers(1, 9), bad=st.sampled_from(["mul", "div0"]))
def test_quasi_affine_accepts_floor_divisions_by_constants_only(e, d, bad):
    i, j = VARS[0], VARS[1]
    assert quasi_affine(e) and quasi_affine(e // d + e % d)
    assert not quasi_affine(e + {"mul": i * j, "div0": i // j}[bad])
    # over some variables: what is free of them is a constant
    assert quasi_affine(e + i * j, over={i}) and not quasi_affine(e + i * i, over={i})
