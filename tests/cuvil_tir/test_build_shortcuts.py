"""The compile path's shortcuts (the visitor's dispatch table, the inlined module kept
for the build's second reader, the memoised simplification, the hash kept on a node,
the integer constant's checked dtypes) change no output: the same LLVM IR with and
without them, for candidates of the tuner's generated space."""

from hypothesis import given, settings, strategies as st

import cuvil_tir as T
from cuvil_tir import arith
from cuvil_tir.arith import Analyzer, rewrite
from cuvil_tir.target import as_target, compile_program
from cuvil_tir.transform import inline
from cuvil_tir.transform.outline import outline_parallel
from cuvil_tir.visitor import Mutator, Visitor


def test_visitor_and_mutator_dispatch_on_the_same_value_classes():
    A = T.decl_buffer((4,), "float32", "A")
    i = T.var("i")
    load = T.BufferLoad(A, (i,))

    class Seen(Visitor):
        def __init__(self):
            self.got = []

        def visit_Var(self, v):
            self.got.append(v.name)

        def visit_buffer(self, b):
            self.got.append("buffer " + b.name)

    class Rename(Mutator):
        def visit_Var(self, v):
            return T.var(v.name + "2")

        def visit_buffer(self, b):
            return b

    seen = Seen()
    assert seen.visit((load, 3, "x", None)) is None
    assert seen.got == ["buffer A", "i"]
    value = (load, 3, "x", None)
    out = Rename().visit(value)
    assert out is not value and out[1:] == (3, "x", None)
    assert str(out[0]) == "A[i2]"
    # a plain value through a mutator is itself; an unchanged tuple is itself
    assert Rename().visit(7) == 7
    plain = (1, "a")
    assert Rename().visit(plain) is plain
    # a subclass dispatches to its base's method (SizeVar -> visit_Var)
    n = T.size_var("n")
    seen = Seen()
    seen.visit(n + 1)
    assert seen.got == ["n"]


def _module():
    A = T.decl_buffer((64,), "float32", "A")
    i = T.var("i")
    f = T.PrimFunc([A], T.For(i, T.const(0), T.const(64), "parallel",
                              T.BufferStore(A, T.float32(1), (i,))))
    return outline_parallel(f)


def test_the_inlined_module_is_kept_for_the_same_objects_only():
    mod = _module()
    first = inline.inline_launches(mod)
    assert inline.inline_launches(mod) is first        # the build's second reader
    assert inline.inline_launches(mod, mod.entry) is first
    other = _module()                                   # equal, but other objects
    again = inline.inline_launches(other)
    assert again is not first and T.structural_equal(again, first)
    inline._LAST[0] = None
    assert T.structural_equal(inline.inline_launches(mod), first)


def _candidates():
    import schedules as S
    from schedules.tune.networks import conv2d, matmul
    from schedules.tune.rules import space_for
    target = "llvm -mcpu=skylake-avx512"
    out = []
    for func, seeds in ((matmul(64, 48, 32), range(3)), (conv2d(8, 8, 10, 10), range(2))):
        space = space_for(func, target)
        for seed in seeds:
            sch = S.Schedule(func, seed=seed)
            space(sch)
            out.append(sch.func.with_attr("global_symbol", "main"))
    return as_target(target), out


def test_the_shortcuts_leave_the_llvm_ir_as_it_was(monkeypatch):
    target, funcs = _candidates()
    fast = [compile_program(f, target, "main").sources["ll"] for f in funcs]
    # without the memo of arith.simplify, the kept canonical sums and the kept
    # inlined module
    monkeypatch.setattr(arith, "simplify_free", lambda e: Analyzer().simplify(e))

    class Never(list):
        def __setitem__(self, k, v):
            pass

    class Forgetful(dict):
        def __setitem__(self, k, v):
            pass
    monkeypatch.setattr(inline, "_LAST", Never([None]))
    monkeypatch.setattr(rewrite, "_CANON", Forgetful())
    slow = [compile_program(f, target, "main").sources["ll"] for f in funcs]
    assert fast == slow
    assert len(set(fast)) == len(funcs)   # the candidates do differ


def test_a_nodes_hash_is_kept_and_a_copy_computes_its_own():
    import copy
    import pickle

    from cuvil_tir.node import node_hash, same
    i = T.var("i")
    e = (i * 4 + 3) // 8
    h = node_hash(e)
    assert node_hash(e) == h == hash(e) == node_hash((i * 4 + 3) // 8)
    for other in (pickle.loads(pickle.dumps(e)), copy.deepcopy(e)):
        assert not same(other, e)                   # its variable is another object
        assert node_hash(other) != h
        assert node_hash(other) == node_hash(copy.copy(other))


@settings(max_examples=150, deadline=None)
@given(value=st.integers(-2 ** 70, 2 ** 70),
       dtype=st.sampled_from(["bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
                              "uint32", "uint64"]))
def test_an_integer_constant_wraps_as_its_dtype_says(value, dtype):
    from cuvil_tir import dtype as D
    c = T.IntImm(value, dtype)
    assert c.value == D.wrap_int(value, dtype) and c.dtype == dtype
