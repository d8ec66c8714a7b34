"""The fp8 dtypes (float8_e4m3fn, float8_e5m2): their values, rounding (nearest, ties
to even, saturating, NaN kept), promotion, the interpreter, the text form, the CUDA
backend (the hardware's saturating conversion) and the CPU backends' refusal."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cuvil_tir as T
import schedules as S
import targets
from cuvil_tir import dtype as D
from cuvil_tir import float8 as F8
from cuvil_tir.parser import parse

FP8 = ("float8_e4m3fn", "float8_e5m2")


def test_the_formats_values():
    e4 = F8.decode(np.arange(256, dtype=np.uint8), "float8_e4m3fn")
    assert F8.largest("float8_e4m3fn") == 448.0 and np.nanmin(e4) == -448.0
    assert e4[1] == 2.0 ** -9 and np.isnan(e4[0x7F]) and np.isnan(e4[0xFF])
    assert np.isnan(e4).sum() == 2 and not np.isinf(e4).any()     # "fn": no infinities
    e5 = F8.decode(np.arange(256, dtype=np.uint8), "float8_e5m2")
    assert F8.largest("float8_e5m2") == 57344.0 and e5[1] == 2.0 ** -16
    assert e5[0x7C] == np.inf and e5[0xFC] == -np.inf and np.isnan(e5).sum() == 6


@pytest.mark.parametrize("dt", FP8)
def test_every_finite_code_round_trips(dt):
    codes = np.arange(256, dtype=np.uint8)
    vals = F8.decode(codes, dt)
    ok = np.isfinite(vals)
    assert (F8.encode(vals[ok], dt) == codes[ok]).all()


def test_rounding_is_to_nearest_ties_to_even_and_saturating():
    e4 = "float8_e4m3fn"
    # 1.0625 lies halfway between 1.0 (0x38, even) and 1.125 (0x39)
    assert F8.encode(1.0625, e4) == 0x38 and F8.encode(1.1875, e4) == 0x3A
    assert F8.encode(1e6, e4) == 0x7E and F8.encode(-np.inf, e4) == 0xFE
    assert F8.encode(np.inf, "float8_e5m2") == 0x7B        # satfinite: not infinity
    assert F8.encode(-0.0, e4) == 0x80 and np.isnan(F8.decode(F8.encode(np.nan, e4), e4))
    assert F8.encode(2.0 ** -10, e4) == 0x00                # half the smallest: even
    assert F8.encode(3 * 2.0 ** -11, e4) == 0x01


@settings(max_examples=200, deadline=None)
@given(st.floats(-1e5, 1e5, allow_nan=False, width=32), st.sampled_from(FP8))
def test_encode_gives_a_nearest_value(x, dt):
    got = float(F8.decode(F8.encode(x, dt), dt))
    vals = F8.decode(np.arange(256, dtype=np.uint8), dt)
    finite = vals[np.isfinite(vals)].astype(np.float64)
    best = np.abs(finite - np.clip(x, -F8.largest(dt), F8.largest(dt))).min()
    assert abs(got - np.clip(x, -F8.largest(dt), F8.largest(dt))) == best


def test_dtype_rules():
    assert D.is_float("float8_e5m2") and D.is_float8("float8_e4m3fnx4")
    assert D.bits("float8_e4m3fn") == 8 and D.to_numpy("float8_e5m2") == np.uint8
    assert D.promote("float8_e4m3fn", "float8_e5m2") == "float16"
    assert D.promote("float8_e4m3fn", "float32") == "float32"
    assert D.lanes("float8_e4m3fnx16") == 16 and D.element("float8_e5m2x4") == "float8_e5m2"


def _cast_func():
    A = T.placeholder((64,), "float8_e4m3fn", name="A")
    B = T.compute((64,), lambda i: (A[i].astype("float32") * 2.0).astype("float8_e5m2"),
                  name="B")
    C = T.compute((64,), lambda i: A[i] + A[i], name="C")
    return T.create_prim_func([A, B, C])


def _expected(a):
    x = F8.decode(a, "float8_e4m3fn").astype(np.float32)
    return F8.encode(x * 2, "float8_e5m2"), F8.encode(x + x, "float8_e4m3fn")


def test_the_interpreter_rounds_after_each_operation_and_text_round_trips():
    f = _cast_func()
    a = F8.encode(np.random.default_rng(0).standard_normal(64) * 200, "float8_e4m3fn")
    b, c = np.zeros(64, np.uint8), np.zeros(64, np.uint8)
    T.interpret(f, a, b, c)
    want_b, want_c = _expected(a)
    assert (b == want_b).all() and (c == want_c).all()
    assert F8.decode(c, "float8_e4m3fn").max() <= 448.0
    g = parse(T.to_text(f))
    b2, c2 = np.zeros(64, np.uint8), np.zeros(64, np.uint8)
    T.interpret(g, a, b2, c2)
    assert (b2 == b).all() and (c2 == c).all()
    with pytest.raises(T.DTypeError, match=r"fp8 tensors are stored as uint8 bits\), found "
                                           r"float32; encode values with cuvil_tir.float8"):
        T.interpret(f, a.astype(np.float32), b, c)


def test_the_cuda_backend_uses_the_saturating_hardware_conversion():
    from targets.cuda.nvcc import nvcc_ptx, sass
    sch = S.Schedule(_cast_func())
    for blk in ("B", "C"):
        bx, tx = sch.split(sch.get_loops(sch.get_block(blk))[0], [None, 32])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
    mod = targets.build(sch, "cuda", name="fp8_cast")
    src = mod.get_source("cuda")
    assert "#include <cuda_fp8.h>" in src and "__nv_fp8_e5m2((float)(" in src
    nvcc_ptx(src, "sm_80")
    code = sass(src, "sm_90")["fp8_cast_kernel0"]
    assert re.search(r"F2FP\.SATFINITE\.E5M2\.F32", code)
    a = F8.encode(np.linspace(-500, 500, 64), "float8_e4m3fn")
    b, c = np.zeros(64, np.uint8), np.zeros(64, np.uint8)
    T.interpret(mod.lowered, a, b, c, check_races=True)
    want_b, want_c = _expected(a)
    assert (b == want_b).all() and (c == want_c).all()


@pytest.mark.parametrize("target, message", [
    ("llvm", "llvm codegen: no LLVM type for dtype 'float8_e4m3fn'; the fp8 dtypes are "
             "compiled by the cuda target"),
    ("c", "c codegen: no C type for dtype 'float8_e4m3fn'; the fp8 dtypes are compiled by "
          "the cuda target")])
def test_cpu_backends_refuse_fp8_naming_the_cuda_target(target, message):
    with pytest.raises(T.CodegenError, match=re.escape(message)):
        targets.build(_cast_func(), target, name="fp8_cpu")
