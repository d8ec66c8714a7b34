"""Run-time bounds checks: ``Target(kind, bounds_check=True)`` for llvm and c."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
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
    # the check is affine in the loop: done once, before the loop, so nothing ran
    assert b.tolist() == [0.0] * 6
    # the module keeps working after a failure
    with pytest.raises(T.BoundsCheckError, match=r"A\[3\]"):
        mod(a[:3].copy(), b[:3].copy())


@pytest.mark.parametrize("kind", KINDS)
def test_default_build_keeps_only_the_checks_run_once_per_loop(kind):
    """Issue 25 F1: ``A[i + 1]`` for ``i < n`` read past the end silently unless
    bounds_check=True.  By default the checks that run once before their loop stay;
    data-dependent ones (``A[idx[i]]``, one per iteration) are bounds_check=True's."""
    f = _shifted()
    plain = T.lower(f, targets.Target(kind))
    assert T.structural_equal(plain, T.lower(f, kind))
    assert str(plain).count("T.assert_") == 2                      # both before the loop
    assert str(plain).index("T.assert_") < str(plain).index("for i in")
    mod = targets.build(f, kind)
    b = np.zeros(6, "float32")
    with pytest.raises(T.BoundsCheckError, match=r'read of A\[6\] \(shape \(6,\)\) in '
                       r'block "B": B\[v_i\] = A\[v_i \+ 1\] - A\[v_i\]'):
        mod(np.arange(6, dtype="float32"), b)
    assert not b.any()                                             # nothing ran
    gather = _gather().func
    assert "T.assert_" not in str(T.lower(gather, targets.Target(kind)))
    assert "T.assert_" in str(T.lower(gather, _target(kind)))


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
    # hoisted before the loop: checked at the first and the last iteration
    assert 'T.assert_(1 < n, "out-of-bounds read of A[{}] (shape ({},)) in block' in text
    assert 'T.assert_(T.bool(False), "out-of-bounds read of A[{}]' in text
    assert T.structural_equal(T.parse(text), f)
    low = T.lower(_gather().func, _target("llvm"))     # a check inside the loop
    assert "T.assert_(" in str(low).split("for ")[1]
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


def _shift_store():
    """``B[i + 1] = A[i]`` over ``i < n``: writes B[n] at the last step."""
    n = T.size_var("n")
    A = T.decl_buffer((n,), "float32", "A")
    B = T.decl_buffer((n,), "float32", "B")
    i = T.var("i")
    return T.PrimFunc([A, B], T.For(i, T.const(0), n, "serial",
                                    T.BufferStore(B, A[i] + 1.0, (i + 1,))))


@pytest.mark.parametrize("kind", KINDS)
def test_out_of_bounds_write_never_happens(kind):
    mod = targets.build(_shift_store(), _target(kind))
    big = np.full(12, -7.0, "float32")
    with pytest.raises(T.BoundsCheckError, match=r"write of B\[8\] \(shape \(8,\)\)"):
        mod(np.zeros(8, "float32"), big[:8])    # a view: B[8] would be big[8]
    assert big.tolist() == [-7.0] * 12


@pytest.mark.parametrize("kind", KINDS)
def test_vectorized_loop_is_checked_once_per_chunk(kind):
    A = T.placeholder((T.size_var("n"),), name="A")     # may be shorter than B
    B = T.compute((64,), lambda i: A[i] * 2.0, name="B")
    sch = S.Schedule(T.create_prim_func([A, B]))
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.vectorize(sch.split(i, [None, 8])[1])
    target = _target(kind, mcpu="haswell") if kind == "llvm" else _target(kind)
    low = T.lower(sch, target)
    text = str(low)
    if kind == "llvm":
        assert "T.Ramp" in text            # still vector code: the check is hoisted
    assert text.index("T.assert_") < text.index("B[")
    mod = targets.build(sch, _target(kind))
    b = np.zeros(64, "float32")
    with pytest.raises(T.BoundsCheckError, match=r"read of A\[63\] \(shape \(60,\)\)"):
        mod(np.ones(60, "float32"), b)
    # the last chunk's check ran before any of its lanes was stored
    assert b[:56].tolist() == [2.0] * 56 and b[56:].tolist() == [0.0] * 8


def _gather():
    """``B[i] = A[idx[i]]``: a data-dependent index, checked at each iteration."""
    n, m = T.size_var("n"), T.size_var("m")
    A = T.placeholder((n,), name="A")
    idx = T.placeholder((m,), "int32", name="idx")
    B = T.compute((m,), lambda i: A[idx[i]] + 1.0, name="B")
    return S.Schedule(T.create_prim_func([A, idx, B]))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("parallel", [False, True])
def test_failing_iteration_stops_before_its_access(kind, parallel):
    sch = _gather()
    if parallel:
        sch.parallel(sch.get_loops(sch.get_block("B"))[0])
    mod = targets.build(sch, _target(kind))
    idx = np.arange(64, dtype="int32")
    idx[40] = 99
    b = np.zeros(64, "float32")
    with pytest.raises(T.BoundsCheckError, match=r"read of A\[99\] \(shape \(64,\)\)"):
        mod(np.arange(64, dtype="float32"), idx, b)
    assert b[40] == 0.0
    if not parallel:       # serially, every earlier iteration ran, no later one
        assert b[:40].tolist() == list(range(1, 41)) and not b[41:].any()
    idx[40] = -1
    with pytest.raises(T.BoundsCheckError, match=r"read of A\[-1\]"):
        mod(np.arange(64, dtype="float32"), idx, b)


@pytest.mark.parametrize("kind", KINDS)
def test_parallel_loop_failure_reaches_the_caller(kind):
    big = np.full(260, -7.0, "float32")
    sch = S.Schedule(_shifted())
    sch.parallel(sch.get_loops(sch.get_block("B"))[0])
    mod = targets.build(sch, _target(kind))
    with pytest.raises(T.BoundsCheckError, match=r"read of A\[256\]"):
        mod(np.arange(256, dtype="float32"), big[:256])
    assert big[255:].tolist() == [-7.0] * 5
    f = _shift_store()
    par = f.with_body(T.For(f.body.loop_var, f.body.min, f.body.extent, "parallel",
                            f.body.body))
    mod = targets.build(par, _target(kind))
    with pytest.raises(T.BoundsCheckError, match=r"write of B\[256\]"):
        mod(np.zeros(256, "float32"), big[:256])
    assert big[256:].tolist() == [-7.0] * 4


@pytest.mark.parametrize("openmp", [True, False])
def test_c_split_parallel_loop_keeps_its_checks_label(openmp):
    """A check inside the serial loop of a split parallel loop jumps to the task's
    stop label: the task loop defines it (issue 25, c_bounds_parallel_goto)."""
    sch = S.Schedule(_shifted())
    o, _ = sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 16])
    sch.parallel(o)
    mod = targets.build(sch, _target("c", openmp=openmp))
    for n in (64, 40):
        b = np.full(n, -7.0, "float32")
        with pytest.raises(T.BoundsCheckError,
                           match=rf"read of A\[{n}\] \(shape \({n},\)\)"):
            mod(np.arange(n, dtype="float32"), b)
        assert b[-1] == -7.0


@pytest.mark.parametrize("kind", KINDS)
def test_in_bounds_results_are_identical(kind):
    n, m = T.size_var("n"), T.size_var("m")
    A = T.placeholder((n, m), name="A")
    X = T.placeholder((m,), name="X")
    k = T.reduce_axis((0, m), name="k")
    Y = T.compute((n,), lambda i: T.sum(A[i, k] * X[k], axis=k), name="Y")
    Z = T.compute((n,), lambda i: T.if_then_else(i > 0, Y[i - 1], Y[i]) * 2.0, name="Z")
    sch = S.Schedule(T.create_prim_func([A, X, Z]))
    sch.parallel(sch.get_loops(sch.get_block("Z"))[0])
    rng = np.random.default_rng(1)
    a, x = rng.standard_normal((33, 17)).astype("float32"), rng.standard_normal(17).astype("float32")
    z0, z1 = np.zeros(33, "float32"), np.zeros(33, "float32")
    targets.build(sch, targets.Target(kind))(a, x, z0)
    targets.build(sch, _target(kind))(a, x, z1)
    assert z0.tobytes() == z1.tobytes()
    # the guarded load Y[i - 1] is checked only where i > 0: no false alarm at i = 0


def test_local_buffer_accesses_are_checked():
    n = T.size_var("n")
    A = T.decl_buffer((n,), "float32", "A")
    L = T.decl_buffer((4,), "float32", "L", scope="local")
    i = T.var("i")
    body = T.Allocate(L, T.seq(
        T.For(i, T.const(0), n, "serial", T.BufferStore(L, A[i], (i,))),
        T.BufferStore(A, L[0], (T.const(0),))))
    f = T.PrimFunc([A], body)
    mod = targets.build(f, _target("llvm"))
    a = np.arange(4, dtype="float32")
    mod(a)
    with pytest.raises(T.BoundsCheckError, match=r"write of L\[4\] \(shape \(4,\)\)"):
        mod(np.arange(5, dtype="float32"))


def test_checked_and_unchecked_builds_never_share_a_cache_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("CUVIL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CUVIL_CACHE", "1")
    f = _gather().func
    a, idx, b = np.arange(5, dtype="float32"), np.array([0, 9], "int32"), np.zeros(2, "float32")
    targets.build(f, "llvm")                   # with the cheap checks only, now cached
    checked = targets.build(f, _target("llvm"))
    assert not checked.from_cache
    again = targets.build(f, _target("llvm"))
    assert again.from_cache
    with pytest.raises(T.BoundsCheckError, match=r"A\[9\]"):
        again(a, idx, b)                       # messages come with the cached code
