"""The simplifier's shortcuts for speed change no result: an expression already in its
canonical form comes back itself (one step, not two), and ``arith.simplify`` with
nothing known is memoised by structure with variables by identity."""

from hypothesis import given, settings, strategies as st

import cuvil_tir as T
from cuvil_tir import arith
from cuvil_tir.arith import Analyzer, memo
from cuvil_tir.node import same

VARS = [T.var("i"), T.var("j"), T.size_var("n")]


def index_exprs():
    leaf = st.one_of(st.sampled_from(VARS), st.integers(-9, 9).map(T.const))
    return st.recursive(leaf, lambda sub: st.one_of(
        st.tuples(sub, sub).map(lambda t: t[0] + t[1]),
        st.tuples(sub, sub).map(lambda t: t[0] - t[1]),
        st.tuples(sub, sub).map(lambda t: t[0] * t[1]),
        st.tuples(sub, st.integers(1, 8)).map(lambda t: t[0] // t[1]),
        st.tuples(sub, st.integers(1, 8)).map(lambda t: t[0] % t[1]),
        st.tuples(sub, sub).map(lambda t: T.min(t[0], t[1]))), max_leaves=10)


def test_a_canonical_sum_comes_back_itself():
    i, j = VARS[:2]
    e = i * 4 + j
    assert Analyzer().simplify(e) is e
    assert Analyzer(index_no_overflow=True).simplify(e) is e
    changed = (i * 4 + j) - i * 4
    assert str(Analyzer().simplify(changed)) == "j"


@settings(max_examples=120, deadline=None)
@given(e=index_exprs())
def test_memoised_simplification_equals_a_fresh_analyzers(e):
    want = Analyzer().simplify(e)
    for _ in range(2):   # the first call fills the table, the second reads it
        got = arith.simplify(e)
        assert same(got, want), (e, got, want)
    # a result equal to the input is the input object itself
    assert (arith.simplify(e) is e) == (want is e or same(want, e))


def test_the_memo_tells_variables_apart_by_identity():
    memo.clear()
    a, b = T.var("x"), T.var("x")        # same name, two variables
    got_a = arith.simplify((a + 1) - 1)
    got_b = arith.simplify((b + 1) - 1)
    assert got_a is a and got_b is b
    assert arith.simplify((a + 1) - 1) is a


def test_the_memo_keeps_at_most_size_entries(monkeypatch):
    memo.clear()
    monkeypatch.setattr(memo, "SIZE", 8)
    i = VARS[0]
    for k in range(20):
        assert str(arith.simplify(i + k - k)) == "i"
    assert len(memo._TABLE) == 8
    # the oldest went first: the newest are still answered from the table
    assert str(arith.simplify(i + 19 - 19)) == "i"


def test_bounds_given_are_not_memoised():
    memo.clear()
    i = VARS[0]
    e = T.min(i, 16)
    assert str(arith.simplify(e, {i: T.Range.from_extent(8)})) == "i"
    assert arith.simplify(e) is e    # nothing known: min stays
    assert len(memo._TABLE) == 1


class _Forgetful(dict):
    """A memo table that keeps nothing: every lookup computes afresh."""

    def __setitem__(self, key, value):
        pass


@settings(max_examples=120, deadline=None)
@given(e=index_exprs(), extent=st.integers(1, 40))
def test_kept_canonical_sums_give_what_computing_them_gives(e, extent):
    from cuvil_tir.arith import rewrite

    def run():
        a = Analyzer(index_no_overflow=True)
        a.bind(VARS[0], T.Range.from_extent(extent))
        return a.simplify(e)
    kept = [run(), run()]          # the second reads what the first kept
    real = rewrite._CANON
    try:
        rewrite._CANON = _Forgetful()
        fresh = run()
    finally:
        rewrite._CANON = real
    assert same(kept[0], fresh) and same(kept[1], fresh), (e, kept, fresh)


def test_kept_canonical_sums_are_bounded_and_tell_variables_apart(monkeypatch):
    from cuvil_tir.arith import rewrite
    monkeypatch.setattr(rewrite, "_CANON", {})
    monkeypatch.setattr(rewrite, "CANON_SIZE", 16)
    a, b = T.var("x"), T.var("x")
    assert Analyzer().simplify((a * 2 + 1) - 1) is not None
    got = Analyzer().simplify((b * 2 + 1) - 1)
    assert str(got) == "x * 2" and got.a is b
    i = VARS[0]
    for k in range(40):
        assert str(Analyzer().simplify(i * 2 + k - k)) == "i * 2"
    assert len(rewrite._CANON) == 16


def test_the_simplify_pass_flattens_a_sequence_inside_a_sequence():
    # with nothing left to simplify, the pass once returned the nested sequence as it
    # was: it prints like the flat one, so the parsed text differed from the function
    from cuvil_tir.stmt import SeqStmt
    from cuvil_tir.transform.simplify import simplify
    A = T.decl_buffer((4,), "float32", "A")
    store = [T.BufferStore(A, T.float32(k), (T.const(k),)) for k in range(3)]
    f = T.PrimFunc([A], SeqStmt((store[0], SeqStmt((store[1], store[2])))))
    out = simplify(f)
    assert [type(s).__name__ for s in out.body.seq] == ["BufferStore"] * 3
    assert T.structural_equal(T.parse(str(out)), out)
    flat = T.PrimFunc([A], SeqStmt(tuple(store)))
    assert simplify(flat).body is flat.body
