"""Target objects, the registry, sources and benchmarking."""

import numpy as np
import pytest

import cuvil_tir as T
import targets
from targets import Target, TargetError
from tests import workloads as W


def test_target_from_string_and_options():
    t = Target("llvm -mcpu=znver3 -opt-level=2 -fast-math")
    assert (t.kind, t.mcpu, t.opt_level, t.fast_math) == ("llvm", "znver3", 2, True)
    assert str(t) == "llvm -fast-math -mcpu=znver3 -opt-level=2"
    assert Target(str(t)) == t and hash(Target(str(t))) == hash(t)
    assert Target("llvm", opt_level=1).options["mattr"] == ""
    assert repr(Target("llvm")) == "Target('llvm')"


def test_unknown_target_and_option():
    with pytest.raises(TargetError, match=r"unknown target 'nope'; registered targets: .*llvm"):
        Target("nope")
    with pytest.raises(TargetError, match=r"unknown target 'nope'"):
        targets.build(W.elementwise_chain(4).func, "nope")
    with pytest.raises(TargetError, match=r"Target 'llvm': unknown option 'mcup'; known "
                                          r"options: bounds_check, fast_math, l1d_kb, l2_kb, mattr, mcpu, num_cores, opt_level"):
        Target("llvm", mcup="native")


def test_duplicate_registration_needs_replace():
    llvm = targets.get_target_kind("llvm")
    with pytest.raises(TargetError, match=r"'llvm' is already registered; pass replace=True"):
        targets.register_target(llvm)
    assert targets.register_target(llvm, replace=True) is llvm
    with pytest.raises(TargetError, match=r"expected a TargetKind"):
        targets.register_target(type("K", (), {"name": "broken", "runtime": print})())


def test_user_target_reusing_llvm_codegen():
    llvm = targets.get_target_kind("llvm")
    seen = []

    class MyCPU(type(llvm)):
        name = "my-cpu"

        def codegen(self, module, target):
            seen.append(module.entry.name)
            return super().codegen(module, target)

    targets.register_target(MyCPU())
    try:
        assert "my-cpu" in targets.list_targets()
        w = W.matmul(8, 8, 8)
        mod = targets.build(w.func, "my-cpu", name="mm")
        arrays = w.make_inputs(np.random.default_rng(0))
        mod(*arrays)
        w.check(arrays)
        assert seen == ["mm"] and mod.target.kind == "my-cpu"
    finally:
        targets.unregister_target("my-cpu")
    assert "my-cpu" not in targets.list_targets()


def test_get_source_formats():
    mod = targets.build(W.matmul(16, 16, 16).func, "llvm", name="mm16")
    ll = mod.get_source()
    assert ll == mod.get_source("ll")
    assert "define i32 @mm16(ptr noalias align 4 %arg0.A" in ll
    assert '"target-cpu"=' in ll
    opt = mod.get_source("ll-opt")
    assert "i32 @mm16(" in opt and "__cuvil_py" in opt
    asm = mod.get_source("asm")
    assert "mm16:" in asm and "ret" in asm
    assert "BufferStore" in mod.get_source("tir") or "C[" in mod.get_source("tir")
    assert mod.entry_name == "mm16" and isinstance(mod.lowered, T.IRModule)
    with pytest.raises(TargetError, match=r"no source format 'ptx'; expected one of "
                                          r"ll, ll-opt, asm, obj, tir"):
        mod.get_source("ptx")


def test_benchmark_stats():
    w = W.elementwise_chain(64)
    mod = targets.build(w.func)
    arrays = w.make_inputs(np.random.default_rng(0))
    r = mod.benchmark(*arrays, repeat=4, number=50, warmup=2)
    assert len(r.all) == 4 and r.number == 50
    assert r.min <= r.median <= r.max and r.min <= r.mean <= r.max and r.std >= 0
    assert 0 < r.min < 1e-3
    assert repr(r).startswith("BenchmarkResult(median=") and "repeat=4, number=50" in repr(r)
    w.check(arrays)
    auto = mod.benchmark(*arrays, repeat=2)
    assert auto.number >= 1 and len(auto.all) == 2
    with pytest.raises(targets.ArgumentError, match=r"expected 4 arguments"):
        mod.benchmark(*arrays[:3])


def test_build_accepts_schedule_like_objects_and_checks_names():
    f = W.elementwise_chain(4).func

    class Sch:
        func = f

    assert targets.build(Sch()).signature.describe().startswith("main(A: float32(4,)")
    with pytest.raises(TargetError, match=r"expected a PrimFunc, an IRModule or a Schedule"):
        targets.build(42)
    with pytest.raises(targets.CodegenError, match=r"'my-name' is not a valid symbol"):
        targets.build(f, name="my-name")


def test_fast_math_flags_reach_the_ir():
    mod = targets.build(W.elementwise_chain(4).func, "llvm -fast-math=contract,nnan")
    assert "fmul contract nnan float" in mod.get_source("ll")
    with pytest.raises(TargetError, match=r"unknown fast-math flag 'quick'"):
        targets.build(W.elementwise_chain(4).func, Target("llvm", fast_math="quick"))


def test_module_outlives_other_references():
    w = W.elementwise_chain(8)
    mod = targets.build(w.func)
    call = mod.__call__
    del mod
    import gc
    gc.collect()
    arrays = w.make_inputs(np.random.default_rng(0))
    call(*arrays)
    w.check(arrays)
