"""Every ArgumentError of a built module, matched on its message."""

import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir.errors import TargetError
from targets import ArgumentError


@pytest.fixture(scope="module")
def matmul_mod():
    A = T.placeholder((128, 64), name="A")
    B = T.placeholder((64, 128), name="B")
    k = T.reduce_axis((0, 64), name="k")
    C = T.compute((128, 128), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
    return targets.build(T.create_prim_func([A, B, C]))


@pytest.fixture(scope="module")
def sym_mod():
    n = T.size_var("n")
    alpha = T.var("alpha", "float32")
    count = T.var("count", "int8")
    A = T.placeholder((n, 4), name="A")
    B = T.compute((n, 4), lambda i, j: A[i, j] * alpha + count.astype("float32"), name="B")
    return targets.build(T.create_prim_func([A, alpha, count, B]))


def _mm_args():
    return [np.zeros((128, 64), "float32"), np.zeros((64, 128), "float32"),
            np.zeros((128, 128), "float32")]


def test_valid_call_passes(matmul_mod):
    a, b, c = _mm_args()
    a[:] = 1
    b[:] = 2
    matmul_mod(a, b, c)
    assert np.all(c == 128.0)


def test_argument_count(matmul_mod):
    with pytest.raises(ArgumentError, match=r"main: expected 3 arguments \(A, B, C\), got 2"):
        matmul_mod(*_mm_args()[:2])


def test_shape_against_constants(matmul_mod):
    a, b, _ = _mm_args()
    with pytest.raises(ArgumentError,
                       match=r"argument 2 'C': expected shape \(128, 128\), got \(128, 64\)"):
        matmul_mod(a, b, np.zeros((128, 64), "float32"))


def test_dtype(matmul_mod):
    a, b, c = _mm_args()
    with pytest.raises(ArgumentError,
                       match=r"argument 0 'A': expected dtype float32, got float64"):
        matmul_mod(a.astype("float64"), b, c)


def test_rank(matmul_mod):
    a, b, c = _mm_args()
    with pytest.raises(ArgumentError, match=r"argument 1 'B': expected 2 dimension\(s\), "
                                            r"shape \(64, 128\), got 1 \(shape \(8192,\)\)"):
        matmul_mod(a, b.ravel(), c)


def test_not_an_array(matmul_mod):
    a, b, c = _mm_args()
    with pytest.raises(ArgumentError, match=r"argument 0 'A': expected a numpy.ndarray of "
                                            r"float32 with shape \(128, 64\), got list"):
        matmul_mod(a.tolist(), b, c)


def test_c_contiguity(matmul_mod):
    a, b, c = _mm_args()
    with pytest.raises(ArgumentError, match=r"argument 1 'B': expected a C-contiguous "
                                            r"array, got strides .*ascontiguousarray\(B\)"):
        matmul_mod(a, np.zeros((128, 64), "float32").T, c)


def test_read_only_output(matmul_mod):
    a, b, c = _mm_args()
    c.setflags(write=False)
    with pytest.raises(ArgumentError, match=r"argument 2 'C': the function writes to C "
                                            r"but the array is read-only"):
        matmul_mod(a, b, c)


def test_read_only_input_is_fine(matmul_mod):
    a, b, c = _mm_args()
    a.setflags(write=False)
    matmul_mod(a, b, c)
    assert np.all(c == 0)


def test_symbol_bound_twice_must_agree(sym_mod):
    with pytest.raises(ArgumentError, match=r"argument 3 'B': expected shape \(n, 4\); "
                                            r"n = 5 \(bound by argument 0 'A' dimension 0\)"
                                            r", got \(6, 4\)"):
        sym_mod(np.zeros((5, 4), "float32"), 1.0, 0, np.zeros((6, 4), "float32"))


def test_scalar_parameters(sym_mod):
    a, b = np.ones((3, 4), "float32"), np.zeros((3, 4), "float32")
    sym_mod(a, 2.0, 3, b)
    assert np.all(b == 5.0)
    sym_mod(a, np.float32(0.5), np.int8(1), b)      # numpy scalars: slow path, accepted
    assert np.all(b == 1.5)
    with pytest.raises(ArgumentError, match=r"argument 1 'alpha': expected a Python float "
                                            r"or int for float32, got str"):
        sym_mod(a, "2", 3, b)
    with pytest.raises(ArgumentError, match=r"argument 2 'count': expected an int in "
                                            r"\[-128, 127\] for int8, got int"):
        sym_mod(a, 2.0, 300, b)
    with pytest.raises(ArgumentError, match=r"argument 2 'count': expected a Python int "
                                            r"for int8, got float"):
        sym_mod(a, 2.0, 1.5, b)


def test_bfloat16_is_stored_as_uint16():
    A = T.placeholder((4,), "bfloat16", name="A")
    B = T.compute((4,), lambda i: A[i] + A[i], name="B")
    mod = targets.build(T.create_prim_func([A, B]))
    with pytest.raises(ArgumentError, match=r"argument 0 'A': expected dtype bfloat16 "
                                            r"\(stored as uint16\), got float32"):
        mod(np.zeros(4, "float32"), np.zeros(4, "uint16"))
    a = np.array([0x3F80] * 4, "uint16")        # 1.0
    b = np.zeros(4, "uint16")
    mod(a, b)
    assert b.tolist() == [0x4000] * 4           # 2.0


def test_composite_dimension():
    n = T.size_var("n")
    A = T.placeholder((n,), name="A")
    B = T.compute((n + 2,), lambda i: T.if_then_else(T.all(i >= 1, i <= n),
                                                      A[T.max(T.min(i - 1, n - 1), 0)],
                                                      0.0), name="B")
    mod = targets.build(T.create_prim_func([A, B]))
    b = np.zeros(5, "float32")
    mod(np.arange(3, dtype="float32") + 1, b)
    assert b.tolist() == [0, 1, 2, 3, 0]
    with pytest.raises(ArgumentError, match=r"argument 1 'B': expected shape .*n = 3 "
                                            r"\(bound by argument 0 'A' dimension 0\), got \(4,\)"):
        mod(np.zeros(3, "float32"), np.zeros(4, "float32"))


def test_error_is_a_cuvil_error_with_code(matmul_mod):
    with pytest.raises(T.CuvilError) as info:
        matmul_mod()
    assert info.value.code == "CVL-E107"
    assert isinstance(info.value, TypeError)



def _huge_intermediate(parallel: bool, dtype: str = "int64", target: str = "llvm"):
    """C[i] = B[i, 0, 0, 0] + B[i, n-1, n-1, n-1] + 1 where B is the internal
    (m, n, n, n) buffer: it is heap-allocated with a size taken from the arguments'
    shapes (reading both corners keeps allocation planning from shrinking it); N only
    binds n."""
    import schedules as S
    m, n = T.size_var("m", dtype), T.size_var("n", dtype)
    A, N = T.placeholder((m,), name="A"), T.placeholder((n,), name="N")
    B = T.compute((m, n, n, n), lambda i, a, b, c: A[i] * 2.0 + N[a], name="B")
    C = T.compute((m,), lambda i: B[i, 0, 0, 0] + B[i, n - 1, n - 1, n - 1] + 1.0,
                  name="C")
    sch = S.Schedule(T.create_prim_func([A, N, C]))
    if parallel:
        (i,) = sch.get_loops(sch.get_block("C"))
        sch.parallel(i)
        sch.compute_at(sch.get_block("B"), i)
    return targets.build(sch, target)


@pytest.mark.parametrize("target", ["llvm", "c"])
@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("dtype, n", [("int64", 1 << 16),    # m*n^3 wraps to 0 in int64
                                      ("int64", 1 << 12),    # 2^52 bytes: no memory
                                      ("int32", 1 << 6)])    # 2^34 elements: int32 indices wrap
def test_internal_buffer_that_cannot_be_allocated_raises(parallel, dtype, n, target):
    mod = _huge_intermediate(parallel, dtype, target)
    a, c = np.ones(1 << 16, "float32"), np.zeros(1 << 16, "float32")
    with pytest.raises(TargetError, match=r"stopped before finishing: an internal buffer "
                                          r"could not be allocated"):
        mod(a, np.zeros(n, "float32"), c)
    # the module stays usable with sizes that fit
    a2, c2 = np.arange(4, dtype="float32"), np.zeros(4, "float32")
    mod(a2, np.zeros(2, "float32"), c2)
    np.testing.assert_array_equal(c2, a2 * 4 + 1)


def _add_one(n=8):
    A = T.placeholder((n,), name="A")
    B = T.compute((n,), lambda i: A[i] + 1.0, name="B")
    return T.create_prim_func([A, B])


@pytest.mark.parametrize("make_args", [
    lambda x: (x, x),                                # the same array twice
    lambda x: (x[::1], x),                           # a view of the output as input
    lambda x: (x.reshape(2, 4).reshape(8), x[:]),    # two views of one array
])
def test_overlapping_arguments_are_refused_when_one_is_written(make_args):
    mod = targets.build(_add_one())
    x = np.arange(8, dtype="float32")
    with pytest.raises(targets.ArgumentError,
                       match=r"argument 1 'B': overlaps argument 0 'A' in memory.*"
                             r"cuvil.allow_inplace"):
        mod(*make_args(x))
    np.testing.assert_array_equal(x, np.arange(8, dtype="float32"))


def test_overlap_check_lets_distinct_views_and_declared_in_place_use_through():
    mod = targets.build(_add_one())
    base = np.arange(16, dtype="float32")
    a, b = base[:8], base[8:]                 # views of one array that do not overlap
    mod(a, b)
    np.testing.assert_array_equal(b, np.arange(8, dtype="float32") + 1)
    inplace = targets.build(_add_one().with_attr("cuvil.allow_inplace", True))
    x = np.arange(8, dtype="float32")
    inplace(x, x)
    np.testing.assert_array_equal(x, np.arange(8, dtype="float32") + 1)


def test_a_function_of_many_buffers_builds_and_checks_its_arguments():
    # the fast argument check once nested one test per step and hit Python's limit on
    # indentation near thirty buffers: 60 inputs summed into one output
    ins = [T.placeholder((4,), name=f"X{k}") for k in range(60)]
    total = T.compute((4,), lambda i: sum((x[i] for x in ins[1:]), ins[0][i]), name="Y")
    mod = targets.build(T.create_prim_func(ins + [total]))
    arrays = [np.full(4, k, "float32") for k in range(60)]
    out = np.zeros(4, "float32")
    mod(*arrays, out)
    np.testing.assert_array_equal(out, np.full(4, sum(range(60)), "float32"))
    with pytest.raises(ArgumentError, match=r"X59"):
        mod(*arrays[:59], np.zeros(5, "float32"), out)
