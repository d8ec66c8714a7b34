"""guarded_loads: every load with the conditions and lets it runs under (the one
visitor the bounds checks and the inlining primitives share)."""

import cuvil_tir as T
from cuvil_tir.analysis.guarded_loads import guarded_loads
from cuvil_tir.expr import Let
from cuvil_tir.stmt import BufferStore, IfThenElse, LetStmt, SeqStmt

A = T.decl_buffer((8,), name="A")
B = T.decl_buffer((8,), "int32", name="B")
C = T.decl_buffer((8,), name="C")


def _show(found):
    return [(str(g.load), [str(c) for c in g.guards],
             [(v.name, str(x)) for v, x in g.lets]) for g in found]


def test_each_arm_of_an_if_then_else_runs_under_its_side_of_the_condition():
    i = T.var("i")
    e = T.if_then_else(A[i] > 0.0, A[i + 1], T.if_then_else(i < 3, A[i + 2], A[0]))
    assert _show(guarded_loads(e)) == [
        ("A[i]", [], []),                                     # the condition: always
        ("A[i + 1]", ["A[i] > T.float32(0)"], []),
        ("A[i + 2]", ["not A[i] > T.float32(0)", "i < 3"], []),
        ("A[0]", ["not A[i] > T.float32(0)", "not i < 3"], []),
    ]


def test_index_loads_come_before_the_load_they_index_and_a_buffer_filters():
    i = T.var("i")
    e = A[B[i]] + A[B[i + 1]]
    assert [str(g.load) for g in guarded_loads(e)] == ["B[i]", "A[B[i]]", "B[i + 1]",
                                                        "A[B[i + 1]]"]
    assert [str(g.load) for g in guarded_loads(e, A)] == ["A[B[i]]", "A[B[i + 1]]"]


def test_a_let_binding_is_seen_by_the_loads_of_its_body_only():
    i, x = T.var("i"), T.var("x")
    e = Let(x, i + 1, A[x]) + A[i]
    assert _show(guarded_loads(e)) == [("A[x]", [], [("x", "i + 1")]), ("A[i]", [], [])]


def test_statements_an_if_and_a_let_statement_guard_their_bodies():
    i, x = T.var("i"), T.var("x")
    s = SeqStmt((
        IfThenElse(i < 4, BufferStore(C, A[i], (i,)),
                   BufferStore(C, A[0], (i,))),
        LetStmt(x, i * 2, BufferStore(C, A[x], (i,))),
    ))
    assert _show(guarded_loads(s)) == [("A[i]", ["i < 4"], []),
                                       ("A[0]", ["not i < 4"], []),
                                       ("A[x]", [], [("x", "i * 2")])]


def test_the_walk_stops_at_a_nested_block():
    X = T.placeholder((4,), name="X")
    f = T.create_prim_func([X, T.compute((4,), lambda i: X[i] * 2.0, name="Y")])
    # the function's body is a root block around Y: Y's load is Y's to declare
    assert guarded_loads(f.body.block.body) == []
    y = f.body.block.body.body
    assert [str(g.load) for g in guarded_loads(y.block.body)] == ["X[v_i]"]
