"""The llvm target sizes code for the CPU it names, never silently for the host."""

import subprocess
import sys

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from targets.llvm import cpu_info, host_vector_bits


def _vectorized(n=64):
    A = T.placeholder((n,), name="A")
    B = T.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    sch = S.Schedule(T.create_prim_func([A, B]))
    sch.vectorize(sch.get_loops(sch.get_block("B"))[0])
    return sch


@pytest.mark.parametrize("mcpu, bits, regs, lanes", [
    ("x86-64", 128, 16, 4), ("haswell", 256, 16, 8), ("znver3", 256, 16, 8),
    ("skylake-avx512", 512, 32, 16), ("icelake-server", 512, 32, 16)])
def test_cpu_info_of_pinned_targets(mcpu, bits, regs, lanes):
    info = cpu_info(targets.Target("llvm", mcpu=mcpu))
    assert (info.name, info.vector_bits, info.vector_registers) == (mcpu, bits, regs)
    assert info.lanes("float32") == lanes and info.lanes("int8") == lanes * 4


def test_mattr_changes_the_width_and_options_pin_the_machine():
    t = targets.Target("llvm", mcpu="skylake-avx512", mattr="-avx512f", num_cores=3,
                       l1d_kb=48, l2_kb=2048)
    info = cpu_info(t)
    assert info.vector_bits == 256 and info.features == ("-avx512f",)
    assert (info.cores, info.l1d_bytes, info.l2_bytes) == (3, 48 << 10, 2 << 20)
    native = cpu_info(targets.Target("llvm"))
    assert native.vector_bits == host_vector_bits() and native.cores >= 1


@pytest.mark.parametrize("mcpu, lanes", [("x86-64", 4), ("haswell", 8),
                                         ("skylake-avx512", 16)])
def test_vectorizer_width_comes_from_the_target(mcpu, lanes):
    mod = targets.build(_vectorized(), targets.Target("llvm", mcpu=mcpu))
    ll = mod.get_source("ll")
    assert f"store <{lanes} x float>" in ll
    assert f"store <{lanes * 2} x float>" not in ll
    if lanes == 16:
        assert "zmm" in mod.get_source("asm")
        assert '"prefer-vector-width"="512"' in ll


def test_a_module_for_wider_vectors_than_the_host_is_refused_not_crashed():
    mod = targets.build(_vectorized(), targets.Target("llvm", mcpu="skylake-avx512"))
    a, b = np.arange(64, dtype="float32"), np.zeros(64, "float32")
    if host_vector_bits() < 512:
        with pytest.raises(targets.TargetError, match=r"compiled for mcpu='skylake-avx512' "
                                                      r"\(512-bit vectors\), which this host"):
            mod(a, b)
    else:
        mod(a, b)
        np.testing.assert_array_equal(b, a * 2 + 1)


@pytest.mark.parametrize("mcpu, match", [
    ("nosuchcpu", r"LLVM cannot compile for mcpu='nosuchcpu'.*not a recognized processor"),
    ("cortex-a53", r"LLVM cannot compile for mcpu='cortex-a53'"),
    ("i686", r"LLVM cannot compile for mcpu='i686'.*64-bit code requested"),
    ("skylake-avx51", r"close matches: skylake-avx512"),
])
def test_unknown_or_foreign_cpu_is_a_target_error_not_a_crash(mcpu, match):
    A = T.placeholder((4,), name="A")
    f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] + 1.0, name="B")])
    with pytest.raises(targets.TargetError, match=match):
        targets.build(f, f"llvm -mcpu={mcpu}")


def test_unknown_feature_is_a_target_error():
    with pytest.raises(targets.TargetError, match=r"not a recognized feature"):
        cpu_info(targets.Target("llvm", mcpu="haswell", mattr="+nosuchfeature"))


def test_bad_cpu_in_a_fresh_process_exits_cleanly():
    code = ("import cuvil_tir as T, targets\n"
            "A = T.placeholder((4,), name='A')\n"
            "f = T.create_prim_func([A, T.compute((4,), lambda i: A[i] + 1.0, name='B')])\n"
            "try:\n    targets.build(f, 'llvm -mcpu=nosuchcpu')\n"
            "except targets.TargetError as e:\n    print('refused', e.code)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "refused CVL-E106", out.stderr
    assert "LLVM ERROR" not in out.stderr
