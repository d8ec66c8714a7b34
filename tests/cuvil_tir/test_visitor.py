"""Visitor and Mutator: dispatch, sharing of unchanged subtrees, substitute, helpers."""

from __future__ import annotations

import gc
import weakref

import cuvil_tir as T
from cuvil_tir.node import same
from cuvil_tir.visitor import Mutator, Visitor, post_order_visit, substitute, used_vars


def matmul():
    A = T.placeholder((4, 4), name="A")
    B = T.placeholder((4, 4), name="B")
    k = T.reduce_axis((0, 4), name="k")
    C = T.compute((4, 4), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
    return T.create_prim_func([A, B, C])


class Identity(T.Mutator):
    """Overrides nothing: every node comes back unchanged."""


class DoubleInts(T.Mutator):
    def visit_IntImm(self, c):
        return T.const(c.value * 2, c.dtype)


def test_identity_mutator_returns_the_same_objects():
    f = matmul()
    assert Identity().visit(f) is f
    assert Identity().visit(f.body) is f.body
    i = T.var("i")
    e = (i + 1) * 3
    assert Identity().visit(e) is e


def test_mutator_shares_unchanged_subtrees():
    i, x = T.var("i"), T.var("x", "float32")
    left = T.exp(x) * x
    e = T.Add(left, T.cast(i + 1, "float32"))
    out = DoubleInts().visit(e)
    assert str(out.b) == 'T.Cast("float32", i + 2)'
    assert out is not e and out.a is left  # the float subtree had no IntImm
    assert out.b.value.a is i


def test_mutator_rebuilds_statements_sharing_siblings():
    A = T.decl_buffer((8,), "int32", "A")
    i = T.var("i")
    s1 = T.BufferStore(A, i * 3, (i,))
    s2 = T.BufferStore(A, i + i, (i,))
    seq = T.seq(s1, s2)

    class TripleToFive(T.Mutator):
        def visit_IntImm(self, c):
            return T.const(5) if c.value == 3 else c

    out = TripleToFive().visit(seq)
    assert out is not seq and out.seq[1] is s2
    assert str(out.seq[0].value) == "i * 5"
    assert out.seq[0].buffer is A  # buffers are definitions, not rebuilt


def test_dispatch_to_base_class_methods():
    seen = []

    class Bin(T.Visitor):
        def visit_BinaryOp(self, e):
            seen.append(type(e).__name__)
            self.generic_visit(e)

        def visit_Var(self, v):
            seen.append("var:" + v.name)

    n = T.size_var("n")
    Bin().visit((n + 1) * 2 < n)
    assert seen == ["LT", "Mul", "Add", "var:n", "var:n"]


def test_visit_buffer_hook():
    names = []

    class Bufs(T.Visitor):
        def visit_buffer(self, b):
            names.append(b.name)

    Bufs().visit(matmul().body)
    assert set(names) == {"A", "B", "C"}


def test_substitute_variables():
    i, j = T.var("i"), T.var("j")
    e = i * 2 + j
    out = substitute(e, {i: j + 1})
    assert str(out) == "(j + 1) * 2 + j"
    assert out.b is j  # unchanged operand shared
    assert str(substitute(e, {i: 4})) == "4 * 2 + j"
    assert substitute(e, {T.var("k"): 1}) is e
    assert substitute(e, {}) is e
    swapped = substitute(i - j, {i: j, j: i})
    assert same(swapped, j - i)  # simultaneous, not sequential


def test_substitute_literal_takes_var_dtype():
    n = T.var("n", "int64")
    out = substitute(n + 1, {n: 7})
    assert out.a.dtype == "int64" and out.a.value == 7


def test_substitute_buffers_in_statements():
    A, B = T.decl_buffer((4,), "float32", "A"), T.decl_buffer((4,), "float32", "B")
    i = T.var("i")
    s = T.BufferStore(A, A[i] * 2.0, (i,))
    out = substitute(s, {}, {A: B})
    assert out.buffer is B and out.value.a.buffer is B
    assert substitute(s, {}, {B: A}) is s


def test_substitute_inside_a_function_body_keeps_numbers_right():
    import numpy as np
    n = T.var("n")
    A = T.decl_buffer((6,), "int32", "A")
    i = T.var("i")
    body = T.For(i, T.const(0), n, "serial", T.BufferStore(A, i * 10, (i,)))
    fixed = substitute(body, {n: 3})
    a = np.full(6, -1, "int32")
    T.interpret(T.PrimFunc((A,), fixed), a)
    assert a.tolist() == [0, 10, 20, -1, -1, -1]


def test_post_order_and_used_vars():
    i, j = T.var("i"), T.var("j")
    order = []
    post_order_visit(i + j * 2, lambda x: order.append(type(x).__name__))
    assert order == ["Var", "Var", "IntImm", "Mul", "Add"]
    assert [v.name for v in used_vars(j * i + j)] == ["j", "i"]


def _tables():
    from cuvil_tir import visitor
    return sum(len(c.__dict__[visitor._TABLE]) for base in (Visitor, Mutator)
               for c in [base] + _all_subclasses(base))


def _all_subclasses(cls):
    out = []
    for c in cls.__subclasses__():
        out += [c] + _all_subclasses(c)
    return out


def test_used_vars_and_post_order_visit_do_not_grow_the_dispatch_cache():
    # a visitor class made per call added dispatch entries on every call of these
    # helpers
    from cuvil_tir import visitor
    i, j = T.var("i"), T.var("j")
    e = i * j + 1
    visitor.used_vars(e)
    visitor.post_order_visit(e, lambda n: None)
    gc.collect()
    before = _tables()
    for _ in range(5):
        assert [v.name for v in visitor.used_vars(e)] == ["i", "j"]
        seen = []
        visitor.post_order_visit(e, seen.append)
        assert len(seen) == 5
    gc.collect()
    assert _tables() == before


def test_a_visitor_class_made_per_call_is_freed_with_its_dispatch_entries():
    # passes define local Visitor/Mutator classes, one per call: the dispatch table
    # must not keep them alive (a module-wide table keyed by class did, and a tuning
    # run's parent process grew by ~1 MB per candidate)
    def count_vars(e):
        class _Count(Visitor):
            n = 0

            def visit_Var(self, v):
                _Count.n += 1

        class _Same(Mutator):
            def visit_Var(self, v):
                return v

        _Count().visit(e)
        assert _Same().visit(e) is e
        return _Count.n, weakref.ref(_Count), weakref.ref(_Same)

    e = T.var("i") * T.var("j") + 1
    got = [count_vars(e) for _ in range(3)]
    gc.collect()
    assert [n for n, _, _ in got] == [2, 2, 2]
    assert [(a(), b()) for _, a, b in got] == [(None, None)] * 3
