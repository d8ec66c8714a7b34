"""Vector exp, log, tanh and sigmoid (issue 25): in vector registers by default (they
were one libm call per lane), within a few ulp of float64 on a sweep of the whole
float32 range, specials included; ``afn`` gives the looser grade.

Built for a pinned AVX2 CPU (8-lane registers; the 16-lane vectors are split in two),
so the same vector code runs on any x86-64 host with AVX2."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets

F32 = np.finfo("float32")
#: every 8191st float32 bit pattern: all exponents, both signs, NaNs and subnormals
SWEEP = np.arange(0, 1 << 32, 8191, dtype=np.uint64).astype(np.uint32).view(np.float32)
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, F32.tiny,
                     88.72, 88.73, 89.5, -87.33, -103.9, -104.5, 9.0, 9.1, 0.625, -0.625,
                     1.0, -1.0, 2.0, 0.5, -20.0, 20.0], "float32")
X = np.concatenate([SPECIALS, SWEEP[:len(SWEEP) // 16 * 16]])


def _reference(name, x):
    with np.errstate(all="ignore"):
        x = x.astype("float64")
        return {"exp": np.exp, "log": np.log, "tanh": np.tanh,
                "sigmoid": lambda v: 1.0 / (1.0 + np.exp(-v))}[name](x)


def _kernel(name, fast_math, dtype="float32", n=None):
    n = len(X) if n is None else n
    A = T.placeholder((n,), dtype, name="A")
    B = T.compute((n,), lambda i: getattr(T, name)(A[i]), name="B")
    sch = S.Schedule(T.create_prim_func([A, B]))
    _, v = sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 16])
    sch.vectorize(v)
    return targets.build(sch, targets.Target("llvm", mcpu="haswell", fast_math=fast_math))


def _ulp_errors(got, want, x, normal_only):
    with np.errstate(all="ignore"):
        w32 = want.astype("float32")
    finite = np.isfinite(w32)
    if normal_only:
        finite &= (np.abs(w32) >= F32.tiny) & (np.abs(x) >= F32.tiny)
    ulp = np.spacing(np.abs(w32[finite])).astype("float64")
    return np.abs(got[finite].astype("float64") - want[finite]) / ulp


@pytest.mark.parametrize("name, accurate, fast", [
    ("exp", 1.0, 3.0), ("log", 1.0, 2.0), ("tanh", 1.5, 2.0), ("sigmoid", 2.5, 3.0)])
def test_ulp_error_over_the_float32_range(name, accurate, fast):
    want = _reference(name, X)
    for fast_math, bound in (("contract", accurate), ("contract,afn", fast)):
        mod = _kernel(name, fast_math)
        opt = mod.get_source("ll-opt")
        assert "@expf" not in opt and "@logf" not in opt and "@tanhf" not in opt
        got = np.full(len(X), -7.0, "float32")
        mod(X, got)
        assert (np.isnan(got) == np.isnan(want)).all(), fast_math
        with np.errstate(all="ignore"):
            over = np.isinf(want.astype("float32")) & ~np.isnan(want)
            np.testing.assert_array_equal(got[over], want[over].astype("float32"))
        err = _ulp_errors(got, want, X, normal_only=fast_math != "contract")
        assert err.max() <= bound, (name, fast_math, err.max())


def test_specials_as_libm():
    x = np.array([np.inf, -np.inf, 0.0, -0.0, np.nan, -1.0, 1e-45] + [1.0] * 9, "float32")
    out = {}
    for name in ("exp", "log", "tanh", "sigmoid"):
        got = np.zeros(16, "float32")
        _kernel(name, "contract", n=16)(x, got)
        out[name] = got
    nan = np.nan
    np.testing.assert_array_equal(out["exp"][:5], [np.inf, 0, 1, 1, nan])
    np.testing.assert_array_equal(out["log"][:6], [np.inf, nan, -np.inf, -np.inf, nan, nan])
    np.testing.assert_array_equal(out["tanh"][:5], [1, -1, 0, 0, nan])
    assert np.signbit(out["tanh"][3]) and out["tanh"][6] == np.float32(1e-45)
    np.testing.assert_array_equal(out["sigmoid"][:5], [1, 0, 0.5, 0.5, nan])
    for name in out:          # -1 and the smallest subnormal, within an ulp
        want = _reference(name, x[5:7])
        assert _ulp_errors(out[name][5:7], want, x[5:7], normal_only=False).max() <= 1.0


def test_subnormal_results_are_kept():
    x = np.linspace(-103.9, -87.4, 64, dtype="float32")
    for name in ("exp", "sigmoid"):
        got = np.zeros(64, "float32")
        _kernel(name, "contract", n=64)(x, got)
        want = _reference(name, x)
        assert (got > 0).all()
        assert _ulp_errors(got, want, x, normal_only=False).max() <= 1.0


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_vectors_use_the_float32_code(dtype):
    x = np.linspace(-6, 6, 64, dtype="float32")
    mod = _kernel("tanh", "contract", dtype=dtype, n=64)
    assert "@tanhf" not in mod.get_source("ll-opt")
    if dtype == "float16":
        got = np.zeros(64, "float16")
        mod(x.astype("float16"), got)
        np.testing.assert_allclose(got, np.tanh(x.astype("float16").astype("float64")),
                                   rtol=2 ** -10, atol=2 ** -24)


def _row_sum(rows=8, n=1024):
    A = T.placeholder((rows, n), name="A")
    k = T.reduce_axis((0, n), name="k")
    return S.Schedule(T.create_prim_func(
        [A, T.compute((rows,), lambda i: T.sum(A[i, k], axis=k), name="B")]))


@pytest.mark.parametrize("how", ["annotation", "fast_math", "default"])
def test_a_sum_vectorizes_only_with_the_users_reassociation(how):
    """Sums stay in exact (sequential) order by default; ``pragma_reassoc`` on the
    reduction loop, or ``fast_math`` with ``reassoc``, lets LLVM keep partial sums in
    vector lanes."""
    sch = _row_sum()
    fast_math = "contract,reassoc" if how == "fast_math" else "contract"
    if how == "annotation":
        sch.annotate(sch.get_loops(sch.get_block("B"))[1], "pragma_reassoc", 1)
    mod = targets.build(sch, targets.Target("llvm", mcpu="haswell", fast_math=fast_math))
    assert ("vector.reduce.fadd" in mod.get_source("ll-opt")) == (how != "default")
    a = np.random.default_rng(0).standard_normal((8, 1024)).astype("float32")
    b = np.zeros(8, "float32")
    mod(a, b)
    sequential = np.zeros(8, "float32")
    for k in range(1024):
        sequential = sequential + a[:, k]
    if how == "default":
        np.testing.assert_array_equal(b, sequential)
    else:
        np.testing.assert_allclose(b, a.astype("float64").sum(axis=1), rtol=0, atol=1e-3)
