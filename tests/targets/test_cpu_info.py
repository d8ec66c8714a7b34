"""The llvm target sizes code for the CPU it names, never silently for the host."""

import re
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


#: what a Haswell and a Zen 4 host report (the host is faked: the tests are the same
#: on any machine)
HASWELL = "+avx,+avx2,+bmi,+bmi2,+f16c,+fma,+lzcnt,+movbe,+popcnt,+sse4.1,+sse4.2,+ssse3"
ZEN4 = HASWELL + (",+avx512bf16,+avx512bitalg,+avx512bw,+avx512cd,+avx512dq,+avx512f,"
                  "+avx512vbmi,+avx512vbmi2,+avx512vl,+avx512vnni,+avx512vpopcntdq,+gfni")


def _fp16():
    sch = S.Schedule(T.create_prim_func(_fp16_tensors()))
    o, v = sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 32])
    sch.vectorize(v)
    return sch


@pytest.mark.parametrize("host, target, missing", [
    (HASWELL, dict(mcpu="skylake-avx512"),
     "+avx512bw, +avx512cd, +avx512dq, +avx512f, +avx512vl"),
    (ZEN4, dict(mcpu="sapphirerapids"), "+avx512fp16, +avxvnni"),
    (ZEN4, dict(mcpu="znver4", mattr="+avx512fp16"), "+avx512fp16"),
])
def test_running_code_for_features_the_host_lacks_is_refused_not_crashed(
        monkeypatch, host, target, missing):
    """Issue 25 F3: building and emitting for another CPU stay allowed; calling or
    timing the module refuses, naming the missing features (before: SIGILL)."""
    monkeypatch.setattr("targets.llvm.cpu.host_features", lambda: host)
    mod = targets.build(_fp16(), targets.Target("llvm", **target))
    assert "vfmadd" in mod.get_source("asm") or "vaddps" in mod.get_source("asm")
    a, c = np.ones(64, "float16"), np.zeros(64, "float16")
    for run in (lambda: mod(a, c), lambda: mod.benchmark(a, c)):
        with pytest.raises(T.HostFeatureError, match=r"built for mcpu=.*whose code may use "
                           rf"CPU features this host \(\w+\) lacks: {re.escape(missing)};"
                           r" running it would stop the process .*SIGILL") as err:
            run()
        assert err.value.code == "CVL-E240"
        assert ["+" + f for f in err.value.missing] == missing.split(", ")
    assert not c.any()


def test_code_for_features_the_host_has_runs(monkeypatch):
    monkeypatch.setattr("targets.llvm.cpu.host_features", lambda: ZEN4)
    mod = targets.build(_fp16(), targets.Target("llvm", mcpu="haswell"))
    a, c = np.full(64, 2, "float16"), np.zeros(64, "float16")
    mod(a, c)
    assert (c == 6).all()


def test_the_tuner_records_a_refused_candidate_as_a_run_failure(monkeypatch):
    from schedules.tune.measure import run_candidate
    monkeypatch.setattr("targets.llvm.cpu.host_features", lambda: HASWELL)
    sch = _fp16()
    out = []
    run_candidate({"func": str(T.create_prim_func(_fp16_tensors())),
                   "trace": sch.trace.as_json(), "decisions": [],
                   "target": "llvm -mcpu=skylake-avx512", "min_repeat_ms": 1}, out.append)
    kind, message, _ = out[-1]
    assert kind == "run"
    assert re.match(r"HostFeatureError: \[CVL-E240\] llvm: this module was built for "
                    r"mcpu='skylake-avx512'.*lacks: \+avx512bw", message)


def _fp16_tensors(n=64):
    A = T.placeholder((n,), "float16", name="A")
    return [A, T.compute((n,), lambda i: A[i] * A[i] + A[i], name="C")]


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
