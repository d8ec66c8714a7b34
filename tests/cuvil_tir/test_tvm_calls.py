"""TVMScript's pointer calls and implicit store conversions (issue 11, section 4).

``T.tvm_access_ptr`` / ``A.access_ptr`` over a flat range of a multi-dimensional
buffer read as the ``access_ptr`` op; schedules that remove or replace a buffer handed
to a call as memory refuse or retarget it; a function written against TVM's namespace
gets TVM's store conversions where they are defined for every value.
"""

import types

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets

rng = np.random.default_rng(7)


def tvm_ns():
    alias = types.ModuleType("tvm.script.tir")
    alias.__tvmscript_namespace__ = True
    return alias


def round_trip(f):
    g = T.parse(str(f))
    assert T.structural_equal(f, g) and str(g) == str(f), f"no round trip:\n{f}"
    return f


MARKED = '''
def f(A: T.Buffer((4, 16), "float32"), B: T.Buffer((4, 16), "float32")):
    for i, j in T.grid(4, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi, 0:16])
            T.writes(B[vi, vj])
            T.evaluate(A.access_ptr("r", offset=vi * 16, extent=16))
            B[vi, vj] = A[vi, vj] * T.float32(3)
'''


def test_access_ptr_of_a_flat_range_is_a_pointer_op_that_round_trips_and_runs():
    f = round_trip(T.parse(MARKED))
    ptr = f.body.block.body.body.body.block.body.seq[0].value
    assert ptr.op == "access_ptr" and ptr.dtype == "handle"
    assert str(ptr) == 'T.tvm_access_ptr(T.type_annotation("float32"), A.data, vi * 16, 16, 1)'
    a = rng.standard_normal((4, 16)).astype("float32")
    b = np.zeros_like(a)
    T.interpret(f, a, b)                       # evaluating a pointer does nothing
    np.testing.assert_allclose(b, a * 3)
    b[:] = 0
    targets.build(f, "llvm")(a, b)
    np.testing.assert_allclose(b, a * 3)


def test_tvm_access_ptr_spelling_with_integer_masks():
    src = ('def f(A: T.Buffer((8, 8), "float16")):\n'
           '    T.evaluate(T.tvm_access_ptr(T.type_annotation(dtype="float16"), A.data, 8, 16, '
           '3, dtype="handle"))\n')
    f = round_trip(T.parse(src))
    assert f.body.value.args[3].value == "rw"


def test_pointer_inside_an_extern_call_and_string_arguments():
    src = ('def f(A: T.Buffer((32, 16), "float16"), B: T.Buffer((32, 16), "float16")):\n'
           '    T.evaluate(T.tvm_load_matrix_sync(B.data, 16, 16, 16, 0, T.tvm_access_ptr('
           'T.type_annotation(dtype="float16"), A.data, 256, 256, 1, dtype="handle"), 16, '
           '"row_major", dtype="handle"))\n')
    f = round_trip(T.parse(src))
    args = f.body.value.args
    assert args[7].op == "access_ptr" and args[9].value == "row_major"
    # a box of a buffer is still passed as its region (Cuvil's form of memory)
    g = T.parse('def g(A: T.Buffer((64,), "float32")):\n'
                '    T.evaluate(T.call_extern("fill", A.access_ptr("w", offset=8, extent=4), '
                'dtype="int32"))\n')
    assert str(g.body.value.args[2]) == "A[8:12]"


@pytest.mark.parametrize("call,message", [
    ('T.tvm_access_ptr(T.type_annotation(dtype="int8"), A.data, 0, 4, 1)',
     r"the type annotation int8 differs from A's dtype float32"),
    ('T.tvm_access_ptr(T.type_annotation(dtype="float32"), A[0, 0:4], 0, 4, 1)',
     r"expected a buffer's data \(A.data\) second"),
    ('T.tvm_access_ptr(T.type_annotation(dtype="float32"), A.data, 0, 4, 5)',
     r"the access mask is 'r', 'w' or 'rw' \(TVMScript: 1, 2 or 3\), found 5"),
    ('A.access_ptr("x", offset=4)', r"access_ptr: the access mask is 'r', 'w' or 'rw', "
                                    r"found 'x'"),
    ('T.tvm_access_ptr("float32", A.data, 0, 4, 1)',
     r"expected T.type_annotation\(dtype\) first"),
])
def test_access_ptr_errors(call, message):
    with pytest.raises(T.ParseError, match=message):
        T.parse(f'def f(A: T.Buffer((4, 4), "float32")):\n    T.evaluate({call})\n')


INLINE = '''
def f(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    B = T.alloc_buffer((8, 8))
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(8, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(B[0:8, 0:8])
            T.writes(C[vi, vj])
            T.evaluate(B.access_ptr("r", extent=8))
            C[vi, vj] = B[vi, vj] + T.float32(1)
'''


def test_inlining_a_buffer_handed_to_a_call_is_refused():
    f = T.parse(INLINE)
    with pytest.raises(S.ScheduleError, match=r"compute_inline: buffer 'B' is accessed "
                                               r"opaquely in block 'C' .*a call receives "
                                               r"its memory"):
        S.Schedule(f).compute_inline("B")
    # the consumer is a plain store; another block hands B to a call
    plain = INLINE.replace('            T.evaluate(B.access_ptr("r", extent=8))\n', "")
    g = T.parse(plain.replace("T.reads(B[0:8, 0:8])", "T.reads(B[vi, vj])") +
                '    with T.block("D"):\n        T.reads(B[0:8, 0:8])\n        T.writes()\n'
                '        T.evaluate(B.access_ptr("r", extent=8))\n')
    with pytest.raises(S.ScheduleError, match=r"reverse_compute_inline: buffer 'B' is "
                                               r"accessed opaquely in block 'D'"):
        S.Schedule(g).reverse_compute_inline("C")


CACHED = '''
def f(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[0:8, 0:8])
            T.writes(C[vi, vj])
            T.evaluate(A.access_ptr("MASK", offset=vi * 8, extent=8))
            C[vi, vj] = A[vi, vj] + T.float32(1)
'''


def test_cache_read_retargets_a_read_pointer_and_refuses_a_written_one():
    sch = S.Schedule(T.parse(CACHED.replace("MASK", "r")))
    sch.cache_read("C", 0, "global")
    g = round_trip(sch.func)
    assert "A_global.data, vi * 8, 8, 1)" in str(g)
    a, c = rng.standard_normal((8, 8)).astype("float32"), np.zeros((8, 8), "float32")
    T.interpret(g, a, c)
    np.testing.assert_allclose(c, a + 1)
    # a call writing through the pointer would write the cache, not A
    with pytest.raises(T.LoweringError, match=r"receives A's memory, and A_global, which "
                                              r"would replace it, would not see the writes"):
        S.Schedule(T.parse(CACHED.replace("MASK", "rw"))).cache_read("C", 0, "global")


STORES = '''
def f(A: T.Buffer((6,), "float32"), H: T.Buffer((6,), "float16"), I: T.Buffer((6,), "int64")):
    for i in range(6):
        with T.block("s"):
            vi = T.axis.S(6, i)
            A[vi] = vi
            H[vi] = A[vi] * T.float32(1.5)
            I[vi] = vi
'''


def test_tvm_namespace_stores_convert_where_every_value_converts():
    f = T.parse(STORES, env={"T": tvm_ns()})
    text = str(f)
    assert 'A[vi] = T.Cast("float32", vi)' in text and 'T.Cast("int64", vi)' in text
    round_trip(f)                                      # the casts are explicit
    a, h, n = np.zeros(6, "float32"), np.zeros(6, "float16"), np.zeros(6, "int64")
    T.interpret(f, a, h, n)
    np.testing.assert_array_equal(a, np.arange(6, dtype="float32"))
    np.testing.assert_array_equal(h, (np.arange(6) * 1.5).astype("float16"))
    np.testing.assert_array_equal(n, np.arange(6))
    # Cuvil's own dialect asks for the cast
    with pytest.raises(T.ParseError, match=r"store to A: expected a value of dtype float32, "
                                           r"found int32"):
        T.parse(STORES)


@pytest.mark.parametrize("store,message", [
    ("I[0] = T.float32(2.5)", r"store to I: TVM would convert the float32 value to int32"),
    ("J[0] = I[0]", r"store to J: TVM would convert the int32 value to int8"),
])
def test_tvm_namespace_refuses_conversions_not_defined_for_every_value(store, message):
    src = ('def f(I: T.Buffer((2,), "int32"), J: T.Buffer((2,), "int8")):\n'
           f'    {store}\n')
    with pytest.raises(T.ParseError, match=message):
        T.parse(src, env={"T": tvm_ns()})


LAUNCH = '''
def f(A: T.Buffer((2048,), "float32"), B: T.Buffer((2048,), "float32"), n: T.int32):
    with T.launch_thread("threadIdx.x", 256) as tx:
        bx = T.launch_thread("blockIdx.x", T.ceildiv(n, 256))
        i: T.int32 = bx * 256 + tx
        if i < n:
            B[i] = A[i] + T.float32(1)
'''


def test_launch_thread_reads_as_thread_bound_loops():
    f = round_trip(T.parse(LAUNCH))
    outer = f.body
    assert (outer.kind, outer.thread_tag, int(outer.extent)) == ("thread_binding",
                                                                 "threadIdx.x", 256)
    inner = outer.body
    assert inner.thread_tag == "blockIdx.x" and str(inner.extent) == "(n + 255) // 256"
    a, b = rng.standard_normal(2048).astype("float32"), np.zeros(2048, "float32")
    T.interpret(f, a, b, 1000)                  # the interpreter runs thread loops
    np.testing.assert_allclose(b[:1000], a[:1000] + 1)
    assert not b[1000:].any()
    with pytest.raises(T.CodegenError, match="thread bindings need a GPU target"):
        targets.build(f, "llvm")


@pytest.mark.parametrize("src,message", [
    ('    with T.launch_thread(256) as tx:\n        pass\n',
     r"T.launch_thread expects \(thread tag, extent\)"),
    ('    x = T.ceildiv(n, n)\n    A[0] = T.Cast("float32", x)\n',
     r"T.ceildiv: the divisor must be a positive integer constant, found n"),
])
def test_launch_thread_and_ceildiv_errors(src, message):
    with pytest.raises(T.ParseError, match=message):
        T.parse('def f(A: T.Buffer((4,), "float32"), n: T.int32):\n' + src)


ASSUMED = '''
def f(A: T.Buffer((4, 4), "int32"), B: T.Buffer((14,), "int32")):
    for i, j in T.grid(4, 4):
        with T.block("assumption"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.evaluate(T.assume(not (vi == 3 and 2 <= vj) or A[vi, vj] == 42))
    for i in T.serial(14):
        with T.block("copy"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi // 4, vi % 4]
'''


def test_assume_is_a_hint_with_no_run_time_effect():
    f = round_trip(T.parse(ASSUMED))
    hint = f.body.block.body.seq[0].body.body.block.body.value
    assert (hint.op, hint.dtype) == ("assume", "bool")
    # the assumption is false here (A[3, 2] is 14): nothing checks or relies on it
    a = np.arange(16, dtype="int32").reshape(4, 4)
    for run in (lambda b: T.interpret(f, a, b), lambda b: targets.build(f, "llvm")(a, b),
                lambda b: targets.build(f, "c")(a, b)):
        b = np.zeros(14, "int32")
        run(b)
        np.testing.assert_array_equal(b, np.arange(14))
    with pytest.raises(T.ParseError, match=r"T.assume: expected a bool condition, found "
                                           r"int32; compare first"):
        T.parse('def g(A: T.Buffer((4,), "int32")):\n    T.evaluate(T.assume(A[0]))\n')


def _qmul_reference(x: int, y: int, q: int, s: int) -> int:
    """TVM's lowering of q_multiply_shift, on Python ints, wrapped to int32."""
    if y == 1 << 30:
        if s > 1:
            v = x << (s - 1)
        else:
            e = 1 - s
            t = (x + (1 << (e - 1)) + 2 ** 31) % 2 ** 32 - 2 ** 31   # the 32-bit sum
            v = t >> e
    else:
        ls, total = max(s, 0), max(-s, 0) + q
        v = ((x << ls) * y + (1 << (total - 1))) >> total
    return (v + 2 ** 31) % 2 ** 32 - 2 ** 31


@pytest.mark.parametrize("y,q,s", [(1457846997, 31, 0), (2101000910, 31, 0),
                                   (1234567890, 31, 2), (1073741823, 31, -5),
                                   (1 << 30, 31, 3), (1 << 30, 31, 0), (1 << 30, 31, -4)])
def test_q_multiply_shift_is_exact_on_every_backend(y, q, s):
    f = round_trip(T.parse(
        'def f(A: T.Buffer((64,), "int32"), B: T.Buffer((64,), "int32")):\n'
        '    for i in range(64):\n'
        f'        B[i] = T.q_multiply_shift(A[i], {y}, {q}, {s}, dtype="int32")\n'))
    a = rng.integers(-2 ** 31, 2 ** 31, 64, dtype=np.int64).astype("int32")
    a[:4] = [0, 1, -1, 2 ** 31 - 1]
    want = np.array([_qmul_reference(int(x), y, q, s) for x in a], "int32")
    for run in (lambda b: T.interpret(f, a, b), lambda b: targets.build(f, "llvm")(a, b),
                lambda b: targets.build(f, "c")(a, b)):
        b = np.zeros(64, "int32")
        run(b)
        np.testing.assert_array_equal(b, want)


@pytest.mark.parametrize("args,message", [
    ("A[0], A[1], 31, 0", r"the multiplier y, q and the shift s must be int32 constants"),
    ("A[0], 1073741824, 31, 1", r"TVM's lowering shifts by s - 1, which must be nonzero"),
    ("A[0], 3, 31, -40", r"right by max\(-s, 0\) \+ q in \[1, 62\]; other shifts are "
                         r"undefined"),
])
def test_q_multiply_shift_refuses_undefined_shifts(args, message):
    with pytest.raises(T.ParseError, match=message):
        T.parse('def f(A: T.Buffer((4,), "int32")):\n'
                f'    A[0] = T.q_multiply_shift({args}, dtype="int32")\n')


def _qmul_axis_reference(x, y, ls, rs, q, lshift):
    """TVM's lowering of q_multiply_shift_per_axis, on Python ints, wrapped to int32
    (shift amounts here stay inside [0, 64))."""
    v = (x << ls) if lshift else x
    total = rs + q
    v = (v * y + (1 << (total - 1))) >> total
    return (v + 2 ** 31) % 2 ** 32 - 2 ** 31


@pytest.mark.parametrize("lshift", [True, False])
def test_q_multiply_shift_per_axis_is_exact_on_every_backend(lshift):
    flags = f"{lshift}, {not lshift}"
    f = round_trip(T.parse(
        'def f(X: T.Buffer((64,), "int32"), Y: T.Buffer((64,), "int32"),\n'
        '      L: T.Buffer((64,), "int32"), R: T.Buffer((64,), "int32"),\n'
        '      B: T.Buffer((64,), "int32")):\n'
        '    for i in range(64):\n'
        f'        B[i] = T.q_multiply_shift_per_axis(X[i], Y[i], L[i], R[i], 31, {flags},\n'
        '                                           dtype="int32")\n'))
    x = rng.integers(-2 ** 24, 2 ** 24, 64, dtype=np.int64).astype("int32")
    y = rng.integers(2 ** 29, 2 ** 31 - 1, 64, dtype=np.int64).astype("int32")
    ls = rng.integers(0, 7, 64, dtype=np.int64).astype("int32")
    rs = rng.integers(0, 7, 64, dtype=np.int64).astype("int32")
    want = np.array([_qmul_axis_reference(*map(int, v), 31, lshift)
                     for v in zip(x, y, ls, rs)], "int32")
    for run in (lambda b: T.interpret(f, x, y, ls, rs, b),
                lambda b: targets.build(f, "llvm")(x, y, ls, rs, b),
                lambda b: targets.build(f, "c")(x, y, ls, rs, b)):
        b = np.zeros(64, "int32")
        run(b)
        np.testing.assert_array_equal(b, want)


@pytest.mark.parametrize("args,message", [
    ("A[0], A[1], A[2], A[3], A[0], False, True", r"q must be an int constant in \[1, 62\]"),
    ("A[0], A[1], A[2], A[3], 31, A[0] < 1, True", r"is_lshift_required must be a bool "
                                                   r"constant"),
    ("A[0], A[1], A[2], A[3], 0, False, True", r"q must be an int constant in \[1, 62\], "
                                               r"found 0"),
])
def test_q_multiply_shift_per_axis_errors(args, message):
    with pytest.raises(T.ParseError, match=message):
        T.parse('def f(A: T.Buffer((4,), "int32")):\n'
                f'    A[0] = T.q_multiply_shift_per_axis({args}, dtype="int32")\n')


def test_a_void_extern_call_reads_as_a_handle_call():
    # TVMScript's dtype="" is a call whose result is not used
    f = round_trip(T.parse('def f(A: T.Buffer((64,), "int32")):\n'
                           '    T.evaluate(T.call_extern("call_impl", A.data, dtype=""))\n'))
    call = f.body.value
    assert (call.dtype, call.args[0].value) == ("handle", "call_impl")
