"""``tree.walk``: every statement with its path, pre-order, children in field order;
iterative, so a deep nest costs no more per statement than a shallow one."""

import cuvil_tir as T
from cuvil_tir.analysis import tree


def test_walk_yields_every_statement_with_its_path_pre_order():
    A = T.placeholder((4, 4), name="A")
    f = T.create_prim_func([A, T.compute((4, 4), lambda i, j: A[i, j] * 2.0, name="B"),
                            ])
    got = [(path, type(s).__name__) for path, s in tree.walk(f)]
    assert got[:5] == [((), "BlockRealize"), (("block",), "Block"),
                       (("block", "body"), "For"), (("block", "body", "body"), "For"),
                       (("block", "body", "body", "body"), "BlockRealize")]
    for path, s in tree.walk(f):
        assert tree.get(f, path) is s


def test_walk_of_a_deep_nest_of_sequences():
    """3000 statements deep: nested generators (one per level) ran out of stack."""
    body = T.Evaluate(T.const(0))
    for _ in range(3000):
        body = T.SeqStmt((T.Evaluate(T.const(1)), body))
    got = list(tree.walk(body))
    assert len(got) == 1 + 2 * 3000
    assert got[-1][1] is not None and got[-1][0] == (("seq", 1),) * 3000
