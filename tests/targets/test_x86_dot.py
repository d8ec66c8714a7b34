"""The x86 dot-product instructions as tensor intrinsics: AVX512-VNNI / AVX-VNNI
``vpdpbusd`` (int8) and AVX512-BF16 ``vdpbf16ps``, chosen from the target's mcpu/mattr
(never the host), checked in the assembly, exact for int8 against numpy and within
bfloat16 tolerance, and refused with coded errors where the target or host lacks them.
"""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir.errors import DTypeError, HostFeatureError, ScheduleError, TargetError
from cuvil_tir.interp import interpret
from cuvil_tir.ops.dot import dpbf16ps, dpbf16ps_reference, dpbusd, dpbusd_reference
from cuvil_tir.tensor_intrin import TensorIntrin
from schedules.intrinsics.x86 import dot_intrin, intrin_name
from targets.llvm.cpu import isa_features, missing_host_features
from targets.toolkit.cpu_recipes import bf16_gemm, dot_gemm, int8_gemm

RNG = np.random.default_rng(7)


def _target(cpu: str, mattr: str = ""):
    return targets.Target("llvm", mcpu=cpu, **({"mattr": mattr} if mattr else {}))


def _bf16_bits(x):
    u = np.ascontiguousarray(x, "float32").view("uint32").astype("uint64")
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("uint16")


def _bf16_value(bits):
    return (bits.astype("uint32") << 16).view("float32").astype("float64")


def _int8(shape, signed=True):
    lo, hi = (-128, 128) if signed else (0, 256)
    x = RNG.integers(lo, hi, shape, dtype="int8" if signed else "uint8")
    x.flat[:2] = (lo, hi - 1)          # the extremes, where an offset would wrap
    return x


# -- the target's features, never the host's ------------------------------------------

@pytest.mark.parametrize("cpu, vnni512, avxvnni, bf16", [
    ("znver4", True, False, True),
    ("sapphirerapids", True, True, True),
    ("icelake-server", True, False, False),
    ("alderlake", False, True, False),
    ("znver3", False, False, False),
    ("x86-64", False, False, False),
])
def test_isa_features_come_from_mcpu(cpu, vnni512, avxvnni, bf16):
    have = _target(cpu).kind_obj.machine(_target(cpu)).features
    assert ("+avx512vnni" in have, "+avxvnni" in have, "+avx512bf16" in have) == \
        (vnni512, avxvnni, bf16)
    names = TensorIntrin.available_names(_target(cpu))
    assert ("x86.vnni_16x4_s8s8" in names) == vnni512
    assert ("x86.vnni_8x4_u8s8" in names) == (vnni512 or avxvnni)
    assert ("x86.bf16_16x2" in names) == bf16


def test_mattr_turns_the_extension_off_and_on():
    assert "avx512vnni" not in isa_features("znver4", "-avx512vnni")
    assert not TensorIntrin.get("x86.vnni_16x4_u8s8").available(
        _target("znver4", "-avx512vnni"))
    assert TensorIntrin.get("x86.vnni_8x4_u8s8").available(_target("znver3", "+avxvnni"))


# -- the instructions in the assembly --------------------------------------------------

@pytest.mark.parametrize("cpu, signed, N, pattern", [
    ("znver4", True, 32, r"^\s*vpdpbusd\s+%zmm"),
    ("sapphirerapids", False, 32, r"^\s*vpdpbusd\s+%zmm"),
    ("icelake-server", False, 8, r"^\s*vpdpbusd\s+%ymm"),     # EVEX, 256-bit (VL)
    ("alderlake", True, 32, r"\{vex\}\s*vpdpbusd\s+%ymm"),    # AVX-VNNI
])
def test_int8_gemm_emits_vpdpbusd(cpu, signed, N, pattern):
    t = _target(cpu)
    asm = targets.build(int8_gemm(8, N, 16, t, signed), t).get_source("asm")
    assert re.search(pattern, asm, re.M), asm[:2000]
    assert "zmm" not in asm if cpu == "alderlake" else True


@pytest.mark.parametrize("cpu", ["znver4", "sapphirerapids", "cooperlake"])
def test_bf16_gemm_emits_vdpbf16ps(cpu):
    t = _target(cpu)
    asm = targets.build(bf16_gemm(8, 32, 16, t), t).get_source("asm")
    assert re.search(r"^\s*vdpbf16ps\s+%zmm", asm, re.M)


# -- refusals with coded errors --------------------------------------------------------

@pytest.mark.parametrize("cpu, make, missing", [
    ("x86-64", lambda t: int8_gemm(8, 32, 16, t), "avxvnni, or avx512vnni with avx512vl"),
    ("znver3", lambda t: int8_gemm(8, 32, 16, t, False), "avxvnni"),
    ("icelake-server", lambda t: bf16_gemm(8, 32, 16, t), "avx512bf16"),
    ("alderlake", lambda t: bf16_gemm(8, 32, 16, t), "avx512bf16"),
])
def test_schedule_refused_without_the_extension(cpu, make, missing):
    with pytest.raises(TargetError, match=f"CVL-E106.*needs {re.escape(missing)}"):
        make(_target(cpu))


def test_codegen_refuses_the_op_before_llvm_aborts():
    impl = TensorIntrin.get("x86.vnni_16x4_u8s8").impl
    with pytest.raises(TargetError, match=r"x86.dpbusd \(vpdpbusd, 512-bit\) needs "
                       r"avx512vnni; mcpu='haswell' has none of them.*mattr='\+avx512vnni'"):
        targets.build(impl, _target("haswell"))


def test_c_target_does_not_offer_them():
    why = TensorIntrin.get("x86.vnni_16x4_u8s8").missing("c")
    assert why == "uses x86.dpbusd, which the c backend does not write"
    assert "x86.bf16_16x2" not in TensorIntrin.available_names("c")


def test_module_for_features_the_host_lacks_is_refused():
    t = _target("alderlake")          # AVX-VNNI's VEX form: not on AVX-512 Zen 4
    mod = targets.build(int8_gemm(8, 32, 16, t, False), t)
    a, b, c = _int8((8, 16), False), _int8((16, 32)), np.zeros((8, 32), "int32")
    if "avxvnni" in missing_host_features(t):
        with pytest.raises(HostFeatureError, match="CVL-E240.*lacks: .*\\+avxvnni"):
            mod(a, b, c)
    else:
        mod(a, b, c)
        np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))


def test_dot_op_checks_dtypes():
    acc = T.decl_buffer((16,), "int32", "acc")
    a = T.decl_buffer((64,), "int8", "a")      # vpdpbusd reads A unsigned
    ramp = T.Ramp(T.const(0), T.const(1), 16)
    with pytest.raises(DTypeError, match=r"x86.dpbusd\(acc, a, b\): expected acc int32xL, "
                       r"a uint8x4 .* found int32x16, int8x64, int8x64"):
        dpbusd(acc[ramp], a[T.Ramp(T.const(0), T.const(1), 64)],
               a[T.Ramp(T.const(0), T.const(1), 64)])


@pytest.mark.parametrize("requires", [3, ("avx512vnni", ("avxvnni",)), ((),)])
def test_register_rejects_bad_requires(requires):
    desc, impl = dot_intrin("u8s8")
    with pytest.raises(ScheduleError, match="requires must be extension names"):
        TensorIntrin.register("test.bad_requires", desc, impl, requires=requires)


@pytest.mark.parametrize("M, N, K, dtype, match", [
    (8, 32, 6, "int8", "K = 6 is not a multiple of 4"),
    (8, 12, 16, "int8", "N = 12 is not a multiple of 8"),
    (8, 32, 16, "float32", "expected A uint8 or int8 with B int8"),
])
def test_dot_gemm_shape_errors(M, N, K, dtype, match):
    A = T.placeholder((M, K), dtype, name="A")
    B = T.placeholder((K, N), "int8" if dtype != "float32" else dtype, name="B")
    k = T.reduce_axis((0, K), name="k")
    acc = "int32" if dtype != "float32" else dtype
    C = T.compute((M, N), lambda i, j: T.sum(A[i, k].astype(acc) * B[k, j].astype(acc),
                                             axis=k), name="C")
    with pytest.raises(T.CuvilError, match=match):
        dot_gemm(S.Schedule(T.create_prim_func([A, B, C])), "C", _target("znver4"))


# -- numerics ----------------------------------------------------------------------------

@pytest.mark.parametrize("signed, K, offset", [(True, 16, True), (True, 12, True),
                                               (True, 16, False), (True, 12, False),
                                               (False, 16, True)])
def test_int8_gemm_exact_in_the_interpreter(signed, K, offset):
    """7 rows: a partial row tile; K = 12: one group of 4 per step; without the offset
    the s8s8 steps subtract their compensation."""
    a, b = _int8((7, K), signed), _int8((K, 32))
    c = np.zeros((7, 32), "int32")
    sch = int8_gemm(7, 32, K, _target("znver4"), signed, offset=offset)
    interpret(sch.func, a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))


@pytest.mark.parametrize("signed", [True, False])
def test_int8_gemm_text_parses_back_and_computes(signed):
    """The printed IR of a dot-product GEMM parses back (the namespaced op prints as
    T.call_intrin: it printed as T.x86.dpbusd, which the parser refused with
    CVL-E108 'unknown name T.x86'), to the same text and the same numbers."""
    func = int8_gemm(7, 32, 16, _target("znver4"), signed).func
    text = func.script()
    assert "T.x86." not in text and '"x86.dpbusd"' in text
    again = T.parse(text)
    assert again.script() == text
    a, b = _int8((7, 16), signed), _int8((16, 32))
    c = np.zeros((7, 32), "int32")
    interpret(again, a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))


def test_bf16_gemm_text_parses_back():
    text = bf16_gemm(9, 32, 64, _target("znver4")).func.script()
    assert '"x86.dpbf16ps"' in text and T.parse(text).script() == text


@pytest.mark.parametrize("signed, offset", [(True, True), (True, False), (False, True)])
def test_int8_gemm_exact_compiled(signed, offset):
    t = _target("znver4")
    M, N, K = 13, 48, 64
    mod = targets.build(int8_gemm(M, N, K, t, signed, offset=offset), t)
    a, b, c = _int8((M, K), signed), _int8((K, N)), np.zeros((M, N), "int32")
    if missing_host_features(t):
        with pytest.raises(HostFeatureError):
            mod(a, b, c)
        return
    a[:] = -128 if signed else 255         # the largest sums the offset route makes
    b[:] = -128
    mod(a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))
    a, b = _int8((M, K), signed), _int8((K, N))
    mod(a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))


def test_bf16_gemm_within_tolerance():
    t = _target("znver4")
    M, N, K = 9, 32, 64
    a = _bf16_bits(RNG.standard_normal((M, K)).astype("float32"))
    b = _bf16_bits(RNG.standard_normal((K, N)).astype("float32"))
    want = _bf16_value(a) @ _bf16_value(b)
    bound = 2 * K * 2.0 ** -24 * (np.abs(_bf16_value(a)) @ np.abs(_bf16_value(b)))
    c = np.zeros((M, N), "float32")
    interpret(bf16_gemm(M, N, K, t).func, a, b, c)
    assert np.all(np.abs(c - want) <= bound)
    mod = targets.build(bf16_gemm(M, N, K, t), t)
    if missing_host_features(t):
        with pytest.raises(HostFeatureError):
            mod(a, b, c)
        return
    c[:] = 0
    mod(a, b, c)
    assert np.all(np.abs(c - want) <= bound)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["u8s8", "s8s8"]), st.integers(0, 2 ** 32 - 1))
def test_vnni_impl_equals_desc(kind, seed):
    """The impl (for s8s8: the +128 offset and its compensation) computes exactly what
    the desc says, for any bytes, in the interpreter."""
    rng = np.random.default_rng(seed)
    desc, impl = dot_intrin(kind, 16, 4)
    a = rng.integers(-128, 128, 16, dtype="int8") if kind == "s8s8" else \
        rng.integers(0, 256, 16, dtype="uint8")
    b = rng.integers(-128, 128, (1, 4, 64), dtype="int8")
    acc = rng.integers(-2 ** 20, 2 ** 20, 16, dtype="int32")
    out = [acc.copy(), acc.copy()]
    interpret(desc, a, b, out[0])
    interpret(impl, a, b, out[1])
    np.testing.assert_array_equal(out[0], out[1])


def test_dpbusd_reference_wraps_like_the_instruction():
    acc = np.array([2 ** 31 - 1], "int32")
    got = dpbusd_reference(acc, np.array([255, 0, 0, 0]), np.array([1, 0, 0, 0]))
    assert got.tolist() == [-(2 ** 31) + 254]


def test_dpbf16ps_reference_matches_the_instruction_bit_for_bit():
    """The interpreter's semantics of vdpbf16ps (pair order, one rounding per step,
    denormals flushed) against the CPU, where this host has AVX512-BF16."""
    t = _target("znver4")
    n = 4096
    a = _bf16_bits(RNG.standard_normal(2 * n).astype("float32") * 2.0 ** RNG.integers(
        -130, 10, 2 * n))
    b = _bf16_bits(RNG.standard_normal(2 * n).astype("float32"))
    acc = (RNG.standard_normal(n) * 2.0 ** RNG.integers(-130, 10, n)).astype("float32")
    A = T.decl_buffer((2 * n,), "bfloat16", "A")
    B = T.decl_buffer((2 * n,), "bfloat16", "B")
    C = T.decl_buffer((n,), "float32", "C")
    i = T.var("i")
    body = T.For(i, T.const(0), T.const(n // 16), "serial", T.BufferStore(
        C, dpbf16ps(C[T.Ramp(i * 16, T.const(1), 16)],
                              A[T.Ramp(i * 32, T.const(1), 32)],
                              B[T.Ramp(i * 32, T.const(1), 32)]),
        (T.Ramp(i * 16, T.const(1), 16),)))
    func = T.PrimFunc([A, B, C], body, {"global_symbol": "dp"})
    want = dpbf16ps_reference(acc, _bf16_value(a).astype("float32"),
                              _bf16_value(b).astype("float32"))
    c = acc.copy()
    interpret(func, a, b, c)
    np.testing.assert_array_equal(c.view("uint32"), want.view("uint32"))
    mod = targets.build(func, t)
    c = acc.copy()
    if missing_host_features(t):
        with pytest.raises(HostFeatureError):
            mod(a, b, c)
        return
    mod(a, b, c)
    np.testing.assert_array_equal(c.view("uint32"), want.view("uint32"))


def test_intrinsic_names():
    assert intrin_name("u8s8", 8) == "x86.vnni_8x4_u8s8"
    assert TensorIntrin.get("x86.bf16_8x2").requires == (("avx512bf16", "avx512vl"),)
