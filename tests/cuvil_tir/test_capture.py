"""The capture (closure) analysis: what a statement uses from outside it, with effects."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

import cuvil_tir as T
from cuvil_tir.analysis.capture import Capture, call_access, capture

A = T.decl_buffer((16,), "float32", "A")
B = T.decl_buffer((16,), "float32", "B")
C = T.decl_buffer((16,), "float32", "C")


def test_buffers_scalars_and_effects_in_order_of_first_use():
    i, x, y = T.var("i"), T.var("x"), T.var("y")
    body = T.For(i, T.const(0), T.const(16), "serial", T.seq(
        T.BufferStore(B, A[i] * T.cast(x, "float32"), (i,)),
        T.BufferStore(C, C[i] + B[i], (i,)),
        T.BufferStore(A, T.cast(y, "float32"), (i,))))
    c = capture(body)
    assert [b.name for b in c.buffers] == ["B", "A", "C"]
    assert [v.name for v in c.scalars] == ["x", "y"]
    assert [c.effect(b) for b in (A, B, C)] == ["readwrite", "readwrite", "readwrite"]
    only = capture(T.BufferStore(B, A[T.const(0)], (T.const(1),)))
    assert (only.effect(A), only.effect(B)) == ("read", "write")
    assert only.written == (B,) and only.reads(A) and not only.writes(A)


def test_definitions_inside_are_not_captured():
    i, j, v = T.var("i"), T.var("j"), T.var("v", "float32")
    n = T.size_var("n")
    Tmp = T.decl_buffer((n,), "float32", "Tmp")
    body = T.For(i, T.const(0), T.const(4), "serial", T.Allocate(Tmp, T.LetStmt(
        v, A[i], T.For(j, T.const(0), n, "serial",
                       T.BufferStore(Tmp, v + T.Let(j, j, T.cast(j, "float32")), (j,))))))
    c = capture(body)
    assert [b.name for b in c.buffers] == ["A"]          # Tmp is allocated inside
    assert [x.name for x in c.scalars] == ["n"]          # the allocation's size
    assert [x.name for x in capture(body, bound=[n]).scalars] == []


def test_shapes_of_captured_buffers_on_request():
    n, m = T.size_var("n"), T.size_var("m")
    X = T.decl_buffer((n, m), "float32", "X")
    s = T.BufferStore(X, T.float32(0), (T.const(0), T.const(0)))
    assert capture(s).scalars == ()
    assert [v.name for v in capture(s, shapes=True).scalars] == ["n", "m"]


def test_calls_on_regions_have_the_declared_effect():
    r = T.call_extern("int32", "dma_in", T.BufferRegion.full(A), effect="reads")
    w = T.call_extern("int32", "dma_out", T.BufferRegion.full(B), effect="writes")
    o = T.call_extern("int32", "npu", T.BufferRegion.full(C))
    c = capture(T.seq(T.Evaluate(r), T.Evaluate(w), T.Evaluate(o)))
    assert [c.effect(b) for b in (A, B, C)] == ["read", "write", "readwrite"]
    assert call_access(T.exp(T.var("x", "float32"))) == (True, False)


def test_block_regions_read_and_write_and_iter_vars_are_bound():
    P = T.placeholder((4,), name="P")
    f = T.create_prim_func([P, T.compute((4,), lambda i: P[i] * 2.0, name="Q")])
    c = capture(f.body)
    assert {b.name: c.effect(b) for b in c.buffers} == {"Q": "write", "P": "read"}
    assert c.scalars == ()


def test_a_definition_covers_its_scope_only():
    a = T.var("a")
    loop = T.For(a, T.const(0), a, "serial", T.BufferStore(A, T.float32(0), (a,)))
    assert capture(loop).scalars == (a,)            # the extent is outside the loop
    used_before = T.seq(T.BufferStore(A, T.cast(a, "float32"), (T.const(0),)),
                        T.For(a, T.const(0), T.const(4), "serial", T.Evaluate(a)))
    assert capture(used_before).scalars == (a,)


def test_ordered_puts_parameters_first_and_keeps_the_rest():
    c = Capture((C, B, A), (), ("read", "write", "read"))
    o = c.ordered([A, B])
    assert [b.name for b in o.buffers] == ["A", "B", "C"]
    assert [o.effect(b) for b in (A, B, C)] == ["read", "write", "read"]


def test_an_uncaptured_buffer_has_no_effect():
    with pytest.raises(T.LoweringError, match="capture: buffer C is not used by the "
                       "statement; it uses A"):
        capture(T.BufferStore(A, T.float32(0), (T.const(0),))).effect(C)


# hypothesis: the captured scalars are exactly the free variables, the captured buffers
# exactly the buffers used and not allocated inside -------------------------------------

VARS = [T.var(n) for n in "abcde"]
BUFS = [T.decl_buffer((8,), "int32", n) for n in ("P", "Q", "R")]


@st.composite
def _expr(draw, bufs, depth=2):
    if depth == 0 or draw(st.booleans()):
        if draw(st.booleans()):
            return draw(st.sampled_from(VARS))
        return T.const(draw(st.integers(0, 7)))
    a, b = draw(_expr(bufs, depth - 1)), draw(_expr(bufs, depth - 1))
    kind = draw(st.sampled_from(["add", "mul", "load"]))
    if kind == "load":
        return draw(st.sampled_from(bufs))[T.floormod(a, 8)]
    return a + b if kind == "add" else a * b


@st.composite
def _stmt(draw, bufs=tuple(BUFS), depth=3):
    kind = draw(st.sampled_from(["store", "for", "let", "alloc", "seq"] if depth else
                                ["store"]))
    if kind == "store":
        buf = draw(st.sampled_from(bufs))
        return T.BufferStore(buf, draw(_expr(bufs)), (T.floormod(draw(_expr(bufs)), 8),))
    if kind == "for":
        v = draw(st.sampled_from(VARS))
        return T.For(v, T.const(0), draw(_expr(bufs, 1)), "serial",
                     draw(_stmt(bufs, depth - 1)))
    if kind == "let":
        v = draw(st.sampled_from(VARS))
        return T.LetStmt(v, draw(_expr(bufs, 1)), draw(_stmt(bufs, depth - 1)))
    if kind == "alloc":     # a fresh buffer, used only inside its allocation
        own = T.decl_buffer((8,), "int32", "S")
        return T.Allocate(own, draw(_stmt((*bufs, own), depth - 1)))
    return T.seq(draw(_stmt(bufs, depth - 1)), draw(_stmt(bufs, depth - 1)))


def _free(n, bound=frozenset(), own=frozenset()):
    """(free variables, free buffers), by the definition: a naive recursion."""
    if isinstance(n, T.Var):
        return ({id(n)} - bound, set())
    if isinstance(n, T.BufferLoad):
        fv, fb = _free(n.indices, bound, own)
        return fv, fb | ({id(n.buffer)} - own)
    if isinstance(n, T.BufferStore):
        fv, fb = _free((n.value, *n.indices), bound, own)
        return fv, fb | ({id(n.buffer)} - own)
    if isinstance(n, T.For):
        fv, fb = _free((n.min, n.extent), bound, own)
        gv, gb = _free(n.body, bound | {id(n.loop_var)}, own)
        return fv | gv, fb | gb
    if isinstance(n, T.LetStmt):
        fv, fb = _free(n.value, bound, own)
        gv, gb = _free(n.body, bound | {id(n.var)}, own)
        return fv | gv, fb | gb
    if isinstance(n, T.Allocate):
        return _free(n.body, bound, own | {id(n.buffer)})
    if isinstance(n, tuple):
        fv, fb = set(), set()
        for x in n:
            gv, gb = _free(x, bound, own)
            fv, fb = fv | gv, fb | gb
        return fv, fb
    if isinstance(n, T.SeqStmt):
        return _free(n.seq, bound, own)
    if isinstance(n, T.BinaryOp):
        return _free((n.a, n.b), bound, own)
    return set(), set()


@settings(max_examples=150, deadline=None)
@given(_stmt())
def test_captured_set_equals_the_free_variables_and_buffers(s):
    c = capture(s)
    fv, fb = _free(s)
    assert {id(v) for v in c.scalars} == fv
    assert {id(b) for b in c.buffers} == fb
    assert len(c.scalars) == len({id(v) for v in c.scalars})
