"""Run-time bounds checks: ``Target(kind, bounds_check=True)`` for llvm and c."""

import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir.transform.bounds_check import insert_bounds_checks

KINDS = ["llvm", "c"]


def _shifted():
    """``B[i] = A[i + 1] - A[i]`` over ``i < n``: reads A[n] at the last step."""
    n = T.size_var("n")
    A = T.placeholder((n,), name="A")
    B = T.compute((n,), lambda i: A[i + 1] - A[i], name="B")
    return T.create_prim_func([A, B])


def _target(kind, **options):
    return targets.Target(kind, bounds_check=True, **options)


@pytest.mark.parametrize("kind", KINDS)
def test_symbolic_read_past_the_end_raises(kind):
    mod = targets.build(_shifted(), _target(kind))
    a, b = np.arange(6, dtype="float32"), np.zeros(6, "float32")
    with pytest.raises(T.BoundsCheckError, match=r'read of A\[6\] \(shape \(6,\)\) in block '
                       r'"B": B\[v_i\] = A\[v_i \+ 1\] - A\[v_i\]') as err:
        mod(a, b)
    assert err.value.values == (6, 6)
    assert err.value.code == "CVL-E231"
    assert isinstance(err.value, T.TargetError)
    # every step before the failing one ran; the failing one stopped before its store
    assert b[:5].tolist() == [1.0] * 5 and b[5] == 0.0
    # the module keeps working after a failure
    with pytest.raises(T.BoundsCheckError, match=r"A\[3\]"):
        mod(a[:3].copy(), b[:3].copy())


@pytest.mark.parametrize("kind", KINDS)
def test_unchecked_build_has_no_checks(kind):
    f = _shifted()
    plain = T.lower(f, targets.Target(kind))
    checked = T.lower(f, _target(kind))
    assert "T.assert_" not in str(plain) and "T.assert_" in str(checked)
    assert T.structural_equal(plain, T.lower(f, kind))


def test_build_key_differs_only_when_on():
    f = _shifted()
    off = targets.build_key(f, targets.Target("llvm", bounds_check=False))
    assert off == targets.build_key(f, "llvm")
    assert targets.build_key(f, _target("llvm")) != off
    assert targets.build_key(f, _target("c")) != targets.build_key(f, "c")
    assert str(_target("llvm")) == "llvm -bounds-check"


def test_interpreter_raises_the_same_error():
    f = _shifted()
    a, b = np.arange(4, dtype="float32"), np.zeros(4, "float32")
    with pytest.raises(T.BoundsCheckError) as compiled:
        targets.build(f, _target("llvm"))(a, b.copy())
    with pytest.raises(T.BoundsCheckError) as interpreted:
        T.interpret(T.lower(f, _target("llvm")), a, b.copy())
    assert str(interpreted.value) == str(compiled.value)
    assert interpreted.value.values == compiled.value.values


def test_assert_prints_and_parses():
    f = insert_bounds_checks(_shifted())
    text = str(f)
    assert 'T.assert_(v_i + 1 >= 0 and v_i + 1 < n, "out-of-bounds read of A[{}]' in text
    assert T.structural_equal(T.parse(text), f)
    low = T.lower(f)
    assert T.structural_equal(T.parse(str(low)), low)


def test_assert_node_checks_its_parts():
    i = T.var("i")
    with pytest.raises(T.ShapeError, match="has 2 '{}' placeholder"):
        T.assert_(i < 4, "{} {}", i)
    with pytest.raises(T.DTypeError, match="scalar bool"):
        T.AssertStmt(i + 1, "x", ())
    with pytest.raises(T.LoweringError, match="kind must be one of"):
        T.assert_(i < 4, "x", kind="nope")


def test_user_assert_raises_runtime_check_error():
    n = T.size_var("n")
    A = T.decl_buffer((n,), "float32", "A")
    f = T.PrimFunc([A], T.seq(T.assert_(n >= 2, "need n >= 2, got n = {}", n),
                              T.BufferStore(A, T.const(1.0), (T.const(1),))))
    mod = targets.build(f, "llvm")
    with pytest.raises(T.RuntimeCheckError, match="need n >= 2, got n = 1") as err:
        mod(np.zeros(1, "float32"))
    assert err.value.code == "CVL-E230" and not isinstance(err.value, T.BoundsCheckError)
    a = np.zeros(3, "float32")
    mod(a)
    assert a.tolist() == [0.0, 1.0, 0.0]
