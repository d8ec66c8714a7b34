"""The bitwise integer ops on every backend: llvm (scalar and vector lanes), C and CUDA
(compiled by nvcc; its lowered IR interpreted) agree with the interpreter, including
shift amounts outside [0, bits), which C and LLVM leave undefined."""

import re

import numpy as np

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir import dtype as D
from tests.cuvil_tir.test_bitwise import BINARY, DTYPES, reference
from tests.targets.cuda_helpers import compile_all

OPS = BINARY + ["bitwise_not"]
N = 16


def _amounts(dt):
    lo, hi = D.int_range(dt)
    edge = [-3, -1, 0, 1, 2, D.bits(dt) - 1, D.bits(dt), D.bits(dt) + 1, 40, 63, 64, 7,
            5, 3, 1, 0]
    return np.array([min(max(v, lo), hi) for v in edge], dt)


def _values(dt, seed):
    lo, hi = D.int_range(dt)
    rng = np.random.default_rng(seed)
    v = rng.integers(lo, hi, size=N, dtype=dt, endpoint=True)
    v[:3] = [lo, hi, 0 if lo == 0 else -1]
    return v


def _kernel(dtypes, kind="serial"):
    """One function: for each dtype, inputs A, B and one output per op."""
    params, stores = [], []
    i = T.var("i")
    for dt in dtypes:
        A, B = T.decl_buffer((N,), dt, f"A_{dt}"), T.decl_buffer((N,), dt, f"B_{dt}")
        outs = [T.decl_buffer((N,), dt, f"{op}_{dt}") for op in OPS]
        params += [A, B, *outs]
        for op, o in zip(OPS, outs):
            val = T.bitwise_not(A[i]) if op == "bitwise_not" else getattr(T, op)(A[i], B[i])
            stores.append(T.BufferStore(o, val, (i,)))
    return T.PrimFunc(tuple(params), T.For(i, T.const(0), T.const(N), kind, T.seq(*stores)))


def _arrays(dtypes):
    out = []
    for k, dt in enumerate(dtypes):
        out += [_values(dt, k), _amounts(dt)] + [np.zeros(N, dt) for _ in OPS]
    return out


def _check(dtypes, arrays):
    for k, dt in enumerate(dtypes):
        a, b, *outs = arrays[k * (2 + len(OPS)):(k + 1) * (2 + len(OPS))]
        for op, got in zip(OPS, outs):
            want = [reference(op, int(x), int(y), dt) for x, y in zip(a, b)]
            assert got.tolist() == want, (op, dt, got.tolist(), want)


def test_llvm_and_c_match_the_definitions_for_every_integer_dtype():
    f = _kernel(DTYPES)
    for target in ("llvm", "c"):
        arrays = _arrays(DTYPES)
        targets.build(f, target)(*arrays)
        _check(DTYPES, arrays)


def test_vector_lanes_on_llvm():
    dtypes = ["int32", "uint8", "int64"]
    mod = targets.build(_kernel(dtypes, "vectorized"), "llvm")
    ll = mod.get_source("ll")
    # the lane count is the target's vector width: any, as long as it is a vector
    for inst in (r"shl <\d+ x i32>", r"lshr <\d+ x i8>", r"ashr <\d+ x i64>"):
        assert re.search(inst, ll), inst
    arrays = _arrays(dtypes)
    mod(*arrays)
    _check(dtypes, arrays)


def test_cuda_kernel_compiles_and_its_lowered_ir_is_exact():
    # int4 weights unpacked as a quantized GEMM's prologue does it
    src = '''@T.prim_func
def unpack(W: T.Buffer((4,), "int32"), S: T.Buffer((32,), "int32"),
           Q: T.Buffer((32,), "float32"), P: T.Buffer((32,), "int32")):
    for t in T.thread_binding(32, thread="threadIdx.x"):
        Q[t] = T.Cast("float32", T.shift_right(T.shift_left(T.bitwise_and(
            T.shift_right(W[t // 8], t % 8 * 4), 15), 28), 28))
        P[t] = T.bitwise_xor(T.shift_left(W[0], S[t]), T.bitwise_not(T.shift_right(W[1], S[t])))
'''
    mod = targets.build(T.parse(src), targets.Target("cuda"), name="unpack")
    cu = mod.get_source("cuda")
    assert "cvl_shift_right_int32" in cu and "__device__" in cu
    assert ".entry unpack_kernel0(" in compile_all([mod])["sm_80"]
    w = np.array([0x89ABCDEF - 2**32, 0x01234567, -7, 12345], "int32")
    s = np.resize(_amounts("int32"), 32)
    q, p = np.zeros(32, "float32"), np.zeros(32, "int32")
    T.interpret(mod.lowered, w, s, q, p)
    nib = [(int(w[t // 8]) >> (t % 8 * 4)) & 15 for t in range(32)]
    assert q.tolist() == [float(v - 16 if v > 7 else v) for v in nib]
    assert p.tolist() == [reference("bitwise_xor", reference("shift_left", int(w[0]), int(a),
                                                             "int32"),
                                    ~reference("shift_right", int(w[1]), int(a), "int32"),
                                    "int32") for a in s]


def test_constant_vector_shift_amounts_need_no_guard():
    # a word's 8 nibbles shifted by the constant lanes (0, 4, ..., 28): in range, so
    # the vector shift is emitted bare (variable amounts are selected against their
    # out-of-range value, test_vector_lanes_on_llvm)
    W = T.placeholder((8,), "int32", name="W")
    Q = T.compute((8, 8), lambda w, k: ((W[w] >> (k * 4)) & 15) - 8, name="Q")
    sch = S.Schedule(T.create_prim_func([W, Q]))
    sch.vectorize(sch.get_loops(sch.get_block("Q"))[1])
    mod = targets.build(sch, "llvm")
    ll = mod.get_source("ll")
    # lanes: the target's vector width (4, 8 or more), whatever the CPU
    assert re.search(r"ashr <\d+ x i32>", ll)
    assert not re.search(r"icmp ult <\d+ x i32> %\w+, <i32 32", ll)
    w = np.random.default_rng(2).integers(-2**31, 2**31 - 1, 8, dtype="int32")
    q = np.zeros((8, 8), "int32")
    mod(w, q)
    assert q.tolist() == [[((int(x) >> (4 * k)) & 15) - 8 for k in range(8)] for x in w]
